"""Data movement along split dims: slice, concatenate, reverse (pieces moved
by collective-permute, never a gather of the whole dim unless the cost model
says so), dynamic_slice and dynamic_update_slice."""

from __future__ import annotations

import math

from meshjit.compiler.graph import Graph, Node
from meshjit.dialects.reshard import DimAxes, axis_stride, coordinate
from meshjit.dialects.rules import FactorKind, ShardingRule
from meshjit.passes.partitioner.builder import Val, i64_array, itemsize
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.factors import (
    FactorLimits,
    WindowedFactor,
    choose_factors,
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
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    lop = prepare(ctx, node, rule, FactorLimits())
    shape = lop.results[0].shape or ()
    lop.attrs["slice_sizes"] = i64_array(shape)
    emit(ctx, node, lop)


def dynamic_update_slice(node: Node, ctx: PartitionCtx) -> None:
    """Along a dim the update does not cover whole, the update lands at a
    runtime offset that may straddle blocks: that dim stays whole."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    limits = FactorLimits(forbidden=frozenset(_dus_unsplittable(ctx.graph, node, rule)))
    emit(ctx, node, prepare(ctx, node, rule, limits))


def _dus_unsplittable(graph: Graph, node: Node, rule: ShardingRule) -> set[int]:
    operand = graph.value(node.operands[0]).shape or ()
    update = graph.value(node.operands[1]).shape or ()
    out: set[int] = set()
    for d, (full, part) in enumerate(zip(operand, update, strict=False)):
        if full != part:
            out.update(rule.operands[0][d])
    return out


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
