"""A function called at two sites that want different shardings.

Shardy clones such callees (sdy-flatten-call-graph). meshjit propagates each
call site as if inlined, writes the first site's shardings onto the callee,
and the partitioner inlines calls at emission, resharding at the other site:
the result is still exact, so meshjit does not need to clone for correctness.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from meshjit.compiler.spmd import compile_module


def _mesh() -> Mesh:
    return Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))


@pytest.mark.devices(8)
def test_callee_used_with_two_shardings_is_exact() -> None:
    mesh = _mesh()

    @jax.jit
    def inner(v: jax.Array) -> jax.Array:
        return jnp.tanh(v) * 2.0 + v

    def outer(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
        ra = inner(a)
        rb = inner(b)
        return ra, rb @ rb.T

    a_sh = NamedSharding(mesh, P("x", None))
    b_sh = NamedSharding(mesh, P(None, "y"))
    lowered = jax.jit(outer, in_shardings=(a_sh, b_sh)).lower(
        jax.ShapeDtypeStruct((16, 32), jnp.float32),
        jax.ShapeDtypeStruct((16, 32), jnp.float32),
    )
    text = lowered.as_text()
    assert text.count("call @inner") == 2  # one callee, two call sites
    compiled = compile_module(text, jax.devices(), "spmd-pipeline")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 32), dtype=np.float32)
    b = rng.standard_normal((16, 32), dtype=np.float32)
    got = compiled.executable(jax.device_put(a, a_sh), jax.device_put(b, b_sh))
    want = jax.jit(outer)(a, b)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
