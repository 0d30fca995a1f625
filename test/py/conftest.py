"""Eight virtual CPU devices for every test; set before jax is imported.

`MESHJIT_TEST_DEVICES=N` gives N virtual CPU devices instead, and
`JAX_PLATFORMS=cuda` (or rocm) runs the tests on that platform's devices.
Tests that need more devices than there are carry `@pytest.mark.devices(n)`
(or a module's `pytestmark`) and are skipped, each saying why.
"""

from __future__ import annotations

import os
import pathlib
import re

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + " --xla_force_host_platform_device_count="
    + os.environ.get("MESHJIT_TEST_DEVICES", "8")
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz-long",
        action="store_true",
        default=False,
        help="run the long fuzzing profiles (tests marked slow)",
    )


# A module that builds 8-device meshes when imported says so in a line
# `pytestmark = pytest.mark.devices(8)`; with fewer devices it is not
# imported but reported skipped, with the reason.
_NEEDS = re.compile(r"^pytestmark = pytest\.mark\.devices\((\d+)\)", re.MULTILINE)


class _TooFewDevices(pytest.File):
    needs = 0

    def collect(self) -> list[pytest.Item]:
        pytest.skip(f"{self.path.name}: {_reason(self.needs)}", allow_module_level=True)


def _reason(needs: int) -> str:
    import jax

    return (
        f"needs {needs} devices; this run has {jax.device_count()} "
        f"({jax.devices()[0].platform})"
    )


def pytest_pycollect_makemodule(
    module_path: pathlib.Path, parent: pytest.Collector
) -> pytest.Collector | None:
    import jax

    found = _NEEDS.search(module_path.read_text(encoding="utf-8"))
    if found is None or int(found.group(1)) <= jax.device_count():
        return None
    node = _TooFewDevices.from_parent(parent, path=module_path)
    node.needs = int(found.group(1))
    return node


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "devices(n): needs n devices; skipped where there are fewer"
    )


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    import jax

    for item in items:
        marker = item.get_closest_marker("devices")
        if marker is not None and marker.args[0] > jax.device_count():
            item.add_marker(pytest.mark.skip(reason=_reason(marker.args[0])))
    if config.getoption("--fuzz-long"):
        return
    skip = pytest.mark.skip(reason="long profile: run with --fuzz-long")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
