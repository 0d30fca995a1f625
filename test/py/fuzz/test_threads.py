"""Thread safety of meshjit.jit: concurrent first calls compile once, all correct."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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
THREADS = 6


def ns(*spec: Any) -> NamedSharding:
    return NamedSharding(MESH, P(*spec))


def _all_at_once(n: int, call: Callable[[int], Any]) -> list[Any]:
    """Runs call(0..n-1) on n threads released together by a barrier."""
    barrier = threading.Barrier(n)

    def run(i: int) -> Any:
        barrier.wait()
        return call(i)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))


def mlp(x: jax.Array, w: jax.Array) -> jax.Array:
    return jnp.tanh(x @ w).sum(axis=1)


def test_concurrent_first_calls_compile_once_and_agree() -> None:
    f = meshjit.jit(mlp, in_shardings=(ns("x"), ns(None, "y")), out_shardings=ns("x"))
    rng = np.random.default_rng(0)
    xs = [rng.uniform(-1, 1, (8, 16)).astype(np.float32) for _ in range(THREADS)]
    w = rng.uniform(-1, 1, (16, 8)).astype(np.float32) / 16
    outs = _all_at_once(THREADS, lambda i: f(xs[i], w))
    info = f.cache_info()
    assert (info.traces, info.compiles, info.size) == (1, 1, 1), info
    assert info.hits == THREADS - 1
    for x, out in zip(xs, outs, strict=True):
        np.testing.assert_allclose(np.asarray(out), mlp(x, w), rtol=1e-5, atol=1e-6)
        assert out.sharding.is_equivalent_to(ns("x"), 1)


def test_concurrent_calls_with_different_shapes_each_compile_once() -> None:
    f = meshjit.jit(lambda a: a * 2.0 + 1.0, in_shardings=ns("x"))
    shapes = [(8, 4), (16, 4), (8, 4), (16, 4), (24, 4), (8, 4)]
    outs = _all_at_once(
        len(shapes), lambda i: f(np.full(shapes[i], i, dtype=np.float32))
    )
    info = f.cache_info()
    assert info.traces == info.compiles == info.size == 3, info
    assert info.hits == len(shapes) - 3
    for i, (shape, out) in enumerate(zip(shapes, outs, strict=True)):
        assert out.shape == shape
        np.testing.assert_array_equal(np.asarray(out), 2.0 * i + 1.0)


def test_threads_with_their_own_mesh_context() -> None:
    """`with mesh:` is per thread: each thread's bare spec uses its own mesh."""
    f = meshjit.pjit(lambda a: a + 1.0, in_shardings=P("x"), out_shardings=P("x"))
    meshes = [
        meshjit.Mesh(np.array(jax.devices()[:8]).reshape(shape), names)
        for shape, names in (((8,), ("x",)), ((2, 4), ("x", "y")))
    ]

    def call(i: int) -> tuple[int, Any]:
        mesh = meshes[i % 2]
        with mesh:
            return i % 2, f(np.zeros((8, 4), np.float32))

    for which, out in _all_at_once(THREADS, call):
        np.testing.assert_array_equal(np.asarray(out), 1.0)
        assert dict(out.sharding.mesh.shape) == dict(meshes[which].shape)
    assert f.cache_info().compiles == 2
