"""FFTs along split dims under propagation's relocation, with a cost model
whose launches are free (so every transform relocates, whatever its size):
rfft/irfft along the split signal dim, a complex 2-D FFT over a split dim,
a transform along dim 0, batch and signal dims both split, a 3-D rfftn;
each against the unsharded run. The default cost model relocates only
large transforms (`test_real_programs_numerics.py` has one)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from . import numerics
from .numerics import rand

pytestmark = pytest.mark.devices(8)

MESH8 = Mesh(np.array(jax.devices()[:8]), ("x",))
MESH24 = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))
check = functools.partial(numerics.check, rtol=1e-4)


@pytest.fixture(autouse=True)
def free_launches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "free_launches.json"
    model = {
        "latency": 1e-9,
        "bandwidth": 1e9,
        "flops": 1e6,
        "memory_bandwidth": 1e9,
        "platform": "cpu",
    }
    path.write_text(json.dumps(model))
    monkeypatch.setenv("MESHJIT_COST", str(path))


def filtered(x: Any, k: Any) -> Any:
    f = jnp.fft.rfft(x, axis=-1)
    return jnp.fft.irfft(f * k, n=x.shape[-1], axis=-1)


@pytest.mark.parametrize(
    ("mesh", "spec"),
    [
        (MESH8, P(None, "x")),
        (MESH24, P(None, ("x", "y"))),
        (MESH24, P("x", "y")),
        (MESH24, P("y", "x")),
    ],
    ids=["cols8", "cols_xy", "rows_x_cols_y", "rows_y_cols_x"],
)
def test_rfft_filter_irfft(mesh: Mesh, spec: P) -> None:
    args = (rand(16, 64, seed=1), rand(33, seed=2))
    compiled = check(filtered, args, mesh, (spec, P()), spec)
    assert "stablehlo.all_to_all" in compiled.as_text("partitioned")


def test_complex_fft2_over_a_split_dim() -> None:
    def spectrum(x: Any) -> Any:
        f = jnp.fft.fft2(x.astype(jnp.complex64), axes=(1, 2))
        return jnp.abs(f[:, :4, :4]), jnp.fft.ifft2(f * 0.5, axes=(1, 2)).real

    spec = P(None, "x")
    check(spectrum, (rand(8, 16, 32, seed=3),), MESH8, (spec,), (P(), spec))
    spec = P("x", "y")
    check(spectrum, (rand(8, 16, 32, seed=3),), MESH24, (spec,), (P(), spec))


def test_transform_along_dim_0_and_a_3d_rfftn() -> None:
    def along_rows(x: Any) -> Any:
        return jnp.fft.irfft(jnp.fft.rfft(x, axis=0) * 2.0, n=x.shape[0], axis=0)

    def volume(x: Any) -> Any:
        f = jnp.fft.rfftn(x, axes=(1, 2, 3))
        return jnp.fft.irfftn(f[..., :3] * 0.5, s=x.shape[1:], axes=(1, 2, 3))

    check(along_rows, (rand(64, 16, seed=4),), MESH8, (P("x"),), P("x"))
    spec = P(None, None, None, "x")
    check(volume, (rand(8, 8, 16, 8, seed=5),), MESH8, (spec,), spec)
    spec = P("x", None, None, "y")
    check(volume, (rand(8, 8, 16, 8, seed=5),), MESH24, (spec,), P())
