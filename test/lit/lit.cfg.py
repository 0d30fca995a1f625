"""lit configuration: %opt is meshjit-opt under this interpreter, filecheck is
the Python FileCheck installed beside it."""

# ruff: noqa: F821  (lit injects `config` and `lit_config`)

import os
import sys

import lit.formats

config.name = "meshjit"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)

python = sys.executable
bindir = os.path.dirname(python)
config.substitutions.append(("%opt", f"{python} -m meshjit.compiler.opt"))
config.substitutions.append(("%PYTHON", python))
config.environment["PATH"] = os.pathsep.join(
    [bindir, config.environment.get("PATH", os.environ.get("PATH", ""))]
)
config.environment["PYTHONUNBUFFERED"] = "1"
config.environment["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
config.environment["JAX_PLATFORMS"] = "cpu"
for var in ("HOME", "TMPDIR", "PYTHONPATH", "MESHJIT_NATIVE"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
