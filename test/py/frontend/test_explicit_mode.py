"""Explicit sharding mode (`AxisType.Explicit`, shardings in types) against jax.

jax's tracer carries each value's sharding in its type on meshes with Explicit
axes and writes it into the module as constraints; meshjit traces with the
arguments' types, so its programs keep those shardings, and its outputs carry
the mesh with its axis types (so `jax.typeof(out)` shows the sharding). Each
case runs under jax.jit and meshjit.jit on 8 CPU devices: values, output
specs, output types and errors must agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit

pytestmark = pytest.mark.devices(8)

EXPLICIT = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
MIXED = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit, AxisType.Auto))


def put(a: np.ndarray, mesh: jax.sharding.Mesh, *spec: Any) -> jax.Array:
    return jax.device_put(a, NamedSharding(mesh, P(*spec)))


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def run_both(
    make: Callable[[Callable[..., Any]], Callable[..., Any]],
    args: tuple[Any, ...],
    mesh: jax.sharding.Mesh | None = None,
) -> tuple[list[jax.Array], list[jax.Array]]:
    """(jax's outputs, meshjit's), each from `make(jit)(*args)`, under
    `jax.set_mesh(mesh)` when a mesh is given."""
    results = []
    for jit in (jax.jit, meshjit.jit):
        if mesh is None:
            out = make(jit)(*args)
        else:
            with jax.set_mesh(mesh):
                out = make(jit)(*args)
        results.append(jax.tree.leaves(out))
    return results[0], results[1]


def assert_same(theirs: list[jax.Array], ours: list[jax.Array]) -> None:
    assert len(theirs) == len(ours)
    for t, o in zip(theirs, ours, strict=True):
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-5, atol=1e-5)
        assert o.sharding.mesh == t.sharding.mesh  # axis types included
        assert o.sharding.spec == t.sharding.spec
        assert jax.typeof(o) == jax.typeof(t)


X = rand(8, 16)
W = rand(16, 4, seed=1)


def test_elementwise_keeps_the_argument_type() -> None:
    x = put(X, EXPLICIT, "x", "y")
    theirs, ours = run_both(lambda jit: jit(lambda a: jnp.sin(a) * 2 + 1), (x,))
    assert_same(theirs, ours)
    assert str(jax.typeof(ours[0])) == "float32[8@x,16@y]"


def test_reduction_drops_the_reduced_axis() -> None:
    x = put(X, EXPLICIT, "x", "y")
    theirs, ours = run_both(lambda jit: jit(lambda a: a.sum(1)), (x,))
    assert_same(theirs, ours)
    assert ours[0].sharding.spec == P("x")


def test_argmax_along_a_split_dim() -> None:
    """jax constrains the index iota it makes; the partitioner makes that iota
    again in the layout the reduction needs, without the constraint (which
    per-device code cannot hold)."""
    x = put(X, EXPLICIT, "x", "y")

    def f(a):  # type: ignore[no-untyped-def]
        return jnp.argmax(a, axis=0), jnp.argmin(a, axis=1)

    theirs, ours = run_both(lambda jit: jit(f), (x,))
    assert_same(theirs, ours)


def test_matmul_with_out_sharding_and_reshard() -> None:
    x = put(X, EXPLICIT, "x", "y")
    w = put(W, EXPLICIT, "y", None)

    def f(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
        y = jnp.einsum("ij,jk->ik", a, b, out_sharding=P("x", None))
        z = jax.sharding.reshard(y, P(None, "x"))
        return jnp.tanh(z), y.sum(0)

    theirs, ours = run_both(lambda jit: jit(f), (x, w), EXPLICIT)
    assert_same(theirs, ours)
    assert str(jax.typeof(ours[0])) == "float32[8,4@x]"


def test_train_step_keeps_parameter_types() -> None:
    params = {
        "w1": put(rand(16, 32), EXPLICIT, None, "y"),
        "w2": put(rand(32, 16, seed=2), EXPLICIT, "y", None),
    }
    x = put(X, EXPLICIT, "x", None)

    def step(p: dict[str, jax.Array], a: jax.Array) -> tuple[Any, jax.Array]:
        def loss(q: dict[str, jax.Array]) -> jax.Array:
            h = jnp.tanh(a @ q["w1"])
            out = jnp.einsum("bh,hd->bd", h, q["w2"], out_sharding=P("x", None))
            return (out**2).mean()

        value, grads = jax.value_and_grad(loss)(p)
        return jax.tree.map(lambda w, g: w - 0.1 * g, p, grads), value

    theirs, ours = run_both(lambda jit: jit(step), (params, x), EXPLICIT)
    assert_same(theirs, ours)
    assert ours[0].sharding.spec == P(None, "y")  # w1 stays as typed


def test_uncommitted_argument_under_set_mesh_is_replicated() -> None:
    theirs, ours = run_both(lambda jit: jit(lambda a: a * 2), (X,), EXPLICIT)
    assert_same(theirs, ours)
    assert ours[0].sharding.spec == P(None, None)


def test_in_and_out_shardings_on_an_explicit_mesh() -> None:
    s_in = NamedSharding(EXPLICIT, P("x", None))
    s_out = NamedSharding(EXPLICIT, P(None, "y"))
    theirs, ours = run_both(
        lambda jit: jit(lambda a: a * 2, in_shardings=s_in, out_shardings=s_out),
        (X,),
    )
    assert_same(theirs, ours)
    assert str(jax.typeof(ours[0])) == "float32[8,16@y]"


def test_mixed_explicit_and_auto_axes() -> None:
    x = put(X, MIXED, "x", "y")  # only `x` is in the type

    def f(a: jax.Array) -> jax.Array:
        return jax.lax.with_sharding_constraint(jnp.exp(a), P(None, "y")).sum(0)

    theirs, ours = run_both(lambda jit: jit(f), (x,), MIXED)
    assert_same(theirs, ours)


def test_auto_axes_inside_explicit_mode() -> None:
    x = put(X, EXPLICIT, "x", None)

    def f(a: jax.Array) -> jax.Array:
        inner = jax.sharding.auto_axes(lambda b: b * 3, out_sharding=P(None, "y"))
        return inner(a) + 1

    theirs, ours = run_both(lambda jit: jit(f), (x,), EXPLICIT)
    assert_same(theirs, ours)


def test_scan_carries_the_type() -> None:
    x = put(X, EXPLICIT, "x", None)

    def f(a: jax.Array) -> jax.Array:
        def body(c: jax.Array, _: Any) -> tuple[jax.Array, None]:
            return jnp.sin(c) + c, None

        return jax.lax.scan(body, a, None, length=3)[0]

    theirs, ours = run_both(lambda jit: jit(f), (x,), EXPLICIT)
    assert_same(theirs, ours)


def test_lower_on_typed_shape_dtype_struct() -> None:
    sds = jax.ShapeDtypeStruct(
        (8, 16), jnp.float32, sharding=NamedSharding(EXPLICIT, P("x"))
    )
    x = put(X, EXPLICIT, "x")
    outs = []
    for jit in (jax.jit, meshjit.jit):
        lowered = jit(lambda a: a * 2).lower(sds)
        assert lowered.out_info.sharding.spec == P("x", None)
        outs.append([lowered.compile()(x)])
    assert_same(outs[0], outs[1])


def test_types_are_part_of_the_cache_key() -> None:
    f = meshjit.jit(lambda a: a + 1)
    first = f(put(X, EXPLICIT, "x", None))
    second = f(put(X, EXPLICIT, None, "y"))
    assert first.sharding.spec == P("x", None)
    assert second.sharding.spec == P(None, "y")


def test_in_shardings_that_contradict_the_type_are_refused() -> None:
    x = put(X, EXPLICIT, "x", "y")
    for jit in (jax.jit, meshjit.jit):
        with pytest.raises(ValueError, match="does not match"):
            jit(lambda a: a, in_shardings=NamedSharding(EXPLICIT, P("x", None)))(x)


def test_with_sharding_constraint_asserts_the_type() -> None:
    x = put(X, EXPLICIT, "x", "y")
    for wsc in (jax.lax.with_sharding_constraint, meshjit.with_sharding_constraint):
        f = meshjit.jit(lambda a, wsc=wsc: wsc(a * 2, P("x", None)))
        with jax.set_mesh(EXPLICIT), pytest.raises(AssertionError, match="reshard"):
            f(x)
    theirs, ours = run_both(
        lambda jit: jit(lambda a: meshjit.with_sharding_constraint(a * 2, P("x", "y"))),
        (x,),
        EXPLICIT,
    )
    assert_same(theirs, ours)


def test_contracting_sharded_dims_need_out_sharding() -> None:
    x = put(X, EXPLICIT, "x", "y")
    w = put(W, EXPLICIT, "y", None)
    for jit in (jax.jit, meshjit.jit):
        with pytest.raises(Exception, match="out_sharding"):
            jit(lambda a, b: a @ b)(x, w)


def shards(a: jax.Array) -> list[np.ndarray]:
    """Each device's buffer, in device order (an unreduced value's partial
    sums are what these hold)."""
    ordered = sorted(a.addressable_shards, key=lambda s: s.device.id)
    return [np.asarray(s.data) for s in ordered]


def assert_same_shards(theirs: list[jax.Array], ours: list[jax.Array]) -> None:
    """Outputs equal buffer for buffer, with the same sharding and type."""
    assert len(theirs) == len(ours)
    for t, o in zip(theirs, ours, strict=True):
        assert o.sharding.spec == t.sharding.spec
        assert jax.typeof(o) == jax.typeof(t)
        for mine, expected in zip(shards(o), shards(t), strict=True):
            np.testing.assert_allclose(mine, expected, rtol=1e-5, atol=1e-5)


def test_unreduced_output_holds_the_partial_sums() -> None:
    """A contraction over a split dim with `unreduced=` output: each device
    returns its partial sum, buffer for buffer as jax's; resharding it sums."""
    x = put(X, EXPLICIT, "x", "y")
    w = put(W, EXPLICIT, "y", None)
    spec = P("x", None, unreduced={"y"})

    def make(jit: Callable[..., Any]) -> Callable[..., Any]:
        return jit(lambda a, b: jnp.einsum("ij,jk->ik", a, b, out_sharding=spec))

    theirs, ours = run_both(make, (x, w), EXPLICIT)
    assert_same_shards(theirs, ours)
    assert ours[0].sharding.spec.unreduced == {"y"}
    with jax.set_mesh(EXPLICIT):
        total = jax.sharding.reshard(ours[0], P("x", None))
    np.testing.assert_allclose(np.asarray(total), X @ W, rtol=1e-4, atol=1e-4)


def test_unreduced_input_is_summed_where_it_must_be() -> None:
    """An unreduced argument: `x + x` stays a partial sum (no collective),
    the reshard to a plain spec sums it once."""
    x = put(X, EXPLICIT, "x", "y")
    w = put(W, EXPLICIT, "y", None)
    spec = P("x", None, unreduced={"y"})
    with jax.set_mesh(EXPLICIT):
        partial = jax.jit(
            lambda a, b: jnp.einsum("ij,jk->ik", a, b, out_sharding=spec)
        )(x, w)

    def keep(jit: Callable[..., Any]) -> Callable[..., Any]:
        return jit(lambda a: a + a)

    def total(jit: Callable[..., Any]) -> Callable[..., Any]:
        return jit(lambda a: jax.sharding.reshard(a + a, P("x", None)))

    assert_same_shards(*run_both(keep, (partial,), EXPLICIT))
    theirs, ours = run_both(total, (partial,), EXPLICIT)
    assert_same(theirs, ours)
    np.testing.assert_allclose(np.asarray(ours[0]), 2 * X @ W, rtol=1e-4, atol=1e-4)
    with jax.set_mesh(EXPLICIT):
        compiled = meshjit.jit(lambda a: a + a).lower(partial).compile()
    assert compiled.partition_report.collectives == []


def test_values_become_unreduced_as_jax_lays_them_out() -> None:
    """To unreduced from a split dim, each device keeps its block in place
    and zeros elsewhere; from a replicated value, the first device along the
    axis keeps it. Neither moves data."""
    mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Explicit,))
    spec = NamedSharding(mesh, P(unreduced={"x"}))
    for a in (put(np.arange(8.0), mesh, "x"), put(np.arange(8.0), mesh)):
        theirs, ours = run_both(lambda jit: jit(lambda v: v, out_shardings=spec), (a,))
        assert_same_shards(theirs, ours)
    assert [list(b) for b in shards(ours[0])] == [list(np.arange(8.0)), [0.0] * 8]


def test_scatter_add_into_unreduced_scatters_rows_where_they_are() -> None:
    """segment_sum with split segments and an unreduced result: each device
    scatters its own rows (buffers as jax's), no gather of the updates."""
    mesh = jax.make_mesh((4,), ("x",), axis_types=(AxisType.Explicit,))
    data = put(np.arange(8, dtype=np.int32), mesh, "x")
    ids = put(np.array([0, 0, 1, 1, 1, 2, 2, 3], dtype=np.int32), mesh, "x")

    def make(jit: Callable[..., Any]) -> Callable[..., Any]:
        spec = P(unreduced={"x"})
        return jit(
            lambda d, i: jax.ops.segment_sum(d, i, num_segments=4, out_sharding=spec)
        )

    theirs, ours = run_both(make, (data, ids), mesh)
    assert_same_shards(theirs, ours)
    assert [list(b) for b in shards(ours[0])] == [
        [1, 0, 0, 0],
        [0, 5, 0, 0],
        [0, 4, 5, 0],
        [0, 0, 6, 7],
    ]


def test_gradient_accumulated_unreduced_over_a_loop_is_summed_once() -> None:
    """Microbatch gradients accumulated as partial sums in a scan: the sum
    across devices happens once, after the loop (jax's own test counts one
    all-reduce); the step computes what jax's does."""
    mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Explicit,))
    reduced = NamedSharding(mesh, P(reduced={"x"}))
    ws = tuple(jax.device_put(rand(4, 4, seed=i), reduced) for i in range(3))
    xs = put(rand(2, 2, 4, seed=7), mesh, None, "x", None)

    def model(params: tuple[jax.Array, ...], batch: jax.Array) -> jax.Array:
        for w in params:
            batch = jnp.tanh(batch @ w)
        return jnp.sum(batch)

    def step(params: tuple[jax.Array, ...], data: jax.Array) -> Any:
        def body(acc: Any, batch: jax.Array) -> tuple[Any, None]:
            grads = jax.grad(model)(params, batch)
            return jax.tree.map(jnp.add, acc, grads), None

        acc = jax.tree.map(jnp.zeros_like, params)
        acc = jax.sharding.reshard(acc, P(unreduced={"x"}))
        acc, _ = jax.lax.scan(body, acc, data)
        acc = jax.sharding.reshard(acc, P())
        plain = jax.sharding.reshard(params, P())
        return jax.tree.map(lambda w, g: w - 0.1 * g, plain, acc)

    theirs, ours = run_both(lambda jit: jit(step), (ws, xs), mesh)
    for t, o in zip(theirs, ours, strict=True):
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-5, atol=1e-5)
    with jax.set_mesh(mesh):
        compiled = meshjit.jit(step).lower(ws, xs).compile()
    collectives = compiled.partition_report.collectives
    reduces = [c for c in collectives if c.kind == "all-reduce"]
    assert len(reduces) == 3  # one per gradient, concatenated into one launch
    assert {c.op for c in reduces} == {"sdy.sharding_constraint"}  # after the loop
    assert compiled.as_text().count("all-reduce(") == 1


def test_lapack_call_with_results_only_factors_runs_whole() -> None:
    """jax's `custom` rules give a LAPACK call's result factors of its own:
    the call cannot compute a block of such a result (its output aliases an
    operand), so it runs on whole operands and the result is sliced."""
    mesh = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Explicit,))
    with jax.set_mesh(mesh):
        a = jax.random.normal(jax.random.key(0), (32, 32))
        b = jax.random.normal(jax.random.key(1), (64, 32), out_sharding=P("x"))
    solve = jax.vmap(jnp.linalg.solve, in_axes=(None, 0))
    theirs, ours = run_both(lambda jit: jit(solve), (a, b), mesh)
    np.testing.assert_allclose(
        np.asarray(ours[0]), np.asarray(theirs[0]), rtol=1e-4, atol=1e-4
    )
