"""Windowed ops along split dims compute what the unsharded program computes:
convolutions (strides, padding, dilations, both gradients), pooling and its
gradient, pad and slice; on 8 CPU devices against one device."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit

pytestmark = pytest.mark.devices(8)

MESHES = {"8": ((8,), ("x",)), "2x4": ((2, 4), ("x", "y"))}
DN = ("NHWC", "HWIO", "NHWC")


def mesh_of(name: str) -> Mesh:
    shape, names = MESHES[name]
    return Mesh(np.array(jax.devices()[:8]).reshape(shape), names)


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed + 7 * len(shape) + sum(shape))
    return rng.standard_normal(shape).astype(np.float32)


def run(
    fn: Callable[..., Any],
    args: Sequence[np.ndarray],
    mesh: str,
    in_specs: Sequence[P],
    out_spec: Any,
) -> meshjit.Compiled:
    m = mesh_of(mesh)
    in_sh = tuple(NamedSharding(m, s) for s in in_specs)
    out_sh = jax.tree.map(
        lambda s: NamedSharding(m, s), out_spec, is_leaf=lambda s: isinstance(s, P)
    )
    compiled = (
        meshjit.jit(fn, in_shardings=in_sh, out_shardings=out_sh).lower(*args).compile()
    )
    placed = [jax.device_put(a, s) for a, s in zip(args, in_sh, strict=True)]
    got = jax.tree.leaves(compiled(*placed))
    one = jax.devices()[0]
    want = jax.tree.leaves(jax.jit(fn)(*[jax.device_put(a, one) for a in args]))
    for g, w in zip(got, want, strict=True):
        # Partial sums add in another order: error relative to the scale.
        scale = max(1.0, float(np.abs(np.asarray(w)).max()))
        np.testing.assert_allclose(
            np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-6 * scale
        )
    return compiled


def gathers_of_rank4(compiled: meshjit.Compiled) -> list[str]:
    """All-gathers the windows fell back to (their reasons)."""
    return [
        c.reason
        for c in compiled.partition_report.collectives
        if c.kind == "all-gather" and "whole dim" in c.reason
    ]


def conv(
    stride: int, padding: Any, lhs_dil: int = 1, rhs_dil: int = 1
) -> Callable[..., Any]:
    def f(x: jax.Array, k: jax.Array) -> jax.Array:
        return jax.lax.conv_general_dilated(
            x,
            k,
            (stride, stride),
            padding,
            lhs_dilation=(lhs_dil, lhs_dil),
            rhs_dilation=(rhs_dil, rhs_dil),
            dimension_numbers=DN,
        )

    return f


CONVS = [
    # (kernel, stride, padding, lhs dilation, rhs dilation)
    (3, 1, "SAME", 1, 1),
    (3, 2, "SAME", 1, 1),
    (7, 2, "SAME", 1, 1),
    (1, 2, "SAME", 1, 1),
    (3, 1, "VALID", 1, 1),
    (3, 3, ((1, 1), (2, 0)), 1, 1),
    (5, 1, ((4, 0), (0, 4)), 1, 1),
    (3, 1, "SAME", 1, 2),
    (3, 1, ((2, 2), (2, 2)), 2, 1),
    (4, 2, "VALID", 1, 1),
]


def _out_size(n: int, k: int, s: int, pad: Any, ld: int, rd: int) -> int:
    if pad == "SAME":
        return -(-n // s)
    lo, hi = (0, 0) if pad == "VALID" else pad[0]
    dilated = (n - 1) * ld + 1 + lo + hi
    return (dilated - (k - 1) * rd - 1) // s + 1


@pytest.mark.parametrize(("k", "stride", "padding", "ld", "rd"), CONVS, ids=str)
@pytest.mark.parametrize(("mesh", "spec"), [("8", P(None, "x")), ("2x4", P("x", "y"))])
def test_conv_forward(
    k: int, stride: int, padding: Any, ld: int, rd: int, mesh: str, spec: P
) -> None:
    h = 64
    oh = _out_size(h, k, stride, padding, ld, rd)
    if oh % (8 if mesh == "8" else 4):
        pytest.skip("jit's out_shardings must divide the result")
    args = [rand(2, h, 16, 4), rand(k, k, 4, 8, seed=1)]
    compiled = run(conv(stride, padding, ld, rd), args, mesh, [spec, P()], spec)
    assert "not partitioned" not in "".join(
        r.message for r in compiled.partition_report.remarks
    )


@pytest.mark.parametrize(("k", "stride"), [(3, 1), (3, 2), (7, 2), (1, 2)])
@pytest.mark.parametrize(("mesh", "spec"), [("8", P(None, "x")), ("2x4", P("x", "y"))])
def test_conv_gradients(k: int, stride: int, mesh: str, spec: P) -> None:
    f = conv(stride, "SAME")

    def loss_grads(x: jax.Array, w: jax.Array) -> Any:
        return jax.grad(lambda x, w: (f(x, w) ** 2).sum(), argnums=(0, 1))(x, w)

    args = [rand(2, 64, 16, 4), rand(k, k, 4, 8, seed=1)]
    run(loss_grads, args, mesh, [spec, P()], (spec, P()))


def test_filter_gradient_reuses_the_forward_window() -> None:
    """A convolution's filter gradient reads the rows its forward pass read
    (a one-row halo each way): the halos are exchanged once, for both."""
    f = conv(1, "SAME")

    def loss_and_grad(x: jax.Array, w: jax.Array) -> Any:
        return jax.value_and_grad(lambda w: (f(x, w) ** 2).sum())(w)

    args = [rand(4, 64, 16, 8), rand(3, 3, 8, 8, seed=1)]
    compiled = run(loss_and_grad, args, "8", [P(None, "x"), P()], (P(), P()))
    windows = [
        (c.kind, c.bytes_per_device)
        for c in compiled.partition_report.collectives
        if "window" in c.reason
    ]
    row = 4 * 16 * 8 * 4  # one row of the local block, f32
    # (the cost model takes one gather of every block's two halo rows; the
    # filter gradient's convolution cuts its window from the same gather)
    assert windows == [("all-gather", 7 * 2 * row)]


def test_halo_wider_than_a_block() -> None:
    """16 rows over 8 devices (blocks of 2) and a 7x7 window: each block
    needs 3 rows from each side, from two neighbours."""
    args = [rand(2, 16, 16, 4), rand(7, 7, 4, 8, seed=1)]
    run(conv(1, "SAME"), args, "8", [P(None, "x"), P()], P(None, "x"))


def test_halo_exchange_moves_only_the_halo() -> None:
    args = [rand(4, 64, 64, 16), rand(3, 3, 16, 16, seed=1)]
    compiled = run(conv(1, "SAME"), args, "8", [P(None, "x"), P()], P(None, "x"))
    kinds = [c.kind for c in compiled.partition_report.collectives]
    assert kinds == ["collective-permute", "collective-permute"]
    row = 4 * 64 * 16 * 4  # one row of the local block, f32
    assert [c.bytes_per_device for c in compiled.partition_report.collectives] == [
        row,
        row,
    ]


@pytest.mark.parametrize(
    ("window", "stride", "rows", "pieces"),
    [(3, 1, 32, 2), (7, 2, 64, 5), (3, 2, 64, 1)],
    ids=["3x3", "7x7s2", "3x3s2"],
)
def test_small_halos_come_in_one_gather_of_the_pieces(
    window: int, stride: int, rows: int, pieces: int
) -> None:
    """A small input over a height split 4 ways (the batch over 2): where
    the cost model would gather the whole height rather than permute each
    halo, every device contributes the rows its neighbours take and one
    all-gather of those brings each device its halos (a 3x3/2 SAME window
    needs one halo: a permute)."""
    args = [rand(4, rows, 8, 2), rand(window, window, 2, 4, seed=1)]
    compiled = run(conv(stride, "SAME"), args, "2x4", [P("x", "y"), P()], P("x", "y"))
    (c,) = compiled.partition_report.collectives
    row = 2 * 8 * 2 * 4  # one row of the local block, f32
    if pieces == 1:
        assert c.kind == "collective-permute"
        return
    assert c.kind == "all-gather"
    assert "the pieces from blocks -1, +1" in c.reason
    assert c.bytes_per_device == 3 * pieces * row  # not 3 blocks of rows / 4


def test_grouped_convolution_splits_groups() -> None:
    def depthwise(x: jax.Array, k: jax.Array) -> jax.Array:
        return jax.lax.conv_general_dilated(
            x, k, (1, 1), "SAME", dimension_numbers=DN, feature_group_count=16
        )

    args = [rand(2, 32, 32, 16), rand(3, 3, 1, 16, seed=1)]
    spec = P(None, None, None, "x")
    compiled = run(depthwise, args, "8", [spec, P(None, None, None, "x")], spec)
    assert compiled.partition_report.collectives == []


def test_patch_embedding_splits_by_patches() -> None:
    """A ViT patch embedding (window = stride = 16) on a height split 8
    ways: a patch spans two blocks. Each output patch reads its own input
    rows, so the output splits by patches; propagation puts the height's
    minor x:(4)2 on the width: before, the window counted as a reduction
    (the kernel, 16, is longer than the output, 4), every device gathered
    the whole image and ran the whole convolution (8x the FLOPs, 1.7x
    jax.jit's step). Now the minor half of x leaves the height only: one
    gather over pairs, 1/8 of the image per device. On 2 x 4 nothing moves."""
    x, k = rand(2, 64, 64, 3), rand(16, 16, 3, 32, seed=1)

    def patch(x: jax.Array, k: jax.Array) -> jax.Array:
        y = jax.lax.conv_general_dilated(x, k, (16, 16), "VALID", dimension_numbers=DN)
        return y.reshape(y.shape[0], -1, y.shape[-1])

    split = run(patch, (x, k), "8", (P(None, "x"), P()), P(None, "x"))
    moved = split.partition_report.collectives
    assert sum(c.bytes_per_device for c in moved) <= x.nbytes // 8, moved
    both = run(patch, (x, k), "2x4", (P("x", "y"), P()), P("x", "y"))
    assert not both.partition_report.collectives


def test_patch_filter_gradient_sums_partial_kernels() -> None:
    """The kernel gradient of an 8x8 patch embedding on 64 rows: the output
    gradient (8 rows, dilated by 8) slides over the whole input, and as
    long as the kernel. It splits by the rows it sums over (each device's
    image rows meet its own output-gradient rows) and all-reduces the
    partial kernels; split by kernel row, every block needed the whole
    image gathered (147 KB per device in a ViT train step, 1.69x jax.jit's
    step, now 1.04x)."""
    x, k = rand(4, 64, 64, 3), rand(8, 8, 3, 16, seed=1)

    def kernel_grad(x: jax.Array, k: jax.Array) -> jax.Array:
        def loss(k: jax.Array) -> jax.Array:
            y = jax.lax.conv_general_dilated(
                x, k, (8, 8), "VALID", dimension_numbers=DN
            )
            return (y**2).sum()

        return jax.grad(loss)(k)

    compiled = run(kernel_grad, (x, k), "2x4", (P("x", "y"), P()), P())
    kinds = {c.kind for c in compiled.partition_report.collectives}
    assert kinds == {"all-reduce"}, compiled.partition_report.collectives


def test_kernel_split_on_one_dim_and_a_window_exchanged_on_another() -> None:
    """Found by the long fuzz run (docs/fuzzing.md, long 17): the kernel's
    rows split over y (each device sums its dilated kernel row over a strided
    window of the input's rows, whole on every device, so cut locally) and
    the input's columns split over x. The columns' window was cut locally
    too, from the split block padded with zeros, because "whole along a
    windowed dim" was kept per operand rather than per (operand, dim): wrong
    values. The columns' window must come from the neighbours."""

    def conv(x: jax.Array, k: jax.Array) -> jax.Array:
        return jax.lax.conv_general_dilated(
            x,
            k,
            (2, 1),
            "VALID",
            rhs_dilation=(2, 1),
            dimension_numbers=DN,
            feature_group_count=2,
        )

    args = [rand(1, 12, 12, 8), rand(4, 5, 4, 2, seed=1)]
    spec = P(None, None, "x")
    compiled = run(conv, args, "2x4", [spec, P("y")], P(None, None, "x"))
    report = compiled.partition_report
    assert [c.axes for c in report.collectives if "window along dim 2" in c.reason]
    assert not [c for c in report.collectives if "window along dim 1" in c.reason]


def _pool(
    x: jax.Array, window: int, stride: int, padding: Any, op: str = "max"
) -> jax.Array:
    init, fn = (-jnp.inf, jax.lax.max) if op == "max" else (0.0, jax.lax.add)
    return jax.lax.reduce_window(
        x, init, fn, (1, window, window, 1), (1, stride, stride, 1), padding
    )


POOLS = [
    (3, 2, "SAME", "max"),
    (2, 2, "VALID", "max"),
    (3, 1, "SAME", "add"),
    (3, 2, "SAME", "add"),
]


@pytest.mark.parametrize(("window", "stride", "padding", "op"), POOLS, ids=str)
@pytest.mark.parametrize(("mesh", "spec"), [("8", P(None, "x")), ("2x4", P("x", "y"))])
def test_pooling(
    window: int, stride: int, padding: str, op: str, mesh: str, spec: P
) -> None:
    args = [np.abs(rand(4, 64, 16, 8)) - 0.5]
    run(lambda x: _pool(x, window, stride, padding, op), args, mesh, [spec], spec)


# JAX pads a SAME pool's operand or cotangent to an uneven size (65 or 66
# rows over 8 devices): split in padded blocks.
@pytest.mark.parametrize(("window", "stride", "padding", "op"), POOLS, ids=str)
@pytest.mark.parametrize(("mesh", "spec"), [("8", P(None, "x")), ("2x4", P("x", "y"))])
def test_pooling_gradient(
    window: int, stride: int, padding: str, op: str, mesh: str, spec: P
) -> None:
    def grad(x: jax.Array) -> jax.Array:
        return jax.grad(lambda x: (_pool(x, window, stride, padding, op) ** 2).sum())(x)

    args = [rand(4, 64, 16, 8)]
    run(grad, args, mesh, [spec], spec)


def test_tiling_pool_gradient_needs_no_collective() -> None:
    """A 2x2/2 max pool's gradient (select_and_scatter) on a split height:
    every window lies in one block."""

    def grad(x: jax.Array) -> jax.Array:
        return jax.grad(lambda x: (_pool(x, 2, 2, "VALID") ** 2).sum())(x)

    compiled = run(grad, [rand(4, 64, 16, 8)], "8", [P(None, "x")], P(None, "x"))
    assert compiled.partition_report.collectives == []


@pytest.mark.parametrize(("window", "stride"), [(3, 1), (3, 2), (5, 1)])
@pytest.mark.parametrize(("mesh", "spec"), [("8", P(None, "x")), ("2x4", P("x", "y"))])
def test_average_pool_without_padding_in_the_count(
    window: int, stride: int, mesh: str, spec: P
) -> None:
    """count_include_pad=False (flax's `avg_pool`): each window's sum over
    the window's count, a window sum of ones. The ones are made where each
    device cuts its window: only the input's halo moves, as for the sum
    alone (no exchange for the counts, no whole count sliced)."""

    def sums(x: jax.Array) -> jax.Array:
        return _pool(x, window, stride, "SAME", "add")

    def f(x: jax.Array) -> jax.Array:
        return sums(x) / sums(jnp.ones((*x.shape[:3], 1), x.dtype))

    args = [rand(4, 64, 16, 8)]
    compiled = run(f, args, mesh, [spec], spec)
    alone = run(sums, args, mesh, [spec], spec)

    def moved(c: meshjit.Compiled) -> list[tuple[str, int]]:
        return [(m.kind, m.bytes_per_device) for m in c.partition_report.collectives]

    assert moved(compiled) == moved(alone)
    # no window sum over the whole height (64 rows), sliced afterwards
    text = compiled.as_text("partitioned")
    assert re.search(r", tensor<f32>\) -> tensor<\d+x64x\d+x1xf32>", text) is None


def test_pad_with_interior_and_negative_edges() -> None:
    def f(x: jax.Array) -> jax.Array:
        return jax.lax.pad(x, 0.5, ((0, 0, 0), (3, -2, 1), (0, 0, 0)))

    args = [rand(4, 32, 8)]  # dim 1: 3 + 32 + 31 (interior) - 2 = 64
    compiled = run(f, args, "8", [P(None, "x")], P(None, "x"))
    assert "all-gather" not in compiled.partition_report.counts()


@pytest.mark.parametrize("mode", ["reflect", "symmetric", "edge", "wrap"])
@pytest.mark.parametrize(("mesh", "spec"), [("8", P(None, "x")), ("2x4", P("x", "y"))])
def test_padding_modes_then_valid_convolution(mode: str, mesh: str, spec: P) -> None:
    """`jnp.pad`'s modes along the split height (private functions that
    slice, reverse, broadcast and concatenate the edges; 44 rows over 8
    split unevenly) feeding a VALID convolution, as image generators write
    it. The empty edges some modes reshape make no remark: nothing of them
    is gathered or computed."""

    def f(w: jax.Array, x: jax.Array) -> jax.Array:
        x = jnp.pad(x, ((0, 0), (2, 2), (2, 2), (0, 0)), mode=mode)
        return jax.lax.conv_general_dilated(
            x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )

    args = [rand(5, 5, 4, 8, seed=1), rand(2, 40, 24, 4, seed=2)]
    compiled = run(f, args, mesh, [P(), spec], spec)
    remarks = [r.message for r in compiled.partition_report.remarks]
    assert not [m for m in remarks if "computed replicated" in m], remarks


@pytest.mark.parametrize(
    ("mode", "k", "stride", "dilation", "groups"),
    [
        ("reflect", 3, 1, 1, 1),
        ("reflect", 7, 1, 1, 1),
        ("symmetric", 5, 2, 1, 1),
        ("wrap", 3, 1, 2, 1),
        ("reflect", 3, 1, 1, 4),
        ("edge", 5, 1, 1, 1),
    ],
)
@pytest.mark.parametrize(
    ("mesh", "spec"),
    [("8", P(None, "x")), ("2x4", P("x", "y")), ("8", P(None, None, "x"))],
)
def test_edge_padding_is_read_through_by_the_convolution(
    mode: str, k: int, stride: int, dilation: int, groups: int, mesh: str, spec: P
) -> None:
    """A reflect/symmetric/wrap/edge pad of height and width before a VALID
    convolution (CycleGAN's generator) with the height split: the
    convolution runs on its real input's blocks as if padded, exchanging
    its halo with the neighbours, and each edge's rows (a few, from the
    first or last block) come by one all-reduce; nothing is gathered, and
    the values and both gradients are the unsharded ones."""
    r = (k - 1) * dilation // 2

    def f(w: jax.Array, x: jax.Array) -> jax.Array:
        x = jnp.pad(x, ((0, 0), (r, r), (r, r), (0, 0)), mode=mode)
        return jax.lax.conv_general_dilated(
            x,
            w,
            (stride, stride),
            "VALID",
            rhs_dilation=(dilation, dilation),
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
            feature_group_count=groups,
        )

    def grads(w: jax.Array, x: jax.Array) -> Any:
        return jax.grad(lambda w, x: (f(w, x) ** 2).sum(), argnums=(0, 1))(w, x)

    args = [rand(k, k, 8 // groups, 8, seed=1), rand(2, 32, 16, 8, seed=2)]
    compiled = run(f, args, mesh, [P(), spec], spec)
    made = [(c.kind, c.op) for c in compiled.partition_report.collectives]
    # the edges from their blocks, one all-reduce a piece (2 rows; with the
    # width split, 2 columns of 3 pieces: the corners too); the
    # convolution's window of its real input (permutes, or gathers where the
    # cost model says); nothing for the padded input, which is never made
    edges = [m for m in made if m == ("all-reduce", "stablehlo.slice")]
    assert len(edges) == (6 if spec == P(None, None, "x") else 2), made
    assert all(
        op == "stablehlo.convolution" for m in made if m not in edges for op in m[1:]
    ), made
    run(grads, args, mesh, [P(), spec], (P(), spec))


@pytest.mark.parametrize("dilation", [1, 2, 8])
@pytest.mark.parametrize(("mesh", "spec"), [("8", P(None, "x")), ("2x4", P("x", "y"))])
def test_causal_dilated_convolution(dilation: int, mesh: str, spec: P) -> None:
    """A WaveNet layer: the time dim padded on the left (1032 rows over 8:
    blocks of 129, each the input's rows shifted by a per-device amount) and
    a dilated convolution over it. Each window is the local block and one
    halo per side, cut at the device's offset: XLA's temporaries stay near
    jax.jit's (the per-device offsets once wrote each piece into a buffer of
    three blocks: 2.9x jax.jit's temporaries at dilation 8)."""

    def f(h: jax.Array, w: jax.Array) -> jax.Array:
        padded = jnp.pad(h, ((0, 0), (dilation, 0), (0, 0)))
        dn = ("NWC", "WIO", "NWC")
        return jax.lax.conv_general_dilated(
            padded, w, (1,), "VALID", rhs_dilation=(dilation,), dimension_numbers=dn
        )

    args = [rand(4, 1024, 32), rand(2, 32, 32, seed=1)]
    compiled = run(f, args, mesh, [spec, P()], spec)
    report = compiled.partition_report
    assert set(report.counts()) == {"collective-permute"}
    m = mesh_of(mesh)
    sh = (NamedSharding(m, spec), NamedSharding(m, P()))
    reference = jax.jit(f, in_shardings=sh, out_shardings=sh[0]).lower(*args).compile()
    temp = compiled.memory_analysis().temp_size_in_bytes
    assert temp <= 1.1 * reference.memory_analysis().temp_size_in_bytes


def test_strided_slice_along_split_dim() -> None:
    args = [rand(4, 96, 8)]
    run(lambda x: x[:, 5:69:2], args, "8", [P(None, "x")], P(None, "x"))


MOVES = {
    "slice_first_third": lambda x: x[:, : x.shape[1] // 3],
    "slice_middle": lambda x: x[:, 8:40],
    "slice_strided": lambda x: x[:, 1::3],
    "fused_qkv_split": lambda x: sum(jnp.split(x, 3, axis=1)),
    "concat_two": lambda x: jnp.concatenate([x, 2 * x], axis=1),
    "concat_three_uneven_parts": lambda x: jnp.concatenate(
        [x[:, :16], x * 3, x[:, 16:32]], axis=1
    ),
    "reverse": lambda x: jnp.flip(x, axis=1),
    "reverse_both": lambda x: jnp.flip(x, axis=(0, 1)),
    "pad_then_slice": lambda x: jnp.pad(x, ((0, 0), (8, 8)))[:, 4:-12],
    "roll_forward": lambda x: jnp.roll(x, 5, axis=1),
    "roll_back_past_blocks": lambda x: jnp.roll(x, -27, axis=1),
    "roll_both_dims": lambda x: jnp.roll(x, (3, -7), axis=(0, 1)),
    "rotate_three_pieces": lambda x: jnp.concatenate(
        [x[:, 70:], x[:, 10:70], x[:, :10]], axis=1
    ),
}


@pytest.mark.parametrize(("shift", "rows"), [(4, 4), (-4, 4), (12, 12)])
def test_roll_moves_one_piece_around_the_ring(shift: int, rows: int) -> None:
    """jnp.roll along a split dim (blocks of 12): each block takes the rows
    that roll into it from one neighbour, the last block from the first
    (one collective-permute with the wrap-around pair), not a gather of the
    dim (it once gathered each of the two slices)."""
    args = [rand(8, 96)]
    compiled = run(
        lambda x: jnp.roll(x, shift, axis=1), args, "8", [P(None, "x")], P(None, "x")
    )
    report = compiled.partition_report
    assert [c.kind for c in report.collectives] == ["collective-permute"]
    assert report.collectives[0].bytes_per_device == 8 * rows * 4


@pytest.mark.parametrize("name", sorted(MOVES))
@pytest.mark.parametrize(("mesh", "spec"), [("8", P(None, "x")), ("2x4", P("x", "y"))])
def test_data_movement_along_split_dim(name: str, mesh: str, spec: P) -> None:
    fn = MOVES[name]
    x = rand(8, 96)
    out = jax.eval_shape(fn, x)
    ways = 8 if mesh == "8" else 4
    out_spec = spec if out.shape[1] % ways == 0 else P(spec[0])
    run(fn, [x], mesh, [spec], out_spec)


@pytest.mark.parametrize("mesh", ["8", "2x4"])
def test_fused_projection_gradient_concatenates_from_one_gather_of_the_pieces(
    mesh: str,
) -> None:
    """dq, dk, dv split along the features, concatenated into a fused QKV
    gradient split the same way (GPT-2's backward): each device sends only
    the pieces of its three blocks that land in another device's block of
    the result, all in one all-gather, instead of gathering the three: over
    4 devices two blocks' worth each (one of its three stays home), over 8
    as many bytes as the three gathers, in one launch."""
    spec = P(None, "x") if mesh == "8" else P("x", "y")
    ways = 8 if mesh == "8" else 4
    args = [rand(8, 32, seed=k) for k in range(3)]
    compiled = run(
        lambda q, k, v: jnp.concatenate([q, 2 * k, v], axis=1),
        args,
        mesh,
        [spec] * 3,
        spec,
    )
    (c,) = compiled.partition_report.collectives
    assert c.kind == "all-gather"
    assert "operands along dim 1" in c.reason
    rows = 8 if mesh == "8" else 4
    block = 32 // ways  # columns of one operand's block
    gathered_three = 3 * (ways - 1) * block * rows * 4
    if ways == 4:
        assert c.bytes_per_device == (ways - 1) * 2 * block * rows * 4
    else:
        assert c.bytes_per_device == gathered_three
    remarks = [r.message for r in compiled.partition_report.remarks]
    assert any("one all-gather of every operand's pieces" in m for m in remarks)


def test_strided_window_past_the_end_reads_padding() -> None:
    """Stride 3 over 16 columns padded (2, 1), split 4 ways: 7 outputs in
    blocks of 2; the last block's real output reads only the high padding.
    Its window, cut from the run of its block and the next one's piece,
    was clamped into the run and read real columns (found by the fuzzer:
    seed 6179)."""
    x = rand(4, 2, 16, 2)
    k = rand(5, 1, 1, 8, seed=1)

    def f(x: jax.Array, k: jax.Array) -> jax.Array:
        y = jax.lax.conv_general_dilated(
            x,
            k,
            (2, 3),
            ((2, 1), (2, 1)),
            rhs_dilation=(1, 2),
            dimension_numbers=DN,
            feature_group_count=2,
        )
        return jnp.transpose(y, (2, 3, 0, 1))

    m = Mesh(np.array(jax.devices()[:8]).reshape(2, 2, 2), ("x", "y", "z"))
    sh = NamedSharding(m, P("z", None, ("x", "y")))
    out = NamedSharding(m, P(None, "z"))
    jitted = meshjit.jit(f, in_shardings=(sh, NamedSharding(m, P())), out_shardings=out)
    got = np.asarray(jitted(jax.device_put(x, sh), k))
    np.testing.assert_allclose(got, np.asarray(jax.jit(f)(x, k)), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("mesh", ["8", "2x4"])
def test_pads_before_windows_fold_into_them(mesh: str) -> None:
    """`jnp.pad` before a VALID window (a causal dilated convolution stack
    as WaveNet writes it, its gradient, a max pool after a -inf pad): the
    pad becomes the op's padding (`fold-pads`), so a time or height split
    exchanges only the window's halo, one collective-permute per
    convolution. A pad of 1.0 is not a convolution's padding: it stays, and
    is right too."""
    spec = P(None, "x") if mesh == "8" else P("x", "y")

    def causal(ws: Any, x: Any) -> Any:
        for i, w in enumerate(ws):
            d = 2**i
            xp = jnp.pad(x, ((0, 0), ((w.shape[0] - 1) * d, 0), (0, 0)))
            y = jax.lax.conv_general_dilated(
                xp,
                w,
                (1,),
                "VALID",
                rhs_dilation=(d,),
                dimension_numbers=("NWC", "WIO", "NWC"),
            )
            x = x + jnp.tanh(y)
        return x

    ws = [rand(2, 8, 8, seed=i) * 0.3 for i in range(3)]
    x = rand(2, 64, 8, seed=9)
    compiled = run(
        lambda w0, w1, w2, x: causal([w0, w1, w2], x),
        [*ws, x],
        mesh,
        [P(), P(), P(), spec],
        spec,
    )
    text = compiled.as_text("partitioned")
    assert "stablehlo.pad" not in text
    assert "all_gather" not in text
    assert text.count("collective_permute") == 3

    def loss(w0: Any, w1: Any, w2: Any, x: Any) -> Any:
        return (causal([w0, w1, w2], x) ** 2).sum()

    run(
        jax.grad(loss, argnums=(0, 3)),
        [*ws, x],
        mesh,
        [P(), P(), P(), spec],
        (P(), spec),
    )

    def pool(x: Any) -> Any:
        xp = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-jnp.inf)
        return jax.lax.reduce_window(
            xp, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "VALID"
        )

    img = rand(2, 32, 16, 4, seed=3)
    compiled = run(pool, [img], mesh, [spec], spec)
    assert "stablehlo.pad" not in compiled.as_text("partitioned")

    def ones_pad(w: Any, x: Any) -> Any:
        xp = jnp.pad(x, ((0, 0), (2, 0), (0, 0)), constant_values=1.0)
        return jax.lax.conv_general_dilated(
            xp, w, (1,), "VALID", dimension_numbers=("NWC", "WIO", "NWC")
        )

    run(ones_pad, [rand(3, 8, 8, seed=4) * 0.3, x], mesh, [P(), spec], spec)


def test_complex_sum_pool_after_a_zero_pad() -> None:
    """A complex sum pool after `jnp.pad(..., constant_values=0j)` (found by
    the fuzzer: `fold-pads` read the complex constant through the bindings,
    which cannot fetch it, and crashed): folded, and right."""

    def pool(v: Any) -> Any:
        xp = jnp.pad(v, ((1, 1), (0, 0)), constant_values=0j)
        return jax.lax.reduce_window(xp, 0j, jax.lax.add, (3, 1), (2, 1), "VALID")

    v = (rand(16, 4, seed=5) + 1j * rand(16, 4, seed=6)).astype(np.complex64)
    compiled = run(pool, [v], "8", [P("x")], P("x"))
    assert "stablehlo.pad" not in compiled.as_text("partitioned")
