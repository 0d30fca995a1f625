"""The compiled-module loader: a build is used only while it matches the sources."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from meshjit import native


def _tree(tmp_path: Path) -> Path:
    """A fake source checkout with one file per package folder."""
    root = tmp_path / "src"
    for folder in (
        "meshjit",
        "compiler",
        "dialects",
        "frontend",
        "htmlreport",
        "passes",
    ):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text(f"# {folder}\n")
    return root


def _fake_build(root: Path, out: Path, sources: str | None = None) -> None:
    """A build folder whose manifest lists every compiled module (empty files)."""
    modules = {}
    for name in native.MODULES:
        rel = Path(*name.split(".")).with_suffix("").as_posix() + native._abi_tag()
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(b"")
        modules[name] = rel
    manifest = {
        "sources": sources or native.source_hash(root),
        "abi": native._abi_tag(),
        "modules": modules,
    }
    (out / native.MANIFEST).write_text(json.dumps(manifest))


@pytest.fixture
def auto_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MESHJIT_NATIVE", raising=False)


@pytest.mark.usefixtures("auto_policy")
def test_fresh_build_is_used(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    _fake_build(root, tmp_path / "native")
    st = native.status(tmp_path / "native", root)
    assert st.active, st.reason
    assert set(st.files) == set(native.MODULES)


@pytest.mark.usefixtures("auto_policy")
def test_any_edit_makes_the_build_stale(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    _fake_build(root, tmp_path / "native")
    (root / "passes" / "__init__.py").write_text("# edited\n")
    st = native.status(tmp_path / "native", root)
    assert not st.active
    assert "sources changed" in st.reason


def _installed(checkout: Path, site: Path) -> Path:
    """The checkout laid out as a wheel installs it: everything under meshjit/."""
    for pkg, folder in native._PACKAGE_DIRS.items():
        target = site / Path(*pkg.split("."))
        for f in (checkout / folder).rglob("*.py"):
            dest = target / f.relative_to(checkout / folder)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(f.read_bytes())
    return site


@pytest.mark.usefixtures("auto_policy")
def test_a_wheel_built_from_a_checkout_hashes_as_the_checkout(tmp_path: Path) -> None:
    """setup.py builds the compiled modules from the checkout; the installed
    copy must find them fresh, and an edit to it must make them stale."""
    root = _tree(tmp_path)
    (root / "passes" / "propagation").mkdir()
    (root / "passes" / "propagation" / "core.py").write_text("x = 1\n")
    site = _installed(root, tmp_path / "site")
    assert not native._checkout(site)
    assert native.source_hash(site) == native.source_hash(root)
    names = [name for name, _ in native.source_files(site)]
    assert "meshjit.passes.propagation.core" in names
    _fake_build(root, site / "meshjit" / "_native")
    assert native.status(site / "meshjit" / "_native", site).active
    (site / "meshjit" / "passes" / "propagation" / "core.py").write_text("x = 2\n")
    assert not native.status(site / "meshjit" / "_native", site).active


@pytest.mark.usefixtures("auto_policy")
def test_added_file_makes_the_build_stale(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    _fake_build(root, tmp_path / "native")
    (root / "dialects" / "new.py").write_text("")
    assert not native.status(tmp_path / "native", root).active


@pytest.mark.usefixtures("auto_policy")
def test_missing_incomplete_and_foreign_builds_are_not_used(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    st = native.status(tmp_path / "none", root)
    assert not st.active
    assert "no compiled build" in st.reason
    out = tmp_path / "native"
    _fake_build(root, out)
    manifest = json.loads((out / native.MANIFEST).read_text())
    first = out / manifest["modules"][native.MODULES[0]]
    first.unlink()
    assert "incomplete" in native.status(out, root).reason
    manifest["abi"] = ".cpython-39-x86_64-linux-gnu.so"
    (out / native.MANIFEST).write_text(json.dumps(manifest))
    assert "rebuild" in native.status(out, root).reason
    (out / native.MANIFEST).write_text("{not json")
    assert "unreadable" in native.status(out, root).reason


def test_policy_zero_and_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path)
    _fake_build(root, tmp_path / "native")
    monkeypatch.setenv("MESHJIT_NATIVE", "0")
    st = native.status(tmp_path / "native", root)
    assert not st.active
    native.required_but_off(st)  # 0 never raises
    monkeypatch.setenv("MESHJIT_NATIVE", "1")
    stale = native.status(tmp_path / "none", root)
    with pytest.raises(ImportError, match="MESHJIT_NATIVE=1 but"):
        native.required_but_off(stale)
    native.required_but_off(native.status(tmp_path / "native", root))
    monkeypatch.setenv("MESHJIT_NATIVE", "yes")
    with pytest.raises(ImportError, match="must be auto, 0 or 1, not 'yes'"):
        native.required_but_off(st)


def test_module_paths() -> None:
    assert native.module_path("meshjit.passes.propagation.core") == (
        native.ROOT / "passes" / "propagation" / "core.py"
    )
    assert native.module_path("meshjit.errors") == native.ROOT / "meshjit" / "errors.py"
    for name in native.MODULES:
        assert native.module_path(name).is_file(), name
    with pytest.raises(ValueError, match="not a meshjit module"):
        native.module_path("jax.numpy")


def test_this_process_loads_what_status_says() -> None:
    """All compiled modules, or none: never a mix of the two."""
    import meshjit.passes.propagation.core as core

    st = native.status()
    loaded = [sys.modules[m].__file__ or "" for m in native.MODULES if m in sys.modules]
    assert "meshjit.passes.propagation.core" in sys.modules
    compiled = [f.endswith(native._abi_tag()) for f in loaded]
    assert all(compiled) if st.active else not any(compiled), (st, loaded)
    assert native.active() == st.active
    assert (core.__file__ or "").endswith(native._abi_tag()) == st.active


def test_status_command_runs() -> None:
    tool = Path(sys.executable).parent / "meshjit-native"
    out = subprocess.run(
        [str(tool), "status"], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith(("on: ", "off: ")), out


def test_build_refuses_what_is_not_a_source_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "meshjit").mkdir()
    assert native.build(tmp_path, tmp_path / "native") == 1
    assert "not a meshjit source checkout" in capsys.readouterr().out
    assert not (tmp_path / "native").exists()
