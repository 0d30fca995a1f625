"""Data movement: slice, dynamic_slice, dynamic_update_slice, concatenate,
reverse."""

from __future__ import annotations

from meshjit.compiler.graph import Graph, Node
from meshjit.dialects.rules import ShardingRule
from meshjit.passes.partitioner.builder import i64_array
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.factors import FactorLimits
from meshjit.passes.partitioner.layouts import project
from meshjit.passes.partitioner.local import emit, prepare, rule_of, run_replicated
from meshjit.passes.partitioner.windows import ints


def slice_(node: Node, ctx: PartitionCtx) -> None:
    """Dims the slice keeps whole may be split: their local limit is the
    local size."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    lop = prepare(ctx, node, rule, FactorLimits())
    operand = ctx.graph.value(node.operands[0])
    assert operand.shape is not None
    lay = project(rule.operands[0], lop.factors, ctx.mesh)
    local = ctx.local_shape(operand.shape, lay)
    limits = list(ints(node.attrs.get("limit_indices")))
    for d, axes in enumerate(lay):
        if axes:
            limits[d] = local[d]
    lop.attrs["limit_indices"] = i64_array(limits)
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


def by_type(node: Node, ctx: PartitionCtx) -> None:
    """concatenate, reverse: their special dim stays whole (the rule says
    so); other dims run on local blocks."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    emit(ctx, node, prepare(ctx, node, rule, FactorLimits()))
