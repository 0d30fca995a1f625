"""Choosing an op's factor shardings: which mesh axes split which factor of
its rule, read from the layouts its operands and results already have.

A handler says which factors its local form can split (`FactorLimits`); the
chooser tries the candidates that reading the tensors in different orders
gives and keeps the cheapest by the cost model (ties: more parallelism).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from meshjit.compiler.graph import Node
from meshjit.dialects.reshard import DimAxes, Layout, reshard_bytes
from meshjit.dialects.rules import FactorKind, ShardingRule
from meshjit.dialects.sharding import AxisRef
from meshjit.passes.partitioner.builder import itemsize
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.layouts import (
    keep_compound_dims_valid,
    project,
    span,
    split_to_factors,
)


@dataclass(frozen=True, slots=True)
class FactorLimits:
    """What a handler's local form can split.

    Pass-through factors split freely (a pass-through factor of operands only
    means "gather that operand", the rule table's convention); reduction
    factors only where the handler finishes the partial result; other kinds
    (permutation, need-replication) only when listed in `movable`."""

    forbidden: frozenset[int] = frozenset()
    movable: frozenset[int] = frozenset()
    reductions: bool = False
    # factor -> the smallest block its split may leave (a halo must fit).
    min_block: tuple[tuple[int, int], ...] = ()


def choose_factors(
    ctx: PartitionCtx, node: Node, rule: ShardingRule, limits: FactorLimits
) -> list[DimAxes]:
    """The factor shardings that cost least to reach from the current layouts.

    Candidates come from reading the current shardings in different orders
    (results first, operands first, each operand first): the first tensor
    to name an axis for a factor wins it."""
    values = (*node.operands, *node.results)
    # The choice depends only on this signature; ops that repeat it (layers
    # of a deep model) reuse the decision.
    signature = (
        node.op,
        rule,
        limits,
        tuple(ctx.layout(v) for v in values),
        tuple(ctx.graph.value(v).shape for v in values),
        tuple(ctx.graph.value(v).dtype for v in values),
    )
    cached = ctx.factor_cache.get(signature)
    if cached is not None:
        return list(cached)
    results = list(zip(node.results, rule.results, strict=True))
    operands = list(zip(node.operands, rule.operands, strict=True))
    orders = [results + operands, operands + results]
    for i in range(len(operands)):
        orders.append([operands[i], *results, *operands[:i], *operands[i + 1 :]])
    best: tuple[int, int, int] | None = None
    chosen: list[DimAxes] = []
    seen: set[tuple[DimAxes, ...]] = set()
    for index, order in enumerate(orders):
        factors = factors_from(ctx, order, rule, limits)
        key_factors = tuple(factors)
        if key_factors in seen:
            continue
        seen.add(key_factors)
        ways = math.prod(span(f, ctx.mesh) for f in factors)
        key = (factor_cost(ctx, node, rule, factors), -ways, index)
        if best is None or key < best:
            best, chosen = key, factors
    ctx.factor_cache[signature] = tuple(chosen)
    return chosen


def factors_from(
    ctx: PartitionCtx,
    order: Sequence[tuple[int, tuple[tuple[int, ...], ...]]],
    rule: ShardingRule,
    limits: FactorLimits,
) -> list[DimAxes]:
    """Factor shardings read from tensors in `order`; an axis serves one
    factor, a factor's axes must divide its size, and factors the op
    cannot split locally stay unsplit."""
    mesh = ctx.mesh
    factors: list[list[AxisRef]] = [[] for _ in range(rule.num_factors)]
    used: list[AxisRef] = []
    in_results = {f for t in rule.results for dim in t for f in dim}
    min_block = dict(limits.min_block)

    def allowed(f: int) -> bool:
        if f in limits.forbidden:
            return False
        kind = rule.kind(f)
        if kind is FactorKind.PASS_THROUGH:
            return f in in_results or not rule.results
        if kind is FactorKind.REDUCTION:
            return limits.reductions
        return f in limits.movable

    for vid, tensor in order:
        split = split_to_factors(tensor, ctx.layout(vid), rule, mesh)
        for f, axes in split.items():
            if factors[f] or not allowed(f):
                continue
            for a in axes:
                if any(a.overlaps(u, mesh) for u in used):
                    break
                ways = span([*factors[f], a], mesh)
                if rule.sizes[f] % ways != 0:
                    break
                if f in min_block and rule.sizes[f] // ways < min_block[f]:
                    break  # a block must hold the whole halo
                factors[f].append(a)
            used.extend(factors[f])
    keep_compound_dims_valid(rule, factors, mesh)
    return [tuple(f) for f in factors]


def partial_axes(rule: ShardingRule, factors: Sequence[DimAxes]) -> DimAxes:
    """The axes results are partial sums over: those of split reductions."""
    return tuple(
        a
        for f in range(rule.num_factors)
        if rule.kind(f) is FactorKind.REDUCTION
        for a in factors[f]
    )


def factor_cost(
    ctx: PartitionCtx, node: Node, rule: ShardingRule, factors: Sequence[DimAxes]
) -> int:
    """Bytes per device to bring operands to `factors` and results to their
    assigned shardings (partial sums included)."""
    partial = partial_axes(rule, factors)
    none: DimAxes = ()
    pairs: list[tuple[int, Layout, Layout, DimAxes]] = [
        (vid, ctx.layout(vid), project(t, factors, ctx.mesh), none)
        for vid, t in zip(node.operands, rule.operands, strict=True)
    ]
    pairs += [
        (vid, project(t, factors, ctx.mesh), ctx.layout(vid), partial)
        for vid, t in zip(node.results, rule.results, strict=True)
    ]
    total = 0
    for vid, src, dst, part in pairs:
        v = ctx.graph.value(vid)
        if v.shape is None:
            continue
        total += reshard_bytes(src, dst, v.shape, itemsize(v.dtype), ctx.mesh, part)
    return total
