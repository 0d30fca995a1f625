"""Reductions along split dims: reduce (a sum-like combiner finishes with an
all-reduce; any other region, argmax's value-index pairs among them, by
all-gathering the blocks' partial results and reducing them again) and
top_k (local candidates, then a merge)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from meshjit.compiler.graph import Node
from meshjit.dialects.reshard import DimAxes
from meshjit.passes.partitioner.builder import Ty, Val, i64_array, itemsize
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
    """Every device's partial results of the group over `axes` (a reduce's:
    they share a shape), each stacked along a new leading dim."""
    rows = [ctx.b.reshape(p, (1, *(p.ty.shape or ()))) for p in partials]
    return _gather_together(ctx, node, rows, 0, axes, "partial results of the blocks")


def _gather_together(
    ctx: PartitionCtx,
    node: Node,
    values: Sequence[Val],
    dim: int,
    axes: DimAxes,
    reason: str,
) -> list[Val]:
    """All-gathers of `values` (one shape) along `dim` over `axes`, as one
    variadic collective where there are several (argmax's values and
    indices, top_k's candidates): one collective's latency, not two, and each
    value in its own type (no packing: no copies into a buffer, no
    reinterpreting of bits at either end)."""
    n = span(axes, ctx.mesh)
    shape = tuple(values[0].ty.shape or ())
    whole = tuple(s * n if d == dim else s for d, s in enumerate(shape))
    nbytes = (n - 1) * math.prod(shape) * sum(itemsize(v.ty.dtype) for v in values)
    ctx.record("all-gather", axes, nbytes, (node.op, node.loc, reason))
    results = [v.ty.with_shape(whole) for v in values]
    return ctx.b.all_gathers(values, dim, ctx.groups(axes), results)


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
    gathered = _gather_together(
        ctx,
        node,
        [values, indices],
        last,
        axes,
        "top-k candidates of the blocks",
    )
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
    taken = b.take_along_last(indices, b.convert(where, indices.ty.dtype))
    return [best, taken]
