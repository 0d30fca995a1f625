"""Complex values through every partitioner family: sums and contractions
over split (and uneven) dims, data movement, windows, scans, gathers,
updates, FFTs, and complex constants under constraints (the bindings cannot
hold a complex dense attribute: see `ir.renamed`). Against one device, 8 CPU
devices."""

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

pytestmark = pytest.mark.devices(8)

MESH = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))


def c(v: jax.Array, spec: P) -> jax.Array:
    return meshjit.with_sharding_constraint(v, NamedSharding(MESH, spec))


KERNEL = np.array([1, 1j, -1], np.complex64)

FNS: dict[str, Callable[[jax.Array], Any]] = {
    # 10 rows over 4 devices: padded blocks masked with complex zeros
    "uneven_sum": lambda x: c(x, P("y")).sum(0),
    "uneven_dot": lambda x: c(x, P(None, "y")) @ c(x.T, P("y")),
    "split_contraction": lambda x: (c(x, P(None, "x")) * (1 + 2j)) @ x.T.conj(),
    "pad_roll": lambda x: jnp.roll(jnp.pad(c(x, P("y")), ((2, 3), (0, 0))), 3, 0),
    "convolve": lambda x: jnp.convolve(c(x, P(None, "y"))[0], KERNEL, mode="same"),
    "slice_concat": lambda x: jnp.concatenate(
        [c(x, P("y"))[:1], c(x, P("y"))[-3:], x[2:4]], 0
    ),
    "update_slice": lambda x: jax.lax.dynamic_update_slice_in_dim(
        c(x, P("y")), x[:2] * 1j, 5, 0
    ),
    "cumsum": lambda x: jnp.cumsum(c(x, P("y")), 0),
    "take": lambda x: jnp.take(c(x, P("y")), jnp.array([9, 0, 4]), axis=0),
    "one_row": lambda x: jnp.flip(c(x[:1], P("y")), 0) + 1j,
    "ifft": lambda x: jnp.fft.ifft(c(x, P("y")), axis=0),
    "mean_var": lambda x: (
        jnp.mean(c(x, P("x", "y"))),
        jnp.var(c(x, P("x", "y")), axis=1),
    ),
    "while_cond": lambda x: jax.lax.while_loop(
        lambda s: s[0] < 3,
        lambda s: (s[0] + 1, c(s[1] * (0.5 - 0.5j) + 1j, P("x", "y"))),
        (0, x),
    )[1].sum(0),
}


@pytest.mark.parametrize("name", sorted(FNS))
def test_complex(name: str) -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((10, 12)) + 1j * rng.standard_normal((10, 12))).astype(
        np.complex64
    )
    fn = FNS[name]
    compiled = meshjit.jit(fn).lower(x).compile()
    assert compiled.partition_report.collectives  # the constraints split it
    got = jax.tree.leaves(compiled(x))
    want = jax.tree.leaves(jax.jit(fn)(x))
    for g, w in zip(got, want, strict=True):
        w = np.asarray(w)
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6 * scale)
