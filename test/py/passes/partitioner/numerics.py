"""Runs a program partitioned on a mesh and unsharded on one device and
compares every output: integers exactly, floats and complex values to a
tolerance relative to each output's largest magnitude."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit


def rand(*shape: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def check(
    fn: Callable[..., Any],
    args: Sequence[Any],
    mesh: Mesh,
    in_specs: Any,
    out_specs: Any,
    rtol: float,
) -> meshjit.Compiled:
    """`fn` compiled by meshjit with `in_specs`/`out_specs` on `mesh`
    against `jax.jit(fn)` on one device; returns meshjit's executable."""

    def named(spec: Any) -> Any:
        return jax.tree.map(
            lambda s: NamedSharding(mesh, s),
            spec,
            is_leaf=lambda s: isinstance(s, P),
        )

    in_sh, out_sh = named(in_specs), named(out_specs)
    compiled = meshjit.jit(fn, in_shardings=in_sh, out_shardings=out_sh)
    compiled = compiled.lower(*args).compile()
    got = compiled(*jax.device_put(tuple(args), in_sh))
    want = jax.jit(fn)(*args)  # one device, no sharding
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert g.shape == w.shape
        assert g.dtype == w.dtype
        if not jnp.issubdtype(w.dtype, jnp.inexact):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
            continue
        g128 = np.asarray(g, np.complex128)
        w128 = np.asarray(w, np.complex128)
        scale = max(float(np.abs(w128).max()), 1e-6)
        assert float(np.abs(g128 - w128).max()) <= rtol * scale
    return compiled
