"""Compiled (mypyc) builds of meshjit's hot modules, used only while fresh.

The hot path (`MODULES`: graph reader, rule table, propagation, export and
the partitioner) is plain typed Python. `meshjit-native build` compiles it
with mypyc (the compiler mypy ships, as black and mypy itself are compiled) into
`build/native/` of the source checkout, with a manifest holding a hash of
every meshjit source file; `pip install .` (or building a wheel) does the
same through setup.py into the installed package's `meshjit/_native/`. On
import, meshjit loads the compiled modules only when that hash still matches
the sources: after any edit the Python source runs until the next build, so a
stale build is never used.

`MESHJIT_NATIVE` picks the policy: `auto` (default: compiled when fresh),
`0` (always the Python source), `1` (compiled, or an ImportError saying why
not: what CI and benchmarks set, so that they measure what they claim).
`meshjit-native status` says which one this checkout gets.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

# What is compiled: pure-Python hot paths with no subclassing of uncompiled
# classes (mypyc cannot compile a dataclass deriving from a Python class,
# which rules out the pass classes themselves).
MODULES: tuple[str, ...] = (
    "meshjit.compiler.diagnostics",
    "meshjit.compiler.graph",
    "meshjit.compiler.op_info",
    "meshjit.compiler.replicas",
    "meshjit.dialects.reshard",
    "meshjit.dialects.rules",
    "meshjit.dialects.sdy_text",
    "meshjit.dialects.sharding",
    "meshjit.dialects.stablehlo_rules",
    "meshjit.passes.partitioner.builder",
    "meshjit.passes.partitioner.combine",
    "meshjit.passes.partitioner.context",
    "meshjit.passes.partitioner.contraction",
    "meshjit.passes.partitioner.control_flow",
    "meshjit.passes.partitioner.cost",
    "meshjit.passes.partitioner.edges",
    "meshjit.passes.partitioner.elementwise",
    "meshjit.passes.partitioner.factors",
    "meshjit.passes.partitioner.gather_scatter",
    "meshjit.passes.partitioner.halo",
    "meshjit.passes.partitioner.layouts",
    "meshjit.passes.partitioner.local",
    "meshjit.passes.partitioner.memory",
    "meshjit.passes.partitioner.module",
    "meshjit.passes.partitioner.reductions",
    "meshjit.passes.partitioner.runtime_offsets",
    "meshjit.passes.partitioner.movement",
    "meshjit.passes.partitioner.report",
    "meshjit.passes.partitioner.rng",
    "meshjit.passes.partitioner.sorting",
    "meshjit.passes.partitioner.table",
    "meshjit.passes.partitioner.windows",
    "meshjit.passes.propagation.axes",
    "meshjit.passes.propagation.build",
    "meshjit.passes.propagation.core",
    "meshjit.passes.propagation.export",
)

# Source folders of the `meshjit` package (pyproject.toml maps them).
_PACKAGE_DIRS: dict[str, str] = {
    "meshjit": "meshjit",
    "meshjit.compiler": "compiler",
    "meshjit.dialects": "dialects",
    "meshjit.frontend": "frontend",
    "meshjit.htmlreport": "htmlreport",
    "meshjit.passes": "passes",
}

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = "manifest.json"
_ENV = "MESHJIT_NATIVE"


def _checkout(root: Path) -> bool:
    """Whether `root` is a source checkout (package folders side by side, as
    pyproject.toml maps them) rather than an installed package (site-packages,
    where they all live under meshjit/)."""
    return all((root / d).is_dir() for d in _PACKAGE_DIRS.values())


# Where compiled modules live: build/native/ of a checkout (meshjit-native
# build), meshjit/_native/ of an installed wheel (built by setup.py).
NATIVE_DIR = (
    ROOT / "build" / "native" if _checkout(ROOT) else ROOT / "meshjit" / "_native"
)


def source_files(root: Path = ROOT) -> list[tuple[str, Path]]:
    """(module name, file) of every .py file of the package, by name: the
    same list in a checkout and in an installed wheel."""
    found: list[tuple[str, Path]] = []
    if _checkout(root):
        for pkg, folder in _PACKAGE_DIRS.items():
            for f in (root / folder).rglob("*.py"):
                rel = f.relative_to(root / folder).with_suffix("").parts
                found.append((".".join((pkg, *rel)), f))
    else:
        for f in (root / "meshjit").rglob("*.py"):
            found.append((".".join(f.relative_to(root).with_suffix("").parts), f))
    return sorted(found)


def source_hash(root: Path = ROOT) -> str:
    """One hash over the module name and bytes of every source file: any
    edit, added or removed file changes it; a wheel built from a checkout
    hashes as the checkout does."""
    h = hashlib.sha256()
    for name, f in source_files(root):
        h.update(name.encode())
        h.update(b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def module_path(name: str, root: Path = ROOT) -> Path:
    """The source file of module `name` (`meshjit.passes.propagation.core`)."""
    parts = name.split(".")
    for pkg in sorted(_PACKAGE_DIRS, key=len, reverse=True):
        prefix = pkg.split(".")
        if parts[: len(prefix)] == prefix:
            rest = parts[len(prefix) :]
            return root / _PACKAGE_DIRS[pkg] / Path(*rest).with_suffix(".py")
    raise ValueError(f"{name} is not a meshjit module")


@dataclass(frozen=True)
class Status:
    """Whether this checkout's compiled modules are used, and why (not)."""

    active: bool
    reason: str
    files: dict[str, Path]  # module name -> extension file, when active


def _abi_tag() -> str:
    return importlib.machinery.EXTENSION_SUFFIXES[0]


def status(native_dir: Path = NATIVE_DIR, root: Path = ROOT) -> Status:
    policy = os.environ.get(_ENV, "auto")
    if policy == "0":
        return Status(False, f"{_ENV}=0: the Python source runs", {})
    manifest_path = native_dir / MANIFEST
    if not manifest_path.is_file():
        return Status(
            False,
            f"no compiled build in {native_dir} (meshjit-native build)",
            {},
        )
    try:
        manifest = json.loads(manifest_path.read_text())
        built_hash = str(manifest["sources"])
        abi = str(manifest["abi"])
        modules = {str(k): str(v) for k, v in manifest["modules"].items()}
    except (OSError, ValueError, KeyError, AttributeError) as err:
        return Status(False, f"unreadable {manifest_path}: {err}", {})
    if abi != _abi_tag():
        return Status(
            False, f"built for {abi}, this Python loads {_abi_tag()}: rebuild", {}
        )
    if built_hash != source_hash(root):
        return Status(
            False,
            "sources changed since the compiled build: the Python source runs "
            "(meshjit-native build)",
            {},
        )
    files = {name: native_dir / rel for name, rel in modules.items()}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing or not set(MODULES) <= set(files):
        return Status(False, f"incomplete compiled build in {native_dir}", {})
    return Status(True, f"compiled modules from {native_dir}", files)


class _NativeFinder(importlib.abc.MetaPathFinder):
    """Finds the compiled extension for each compiled module name (and
    mypyc's shared runtime library); every other name is left to the rest
    of `sys.meta_path`."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        file = self.files.get(fullname)
        if file is None:
            return None
        return importlib.util.spec_from_file_location(fullname, file)


_STATE: list[Status] = []


def install() -> Status:
    """Puts the compiled modules first in line, if fresh; once per process.
    Must run before any compiled module is imported (meshjit/__init__.py)."""
    if _STATE:
        return _STATE[0]
    st = status()
    _STATE.append(st)
    required_but_off(st)
    if st.active:
        sys.meta_path.insert(0, _NativeFinder(st.files))
    return st


def required_but_off(st: Status) -> None:
    """Raises ImportError when MESHJIT_NATIVE is not auto/0/1, or is 1 and the
    build is not used (except in the `meshjit-native` tool itself, which must
    be able to build)."""
    policy = os.environ.get(_ENV, "auto")
    if policy not in ("auto", "0", "1"):
        raise ImportError(f"{_ENV} must be auto, 0 or 1, not {policy!r}")
    tool = os.path.basename(sys.argv[0]) == "meshjit-native" if sys.argv else False
    if policy == "1" and not st.active and not tool:
        raise ImportError(
            f"{_ENV}=1 but meshjit's compiled modules are off: {st.reason}"
        )


def active() -> bool:
    """Whether this process runs the compiled modules (all of them, or none)."""
    return (
        bool(_STATE)
        and _STATE[0].active
        and all(
            getattr(sys.modules.get(m), "__file__", "").endswith(_abi_tag())
            for m in MODULES
            if m in sys.modules
        )
    )


# ---------------------------------------------------------------------------
# Building


def _stage(root: Path, stage: Path) -> None:
    """Lays the `meshjit` package out as it is imported (pyproject.toml maps
    its folders into it), with symlinks, so that mypyc names modules right."""
    pkg = stage / "meshjit"
    pkg.mkdir()
    for f in (root / "meshjit").iterdir():
        if f.name != "__pycache__":
            (pkg / f.name).symlink_to(f)
    for name, folder in _PACKAGE_DIRS.items():
        if name != "meshjit":
            (pkg / name.split(".")[-1]).symlink_to(root / folder)


_SETUP = """\
import sys
from mypyc.build import mypycify
from setuptools import setup
config, out, tmp, *files = sys.argv[1:]
setup(
    name="meshjit-native",
    ext_modules=mypycify(["--config-file", config, *files], opt_level="3"),
    script_args=["build_ext", "--build-lib", out, "--build-temp", tmp],
)
"""


def build(
    root: Path = ROOT,
    native_dir: Path = NATIVE_DIR,
    config: Path | None = None,
    log: Path | None = None,
) -> int:
    """Compiles MODULES into `native_dir` (replaced as a whole at the end).
    `config` is the mypy configuration (pyproject.toml's by default), `log`
    where the compiler's output goes (beside `native_dir` by default)."""
    missing_dirs = [d for d in _PACKAGE_DIRS.values() if not (root / d).is_dir()]
    if missing_dirs:
        print(
            f"meshjit.native: {root} is not a meshjit source checkout (no "
            f"{', '.join(missing_dirs)}/); the build works on an editable "
            "install (pip install -e .)"
        )
        return 1
    before = source_hash(root)
    with tempfile.TemporaryDirectory(prefix="meshjit-native-") as tmp_name:
        tmp = Path(tmp_name)
        stage, out = tmp / "stage", tmp / "out"
        stage.mkdir()
        _stage(root, stage)
        files = [
            str(Path("meshjit", *m.split(".")[1:]).with_suffix(".py")) for m in MODULES
        ]
        log = log or native_dir.parent / "native-build.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        print(f"compiling {len(files)} modules with mypyc (log: {log}) ...")
        with open(log, "w") as out_log:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    _SETUP,
                    str(config or root / "pyproject.toml"),
                    str(out),
                    str(tmp / "tmp"),
                    *files,
                ],
                cwd=stage,
                stdout=out_log,
                stderr=subprocess.STDOUT,
                env={**os.environ, _ENV: "0"},
            )
        if proc.returncode != 0:
            print(log.read_text()[-4000:], file=sys.stderr)
            print(f"meshjit.native: the build failed (exit {proc.returncode})")
            return 1
        if source_hash(root) != before:
            print("meshjit.native: sources changed during the build; run it again")
            return 1
        suffix = _abi_tag()
        modules: dict[str, str] = {}
        for ext in sorted(out.rglob("*" + suffix)):
            rel = ext.relative_to(out)
            name = ".".join(rel.parts)[: -len(suffix)]
            modules[name] = str(rel)
        missing = sorted(set(MODULES) - set(modules))
        if missing:
            print(f"meshjit.native: the build made no extension for {missing}")
            return 1
        manifest = {"sources": before, "abi": suffix, "modules": modules}
        (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        # Swap whole folders by renaming: a process starting meanwhile sees
        # the old build or the new one, never a half-copied file, and a
        # running process keeps the files it mapped.
        new = native_dir.with_name(native_dir.name + ".new")
        old = native_dir.with_name(native_dir.name + ".old")
        for d in (new, old):
            shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(out, new)
        if native_dir.exists():
            native_dir.rename(old)
        new.rename(native_dir)
        shutil.rmtree(old, ignore_errors=True)
    print(f"meshjit.native: {len(modules)} extensions in {native_dir}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="meshjit-native",
        description="Build meshjit's compiled (mypyc) modules, or say whether "
        "they are used. A build is used only while every meshjit source file "
        "is unchanged since it was made; otherwise the Python source runs.",
    )
    parser.add_argument("command", choices=("build", "status", "clean"))
    args = parser.parse_args(argv)
    if args.command == "build":
        return build()
    if args.command == "clean":
        shutil.rmtree(NATIVE_DIR, ignore_errors=True)
        print(f"removed {NATIVE_DIR}")
        return 0
    st = status()
    print(("on: " if st.active else "off: ") + st.reason)
    return 0
