"""Host callbacks and ordered effects (jax.debug.callback/print, io_callback,
pure_callback) inside meshjit.jit, against jax.jit on 8 CPU devices.

jax places a callback outside shard_map on one device (a maximal sharding);
meshjit's partitioner runs it there only, on its operands gathered whole, and
sums a callback's results to every device. A `partitioned=True` debug
callback is called on every device with its block, as XLA's partitioner
does. Ordered effects thread jax's
tokens between calls, so callbacks run in program order across calls too.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import io_callback
from jax.extend.core import Token
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit

pytestmark = pytest.mark.devices(8)

MESH = jax.sharding.Mesh(np.array(jax.devices()[:8]), ("x",))


def sharded(a: np.ndarray) -> jax.Array:
    return jax.device_put(a, NamedSharding(MESH, P("x")))


def calls_of(jit: Any, fun: Any, *args: Any) -> tuple[list[np.ndarray], Any]:
    """The values each callback call saw, and the outputs, under `jit`."""
    seen: list[np.ndarray] = []
    out = jit(fun(seen))(*args)
    jax.block_until_ready(out)
    jax.effects_barrier()
    return seen, out


def test_debug_callback_runs_once_on_the_whole_value() -> None:
    def make(seen: list[np.ndarray]) -> Any:
        def f(x: jax.Array) -> jax.Array:
            jax.debug.callback(lambda v: seen.append(np.asarray(v)), x * 3)
            return x + 1

        return f

    x = sharded(np.arange(16, dtype=np.float32))
    ours, out = calls_of(meshjit.jit, make, x)
    theirs, want = calls_of(jax.jit, make, x)
    assert len(ours) == len(theirs) == 1
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[0], np.arange(16) * 3)
    np.testing.assert_array_equal(out, want)
    assert out.sharding.spec == P("x")


def _blocks(seen: list[np.ndarray]) -> list[tuple[tuple[int, ...], bytes]]:
    return sorted((a.shape, a.tobytes()) for a in seen)


@pytest.mark.parametrize("spec", [P("x", "y"), P(None, "y"), P()])
def test_partitioned_debug_callback_runs_on_every_device_on_its_block(
    spec: P,
) -> None:
    """`partitioned=True`: one call per device, on that device's block (jax:
    XLA's partitioner calls it per shard), not once on the whole value."""
    mesh = jax.make_mesh((4, 2), ("x", "y"))

    def make(seen: list[np.ndarray]) -> Any:
        def f(x: jax.Array) -> jax.Array:
            y = jnp.sin(x) * 2
            jax.debug.callback(
                lambda v: seen.append(np.asarray(v)), y, partitioned=True
            )
            return y + 1

        return f

    x = jax.device_put(
        np.arange(64, dtype=np.float32).reshape(8, 8), NamedSharding(mesh, spec)
    )
    ours, out = calls_of(meshjit.jit, make, x)
    theirs, want = calls_of(jax.jit, make, x)
    assert len(ours) == len(theirs) == 8
    assert _blocks(ours) == _blocks(theirs)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("manual", [("x",), ("x", "y")])
def test_partitioned_debug_callback_inside_shard_map(manual: tuple[str, ...]) -> None:
    """In a shard_map: per device over every manual axis (jax's lowering
    gathers the free axes and calls it at their first position)."""
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("x", "y"))

    def make(seen: list[np.ndarray]) -> Any:
        def body(a: jax.Array) -> jax.Array:
            jax.debug.callback(
                lambda v: seen.append(np.asarray(v)), a * 2, partitioned=True
            )
            return a + 1

        def f(x: jax.Array) -> jax.Array:
            return jax.shard_map(
                body,
                mesh=mesh,
                in_specs=P("x"),
                out_specs=P("x"),
                axis_names=set(manual),
            )(x)

        return f

    x = jax.device_put(
        np.arange(64, dtype=np.float32).reshape(8, 8), NamedSharding(mesh, P("x", "y"))
    )
    ours, out = calls_of(meshjit.jit, make, x)
    theirs, want = calls_of(jax.jit, make, x)
    assert len(ours) == len(theirs) == (4 if manual == ("x",) else 8)
    assert _blocks(ours) == _blocks(theirs)
    np.testing.assert_array_equal(out, want)


def test_partitioned_debug_callback_of_a_partial_sum_sees_the_sum() -> None:
    """A contraction over a split dim left as a partial sum is summed before
    the callback sees it; a dim its axis does not divide is passed whole."""
    seen: list[np.ndarray] = []

    @meshjit.jit
    def f(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
        y = a @ b
        jax.debug.callback(lambda v: seen.append(np.asarray(v)), y, partitioned=True)
        z = jax.lax.with_sharding_constraint(c * 2, NamedSharding(MESH, P("x")))
        jax.debug.callback(lambda v: seen.append(np.asarray(v)), z, partitioned=True)
        return y

    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.ones((8, 2), np.float32)
    out = f(sharded(a.T).T, sharded(b), np.arange(12, dtype=np.float32))
    jax.effects_barrier()
    np.testing.assert_array_equal(out, a @ b)
    sums = [v for v in seen if v.shape == (4, 2)]
    assert len(sums) == 8
    assert all((v == a @ b).all() for v in sums)
    whole = [v for v in seen if v.shape == (12,)]
    assert len(whole) == 8
    assert all((v == np.arange(12) * 2).all() for v in whole)


def _inspections(jit: Any, f: Any, *args: Any, **kw: Any) -> list[Any]:
    """What each jax.debug.inspect_array_sharding callback of `f` saw when
    `jit(f, **kw)` compiled for `args` (jax: at compile time, by XLA's
    partitioner; meshjit: after its propagation)."""
    seen: list[Any] = []
    jit(f(seen), **kw).lower(*args).compile()
    return seen


def _spec_of(s: Any) -> Any:
    return (type(s).__name__, s.mesh.shape_tuple, s.spec)


def test_inspect_array_sharding_sees_the_sharding_chosen_for_the_value() -> None:
    """Intermediates with a propagated split (a dot's rows, a transpose's
    two axes), a replicated one (a reduction to a scalar), a jitted
    function's value inside another, and one inside a shard_map manual
    over every axis (P(), as jax says): the same NamedSharding as jax's,
    each callback called once per compile."""
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("x", "y"))

    def make(seen: list[Any]) -> Any:
        def inspect(v: jax.Array, tag: str) -> None:
            jax.debug.inspect_array_sharding(
                v, callback=lambda s: seen.append((tag, s))
            )

        @jax.jit
        def inner(v: jax.Array) -> jax.Array:
            inspect(v, "inner")
            return v * 2

        def body(v: jax.Array) -> jax.Array:
            inspect(v, "body")
            return v + 1

        def f(x: jax.Array, w: jax.Array) -> Any:
            y = jnp.sin(x) @ w
            inspect(y, "dot")
            inspect(x.T, "transpose")
            inspect(y.sum(), "sum")
            z = inner(y)
            m = jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(z)
            return m

        return f

    x = jax.device_put(np.ones((8, 16), np.float32), NamedSharding(mesh, P("x", "y")))
    w = jax.device_put(np.ones((16, 4), np.float32), NamedSharding(mesh, P("y")))
    ours = _inspections(meshjit.jit, make, x, w)
    theirs = _inspections(jax.jit, make, x, w)
    assert sorted(t for t, _ in ours) == sorted(t for t, _ in theirs)
    assert len(ours) == 5
    assert {t: _spec_of(s) for t, s in ours} == {t: _spec_of(s) for t, s in theirs}
    assert dict(ours)["transpose"].spec == P("y", "x")
    assert dict(ours)["body"].spec == P()


def test_inspect_array_sharding_on_one_device_and_when_called() -> None:
    """Without a mesh the callback gets a replicated sharding; a jitted call
    compiles and calls it once, a second call (cached) does not; the
    program's results are unchanged."""
    seen: list[Any] = []

    @meshjit.jit
    def f(x: jax.Array) -> jax.Array:
        jax.debug.inspect_array_sharding(x * 2, callback=seen.append)
        return x + 1

    x = jnp.arange(8.0)
    np.testing.assert_array_equal(f(x), np.arange(8.0) + 1)
    np.testing.assert_array_equal(f(x), np.arange(8.0) + 1)
    assert len(seen) == 1
    assert seen[0].is_fully_replicated


def test_debug_print_of_a_sum() -> None:
    x = sharded(np.arange(16, dtype=np.float32))
    seen: list[float] = []

    @meshjit.jit
    def f(x: jax.Array) -> jax.Array:
        jax.debug.callback(lambda s: seen.append(float(s)), x.sum())
        return x * 2

    np.testing.assert_array_equal(f(x), np.arange(16) * 2)
    jax.effects_barrier()
    assert seen == [120.0]


def test_ordered_io_callbacks_keep_program_order_across_calls() -> None:
    def make(seen: list[np.ndarray]) -> Any:
        def f(x: jax.Array) -> jax.Array:
            io_callback(lambda v: seen.append(np.asarray(v)), None, x, ordered=True)
            io_callback(
                lambda v: seen.append(np.asarray(v)), None, x * 10, ordered=True
            )
            return x + 1

        return f

    x = sharded(np.arange(16, dtype=np.float32))
    seen: list[np.ndarray] = []
    f = meshjit.jit(make(seen))
    for _ in range(2):  # the second call runs the program again, tokens threaded
        out = f(x)
    jax.effects_barrier()
    assert [float(s[1]) for s in seen] == [1.0, 10.0, 1.0, 10.0]
    np.testing.assert_array_equal(seen[1], np.arange(16) * 10)
    np.testing.assert_array_equal(out, np.arange(16) + 1)


def test_io_callback_result_reaches_every_device() -> None:
    def make(seen: list[np.ndarray]) -> Any:
        def f(x: jax.Array) -> jax.Array:
            y = io_callback(
                lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x
            )
            return (y + x).sum(), y > 10

        return f

    x = sharded(np.arange(16, dtype=np.float32))
    _, (total, big) = calls_of(meshjit.jit, make, x)
    _, (want_total, want_big) = calls_of(jax.jit, make, x)
    assert float(total) == float(want_total) == 3 * 120
    np.testing.assert_array_equal(big, want_big)  # a boolean result too


def test_io_callback_with_in_shardings_on_an_auto_mesh() -> None:
    """The arguments' Auto mesh would be in their avals, where jax refuses
    callbacks (they need devices at lowering): traced without it."""
    mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))

    def f(x: jax.Array) -> jax.Array:
        spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return io_callback(lambda a: np.asarray(a) * 2, spec, x) + 1

    g = meshjit.jit(f, in_shardings=NamedSharding(mesh, P("x")))
    np.testing.assert_array_equal(g(jnp.arange(16.0)), np.arange(16.0) * 2 + 1)


def test_pure_callback() -> None:
    def f(x: jax.Array) -> jax.Array:
        y = jax.pure_callback(
            lambda v: np.sin(np.asarray(v)), jax.ShapeDtypeStruct(x.shape, x.dtype), x
        )
        return y * x

    x = sharded(np.linspace(0, 1, 16, dtype=np.float32))
    np.testing.assert_allclose(meshjit.jit(f)(x), jax.jit(f)(x), rtol=1e-6)


def test_ordered_io_callback_inside_shard_map_runs_per_device() -> None:
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]), ("i",))

    def make(seen: list[np.ndarray]) -> Any:
        def body(x: jax.Array, y: jax.Array) -> jax.Array:
            io_callback(lambda v: seen.append(np.asarray(v)), (), x, ordered=True)
            return x + y[..., jnp.newaxis]

        return jax.shard_map(
            body, mesh=mesh, in_specs=(P(None, "i"), P(None)), out_specs=P(None, "i")
        )

    x, y = jnp.zeros((2, 16)), jnp.ones(2)
    ours, out = calls_of(meshjit.jit, make, x, y)
    theirs, want = calls_of(jax.jit, make, x, y)
    assert len(ours) == len(theirs) == 4
    assert all(s.shape == (2, 4) for s in ours)
    np.testing.assert_array_equal(out, want)


def test_closed_over_mutable_arrays_are_read_and_written_back() -> None:
    """Mutable arrays (jax.new_ref) the function closes over are passed in
    and their new values written back after the call, as under jax.jit."""

    def run(jit: Any) -> tuple[Any, np.ndarray, np.ndarray]:
        scale = jax.new_ref(jnp.arange(4.0))
        total = jax.new_ref(jnp.ones(3))

        def f(x: jax.Array, y: jax.Array) -> Any:
            total[...] = total[...] + x.sum()
            return x * scale[...][1], y + 1

        g = jit(f)
        for _ in range(2):
            out = g(jnp.ones(5), jnp.zeros(2))
        return out, np.asarray(scale[...]), np.asarray(total[...])

    ours, theirs = run(meshjit.jit), run(jax.jit)
    leaves = jax.tree_util.tree_leaves
    for a, b in zip(leaves(ours), leaves(theirs), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ours[2], [11.0, 11.0, 11.0])


def test_sharded_mutable_array_keeps_its_layout() -> None:
    ref = jax.new_ref(sharded(np.arange(16, dtype=np.float32)))

    @meshjit.jit
    def double() -> jax.Array:
        ref[...] = ref[...] * 2
        return ref[...].sum()

    assert float(double()) == 2 * 120
    assert float(double()) == 4 * 120
    value = ref[...]
    np.testing.assert_array_equal(value, np.arange(16) * 4)


def test_token_arguments_and_results() -> None:
    """A `Token` argument is passed as its buffer and a token result comes
    back as a `Token`, as under jax.jit (on one device and on eight)."""
    token = jax.lax.create_token(None)
    x = jax.device_put(jnp.arange(8), jax.devices()[0])
    out, tok = meshjit.jit(lambda x, t: (x, t))(x, token)
    np.testing.assert_array_equal(out, np.arange(8))
    assert isinstance(tok, Token)
    tok.block_until_ready()

    f = meshjit.jit(lambda x, t: (x * 2, {"t": t}))
    y = sharded(np.arange(16, dtype=np.float32))
    for _ in range(2):  # the second call takes the same path
        out, tree = f(y, token)
    assert isinstance(tree["t"], Token)
    np.testing.assert_array_equal(out, np.arange(16) * 2)
    assert out.sharding.spec == P("x")


def test_mutable_array_written_between_calls() -> None:
    """A value written into the array between calls is what the next call
    reads (the compiled program is reused: the array is passed laid out as
    it was compiled for)."""
    ref = jax.new_ref(sharded(np.arange(16, dtype=np.float32)))

    @meshjit.jit
    def total() -> jax.Array:
        return ref[...].sum()

    assert float(total()) == 120.0
    ref[...] = jax.device_put(jnp.ones(16), NamedSharding(MESH, P()))
    assert float(total()) == 16.0
    assert total.cache_info().compiles == 1
