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
from meshjit.compiler.op_info import combiner as _combiner
from meshjit.dialects.reshard import DimAxes, Layout
from meshjit.dialects.rules import FactorKind, ShardingRule
from meshjit.dialects.sharding import AxisRef
from meshjit.dialects.stablehlo_rules import REDUCIBLE_COMBINERS
from meshjit.passes.partitioner.builder import itemsize
from meshjit.passes.partitioner.context import PartitionCtx, efficiency
from meshjit.passes.partitioner.cost import (
    PLAIN,
    CostModel,
    pieces_sum_seconds,
    reshard_seconds,
)
from meshjit.passes.partitioner.halo import (
    JointChoice,
    Window,
    WindowPlan,
    choose_exchange,
    choose_joint,
    output_parallel,
    window_split,
)
from meshjit.passes.partitioner.layouts import (
    keep_compound_dims_valid,
    layout_text,
    local_blocks,
    project,
    span,
    split_to_factors,
)
from meshjit.passes.partitioner.report import Decision


@dataclass(frozen=True, slots=True)
class WindowedFactor:
    """A factor whose split makes each block read a window of some operands
    along `dim` (`halo.py`): the chooser counts the window exchanges in its
    cost, and splits the factor only over device counts whose blocks share
    one local form for every operand."""

    factor: int
    dim: int  # the operands' windowed dim
    windows: tuple[tuple[int, Window], ...]  # (operand index, its window)
    by_kernel: bool = False  # a convolution split by kernel blocks
    trim: bool = False  # data movement: padding outputs read nothing

    def plans(self, n: int) -> tuple[WindowPlan, ...] | None:
        out = []
        for _, w in self.windows:
            if self.by_kernel:
                plan = window_split(w, n)
            else:
                plan = output_parallel(w, n, self.trim)
            if plan is None:
                return None
            out.append(plan)
        return tuple(out)


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
    windowed: tuple[WindowedFactor, ...] = ()
    # Factors that are a whole dim wherever they appear may split a dim
    # their axes do not divide (blocks padded at the end); split reduction
    # factors then need the handler to mask the padding (`mask_uneven`).
    uneven: bool = False
    # With `uneven`: factors that still split only where their axes divide
    # them (a reversed dim: padded blocks would not mirror into place).
    even: frozenset[int] = frozenset()
    # Movable factors whose split the handler finishes with one all-reduce
    # of the results' blocks over the factor's axes (dynamic_slice's pieces
    # of a slice, summed): priced as such in `factor_cost`.
    assembled: frozenset[int] = frozenset()

    def window(self, factor: int) -> WindowedFactor | None:
        for w in self.windowed:
            if w.factor == factor:
                return w
        return None


def split_blocked(
    rule: ShardingRule, result_shapes: Sequence[tuple[int, ...]]
) -> tuple[ShardingRule, dict[int, int]]:
    """The rule table's rule as a handler that makes a blocked dim local
    itself sees it (dynamic_slice's sliced dims, top_k's row): each blocked
    factor stays on the operands as a permutation the handler may split
    (list it in `FactorLimits.movable`), and the results get a new
    need-replication factor in its place (they are produced whole along it).
    Returns the rule and, per blocked factor, the operand dim it is on."""
    blocked = [f for f in range(rule.num_factors) if rule.kind(f) is FactorKind.BLOCKED]
    sizes = list(rule.sizes)
    kinds = [rule.kind(f) for f in range(rule.num_factors)]
    twin: dict[int, int] = {}
    for f in blocked:
        kinds[f] = FactorKind.PERMUTATION
        twin[f] = len(sizes)
        sizes.append(1)
        kinds.append(FactorKind.NEED_REPLICATION)
    results = tuple(
        tuple(tuple(twin.get(f, f) for f in dim) for dim in tensor)
        for tensor in rule.results
    )
    for tensor, shape in zip(results, result_shapes, strict=True):
        for dim, size in zip(tensor, shape, strict=True):
            for f in dim:
                if f >= rule.num_factors:
                    sizes[f] = size
    dims = {f: d for d, fs in enumerate(rule.operands[0]) for f in fs if f in twin}
    return ShardingRule(tuple(sizes), rule.operands, results, tuple(kinds)), dims


def choose_factors(
    ctx: PartitionCtx, node: Node, rule: ShardingRule, limits: FactorLimits
) -> list[DimAxes]:
    """The factor shardings that cost least to reach from the current layouts.

    Candidates come from reading the current shardings in different orders
    (results first, operands first, each operand first): the first tensor
    to name an axis for a factor wins it; and from each of those with one
    factor left unsplit (e.g. gather a small operand instead of a large
    result)."""
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
        # Other copies of the operands, and unreduced partial sums, change
        # what reaching a layout costs.
        tuple(tuple(lay for lay, _ in ctx.scope.versions_of(v)) for v in node.operands),
        tuple(ctx.deferred.get(v, ((), ()))[1] for v in node.operands),
        # A window made before costs nothing to reuse (`PartitionCtx.has_window`).
        tuple(v in ctx.windowed for v in node.operands),
    )
    cached = ctx.factor_cache.get(signature)
    if cached is not None:
        return list(cached)
    results = list(zip(node.results, rule.results, strict=True))
    operands = list(zip(node.operands, rule.operands, strict=True))
    orders = [results + operands, operands + results]
    for i in range(len(operands)):
        orders.append([operands[i], *results, *operands[:i], *operands[i + 1 :]])
    best: tuple[float, int, int] | None = None
    chosen: list[DimAxes] = []
    seen: set[tuple[DimAxes, ...]] = set()
    candidates = [factors_from(ctx, node, order, rule, limits) for order in orders]
    named = [a for v in values for axes in ctx.layout(v) for a in axes]
    for base in list(candidates):
        for f, axes in enumerate(base):
            if axes:
                fewer = [list(a) for a in base]
                fewer[f] = []
                keep_compound_dims_valid(rule, fewer, ctx.mesh)
                candidates.append([tuple(a) for a in fewer])
        candidates += relocated(ctx, rule, limits, base, named)
    scored: list[tuple[tuple[float, int, int], list[DimAxes]]] = []
    for index, factors in enumerate(candidates):
        key_factors = tuple(factors)
        if key_factors in seen:
            continue
        seen.add(key_factors)
        ways = math.prod(span(f, ctx.mesh) for f in factors)
        key = (factor_cost(ctx, node, rule, factors, limits), -ways, index)
        scored.append((key, factors))
        if best is None or key < best:
            best, chosen = key, factors
    if len(scored) > 1 and best is not None:
        best, chosen = _fewest_bytes_among_ties(ctx, node, rule, limits, scored, best)
        _record_decision(ctx, node, rule, scored, best, chosen)
    ctx.factor_cache[signature] = tuple(chosen)
    return chosen


# Plans whose estimates are this close are a tie: the model's constants are
# not that precise (side by side, such plans measure either way); among them
# the one that moves the fewest bytes wins.
TIE = 0.02
_BYTES_ONLY = CostModel(
    latency=0.0, bandwidth=1.0, flops=math.inf, memory_bandwidth=math.inf
)


def _fewest_bytes_among_ties(
    ctx: PartitionCtx,
    node: Node,
    rule: ShardingRule,
    limits: FactorLimits,
    scored: list[tuple[tuple[float, int, int], list[DimAxes]]],
    best: tuple[float, int, int],
) -> tuple[tuple[float, int, int], list[DimAxes]]:
    ties = [(key, f) for key, f in scored if key[0] <= best[0] * (1 + TIE)]
    if len(ties) < 2:
        return best, next(f for key, f in scored if key == best)
    model, ctx.cost = ctx.cost, _BYTES_ONLY
    try:
        ranked = [
            ((factor_cost(ctx, node, rule, f, limits), key), key, f) for key, f in ties
        ]
    finally:
        ctx.cost = model
    _, key, factors = min(ranked, key=lambda r: r[0])
    return key, factors


def _record_decision(
    ctx: PartitionCtx,
    node: Node,
    rule: ShardingRule,
    scored: list[tuple[tuple[float, int, int], list[DimAxes]]],
    best: tuple[float, int, int],
    chosen: list[DimAxes],
) -> None:
    """For --explain: the chosen split and the best different one (plans
    compared by the layouts they give, printed only for the two shown)."""
    plan = _plan_layouts(ctx, rule, chosen)
    others = [
        (key, f)
        for key, f in scored
        if key != best and _plan_layouts(ctx, rule, f) != plan
    ]
    other_key, other = min(others, key=lambda kf: kf[0]) if others else (None, None)
    ctx.report.decisions.append(
        Decision(
            node.op,
            node.loc,
            _plan_text(ctx, rule, chosen),
            best[0],
            _plan_text(ctx, rule, other) if other is not None else "",
            other_key[0] if other_key is not None else 0.0,
            ctx.site,
        )
    )


def _plan_layouts(
    ctx: PartitionCtx, rule: ShardingRule, factors: Sequence[DimAxes]
) -> tuple[Layout, ...]:
    """Operand then result layouts under `factors` (what `_plan_text` shows)."""
    return tuple(project(t, factors, ctx.mesh) for t in (*rule.operands, *rule.results))


def _plan_text(
    ctx: PartitionCtx, rule: ShardingRule, factors: Sequence[DimAxes]
) -> str:
    """Operand layouts -> result layouts under `factors`."""
    ins = " x ".join(layout_text(project(t, factors, ctx.mesh)) for t in rule.operands)
    outs = ", ".join(layout_text(project(t, factors, ctx.mesh)) for t in rule.results)
    return f"{ins} -> {outs}"


def relocated(
    ctx: PartitionCtx,
    rule: ShardingRule,
    limits: FactorLimits,
    base: Sequence[DimAxes],
    named: Sequence[AxisRef],
) -> list[list[DimAxes]]:
    """Candidates where an axis the tensors name but `base` leaves unused
    (it sits on a dim the op cannot split, e.g. the dim a sort sorts) moves
    to a pass-through factor that can take it: one all-to-all there and
    back instead of a gather (XLA's partitioner does this for sorts)."""
    mesh = ctx.mesh
    used = [a for f in base for a in f]
    in_results = {f for t in rule.results for dim in t for f in dim}
    out: list[list[DimAxes]] = []
    for a in dict.fromkeys(named):
        if any(a.overlaps(u, mesh) for u in used):
            continue
        for f in range(rule.num_factors):
            if f in limits.forbidden or rule.kind(f) is not FactorKind.PASS_THROUGH:
                continue
            if f not in in_results and rule.results:
                continue
            if rule.sizes[f] % span([*base[f], a], mesh):
                continue
            moved = [list(x) for x in base]
            moved[f].append(a)
            keep_compound_dims_valid(rule, moved, mesh)
            out.append([tuple(x) for x in moved])
    return out


def whole_dim_factors(
    ctx: PartitionCtx, node: Node, rule: ShardingRule
) -> frozenset[int]:
    """Factors that are the only factor of every dim they appear in, with the
    dim's size: they may split unevenly."""
    out = set(range(rule.num_factors))
    values = (*node.operands, *node.results)
    for vid, tensor in zip(values, (*rule.operands, *rule.results), strict=True):
        shape = ctx.graph.value(vid).shape or ()
        for d, dim_factors in enumerate(tensor):
            if len(dim_factors) != 1 or shape[d] != rule.sizes[dim_factors[0]]:
                out.difference_update(dim_factors)
    return frozenset(out)


def factors_from(
    ctx: PartitionCtx,
    node: Node,
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
    windowed = {w.factor: w for w in limits.windowed}
    whole = (
        whole_dim_factors(ctx, node, rule) - limits.even
        if limits.uneven
        else frozenset()
    )
    # A windowed factor may split unevenly too: its blocks' windows are cut
    # from padded blocks and masked.
    whole |= frozenset(windowed)

    def allowed(f: int) -> bool:
        if f in limits.forbidden:
            return False
        kind = rule.kind(f)
        if kind is FactorKind.PASS_THROUGH:
            return f in in_results or not rule.results
        if kind is FactorKind.REDUCTION:
            return limits.reductions
        return f in limits.movable or f in windowed

    for vid, tensor in order:
        split = split_to_factors(tensor, ctx.layout(vid), rule, mesh, whole)
        for f, axes in split.items():
            if factors[f] or not allowed(f):
                continue
            for a in axes:
                if any(a.overlaps(u, mesh) for u in used):
                    break
                ways = span([*factors[f], a], mesh)
                if rule.sizes[f] % ways != 0 and f not in whole:
                    break
                factors[f].append(a)
            if f in windowed:
                w = windowed[f]
                while factors[f] and w.plans(span(factors[f], mesh)) is None:
                    factors[f].pop()
            used.extend(factors[f])
    keep_compound_dims_valid(rule, factors, mesh)
    return [tuple(f) for f in factors]


def gathers_partials(ctx: PartitionCtx, node: Node) -> bool:
    """Whether a split reduction's partial results are gathered and reduced
    again (`reductions.reduce`: a reduce with several results, argmax's
    values and indices, or a combiner no all-reduce has) rather than
    all-reduced."""
    if node.op != "stablehlo.reduce":
        return False
    combiner = _combiner(ctx.graph, node)
    return len(node.results) > 1 or combiner not in REDUCIBLE_COMBINERS


def partial_axes(rule: ShardingRule, factors: Sequence[DimAxes]) -> DimAxes:
    """The axes results are partial sums over: those of split reductions."""
    return tuple(
        a
        for f in range(rule.num_factors)
        if rule.kind(f) is FactorKind.REDUCTION
        for a in factors[f]
    )


def whole_copy_along(ctx: PartitionCtx, vid: int, dim: int) -> bool:
    """Whether value `vid` is laid out, or has a local copy, whole along
    `dim` (a windowed op then cuts each block's window from it locally);
    never while it is an unreduced partial sum. A recomputable value (a
    splat, an iota) is made whole where it is read: its window needs no
    exchange (a pooling's window counts, `reduce_window` over ones, are
    computed per block instead of whole, which XLA folds at compile time)."""
    if vid in ctx.deferred:
        return False
    if ctx.recomputable(vid):
        return True
    layouts = [ctx.layout(vid), *(lay for lay, _ in ctx.scope.versions_of(vid))]
    return any(not lay[dim] for lay in layouts)


def operand_layouts(
    ctx: PartitionCtx,
    node: Node,
    rule: ShardingRule,
    factors: Sequence[DimAxes],
    limits: FactorLimits,
) -> tuple[list[Layout], frozenset[tuple[int, int]]]:
    """Each operand's layout for the local op, and the (operand, dim) pairs
    where a split windowed factor reads the operand through a window along a
    dim it is (or has a copy) whole along: it stays whole there, and each
    device cuts its window locally. Per dim: an operand whole along one
    windowed dim may be split along another, whose window it then
    exchanges."""
    wants = [project(t, factors, ctx.mesh) for t in rule.operands]
    whole: set[tuple[int, int]] = set()
    for w in limits.windowed:
        if not factors[w.factor]:
            continue
        for k, _ in w.windows:
            if whole_copy_along(ctx, node.operands[k], w.dim):
                want = list(wants[k])
                want[w.dim] = ()
                wants[k] = tuple(want)
                whole.add((k, w.dim))
    return wants, frozenset(whole)


def factor_cost(
    ctx: PartitionCtx,
    node: Node,
    rule: ShardingRule,
    factors: Sequence[DimAxes],
    limits: FactorLimits,
) -> float:
    """Estimated seconds of the op under `factors`: its share of the work on
    one device, plus the collectives that bring operands to `factors` (from
    the cheapest copy of each) and results to their assigned shardings
    (partial sums included), plus the window exchanges of split windowed
    factors."""
    partial = partial_axes(rule, factors)
    wants, whole = operand_layouts(ctx, node, rule, factors, limits)
    total = 0.0
    for vid, want in zip(node.operands, wants, strict=True):
        total += ctx.reshard_seconds_to(vid, want)
    # Several partial results gathered in one collective (argmax's values
    # and indices) are priced as that gather, then moved as whole values.
    packed = 0
    gathered = bool(partial) and gathers_partials(ctx, node)
    for vid, t in zip(node.results, rule.results, strict=True):
        v = ctx.graph.value(vid)
        if v.shape is None:
            continue
        src = project(t, factors, ctx.mesh)
        keep = ctx.unreduced.get(vid, ())  # declared unreduced: not summed
        if gathered:
            local = ctx.local_shape(v.shape, src)
            packed += math.prod(local) * itemsize(v.dtype)
        total += reshard_seconds(
            src,
            ctx.layout(vid),
            v.shape,
            itemsize(v.dtype),
            ctx.mesh,
            () if gathered else tuple(a for a in partial if a not in keep),
            ctx.cost,
        )
    if gathered:
        n = span(partial, ctx.mesh)
        total += ctx.cost.collective_seconds("all-gather", (n - 1) * packed, n)
    for w in limits.windowed:
        if factors[w.factor]:
            total += window_seconds(ctx, node, rule, factors, w, whole)[0]
    summed = tuple(a for f in sorted(limits.assembled) for a in factors[f])
    if summed:
        for vid, t in zip(node.results, rule.results, strict=True):
            v = ctx.graph.value(vid)
            if v.shape is not None:
                local = ctx.local_shape(v.shape, project(t, factors, ctx.mesh))
                total += pieces_sum_seconds(
                    ctx.cost, local, itemsize(v.dtype), summed, ctx.mesh
                )
    used = {a for f in factors for a in f}
    ways = math.prod(a.full_size(ctx.mesh) for a in used)
    flops, nbytes = ctx.work(node)
    slow = efficiency(node)
    if slow is not PLAIN:
        values = [ctx.graph.value(v) for v in (*node.operands, *node.results)]
        layouts = [*wants, *(project(t, factors, ctx.mesh) for t in rule.results)]
        tensors = [(v.shape, itemsize(v.dtype)) for v in values]
        blocks = local_blocks(tensors, layouts, ctx.mesh)
        more_flops, more_bytes = slow.scale(ctx.cost, blocks)
        flops, nbytes = flops * more_flops, nbytes * more_bytes
    return total + ctx.cost.compute_seconds(flops / ways, nbytes / ways)


def window_seconds(
    ctx: PartitionCtx,
    node: Node,
    rule: ShardingRule,
    factors: Sequence[DimAxes],
    w: WindowedFactor,
    whole: frozenset[tuple[int, int]],
) -> tuple[float, JointChoice | None]:
    """Estimated seconds of the window exchanges of a split windowed factor
    (none for operands whole along the dim: they are cut locally), and, for
    a factor with several windows (a concatenate's operands), the one
    all-gather of all their pieces where the cost model prefers it to each
    window's own way (`halo.choose_joint`; not where the windows differ in
    what one position along the dim holds, an operand is whole along the
    dim, or the result is returned whole along it)."""
    plans = w.plans(span(factors[w.factor], ctx.mesh))
    if plans is None:
        return 0.0, None
    rows: list[int | None] = []  # bytes of one position along the dim
    axes = factors[w.factor]
    for (k, _), plan in zip(w.windows, plans, strict=True):
        v = ctx.graph.value(node.operands[k])
        layout = project(rule.operands[k], factors, ctx.mesh)
        if (
            v.shape is None
            or (k, w.dim) in whole
            or ctx.has_window(node.operands[k], layout, w.dim, axes, plan)
        ):
            rows.append(None)  # cut locally, or made before and reused
            continue
        local = ctx.local_shape(v.shape, layout)
        inner = math.prod(n for d, n in enumerate(local) if d != w.dim)
        rows.append(inner * itemsize(v.dtype))
    returned_whole = any(
        not lay[d]
        for vid, tensor in zip(node.results, rule.results, strict=True)
        for lay in ctx.returned.get(vid, ())
        for d, fs in enumerate(tensor)
        if w.factor in fs
    )
    if len(plans) > 1 and len(set(rows)) == 1 and rows[0] and not returned_whole:
        # (returned whole: the windows' gathers of the dim make that copy)
        values = tuple(node.operands[k] for k, _ in w.windows)
        joint = choose_joint(plans, rows[0], ctx.cost, values)
        if joint is not None and joint.taken:
            return joint.seconds, joint
    total = 0.0
    for plan, row in zip(plans, rows, strict=True):
        if row is not None:
            total += choose_exchange(plan, row, ctx.cost).seconds
    return total, None
