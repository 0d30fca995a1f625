"""Running an op on local blocks by its sharding rule: the flow most handlers
share (choose factors, reshard operands, emit on local types, bind results
with their partial sums), and the last resort, running it replicated."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from meshjit.compiler.graph import Graph, Node
from meshjit.compiler.op_info import combiner as _combiner
from meshjit.compiler.op_info import rule_lookup
from meshjit.dialects.reshard import DimAxes, Layout
from meshjit.dialects.rules import FactorKind, ShardingRule
from meshjit.passes.partitioner.builder import Ty, Val
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.factors import (
    FactorLimits,
    choose_factors,
    operand_layouts,
    partial_axes,
)
from meshjit.passes.partitioner.layouts import project, replicated, span


@dataclass(slots=True)
class LocalOp:
    """An op about to run on local blocks: its operands already resharded to
    what the chosen factors ask, its local result types and attributes."""

    rule: ShardingRule
    factors: list[DimAxes]
    operands: list[Val]
    wants: list[Layout]  # each operand's layout
    produced: list[Layout]  # each result's layout as the op computes it
    results: list[Ty]
    partial: DimAxes  # axes the results are partial sums over
    combiner: str
    attrs: dict[str, str]
    # (operand, dim) pairs a windowed factor reads whole along its dim (each
    # device cuts its window locally).
    whole: frozenset[tuple[int, int]] = frozenset()
    # Operands already replaced by a window (along some dim).
    windowed: set[int] = field(default_factory=set)


def rule_of(ctx: PartitionCtx, node: Node) -> ShardingRule | None:
    """The op's sharding rule from the table, or None when it has none (an
    op or custom-call target the table does not know)."""
    found = rule_lookup(ctx.graph, node)
    return None if found is None or found.warning else found.rule


def prepare(
    ctx: PartitionCtx,
    node: Node,
    rule: ShardingRule,
    limits: FactorLimits,
    factors: list[DimAxes] | None = None,
) -> LocalOp:
    """Chooses factors (unless given) and brings every operand to its local
    form. A deferred partial sum stays unreduced when the op is linear in it."""
    if factors is None:
        factors = choose_factors(ctx, node, rule, limits)
    wants, whole = operand_layouts(ctx, node, rule, factors, limits)
    pending = {
        i: ctx.deferred[v][1] for i, v in enumerate(node.operands) if v in ctx.deferred
    }
    carried: DimAxes = ()
    if pending and ctx.linear_in(node, pending, wants):
        carried = next(iter(pending.values()))
    operands = []
    for i, (vid, want) in enumerate(zip(node.operands, wants, strict=True)):
        if carried and i in pending:
            operands.append(ctx.val(vid))  # still partial: the op is linear
        else:
            operands.append(ctx.value_reshard(vid, want, node, f"operand {i}"))
    produced = [project(t, factors, ctx.mesh) for t in rule.results]
    partial = partial_axes(rule, factors)
    partial += tuple(a for a in carried if a not in partial)
    results = [
        ctx.local_ty(v, lay) for v, lay in zip(node.results, produced, strict=True)
    ]
    return LocalOp(
        rule,
        factors,
        operands,
        wants,
        produced,
        results,
        partial,
        _combiner(ctx.graph, node) or "stablehlo.add",
        ctx.op_attrs(node),
        whole,
    )


def mask_uneven(
    ctx: PartitionCtx, node: Node, lop: LocalOp, fills: Sequence[Val | None]
) -> None:
    """Before a reduction over a dim split unevenly (blocks padded at the
    end), the padding of every operand along it is set to `fills[k]` (the
    reduction's identity: 0 for a dot, the init value for a reduce)."""
    rule = lop.rule
    for f in range(rule.num_factors):
        axes = lop.factors[f]
        if not axes or rule.kind(f) is not FactorKind.REDUCTION:
            continue
        if rule.sizes[f] % span(axes, ctx.mesh) == 0:
            continue
        for k, tensor in enumerate(rule.operands):
            fill = fills[k] if k < len(fills) else None
            for d, dim_factors in enumerate(tensor):
                if f in dim_factors and fill is not None:
                    lop.operands[k] = ctx.mask_beyond(
                        lop.operands[k], d, lop.wants[k][d], rule.sizes[f], fill
                    )


def finish(ctx: PartitionCtx, node: Node, lop: LocalOp, outs: Sequence[Val]) -> None:
    """Binds the local results: resharded (partial sums resolved) to their
    assigned layouts, or left partial when a linear use can take them."""
    for vid, out, lay in zip(node.results, outs, lop.produced, strict=True):
        ctx.bind_result(vid, out, lay, node, lop.partial, lop.combiner)


def emit(ctx: PartitionCtx, node: Node, lop: LocalOp) -> None:
    """The op itself on local types (regions copied as they are), then its
    results bound."""
    regions = [ctx.verbatim_region(r[0]) for r in node.regions]
    outs = ctx.b.op(node.op, lop.operands, lop.results, lop.attrs, regions)
    finish(ctx, node, lop, outs)


def run_replicated(
    ctx: PartitionCtx, node: Node, why: str, remark: bool = True
) -> None:
    """Gathers every operand, runs the op on global shapes, slices results;
    says so in a remark where that costs anything: an operand or captured
    value is split (gathered), or a result is (every device computes all of
    it). An op on replicated values with replicated results (a key's
    bitcast) is what it would be anyway, and so is one on zero-size values
    (nothing to gather or compute: the reshapes of `jnp.pad`'s empty
    edges). `remark=False`: a handler that runs the op whole by choice says
    why in its own docstring."""
    captured_vids = captured_values(ctx.graph, node)
    values = (*node.operands, *captured_vids, *node.results)

    def costs(vid: int) -> bool:
        shape = ctx.graph.value(vid).shape
        return any(ctx.layout(vid)) and not (shape is not None and 0 in shape)

    if remark and any(costs(v) for v in values):
        ctx.remark(
            node.loc,
            f"'{node.op}' computed replicated ({why}): its operands are "
            "all-gathered first",
        )
    operands = []
    for i, vid in enumerate(node.operands):
        rank = len(ctx.graph.value(vid).shape or ())
        operands.append(ctx.value_reshard(vid, replicated(rank), node, f"operand {i}"))
    captured = {}
    for vid in captured_vids:
        rank = len(ctx.graph.value(vid).shape or ())
        captured[vid] = ctx.value_reshard(vid, replicated(rank), node, "captured value")
    ctx.push_scope()
    ctx.scope.names.update(captured)
    results = [ctx.global_ty(v) for v in node.results]
    regions = [ctx.verbatim_region(r[0]) for r in node.regions]
    outs = ctx.b.op(node.op, operands, results, ctx.op_attrs(node), regions)
    ctx.pop_scope()
    for vid, out in zip(node.results, outs, strict=True):
        rank = len(ctx.graph.value(vid).shape or ())
        ctx.bind_result(vid, out, replicated(rank), node)


def captured_values(graph: Graph, node: Node) -> list[int]:
    """Values used inside `node`'s regions but defined outside them."""
    inside: set[int] = set()
    used: list[int] = []

    def walk(n: Node) -> Iterator[Node]:
        for region in n.regions:
            for block in region:
                inside.update(block.args)
                for nid in block.nodes:
                    child = graph.node(nid)
                    inside.update(child.results)
                    yield child
                    yield from walk(child)

    children = list(walk(node))
    for child in children:
        for v in child.operands:
            if v not in inside and v not in used:
                used.append(v)
    return used
