"""`AUTO(mesh)` in jit's in/out_shardings: the auto-shard pass chooses the
layouts; Compiled reports them, calls move arguments into them, numerics
match jax.jit, and explain says what was chosen and why."""

from __future__ import annotations

import re
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import meshjit
from meshjit import NamedSharding, P
from meshjit.errors import ShardingError
from meshjit.sharding import AUTO

pytestmark = pytest.mark.devices(8)


@pytest.fixture(scope="module")
def mesh() -> meshjit.Mesh:
    return meshjit.Mesh(np.array(jax.devices()[:8]), ("x",))


def step(w1: jax.Array, w2: jax.Array, x: jax.Array, y: jax.Array) -> Any:
    def loss(w1: jax.Array, w2: jax.Array) -> jax.Array:
        return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)

    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 0.1 * g1, w2 - 0.1 * g2


def arrays(*shapes: tuple[int, ...]) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(0)
    return [(rng.standard_normal(s) * 0.05).astype(np.float32) for s in shapes]


SMALL_BATCH = ((1024, 4096), (4096, 1024), (16, 1024), (16, 1024))


def close(got: Any, want: Any) -> None:
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


def test_auto_everywhere_picks_reports_and_runs(mesh: meshjit.Mesh) -> None:
    args = arrays(*SMALL_BATCH)
    f = meshjit.jit(step, in_shardings=AUTO(mesh), out_shardings=AUTO(mesh))
    compiled = f.lower(*args).compile()
    (w1, w2, x, y), _ = compiled.input_shardings
    assert (w1.spec, w2.spec, x.spec, y.spec) == (
        jax.P(None, "x"),
        jax.P("x"),
        jax.P(),
        jax.P(),
    )
    out1, out2 = compiled.output_shardings
    assert (out1.spec, out2.spec) == (jax.P(None, "x"), jax.P("x"))
    assert compiled.collectives_text().count("all-reduce") == 2  # one, and total
    out = f(*args)
    close(out, jax.jit(step)(*args))
    assert out[0].sharding.is_equivalent_to(w1, 2)
    # the next step takes the outputs as they are: no move, no new compile
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = f(out[0], out[1], args[2], args[3])
    close(again, jax.jit(step)(*jax.jit(step)(*args), args[2], args[3]))
    info = f.cache_info()
    assert (info.traces, info.compiles) == (1, 1)


def test_committed_arguments_elsewhere_are_moved_with_a_note(
    mesh: meshjit.Mesh,
) -> None:
    args = arrays(*SMALL_BATCH)
    elsewhere = jax.device_put(args[0], NamedSharding(mesh, P("x")).to_jax())
    f = meshjit.jit(step, in_shardings=AUTO(mesh))
    with pytest.warns(UserWarning, match=r"moving `w1` to the layout auto-sharding"):
        out = f(elsewhere, *args[1:])
    close(out, jax.jit(step)(*args))
    with warnings.catch_warnings():  # said once
        warnings.simplefilter("error")
        out = f(elsewhere, *args[1:])
    close(out, jax.jit(step)(*args))
    compiled = f.lower(elsewhere, *args[1:]).compile()
    with pytest.warns(UserWarning, match="moving `w1`"):
        close(compiled(elsewhere, *args[1:]), jax.jit(step)(*args))


def test_auto_beside_fixed_shardings(mesh: meshjit.Mesh) -> None:
    """Only the AUTO leaves are chosen: w1 keeps the row split it was given
    (the search fits the rest around it)."""
    args = arrays(*SMALL_BATCH)
    auto = AUTO(mesh)
    rows = NamedSharding(mesh, P("x"))
    f = meshjit.jit(step, in_shardings=(rows, auto, auto, auto))
    compiled = f.lower(*args).compile()
    (w1, *_), _ = compiled.input_shardings
    assert w1.spec == jax.P("x")
    close(f(*args), jax.jit(step)(*args))


def test_memory_budget_bounds_the_choice(mesh: meshjit.Mesh) -> None:
    """DP fits in no budget below its peak: with one between the smallest
    peak and DP's, a weight is split and the step still computes the same."""
    args = arrays((32, 64), (64, 32), (8192, 32), (8192, 32))
    free = meshjit.jit(step, in_shardings=AUTO(mesh)).lower(*args).compile()
    (w1, w2, *_), _ = free.input_shardings
    assert (w1.spec, w2.spec) == (jax.P(), jax.P())  # data parallel
    tight = AUTO(mesh, memory_budget="1.26MiB")
    f = meshjit.jit(step, in_shardings=tight, out_shardings=tight)
    (w1, w2, *_), _ = f.lower(*args).compile().input_shardings
    assert (w1.spec, w2.spec) != (jax.P(), jax.P())
    close(f(*args), jax.jit(step)(*args))
    too_small = meshjit.jit(step, in_shardings=AUTO(mesh, memory_budget=4096))
    with pytest.raises(ShardingError, match=r"no layout fits the memory budget of "):
        too_small.lower(*args).compile()


def test_explain_says_what_auto_sharding_chose(mesh: meshjit.Mesh) -> None:
    args = arrays(*SMALL_BATCH)
    f = meshjit.jit(step, in_shardings=AUTO(mesh), out_shardings=AUTO(mesh))
    text = str(meshjit.explain(f, *args))
    assert re.search(
        r"argument 0 of @main \(`w1`\): chosen by auto-sharding: "
        r"\[\{\}, \{\"x\"\}\], estimated [0-9.]+ us; next best \[.*\] "
        r"\(\+[0-9.]+ us for the program\)",
        text,
    ), text
    assert "dot_general at" in text
    assert "auto-shard: optimal" in text


def test_auto_errors_name_the_problem(mesh: meshjit.Mesh) -> None:
    args = arrays(*SMALL_BATCH)
    with pytest.raises(ShardingError, match="different options"):
        meshjit.jit(
            step,
            in_shardings=(AUTO(mesh), AUTO(mesh, memory_budget="1GiB"), None, None),
        ).lower(*args)
    other = meshjit.Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("a", "b"))
    with pytest.raises(ShardingError, match="AUTO chooses layouts on its mesh"):
        meshjit.jit(
            step, in_shardings=(NamedSharding(mesh, P("x")), AUTO(other), None, None)
        ).lower(*args)
    with pytest.raises(ShardingError, match="memory-budget 'lots' is not a size"):
        AUTO(mesh, memory_budget="lots")
    with pytest.raises(ShardingError, match="time_limit must be positive"):
        AUTO(mesh, time_limit=0)
    assert repr(AUTO(mesh, memory_budget="2GiB")).startswith("AUTO(Mesh(")


def test_auto_out_shardings_inside_another_jit(mesh: meshjit.Mesh) -> None:
    inner = meshjit.jit(lambda a: a * 2, out_shardings=AUTO(mesh))
    outer = jax.jit(lambda a: inner(a) + 1)
    a = np.arange(16.0, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(outer(a)), a * 2 + 1)


def test_donated_arguments_keep_their_layout_across_steps(mesh: meshjit.Mesh) -> None:
    """Donated AUTO arguments are tied to the outputs that reuse their
    buffers: a training loop feeds each step's weights to the next with no
    move and no warning, and the buffers are reused."""
    args = arrays((32, 64), (64, 32), (8192, 32), (8192, 32))
    auto = AUTO(mesh)
    f = meshjit.jit(step, in_shardings=auto, out_shardings=auto, donate_argnums=(0, 1))
    compiled = f.lower(*args).compile()
    (w1, w2, *_), _ = compiled.input_shardings
    o1, o2 = compiled.output_shardings
    assert (o1.spec, o2.spec) == (w1.spec, w2.spec)
    want = jax.jit(step)(*args)
    weights = jax.device_put(args[:2], [w1, w2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = f(*weights, args[2], args[3])
        assert weights[0].is_deleted()  # donated, and used
        close(out, want)
        f(*out, args[2], args[3])
