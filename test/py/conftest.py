"""Eight virtual CPU devices for every test; set before jax is imported.

`MESHJIT_TEST_DEVICES=N` gives N virtual CPU devices instead, and
`JAX_PLATFORMS=cuda` (or rocm) runs the tests on that platform's devices.
Tests that need more devices than there are carry `@pytest.mark.devices(n)`
(or a module's `pytestmark`) and are skipped, each saying why.
"""

from __future__ import annotations

import os

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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "devices(n): needs n devices; skipped where there are fewer"
    )


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    import jax

    have = jax.device_count()
    platform = jax.devices()[0].platform
    for item in items:
        marker = item.get_closest_marker("devices")
        if marker is not None and marker.args[0] > have:
            item.add_marker(
                pytest.mark.skip(
                    reason=f"needs {marker.args[0]} devices; this run has {have} "
                    f"({platform})"
                )
            )
    if config.getoption("--fuzz-long"):
        return
    skip = pytest.mark.skip(reason="long profile: run with --fuzz-long")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
