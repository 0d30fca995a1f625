"""Builds meshjit's compiled modules (mypyc) into wheels and `pip install .`.

Everything else about the package is in pyproject.toml. A wheel gets the hot
modules compiled into `meshjit/_native/` (as black and mypy ship theirs),
used at import while they match the installed sources. Editable installs
(`pip install -e .`) skip this: they use `meshjit-native build`, which keeps
the build beside the checkout and notices edits. `MESHJIT_NATIVE_BUILD=0`
skips it too; without a C compiler the wheel is built without them (meshjit
then runs its Python source, slower, and says so in `meshjit-native status`).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = Path(__file__).resolve().parent

# mypyc only needs the modules to type-check, not pyproject.toml's strictness;
# jax is not installed in the isolated build environment, so its types are Any.
_MYPY_CONFIG = """\
[mypy]
python_version = 3.11
ignore_missing_imports = True
"""


def _native() -> object:
    spec = importlib.util.spec_from_file_location(
        "_meshjit_native", ROOT / "meshjit" / "native.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class BuildPyWithNative(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        if os.environ.get("MESHJIT_NATIVE_BUILD", "1") == "0":
            print("meshjit: MESHJIT_NATIVE_BUILD=0: no compiled modules")
            return
        native = _native()
        out = Path(self.build_lib) / "meshjit" / "_native"
        with tempfile.TemporaryDirectory(prefix="meshjit-setup-") as tmp:
            config = Path(tmp) / "mypy.ini"
            config.write_text(_MYPY_CONFIG)
            log = Path(tmp) / "native-build.log"
            code = native.build(ROOT, out, config, log)  # type: ignore[attr-defined]
        if code != 0:
            print(
                "meshjit: the compiled modules were not built; the installed "
                "meshjit runs its Python source (slower)",
                file=sys.stderr,
            )


class PlatformDistribution(Distribution):
    """The wheel holds compiled extensions: tag it for this platform and
    Python, not `py3-none-any`."""

    def has_ext_modules(self) -> bool:
        return True


setup(cmdclass={"build_py": BuildPyWithNative}, distclass=PlatformDistribution)
