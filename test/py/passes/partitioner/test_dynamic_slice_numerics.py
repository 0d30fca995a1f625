"""dynamic_slice and dynamic_update_slice with run-time starts along split
dims: the operand stays split (slice: a masked local cut and one all-reduce
of bit patterns; update: a masked select, no collective) and the answers are
exactly the unsharded ones, clamped starts included."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit

pytestmark = pytest.mark.devices(8)


def mesh_2x4() -> Mesh:
    return Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))


def compile_and_run(fn, args, in_specs, out_spec, ref=None):  # type: ignore[no-untyped-def]
    m = mesh_2x4()
    in_sh = tuple(NamedSharding(m, s) for s in in_specs)
    compiled = (
        meshjit.jit(fn, in_shardings=in_sh, out_shardings=NamedSharding(m, out_spec))
        .lower(*args)
        .compile()
    )
    got = compiled(*[jax.device_put(a, s) for a, s in zip(args, in_sh, strict=True)])
    one = jax.devices()[0]
    want = jax.jit(ref or fn)(*[jax.device_put(a, one) for a in args])
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    return compiled


def kinds(compiled: meshjit.Compiled) -> list[str]:
    return [c.kind for c in compiled.partition_report.collectives]


# Starts inside one block, across a block edge, past the end (clamped),
# negative (clamped to 0).
STARTS = [(0, 0), (3, 5), (6, 14), (9, 30), (-4, -2)]


@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_dynamic_slice_of_split_operand(start: tuple[int, int], dtype: type) -> None:
    x = (np.arange(16 * 32).reshape(16, 32) % 97).astype(dtype)

    def f(x: jax.Array, i: jax.Array, j: jax.Array) -> jax.Array:
        return jax.lax.dynamic_slice(x, (i, j), (5, 7))

    i, j = (np.int32(s) for s in start)
    c = compile_and_run(f, (x, i, j), (P("x", "y"), P(), P()), P())
    # The operand is never gathered: one all-reduce assembles the slice.
    assert kinds(c) == ["all-reduce"], c.partition_report.collectives


def test_dynamic_slice_keeps_whole_dims_split() -> None:
    """A dim the slice takes whole stays split through the op."""
    x = np.random.default_rng(0).standard_normal((8, 40)).astype(np.float32)

    def f(x: jax.Array, j: jax.Array) -> jax.Array:
        return jax.lax.dynamic_slice_in_dim(x, j, 12, axis=1) * 2.0

    c = compile_and_run(f, (x, np.int32(17)), (P("x", "y"), P()), P("x"))
    assert kinds(c) == ["all-reduce"], c.partition_report.collectives


def test_dynamic_slice_uneven_blocks() -> None:
    """30 rows along 4 devices (a constraint): blocks of 8, the last padded."""
    m = mesh_2x4()
    x = np.arange(30 * 6, dtype=np.float32).reshape(30, 6)

    def f(x: jax.Array, i: jax.Array, split: bool = True) -> jax.Array:
        x = x + 1.0
        if split:
            x = jax.lax.with_sharding_constraint(x, NamedSharding(m, P("y")))
        return jax.lax.dynamic_slice_in_dim(x, i, 9, axis=0)

    def ref(x: jax.Array, i: jax.Array) -> jax.Array:
        return f(x, i, split=False)

    for i in (0, 20, 21, 28):
        c = compile_and_run(f, (x, np.int32(i)), (P(), P()), P(), ref)
        assert kinds(c) == ["all-reduce"], c.partition_report.collectives


# Updates into blocks of 8 x 8: shorter than a block along both dims (an
# update-sized window of the block), and longer along dim 0 (whole blocks
# there) but shorter along dim 1.
UPDATES = [(5, 7), (11, 3)]


@pytest.mark.parametrize("update", UPDATES, ids=["5x7", "11x3"])
@pytest.mark.parametrize("start", [*STARTS, (7, 6), (0, 29)])
def test_dynamic_update_slice_of_split_operand(
    start: tuple[int, int], update: tuple[int, int]
) -> None:
    x = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    u = -np.arange(update[0] * update[1], dtype=np.float32).reshape(update) - 1

    def f(x: jax.Array, u: jax.Array, i: jax.Array, j: jax.Array) -> jax.Array:
        return jax.lax.dynamic_update_slice(x, u, (i, j))

    i, j = (np.int32(s) for s in start)
    c = compile_and_run(f, (x, u, i, j), (P("x", "y"), P(), P(), P()), P("x", "y"))
    assert kinds(c) == [], c.partition_report.collectives
    assert re.search("dynamic.update.slice", c.as_text())


def test_dynamic_update_slice_gathers_a_split_update() -> None:
    """The update arrives split along a dim it covers part of: it is gathered
    (it is the small one); the operand stays split."""
    x = np.arange(16 * 32, dtype=np.int32).reshape(16, 32)
    u = np.full((8, 4), -1, dtype=np.int32)

    def f(x: jax.Array, u: jax.Array, i: jax.Array) -> jax.Array:
        return jax.lax.dynamic_update_slice(x, u, (i, np.int32(10)))

    for i in (0, 5, 8, 13):
        c = compile_and_run(
            f, (x, u, np.int32(i)), (P("x", "y"), P("x"), P()), P("x", "y")
        )
        assert all(k == "all-gather" for k in kinds(c)), c.partition_report.collectives


def test_scan_writing_rows_of_a_split_buffer() -> None:
    """The pattern dynamic_update_slice comes from: a loop writing row t of a
    buffer split along its rows."""
    m = mesh_2x4()
    rows = NamedSharding(m, P("y"))

    def f(x: jax.Array) -> jax.Array:
        def body(t: jax.Array, buf: jax.Array) -> jax.Array:
            row = jnp.sin(x[0] * t)
            return jax.lax.dynamic_update_slice_in_dim(buf, row[None], t, axis=0)

        return jax.lax.fori_loop(0, 16, body, jnp.zeros((16, 8), jnp.float32))

    x = np.linspace(0, 1, 16 * 8, dtype=np.float32).reshape(16, 8)
    got = meshjit.jit(f, in_shardings=rows, out_shardings=rows)(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(f(x)), rtol=1e-6)


def test_scan_reading_rows_of_a_split_input_gathers_it_once() -> None:
    """A scan over a dim split across devices (an RNN over a time dim laid
    out over the mesh): `xs` is a loop carry the body only reads, one row
    per iteration. Assembling each row is a collective per iteration; the
    input is gathered once, before the loop, instead (XLA's partitioner
    gets there by hoisting its loop-invariant gather; on a partitioned
    module XLA hoists no collective)."""
    m = mesh_2x4()
    w = np.linspace(-0.5, 0.5, 8 * 8, dtype=np.float32).reshape(8, 8)

    def f(xs: jax.Array) -> jax.Array:
        def step(h: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
            h = jnp.tanh(x + h @ w)
            return h, h

        return jax.lax.scan(step, jnp.zeros((4, 8)), xs)[1]

    xs = np.linspace(-1, 1, 16 * 4 * 8, dtype=np.float32).reshape(16, 4, 8)
    time_split = NamedSharding(m, P(("x", "y")))
    compiled = meshjit.jit(f, in_shardings=time_split).lower(xs).compile()
    got = compiled(jax.device_put(xs, time_split))
    want = jax.jit(f)(jax.device_put(xs, jax.devices()[0]))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    text = compiled.as_text("partitioned")
    loop = text.index("stablehlo.while")
    assert kinds(compiled).count("all-gather") == 1, kinds(compiled)
    assert "all_reduce" not in text[loop:], text
    assert text.index("all_gather") < loop, text
    remarks = [r.message for r in compiled.partition_report.remarks]
    assert any("gathered along dim 0 once before the loop" in r for r in remarks)


def test_loop_of_unknown_length_reading_rows_keeps_them_split() -> None:
    """A while loop whose trip count is data-dependent reads rows of a split
    carry: no count to weigh a gather against, so each row is assembled
    where it is read, and the answer is the unsharded one."""
    m = mesh_2x4()

    def f(xs: jax.Array, n: jax.Array) -> jax.Array:
        def body(c: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
            i, acc = c
            return i + 1, acc * 0.5 + jax.lax.dynamic_index_in_dim(xs, i, 0, False)

        return jax.lax.while_loop(lambda c: c[0] < n, body, (0, jnp.zeros((4, 8))))[1]

    xs = np.linspace(-1, 1, 16 * 4 * 8, dtype=np.float32).reshape(16, 4, 8)
    time_split = NamedSharding(m, P(("x", "y")))
    replicated = NamedSharding(m, P())
    compiled = (
        meshjit.jit(f, in_shardings=(time_split, replicated))
        .lower(xs, np.int32(11))
        .compile()
    )
    got = compiled(jax.device_put(xs, time_split), np.int32(11))
    want = jax.jit(f)(jax.device_put(xs, jax.devices()[0]), np.int32(11))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    remarks = [r.message for r in compiled.partition_report.remarks]
    assert not any("once before the loop" in r for r in remarks), remarks
    assert "all-gather" not in kinds(compiled), kinds(compiled)


def test_scan_over_layers_split_along_the_layer_dim_gathers_them_once() -> None:
    """A scan over layers whose stacked weights are split along the layer dim
    (FSDP over layers): each weight is gathered once before the loop and
    every iteration slices its layer locally (a dynamic_slice reads only
    the slice, so slicing the gathered copy is priced below assembling each
    layer's slice with an all-reduce)."""
    m = Mesh(np.array(jax.devices()[:8]), ("x",))
    layers, width = 8, 256  # a layer: 256 KiB, all of them 2 MiB
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((layers, width, width)) * 0.05).astype(np.float32)
    b = (rng.standard_normal((layers, width)) * 0.1).astype(np.float32)
    x = rng.standard_normal((8, width)).astype(np.float32)

    def f(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
        def body(
            h: jax.Array, p: tuple[jax.Array, jax.Array]
        ) -> tuple[jax.Array, None]:
            return jnp.tanh(h @ p[0] + p[1]), None

        return jax.lax.scan(body, x, (w, b))[0]

    split = NamedSharding(m, P("x"))
    compiled = (
        meshjit.jit(f, in_shardings=(split, split, split)).lower(x, w, b).compile()
    )
    got = compiled(*(jax.device_put(a, split) for a in (x, w, b)))
    want = jax.jit(f)(*(jax.device_put(a, jax.devices()[0]) for a in (x, w, b)))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    text = compiled.as_text("partitioned")
    loop = text.index("stablehlo.while")
    assert kinds(compiled) == ["all-gather", "all-gather"], kinds(compiled)
    assert "all_reduce" not in text[loop:], text
    assert "all_gather" not in text[loop:], text


def test_counted_while_with_step_two_gathers_once() -> None:
    """A while loop counting by 2 (16 iterations over 32 rows split 8 ways)
    is a counted loop too: the rows it reads are gathered once before it."""
    m = Mesh(np.array(jax.devices()[:8]), ("x",))

    def f(xs: jax.Array) -> jax.Array:
        def body(c: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
            i, acc = c
            return i + 2, acc * 0.5 + jax.lax.dynamic_index_in_dim(xs, i, 0, False)

        return jax.lax.while_loop(lambda c: c[0] < 32, body, (0, jnp.zeros((4, 8))))[1]

    xs = np.linspace(-1, 1, 32 * 4 * 8, dtype=np.float32).reshape(32, 4, 8)
    split = NamedSharding(m, P("x"))
    compiled = meshjit.jit(f, in_shardings=split).lower(xs).compile()
    got = compiled(jax.device_put(xs, split))
    want = jax.jit(f)(jax.device_put(xs, jax.devices()[0]))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    assert kinds(compiled) == ["all-gather"], kinds(compiled)
    remarks = [r.message for r in compiled.partition_report.remarks]
    assert any("in each of 16 iterations" in r for r in remarks), remarks
