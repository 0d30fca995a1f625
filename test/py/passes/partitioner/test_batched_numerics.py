"""Linear algebra and FFTs on a batch split over devices run on the local
batch (no gather); against one device, 8 CPU devices."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit

MESH = Mesh(np.array(jax.devices()[:8]), ("x",))


def _spd(a: jax.Array) -> jax.Array:
    return a @ jnp.swapaxes(a, -1, -2) + 8 * jnp.eye(a.shape[-1], dtype=a.dtype)


BATCHED: dict[str, Callable[[jax.Array], Any]] = {
    "cholesky": lambda a: jnp.linalg.cholesky(_spd(a)),
    "triangular_solve": lambda a: jax.scipy.linalg.solve_triangular(
        jnp.linalg.cholesky(_spd(a)), a, lower=True
    ),
    "inv": lambda a: jnp.linalg.inv(_spd(a)),
    "eigh_values": lambda a: jnp.linalg.eigvalsh(_spd(a)),
    "qr_r": lambda a: jnp.abs(jnp.linalg.qr(a)[1]),
    "fft": lambda a: jnp.abs(jnp.fft.fft(a, axis=-1)),
    "rfft2": lambda a: jnp.abs(jnp.fft.rfft2(a)),
}


@pytest.mark.parametrize("name", sorted(BATCHED))
def test_batched_op_runs_on_local_batch(name: str) -> None:
    fn = BATCHED[name]
    x = np.random.default_rng(0).standard_normal((16, 8, 8)).astype(np.float32)
    sh = NamedSharding(MESH, P("x"))
    compiled = meshjit.jit(fn, in_shardings=sh, out_shardings=sh).lower(x).compile()
    got = np.asarray(compiled(jax.device_put(x, sh)))
    want = np.asarray(jax.jit(fn)(x))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)
    assert compiled.partition_report.collectives == []
    assert not [
        r for r in compiled.partition_report.remarks if "replicated" in r.message
    ]
