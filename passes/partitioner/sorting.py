"""Sorting along a split dim without a whole copy: an odd-even merge of the
sorted blocks, for where the gather a sort otherwise makes would break
`partition{memory-limit=...}`.

A sort cannot compute its sorted dim from a block. Where another dim can take
that dim's axes and the cost model prefers it to gathering the dim, the
rule's choice moves them there (an all-to-all each way, as XLA's partitioner
does); otherwise every device sorts all of the dim. Under a memory limit
that the gathered copies would break, the axes move to another dim where one
can take them, and where none can the blocks are merged: each device sorts
its block, then in `n` rounds (n blocks along the axes) neighbouring blocks,
pairs (0, 1), (2, 3), ... in even rounds and (1, 2), (3, 4), ... in odd ones,
swap blocks by collective-permute, sort the two together (the lower block
first) and keep their half: the lower block the first, the upper the second.
`n` rounds sort `n` blocks (the odd-even transposition sort with a block per
element; Baudet and Stevenson 1978). The merge is stable: equal keys are in
the order of their global positions before every round and a round keeps
that order, so it computes what the whole sort computes for a stable sort
(for an unstable one both are valid orders of equal keys). It sends about
the bytes one gather sends, in `n` permutes instead of one collective, and
each round sorts two blocks (about 2x the comparisons of the whole sort on 8
devices), so the cost model never prefers it: it is taken only where memory
asks for it, with a remark.
"""

from __future__ import annotations

import math

from meshjit.compiler.graph import Node
from meshjit.dialects.reshard import DimAxes, neighbor_pairs
from meshjit.dialects.rules import ShardingRule
from meshjit.passes.partitioner.builder import Val, itemsize
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.factors import (
    FactorLimits,
    choose_factors,
    factor_cost,
    operand_layouts,
    relocated,
)
from meshjit.passes.partitioner.layouts import axis_text, span
from meshjit.passes.partitioner.local import (
    LocalOp,
    emit,
    finish,
    prepare,
    rule_of,
    run_replicated,
)
from meshjit.passes.partitioner.memory import value_bytes

_LIMITS = FactorLimits(uneven=True)


def sort(node: Node, ctx: PartitionCtx) -> None:
    """By the rule (other dims split, the sorted dim's axes moved to another
    dim or gathered); under a memory limit that the gathered copies would
    break, the axes moved to another dim that can take them, else the
    odd-even merge of the blocks."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    plan = _under_the_limit(ctx, node, rule)
    if plan is None:
        emit(ctx, node, prepare(ctx, node, rule, _LIMITS))
        return
    factors, merge = plan
    lop = prepare(ctx, node, rule, _LIMITS, factors)
    if merge is None:
        emit(ctx, node, lop)
        return
    dim, axes = merge
    finish(ctx, node, lop, _odd_even_merge(ctx, node, lop, dim, axes))


def _sorted_dim(ctx: PartitionCtx, node: Node) -> int:
    rank = len(ctx.graph.value(node.operands[0]).shape or ())
    dim = node.attrs.get("dimension", rank - 1)
    return int(dim) % rank if isinstance(dim, int) and rank else 0


def _under_the_limit(
    ctx: PartitionCtx, node: Node, rule: ShardingRule
) -> tuple[list[DimAxes], tuple[int, DimAxes] | None] | None:
    """Where the rule's choice gathers the split sorted dim and the copies
    break the memory limit: the factors to use instead, with the dim and its
    axes when the blocks are merged (None: the axes move to another dim).
    None where the rule's choice is taken: no memory limit, the dim not
    split, its axes moved to another dim already, or the copies fit (also
    when the axes divide the dim unevenly: the merge needs equal blocks)."""
    memory = ctx.memory
    shape = ctx.graph.value(node.operands[0]).shape or ()
    if memory is None or not shape:
        return None
    dim = _sorted_dim(ctx, node)
    axes = ctx.layout(node.operands[0])[dim]
    (factor,) = rule.operands[0][dim] or (None,)
    if not axes or factor is None:
        return None
    chosen = choose_factors(ctx, node, rule, _LIMITS)
    used = [u for f in chosen for u in f]
    if any(a.overlaps(u, ctx.mesh) for a in axes for u in used):
        return None  # moved to another dim: an all-to-all, no whole copy
    wants, _ = operand_layouts(ctx, node, rule, chosen, _LIMITS)
    copies = 0  # the gathered operands and the whole results (laid out alike)
    for vid, want in zip(
        (*node.operands, *node.results), (*wants, *wants), strict=True
    ):
        v = ctx.graph.value(vid)
        if v.shape is not None:
            copies += value_bytes(v.shape, v.dtype, ctx.local_shape(v.shape, want))
    refused = ctx.hold_or_refuse(copies)
    if not refused:
        return None
    names = "{" + ", ".join(axis_text(a) for a in axes) + "}"
    moves = relocated(ctx, rule, _LIMITS, chosen, list(axes))
    if moves:  # the cheapest dim that takes the axes (an all-to-all each way)
        best = min(moves, key=lambda f: factor_cost(ctx, node, rule, f, _LIMITS))
        ctx.remark(
            node.loc,
            f"{node.op} along its split dim {dim} moves {names} to another dim "
            f"by all-to-all rather than sorting gathered copies: {refused}",
        )
        return best, None
    n = span(axes, ctx.mesh)
    if shape[dim] % n:
        return None
    ctx.remark(
        node.loc,
        f"{node.op} along its split dim {dim} merges the sorted blocks over "
        f"{names} ({n} rounds of collective-permutes) rather than sorting "
        f"gathered copies: {refused}",
    )
    factors = list(chosen)
    factors[factor] = axes
    return factors, (dim, axes)


def _odd_even_merge(
    ctx: PartitionCtx, node: Node, lop: LocalOp, dim: int, axes: DimAxes
) -> list[Val]:
    """The sort of the blocks along `dim` (split over `axes`), block-wise."""
    b = ctx.b
    n = span(axes, ctx.mesh)
    blocks = ctx.block_of_position(axes)
    region = node.regions[0][0]
    xs = b.op(
        node.op, lop.operands, lop.results, lop.attrs, [ctx.verbatim_region(region)]
    )
    block = (xs[0].ty.shape or ())[dim]
    nbytes = sum(math.prod(x.ty.shape or ()) * itemsize(x.ty.dtype) for x in xs)
    zero = ctx.const_i32(0)
    one = ctx.const_i32(1)
    for r in range(n):
        lower = [(i + r) % 2 == 0 and i + 1 < n for i in blocks]
        upper = [(i + r) % 2 == 1 and i > 0 for i in blocks]
        pairs = _round_pairs(ctx, axes, blocks, r)
        if not pairs:
            continue
        ctx.record(
            "collective-permute",
            axes,
            nbytes,
            (
                node.op,
                node.loc,
                f"odd-even merge of sorted blocks, round {r + 1} of {n}",
            ),
        )
        got = [b.collective_permute(x, pairs) for x in xs]
        is_lower = b.compare(ctx.per_position([int(x) for x in lower]), one, "EQ")
        start = ctx.per_position([0 if lo else block for lo in lower])
        both = [
            b.concatenate([b.select(is_lower, x, g), b.select(is_lower, g, x)], dim)
            for x, g in zip(xs, got, strict=True)
        ]
        merged = b.op(
            node.op,
            both,
            [v.ty for v in both],
            lop.attrs,
            [ctx.verbatim_region(region)],
        )
        starts = [start if d == dim else zero for d in range(len(xs[0].ty.shape or ()))]
        kept = [
            b.dynamic_slice(m, starts, x.ty.shape or ())
            for m, x in zip(merged, xs, strict=True)
        ]
        flags = [int(lo or up) for lo, up in zip(lower, upper, strict=True)]
        if not all(flags):  # a block at an end with no partner keeps its own
            paired = b.compare(ctx.per_position(flags), one, "EQ")
            kept = [b.select(paired, k, x) for k, x in zip(kept, xs, strict=True)]
        xs = kept
    return xs


def _round_pairs(
    ctx: PartitionCtx, axes: DimAxes, blocks: list[int], r: int
) -> list[tuple[int, int]]:
    """(source, target) mesh positions of round `r`: block i and i + 1 swap
    where i + r is even."""
    up = [
        (p, q) for p, q in neighbor_pairs(ctx.mesh, axes, 1) if (blocks[p] + r) % 2 == 0
    ]
    down = [
        (p, q)
        for p, q in neighbor_pairs(ctx.mesh, axes, -1)
        if (blocks[q] + r) % 2 == 0
    ]
    return sorted(up + down)
