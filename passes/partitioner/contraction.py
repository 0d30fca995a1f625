"""dot_general and convolution: contracting dims split into partial sums;
a convolution's spatial dims split with a halo exchange."""

from __future__ import annotations

from meshjit.compiler.graph import Node
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.factors import FactorLimits
from meshjit.passes.partitioner.local import emit, prepare, rule_of, run_replicated
from meshjit.passes.partitioner.windows import conv_halos, exchange_halos, padding_text


def dot_general(node: Node, ctx: PartitionCtx) -> None:
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    emit(ctx, node, prepare(ctx, node, rule, FactorLimits(reductions=True)))


def convolution(node: Node, ctx: PartitionCtx) -> None:
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    if (
        node.attrs.get("feature_group_count", 1) != 1
        or node.attrs.get("batch_group_count", 1) != 1
    ):
        # The group count would need local rewriting.
        run_replicated(ctx, node, "not partitioned yet")
        return
    halos = conv_halos(ctx.graph, node, rule)
    limits = FactorLimits(
        movable=frozenset(halos),
        reductions=True,
        min_block=tuple(sorted((f, h.width) for f, h in halos.items())),
    )
    lop = prepare(ctx, node, rule, limits)
    split = {f: h for f, h in halos.items() if lop.factors[f]}
    if split:
        lop.operands[0] = exchange_halos(ctx, lop.operands[0], split, lop.factors)
        lop.attrs["padding"] = padding_text(node, split)
    emit(ctx, node, lop)
