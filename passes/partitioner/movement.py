"""Data movement along split dims: slice, concatenate, reverse (pieces moved
by collective-permute, never a gather of the whole dim unless the cost model
says so), dynamic_slice and dynamic_update_slice."""

from __future__ import annotations

import math
from collections.abc import Sequence

from meshjit.compiler.graph import Node
from meshjit.dialects.reshard import DimAxes, axis_stride, coordinate
from meshjit.dialects.rules import FactorKind
from meshjit.passes.partitioner.builder import Ty, Val, i64_array, itemsize
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.factors import (
    FactorLimits,
    WindowedFactor,
    choose_factors,
    split_blocked,
)
from meshjit.passes.partitioner.halo import Window
from meshjit.passes.partitioner.layouts import project, span
from meshjit.passes.partitioner.local import (
    emit,
    finish,
    prepare,
    rule_of,
    run_replicated,
)
from meshjit.passes.partitioner.windows import (
    gather_window,
    ints,
    whole_where_gathered,
)


def slice_(node: Node, ctx: PartitionCtx) -> None:
    """A dim the slice keeps whole splits as it is (its local limit is the
    local size); a sliced dim splits by output blocks: each block gets the
    part of the input its elements come from (pieces moved by
    collective-permute) and slices it locally with the same stride."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    operand = ctx.graph.value(node.operands[0]).shape or ()
    starts = list(ints(node.attrs.get("start_indices")))
    stops = list(ints(node.attrs.get("limit_indices")))
    strides = list(ints(node.attrs.get("strides"))) or [1] * len(operand)
    windowed = []
    for d, n in enumerate(operand):
        if (starts[d], stops[d], strides[d]) == (0, n, 1):
            continue
        window = Window(n, 1, strides[d], -starts[d], stops[d] - n)
        windowed += [
            WindowedFactor(f, d, ((0, window),))
            for f in rule.operands[0][d]
            if rule.kind(f) is FactorKind.PERMUTATION
        ]
    limits = FactorLimits(windowed=tuple(windowed))
    factors = choose_factors(ctx, node, rule, limits)
    factors = whole_where_gathered(ctx, node, rule, limits, factors)
    lop = prepare(ctx, node, rule, limits, factors)
    lay = project(rule.operands[0], lop.factors, ctx.mesh)
    local = ctx.local_shape(operand, lay)
    for d, axes in enumerate(lay):
        if axes:
            stops[d] = local[d]
    for w in windowed:
        axes = lop.factors[w.factor]
        if not axes:
            continue
        plans = w.plans(span(axes, ctx.mesh))
        assert plans is not None
        (plan,) = plans
        lop.operands[0] = gather_window(ctx, node, lop, 0, w.dim, axes, plan, None)
        starts[w.dim], stops[w.dim] = 0, plan.length
    lop.attrs["start_indices"] = i64_array(starts)
    lop.attrs["limit_indices"] = i64_array(stops)
    emit(ctx, node, lop)


def dynamic_slice(node: Node, ctx: PartitionCtx) -> None:
    """Along a dim the slice takes part of, the operand may stay split: each
    device cuts the part of the slice that lies in its block (zeros
    elsewhere) and one all-reduce of the bit patterns (every element comes
    from exactly one device) assembles it, exactly. The slice itself is never
    split along such a dim (its start is known only at run time)."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    operand = ctx.graph.value(node.operands[0]).shape or ()
    result = ctx.graph.value(node.results[0]).shape or ()
    rule, sliced = split_blocked(rule, [result])
    lop = prepare(ctx, node, rule, FactorLimits(movable=frozenset(sliced), uneven=True))
    split = {d: lop.factors[f] for f, d in sliced.items() if lop.factors[f]}
    out_shape = lop.results[0].shape or ()
    if not split:
        lop.attrs["slice_sizes"] = i64_array(out_shape)
        emit(ctx, node, lop)
        return
    b = ctx.b
    x = lop.operands[0]
    block = list(x.ty.shape or ())
    # Pad each split dim by the slice's length on both sides, so a start
    # outside the block still cuts `length` elements (all masked).
    widths = [result[d] if d in split else 0 for d in range(len(block))]
    padded = b.pad_zeros(x, widths, widths)
    starts = []
    masks = []
    for d, n in enumerate(operand):
        start = _clamped_start(ctx, lop.operands[1 + d], n - result[d])
        if d not in split:
            starts.append(start if n != result[d] else ctx.const_i32(0))
            continue
        first = ctx.dim_offset(split[d], block[d])  # my block's first index
        local = b.binary("stablehlo.subtract", start, first)
        starts.append(b.binary("stablehlo.add", local, ctx.const_i32(result[d])))
        masks.append((d, local, block[d]))
    part = b.dynamic_slice(padded, starts, out_shape)
    mine = _positions_inside(ctx, part.ty, masks)
    part = b.select(mine, part, b.zeros(part.ty))
    axes = tuple(a for d in sorted(split) for a in split[d])
    out = _assemble_by_sum(ctx, node, part, axes)
    finish(ctx, node, lop, [out])


def _clamped_start(ctx: PartitionCtx, index: Val, most: int) -> Val:
    """A start index as the op uses it: i32, clamped to [0, most]."""
    b = ctx.b
    start = b.convert(index, "i32")
    start = b.binary("stablehlo.maximum", start, ctx.const_i32(0))
    return b.binary("stablehlo.minimum", start, ctx.const_i32(max(most, 0)))


def _positions_inside(
    ctx: PartitionCtx, ty: Ty, masks: Sequence[tuple[int, Val, int]]
) -> Val:
    """Where, along each (dim, offset, block), position + offset lies in
    [0, block): a slice position that falls in this device's block."""
    b = ctx.b
    index_ty = ty.with_dtype("i32")
    inside: Val | None = None
    for d, offset, block in masks:
        position = b.binary(
            "stablehlo.add", b.iota(index_ty, d), b.broadcast(offset, index_ty)
        )
        here = b.binary(
            "stablehlo.and",
            b.compare(position, b.splat(index_ty, "0"), "GE"),
            b.compare(position, b.splat(index_ty, str(block)), "LT"),
        )
        inside = here if inside is None else b.binary("stablehlo.and", inside, here)
    assert inside is not None
    return inside


_BITS = {1: "i8", 2: "i16", 4: "i32", 8: "i64"}


def _assemble_by_sum(ctx: PartitionCtx, node: Node, part: Val, axes: DimAxes) -> Val:
    """Pieces that are zero except on the one device that holds each element,
    combined exactly: an all-reduce sum of their bit patterns as integers
    (n - 1 zeros and one value; a float sum would turn -0.0 into +0.0;
    CPU collectives have no bitwise `or`). Booleans go as i8."""
    b = ctx.b
    dtype = part.ty.dtype
    size = itemsize(dtype)
    if dtype == "i1":
        as_int = "i8"
    elif dtype[0] in "iu" or dtype.startswith("complex"):
        as_int = dtype  # complex: summed as is (only -0.0 parts may turn +0.0)
    else:
        as_int = _BITS[size]
    bits = part
    if dtype == "i1":
        bits = b.convert(part, "i8")
    elif as_int != dtype:
        bits = b.op1("stablehlo.bitcast_convert", [part], part.ty.with_dtype(as_int))
    nbytes = math.prod(part.ty.shape or ()) * max(size, 1)
    moved = 2 * nbytes * (span(axes, ctx.mesh) - 1) // span(axes, ctx.mesh)
    ctx.record(
        "all-reduce", axes, moved, (node.op, node.loc, "slice pieces of the blocks")
    )
    combined = b.all_reduce(bits, ctx.groups(axes), "stablehlo.add")
    if dtype == "i1":
        return b.compare(combined, b.splat(combined.ty, "0"), "NE")
    if as_int == dtype:
        return combined
    return b.op1("stablehlo.bitcast_convert", [combined], part.ty)


def dynamic_update_slice(node: Node, ctx: PartitionCtx) -> None:
    """Along a dim the update covers part of, the operand may stay split:
    each device takes the window of the (whole) update that falls on its
    block and keeps its own elements elsewhere: no collective."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    operand = ctx.graph.value(node.operands[0]).shape or ()
    update = ctx.graph.value(node.operands[1]).shape or ()
    # The update stays whole along the dims it covers part of.
    whole = {
        f
        for d, (n, u) in enumerate(zip(operand, update, strict=True))
        if n != u
        for f in rule.operands[1][d]
    }
    lop = prepare(
        ctx, node, rule, FactorLimits(forbidden=frozenset(whole), uneven=True)
    )
    lay = lop.produced[0]
    partial = [
        d for d, (n, u) in enumerate(zip(operand, update, strict=True)) if n != u
    ]
    if not any(lay[d] for d in partial):
        emit(ctx, node, lop)
        return
    b = ctx.b
    block, upd = lop.operands[0], lop.operands[1]
    local = list(block.ty.shape or ())
    # Pad the update by a block on both sides along each such dim, then cut
    # the block-sized window aligned with this device's block.
    widths = [local[d] if d in partial else 0 for d in range(len(local))]
    padded = b.pad_zeros(upd, widths, widths)
    starts = []
    masks = []
    for d, n in enumerate(operand):
        if d not in partial:
            starts.append(ctx.const_i32(0))
            continue
        start = _clamped_start(ctx, lop.operands[2 + d], n - update[d])
        first = ctx.dim_offset(lay[d], local[d])  # 0 when the dim is whole
        ahead = b.binary("stablehlo.subtract", first, start)  # block start in update
        starts.append(b.binary("stablehlo.add", ahead, ctx.const_i32(local[d])))
        masks.append((d, ahead, update[d]))
    window = b.dynamic_slice(padded, starts, local)
    covered = _positions_inside(ctx, window.ty, masks)
    finish(ctx, node, lop, [b.select(covered, window, block)])


def concatenate(node: Node, ctx: PartitionCtx) -> None:
    """Along a split concatenated dim, each block of the result takes from
    every operand the window its positions come from (positions of other
    operands are padding), and selects by position."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    dim = node.attrs.get("dimension")
    assert isinstance(dim, int)
    sizes = [(ctx.graph.value(v).shape or ())[dim] for v in node.operands]
    total = sum(sizes)
    windows: list[tuple[int, Window]] = []
    offset = 0
    for k, n in enumerate(sizes):
        windows.append((k, Window(n, 1, 1, offset, total - offset - n)))
        offset += n
    factors = [
        f for f in rule.results[0][dim] if rule.kind(f) is not FactorKind.PASS_THROUGH
    ]
    windowed = tuple(WindowedFactor(f, dim, tuple(windows)) for f in factors)
    limits = FactorLimits(windowed=windowed)
    chosen = choose_factors(ctx, node, rule, limits)
    chosen = whole_where_gathered(ctx, node, rule, limits, chosen)
    lop = prepare(ctx, node, rule, limits, chosen)
    split = [w for w in windowed if lop.factors[w.factor]]
    if not split:
        emit(ctx, node, lop)
        return
    (w,) = split
    axes = lop.factors[w.factor]
    plans = w.plans(span(axes, ctx.mesh))
    assert plans is not None
    b = ctx.b
    out = None
    offset = 0
    for (k, _), plan, n in zip(w.windows, plans, sizes, strict=True):
        part = gather_window(ctx, node, lop, k, dim, axes, plan, None)
        if out is None:
            out = part
        else:
            index_ty = part.ty.with_dtype("i32")
            first = ctx.dim_offset(axes, plan.length)
            position = b.binary(
                "stablehlo.add", b.iota(index_ty, dim), b.broadcast(first, index_ty)
            )
            mine = b.compare(position, b.splat(index_ty, str(offset)), "GE")
            out = b.select(mine, part, out)
        offset += n
    assert out is not None
    finish(ctx, node, lop, [out])


def reverse(node: Node, ctx: PartitionCtx) -> None:
    """Along a split reversed dim, each device reverses its block, which is
    the mirrored block of the result: one collective-permute moves it there."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    dims = ints(node.attrs.get("dimensions"))
    movable = frozenset(
        f
        for d in dims
        for f in rule.operands[0][d]
        if rule.kind(f) is FactorKind.PERMUTATION
    )
    lop = prepare(ctx, node, rule, FactorLimits(movable=movable))
    out = ctx.b.op1(node.op, lop.operands, lop.results[0], lop.attrs)
    lay = lop.produced[0]
    split = [axes for d, axes in enumerate(lay) if d in dims and axes]
    if split:
        out = _mirror(ctx, node, out, [(d, lay[d]) for d in dims if lay[d]])
    finish(ctx, node, lop, [out])


def _mirror(
    ctx: PartitionCtx, node: Node, x: Val, dims: list[tuple[int, DimAxes]]
) -> Val:
    """Sends each device's block to the device holding the mirrored block
    index along each of `dims` (over its axes)."""
    mesh = ctx.mesh
    moved = tuple(a for _, axes in dims for a in axes)
    pairs = []
    for p in range(mesh.size):
        q = p
        for _, axes in dims:
            for a in axes:
                c = coordinate(mesh, a, q)
                q += (a.full_size(mesh) - 1 - 2 * c) * axis_stride(mesh, a)
        pairs.append((p, q))
    shape = x.ty.shape or ()
    nbytes = math.prod(shape) * itemsize(x.ty.dtype)
    ctx.record(
        "collective-permute",
        moved,
        nbytes,
        (node.op, node.loc, "reversed blocks to their mirrored place"),
    )
    return ctx.b.collective_permute(x, pairs)
