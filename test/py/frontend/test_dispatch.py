"""The per-call fast path (frontend/dispatch.py): jax's C++ dispatch repeats a
call meshjit's Python path made, and every call it must not take still gets the
Python path's answer or its clear error.

`cache_info().fast` counts the calls that never reached Python, so each test
shows which path ran.
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import meshjit
from meshjit import Mesh, NamedSharding, P

pytestmark = pytest.mark.devices(8)

DEVICES = jax.devices()[:8]
MESH8 = Mesh(np.array(DEVICES), ("x",))
MESH24 = Mesh(np.array(DEVICES).reshape(2, 4), ("x", "y"))
JAX_MESH8 = jax.sharding.Mesh(np.array(DEVICES), ("x",))


def ns(mesh: Mesh, *spec: Any) -> NamedSharding:
    return NamedSharding(mesh, P(*spec))


def placed(value: np.ndarray, *spec: Any) -> jax.Array:
    out: jax.Array = jax.device_put(
        value, jax.sharding.NamedSharding(JAX_MESH8, jax.P(*spec))
    )
    return out


X = np.arange(64, dtype=np.float32).reshape(8, 8)


def test_repeated_calls_run_in_cpp_and_stay_correct() -> None:
    f = meshjit.jit(lambda a, b: a @ b + 1.0, in_shardings=(ns(MESH8, "x"), None))
    a, b = placed(X, "x"), placed(X.T.copy())
    for i in range(5):
        out = f(a, b * float(i))
        np.testing.assert_allclose(out, X @ (X.T * i) + 1.0, rtol=1e-6)
    info = f.cache_info()
    assert (info.traces, info.compiles) == (1, 1)
    assert info.fast == 4  # the first call compiled; the other four never left C++
    assert info.hits == 4
    assert out.sharding.spec == jax.P("x")  # type: ignore[attr-defined]


def test_outputs_keep_pytree_and_shardings_on_the_fast_path() -> None:
    f = meshjit.jit(
        lambda d: {"sum": d["a"] + d["b"], "pair": (d["a"], d["b"] * 2.0)},
        out_shardings={"sum": ns(MESH24, "x", "y"), "pair": None},
    )
    args = {"a": placed(X, "x"), "b": placed(X)}
    first, second = f(args), f(args)
    assert f.cache_info().fast == 1
    assert jax.tree.structure(first) == jax.tree.structure(second)
    for x, y in zip(jax.tree.leaves(first), jax.tree.leaves(second), strict=True):
        assert x.sharding == y.sharding
        np.testing.assert_array_equal(x, y)
    assert second["sum"].sharding.spec == jax.P("x", "y")


def test_donation_on_the_fast_path_deletes_and_then_errors_clearly() -> None:
    f = meshjit.jit(
        lambda a: a * 2.0,
        in_shardings=ns(MESH8, "x"),
        out_shardings=ns(MESH8, "x"),
        donate_argnums=0,
    )
    f(placed(X, "x"))
    a = placed(X, "x")
    np.testing.assert_array_equal(f(a), X * 2.0)
    assert f.cache_info().fast == 1
    assert a.is_deleted()
    with pytest.raises(meshjit.ShardingError, match=r"`a`.*donated.*deleted"):
        f(a)
    b = placed(X, "x")
    g = meshjit.jit(lambda a, b: a * b, donate_argnums=0)
    g(placed(X, "x"), b)
    with pytest.raises(meshjit.ShardingError, match="donated argument `a` and as `b`"):
        g(b, b)
    assert not b.is_deleted()


def test_deleted_argument_of_a_function_without_donation_errors_clearly() -> None:
    f = meshjit.jit(lambda a: a + 1.0)
    a = placed(X, "x")
    f(a)
    f(a)
    assert f.cache_info().fast == 1
    a.delete()
    with pytest.raises(meshjit.ShardingError, match=r"`a`.*deleted"):
        f(a)


def test_a_committed_argument_on_another_sharding_still_errors() -> None:
    f = meshjit.jit(lambda a: a + 1.0, in_shardings=ns(MESH8, "x"))
    f(placed(X, "x"))
    f(placed(X, "x"))
    with pytest.raises(meshjit.ShardingError, match="committed"):
        f(placed(X, None, "x"))
    with pytest.raises(meshjit.ShardingError, match="committed"):
        f(placed(X, None, "x"))  # a refused signature is never cached


def test_host_values_scalars_and_uncommitted_arrays_are_placed() -> None:
    f = meshjit.jit(lambda a, s: a * s, in_shardings=(ns(MESH8, "x"), None))
    with jax.default_device(DEVICES[3]):
        elsewhere = jnp.asarray(X)  # uncommitted, on device 3
    for value in (X, jnp.asarray(X), elsewhere):
        for _ in range(3):
            out = f(value, 3.0)
            np.testing.assert_array_equal(out, X * 3.0)
            assert out.sharding.spec == jax.P("x")  # type: ignore[attr-defined]
    assert f.cache_info().fast >= 6


def test_static_arguments_key_on_value_and_type() -> None:
    f = meshjit.jit(lambda a, n: a * n, static_argnums=1)
    a = placed(X, "x")
    assert f(a, 2).dtype == jnp.float32
    assert f(a, 2).dtype == jnp.float32
    got = f(a, 2.5)  # equal hashes would not be enough: 2 and 2.0 trace apart
    np.testing.assert_array_equal(got, X * 2.5)
    assert f.cache_info().traces == 2
    np.testing.assert_array_equal(f(a, n=3), X * 3)


def test_changed_shapes_and_dtypes_retrace_and_compiled_refuses_them() -> None:
    f = meshjit.jit(lambda a: a.sum(0))
    f(placed(X, "x"))
    f(placed(X, "x"))
    np.testing.assert_array_equal(f(placed(X.astype(np.int32), "x")), X.sum(0))
    np.testing.assert_array_equal(f(placed(np.ones((16, 8), np.float32), "x")), 16)
    assert f.cache_info().traces == 3
    compiled = f.lower(placed(X, "x")).compile()
    np.testing.assert_array_equal(compiled(placed(X, "x")), X.sum(0))
    np.testing.assert_array_equal(compiled(placed(X, "x")), X.sum(0))
    with pytest.raises(meshjit.JitArgumentError, match=r"`a`.*compiled for"):
        compiled(placed(np.ones((16, 8), np.float32), "x"))
    with pytest.raises(meshjit.JitArgumentError, match=r"`a`.*compiled for"):
        compiled(placed(X.astype(np.int32), "x"))


def test_meshjit_mesh_context_is_part_of_the_dispatch_key() -> None:
    """jax's C++ dispatch does not see meshjit's `with mesh:`: a bare
    PartitionSpec must still resolve against the mesh of each call."""
    f = meshjit.pjit(lambda a: a * 2.0, in_shardings=P("x"), out_shardings=P("x"))
    for _ in range(2):
        with MESH8:
            out8 = f(X)
        with MESH24:
            out2 = f(X)
    assert out8.sharding.mesh.shape == {"x": 8}  # type: ignore[attr-defined]
    assert out2.sharding.mesh.shape == {"x": 2, "y": 4}  # type: ignore[attr-defined]
    np.testing.assert_array_equal(out2, X * 2.0)
    assert f.cache_info().fast == 2


def test_jax_mesh_context_is_part_of_the_dispatch_key() -> None:
    f = meshjit.pjit(lambda a: a * 2.0, in_shardings=P("x"), out_shardings=P("x"))
    other = jax.sharding.Mesh(np.array(DEVICES).reshape(2, 4), ("x", "y"))
    for _ in range(2):
        with jax.set_mesh(JAX_MESH8):
            out8 = f(X)
        with jax.set_mesh(other):
            out2 = f(X)
    assert out8.sharding.mesh.shape == {"x": 8}  # type: ignore[attr-defined]
    assert out2.sharding.mesh.shape == {"x": 2, "y": 4}  # type: ignore[attr-defined]


def test_jax_deprecated_mesh_context_is_a_mesh_context() -> None:
    """`with jax.sharding.Mesh(...):` (deprecated in jax, still what pjit code
    uses) resolves bare PartitionSpecs and pjit's None (= replicated), and is
    part of the dispatch key like meshjit's own `with mesh:`."""
    f = meshjit.pjit(lambda a: a * 2.0, in_shardings=P("x"), out_shardings=None)
    other = jax.sharding.Mesh(np.array(DEVICES).reshape(2, 4), ("x", "y"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for _ in range(2):
            with JAX_MESH8:
                out8 = f(X)
            with other:
                out2 = f(X)
    assert out8.sharding.mesh.shape == {"x": 8}  # type: ignore[attr-defined]
    assert out2.sharding.mesh.shape == {"x": 2, "y": 4}  # type: ignore[attr-defined]
    assert out2.sharding.spec == jax.P()  # type: ignore[attr-defined]
    np.testing.assert_array_equal(out2, X * 2.0)


def test_with_sharding_constraint_sees_either_jax_mesh_context() -> None:
    def fn(a: jax.Array) -> jax.Array:
        return meshjit.with_sharding_constraint(a * 2.0, P("x"))

    with jax.set_mesh(JAX_MESH8):
        out = meshjit.jit(fn)(X)
    assert out.sharding.spec == jax.P("x")  # type: ignore[attr-defined]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with JAX_MESH8:
            out = meshjit.pjit(fn)(X)
    assert out.sharding.spec == jax.P("x")  # type: ignore[attr-defined]
    np.testing.assert_array_equal(out, X * 2.0)


def test_jax_default_device_places_uncommitted_calls_as_jax_does() -> None:
    f = meshjit.jit(lambda a: a + 1.0)
    seen = [f(1.0).devices()]
    with jax.default_device(DEVICES[3]):
        seen.append(f(1.0).devices())
        seen.append(f(1.0).devices())
    seen.append(f(1.0).devices())
    assert seen == [{DEVICES[0]}, {DEVICES[3]}, {DEVICES[3]}, {DEVICES[0]}]
    assert "default_device" in f.cache_info().log[-1]


def test_disable_jit_runs_the_function_eagerly_as_jax_does() -> None:
    seen: list[object] = []

    def fn(a: jax.Array) -> jax.Array:
        seen.append(type(a))
        return a + 1.0

    f = meshjit.jit(fn, in_shardings=ns(MESH8, "x"))
    a = placed(X, "x")
    f(a)
    with jax.disable_jit():
        np.testing.assert_array_equal(f(a), X + 1.0)
    assert not issubclass(seen[-1], jax.core.Tracer)  # ran on the array itself
    assert issubclass(seen[0], jax.core.Tracer)


def test_zero_size_outputs_stay_on_the_python_path_and_are_right() -> None:
    f = meshjit.jit(lambda a: (a[:0], a + 1.0), in_shardings=ns(MESH8, "x"))
    a = placed(X, "x")
    for _ in range(3):
        empty, full = f(a)
        assert empty.shape == (0, 8)
        np.testing.assert_array_equal(full, X + 1.0)
    assert f.cache_info().fast == 0


def test_nested_calls_inside_another_trace_do_not_use_the_fast_path() -> None:
    inner = meshjit.jit(lambda a: a * 3.0)
    outer = meshjit.jit(lambda a: inner(a) + inner(a + 1.0))
    a = placed(X, "x")
    np.testing.assert_array_equal(inner(a), X * 3.0)
    for _ in range(2):
        np.testing.assert_array_equal(outer(a), X * 3.0 + (X + 1.0) * 3.0)
    assert outer.cache_info().fast == 1


def test_clear_cache_drops_the_cpp_entries_too() -> None:
    f = meshjit.jit(lambda a: a - 1.0)
    a = placed(X, "x")
    f(a)
    f.clear_cache()
    f(a)
    info = f.cache_info()
    assert info.compiles == 2
    assert info.fast == 0


def test_keyword_calls_in_another_order_than_jax_flattens_them() -> None:
    """jax's C++ dispatch flattens keyword arguments sorted by name ("v12"
    before "v3"); meshjit's leaves follow the signature. With an unused
    argument between them the kept-argument mask must follow jax's order: it
    used to hand the executable `v3`'s buffer for `v12` (XLA refused the size,
    then the process crashed; equal sizes would have been a wrong answer),
    found by the fuzzer's keyword-call front door."""

    def f(v0: jax.Array, v3: jax.Array, v12: jax.Array) -> jax.Array:
        return v12 * 2.0  # v0 and v3 are not the executable's arguments

    g = meshjit.jit(f, in_shardings={"v0": None, "v3": ns(MESH8, "x"), "v12": None})
    a, b = np.ones(2, np.float32), np.arange(16, dtype=np.float32)
    c = np.full((3, 5), 2.0, np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(g(v0=a, v3=b, v12=c), c * 2.0)
        np.testing.assert_array_equal(g(v12=c, v0=a, v3=b), c * 2.0)
    assert g.cache_info().fast == 5  # the kept argument's place is the same


def test_kept_keyword_arguments_out_of_jax_order_stay_on_the_python_path() -> None:
    """Two kept arguments whose signature order (`w`, `b`) is not jax's
    sorted order (`b`, `w`): the C++ path would pass them to the executable
    swapped, so such calls run in Python, with the right answer every time."""

    def f(w: jax.Array, b: jax.Array, x: jax.Array) -> jax.Array:
        return x @ w + b

    g = meshjit.jit(f, in_shardings={"w": None, "b": None, "x": ns(MESH8, "x")})
    w, bias = np.ones((8, 4), np.float32), np.arange(4, dtype=np.float32)
    for i in range(3):
        out = g(w=w, b=bias, x=X * i)
        np.testing.assert_allclose(out, (X * i) @ w + bias, rtol=1e-6)
    assert g.cache_info().fast == 0
    # by position the order is the signature's: the fast path runs
    h = meshjit.jit(f, in_shardings=(None, None, ns(MESH8, "x")))
    for i in range(3):
        np.testing.assert_allclose(h(w, bias, X * i), (X * i) @ w + bias, rtol=1e-6)
    assert h.cache_info().fast == 2


@pytest.mark.parametrize("stage", ["jit", "compiled"])
def test_dropping_the_jitted_function_frees_its_closed_over_arrays(stage: str) -> None:
    """jax's test_jit_reference_dropping: no reference cycle keeps a jitted
    function (and the arrays it closes over, their device memory) alive once
    the caller drops it; freed at once, not at the next cycle collection."""
    import gc
    import weakref

    x = jnp.ones(10)
    f = (lambda x: lambda: x * 2)(x)
    g = meshjit.jit(f) if stage == "jit" else meshjit.jit(f).lower().compile()
    ref = weakref.ref(x)
    del x
    enabled = gc.isenabled()
    gc.disable()
    try:
        g()
        g()
        del f
        assert ref() is not None
        np.testing.assert_array_equal(np.asarray(g()), np.full(10, 2.0))
        del g
        assert ref() is None
    finally:
        if enabled:
            gc.enable()


def test_no_execution_refuses_to_run_as_jax_does() -> None:
    """jax.no_execution() (part of jax's dispatch key): a call under it is
    refused, before and after the fast path has the function cached."""
    f = meshjit.jit(lambda: jnp.ones(3))
    np.testing.assert_array_equal(f(), np.ones(3))
    np.testing.assert_array_equal(f(), np.ones(3))
    with pytest.raises(RuntimeError, match="no_execution"), jax.no_execution():
        f()
    with pytest.raises(RuntimeError, match="no_execution"), jax.no_execution():
        meshjit.jit(lambda: jnp.zeros(3))()
    np.testing.assert_array_equal(f(), np.ones(3))


def test_jax_clear_caches_clears_meshjit_too() -> None:
    """jax.clear_caches() ("all compilation and staging caches") drops
    meshjit's traces and executables as well: the next call traces again."""
    traces = []

    @meshjit.jit
    def add(x: Any) -> Any:
        traces.append(1)
        return x * 2

    add(jnp.arange(8))
    add(jnp.arange(8))
    assert len(traces) == 1
    jax.clear_caches()
    np.testing.assert_array_equal(np.asarray(add(jnp.arange(8))), np.arange(8) * 2)
    assert len(traces) == 2
    assert add.cache_info().size == 1
