"""The supported jax range: one clear error at import outside it."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import jax
import jaxlib
import pytest

from meshjit.compiler import bridge
from meshjit.errors import UnsupportedJaxError

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("0.10.2", (0, 10, 2)),
        ("0.12.0.1", (0, 12, 0, 1)),
        ("0.11.0rc1", (0, 11, 0)),
        ("0.13.0.dev20261101", (0, 13, 0)),
        ("garbage", ()),
    ],
)
def test_release_parses_pip_versions(text: str, release: tuple[int, ...]) -> None:
    assert bridge.release(text) == release


@pytest.mark.parametrize(
    "version", ["0.10.2", "0.11.0", "0.11.2", "0.12.0", "0.12.0.1", "0.12.9"]
)
def test_versions_in_the_range_are_accepted(version: str) -> None:
    bridge.check_versions(version, version)


@pytest.mark.parametrize(
    "version", ["0.10.1", "0.9.2", "0.4.38", "0.13.0", "0.13.0.dev1", "1.0.0", "x"]
)
def test_versions_outside_the_range_are_refused(version: str) -> None:
    with pytest.raises(UnsupportedJaxError) as err:
        bridge.check_versions(version, version)
    message = str(err.value)
    assert ">=0.10.2,<0.13" in message
    assert f"jax {version}" in message
    assert f"jaxlib {version}" in message
    assert isinstance(err.value, ImportError)


def test_jax_and_jaxlib_of_different_releases_are_refused() -> None:
    with pytest.raises(
        UnsupportedJaxError, match=r"same release.*jax 0\.12\.0 and jaxlib 0\.11\.2"
    ):
        bridge.check_versions("0.12.0", "0.11.2")
    # A jax-only post release beside its jaxlib is the same release.
    bridge.check_versions("0.12.0.1", "0.12.0")


def test_pyproject_states_the_same_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = set(project["dependencies"])
    assert f"jax{bridge.JAX_RANGE}" in deps
    assert f"jaxlib{bridge.JAX_RANGE}" in deps


def test_installed_jax_is_in_the_range() -> None:
    bridge.check_versions(jax.__version__, jaxlib.__version__)


def test_import_with_a_jax_outside_the_range_fails_clearly() -> None:
    # A fresh interpreter whose jax claims 0.13.0: `import meshjit` fails at
    # once with the range named (not an AttributeError deep in a pass).
    code = (
        "import jax, jaxlib.version\n"
        "jax.__version__ = '0.13.0'\n"
        "jaxlib.version.__version__ = '0.13.0'\n"
        "try:\n"
        "    import meshjit\n"
        "except ImportError as err:\n"
        "    print(type(err).__name__, err)\n"
        "else:\n"
        "    print('imported')\n"
    )
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    ).stdout
    assert out.startswith(
        "UnsupportedJaxError meshjit supports jax and jaxlib >=0.10.2,<0.13"
    ), out
    assert "jax 0.13.0 and jaxlib 0.13.0" in out
