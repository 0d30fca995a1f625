"""Reductions along split dims: reduce (a sum-like combiner finishes with an
all-reduce; any other region, argmax's value-index pairs among them, by
all-gathering the blocks' partial results and reducing them again) and
top_k (local candidates, then a merge)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from meshjit.compiler.graph import Node
from meshjit.dialects.reshard import DimAxes
from meshjit.passes.partitioner.builder import Ty, Val, has_bits, i64_array, itemsize
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.factors import (
    FactorLimits,
    gathers_partials,
    split_blocked,
)
from meshjit.passes.partitioner.layouts import span
from meshjit.passes.partitioner.local import (
    emit,
    finish,
    mask_uneven,
    prepare,
    rule_of,
    run_replicated,
)


def reduce(node: Node, ctx: PartitionCtx) -> None:
    """Reduced dims may be split: each device reduces its block. With one
    result and an associative combiner the partial results are all-reduced
    (later, on a smaller tensor, when a linear op follows); otherwise the
    partial results are all-gathered and reduced again with the op's own
    region (exact for argmax/argmin's value-index pairs)."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    lop = prepare(ctx, node, rule, FactorLimits(reductions=True, uneven=True))
    count = len(node.results)
    mask_uneven(ctx, node, lop, lop.operands[count:])
    if not lop.partial or not gathers_partials(ctx, node):
        emit(ctx, node, lop)
        return
    b = ctx.b
    axes = lop.partial
    region = ctx.verbatim_region(node.regions[0][0])
    partials = b.op(node.op, lop.operands, lop.results, lop.attrs, [region])
    gathered = _stack_all(ctx, node, partials, axes)
    inits = lop.operands[len(partials) :]
    again = ctx.verbatim_region(node.regions[0][0])
    outs = b.op(
        node.op,
        [*gathered, *inits],
        lop.results,
        {"dimensions": i64_array([0])},
        [again],
    )
    lop.partial = ()
    finish(ctx, node, lop, outs)


def _stack_all(
    ctx: PartitionCtx, node: Node, partials: Sequence[Val], axes: DimAxes
) -> list[Val]:
    """`_stack` of each of a reduce's partial results (they share a shape),
    in one all-gather where there are several (argmax's values and indices:
    one collective's latency, not two): their bits side by side as integers
    of the widest one's width."""
    if len(partials) == 1 or not all(has_bits(p.ty.dtype) for p in partials):
        return [_stack(ctx, node, p, axes) for p in partials]
    b = ctx.b
    width = max(itemsize(p.ty.dtype) for p in partials)
    shape = tuple(partials[0].ty.shape or ())
    rows = [b.reshape(b.to_bits(p, width), (1, *shape)) for p in partials]
    stacked = _stack(ctx, node, b.concatenate(rows, 0), axes)
    n = span(axes, ctx.mesh)
    return [
        b.from_bits(b.reshape(b.slice_dim(stacked, 1, k, 1), (n, *shape)), p.ty.dtype)
        for k, p in enumerate(partials)
    ]


def _stack(ctx: PartitionCtx, node: Node, x: Val, axes: DimAxes) -> Val:
    """Every device's `x` of the group over `axes`, stacked along a new
    leading dim."""
    shape = x.ty.shape or ()
    n = span(axes, ctx.mesh)
    one = ctx.b.reshape(x, (1, *shape))
    nbytes = (n - 1) * math.prod(shape) * itemsize(x.ty.dtype)
    ctx.record(
        "all-gather", axes, nbytes, (node.op, node.loc, "partial results of the blocks")
    )
    return ctx.b.all_gather(one, 0, ctx.groups(axes), x.ty.with_shape((n, *shape)))


def top_k(node: Node, ctx: PartitionCtx) -> None:
    """Along a split last dim: each device takes the top k of its block
    (indices made global), all-gathers the candidates and keeps the top k of
    them (values descending in total order, ties to the smaller index)."""
    operand = ctx.graph.value(node.operands[0]).shape or ()
    result = ctx.graph.value(node.results[0]).shape or ()
    if not operand:
        run_replicated(ctx, node, "a scalar")
        return
    last = len(operand) - 1
    registry = rule_of(ctx, node)
    if registry is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    rule, row = split_blocked(registry, [result, result])
    split = next(f for f, d in row.items() if d == last)
    k = result[last]
    counts = [
        n
        for n in range(2, ctx.mesh.size + 1)
        if ctx.mesh.size % n == 0 and operand[last] % n == 0 and operand[last] // n >= k
    ]
    if not counts:
        emit(ctx, node, prepare(ctx, node, rule, FactorLimits()))
        return
    lop = prepare(ctx, node, rule, FactorLimits(movable=frozenset({split})))
    axes = lop.factors[split]
    if not axes or span(axes, ctx.mesh) not in counts:
        if axes:  # a split the merge cannot serve: take the row whole
            lop = prepare(ctx, node, rule, FactorLimits())
        emit(ctx, node, lop)
        return
    b = ctx.b
    x = lop.operands[0]
    block = (x.ty.shape or ())[last]
    local = [Ty((*r.shape[:-1], k), r.dtype) if r.shape else r for r in lop.results]
    values, indices = b.op(node.op, [x], local, lop.attrs)
    offset = b.convert(ctx.dim_offset(axes, block), indices.ty.dtype)
    indices = b.binary("stablehlo.add", indices, b.broadcast(offset, indices.ty))
    n = span(axes, ctx.mesh)
    wide = [
        v.ty.with_shape((*(v.ty.shape or ())[:-1], n * k)) for v in (values, indices)
    ]
    gathered = []
    for v, ty in zip((values, indices), wide, strict=True):
        nbytes = (n - 1) * math.prod(v.ty.shape or ()) * itemsize(v.ty.dtype)
        ctx.record(
            "all-gather",
            axes,
            nbytes,
            (node.op, node.loc, "top-k candidates of the blocks"),
        )
        gathered.append(b.all_gather(v, last, ctx.groups(axes), ty))
    outs = _merge_candidates(ctx, node, gathered, k)
    finish(ctx, node, lop, outs)


def _merge_candidates(
    ctx: PartitionCtx, node: Node, pair: Sequence[Val], k: int
) -> list[Val]:
    """The top k of the gathered candidates (values, global indices): top_k
    of the values picks positions (ties to the earlier candidate: the
    smaller index, as blocks and each block's candidates are in index
    order), and a gather takes the indices at those positions."""
    b = ctx.b
    values, indices = pair
    best, where = b.top_k(values, k)
    return [best, b.take_along_last(indices, b.convert(where, indices.ty.dtype))]
