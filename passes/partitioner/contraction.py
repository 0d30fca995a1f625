"""dot_general and convolution: contracting dims split into partial sums;
a convolution's spatial dims split by windows (`windows.gather_window`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from meshjit.compiler.graph import Graph, Node
from meshjit.dialects.rules import NULL_DIM, FactorKind, RuleBuilder, ShardingRule
from meshjit.passes.partitioner.builder import Ty, Val, i64, padding_attr
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.edges import (
    EdgeParts,
    core_value,
    edge_parts,
    fill_edges,
)
from meshjit.passes.partitioner.factors import (
    FactorLimits,
    WindowedFactor,
    choose_factors,
    operand_layouts,
)
from meshjit.passes.partitioner.halo import Window
from meshjit.passes.partitioner.layouts import span
from meshjit.passes.partitioner.local import (
    LocalOp,
    emit,
    mask_uneven,
    prepare,
    rule_of,
    run_replicated,
)
from meshjit.passes.partitioner.windows import gather_window, ints, padding_values

PERMUTATION = FactorKind.PERMUTATION
REDUCTION = FactorKind.REDUCTION


def dot_general(node: Node, ctx: PartitionCtx) -> None:
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    lop = prepare(ctx, node, rule, FactorLimits(reductions=True, uneven=True))
    zero = _zero(ctx, lop.operands[0])
    mask_uneven(ctx, node, lop, [zero, zero])
    emit(ctx, node, lop)


def _zero(ctx: PartitionCtx, like: Val) -> Val:
    return ctx.b.zeros(Ty((), like.ty.dtype))


@dataclass(frozen=True, slots=True)
class ConvFactors:
    rule: ShardingRule
    spatial: tuple[tuple[int, WindowedFactor], ...]  # spatial index, its factor
    batch_groups: int  # factor of batch_group_count (-1: none)
    feature_groups: int  # factor of feature_group_count (-1: none)


def conv_factors(
    graph: Graph, node: Node, edges: EdgeParts | None = None
) -> ConvFactors | None:
    """The convolution's factors as the partitioner splits them (the rule
    table's spatial factors serve propagation: two per dim, as Shardy's).
    Each spatial dim is one factor: shared by input and output, or by input
    and kernel (a reduction) where the kernel's overlapping window spans
    more than half the input (a filter gradient's). With `edges`, the input
    is the core, padded by the edges' lengths as well along their dim."""
    attrs = node.attrs
    dims = attrs.get("dimension_numbers")
    if not isinstance(dims, Mapping):
        return None
    keys = (
        "input_batch_dimension",
        "input_feature_dimension",
        "kernel_input_feature_dimension",
        "kernel_output_feature_dimension",
        "output_batch_dimension",
        "output_feature_dimension",
    )
    found = [v for v in (dims.get(k) for k in keys) if isinstance(v, int)]
    if len(found) != len(keys):
        return None
    in_batch, in_feat, k_in, k_out, out_batch, out_feat = found
    lhs = graph.value(node.operands[0]).shape or ()
    rhs = graph.value(node.operands[1]).shape or ()
    out = graph.value(node.results[0]).shape or ()
    lhs_sp = ints(dims.get("input_spatial_dimensions"))
    rhs_sp = ints(dims.get("kernel_spatial_dimensions"))
    out_sp = ints(dims.get("output_spatial_dimensions"))
    n = len(lhs_sp)
    strides = ints(attrs.get("window_strides")) or (1,) * n
    lhs_dil = ints(attrs.get("lhs_dilation")) or (1,) * n
    rhs_dil = ints(attrs.get("rhs_dilation")) or (1,) * n
    reversal = attrs.get("window_reversal")
    flipped = ints(reversal) if isinstance(reversal, tuple) else (0,) * n
    pads = padding_values(attrs.get("padding"), n)
    batch_groups = attrs.get("batch_group_count", 1)
    feature_groups = attrs.get("feature_group_count", 1)
    if not isinstance(batch_groups, int) or not isinstance(feature_groups, int):
        return None
    b = RuleBuilder([len(lhs), len(rhs)], [len(out)])
    count = 0
    bg_factor = fg_factor = -1
    if batch_groups > 1:
        b.factor([in_batch, k_out], [out_feat], batch_groups)
        bg_factor, count = count, count + 1
    b.factor([in_batch, NULL_DIM], [out_batch], out[out_batch])
    count += 1
    spatial: list[tuple[int, WindowedFactor]] = []
    for s in range(n):
        lo, hi = pads[s]
        size = lhs[lhs_sp[s]]
        if edges is not None and edges.dim == lhs_sp[s]:
            size, lo, hi = edges.size, lo + edges.low, hi + edges.high
        window = Window(
            size, rhs[rhs_sp[s]], strides[s], lo, hi, lhs_dil[s], rhs_dil[s]
        )
        if window.out_size != out[out_sp[s]] or flipped[s]:
            continue  # the dim stays whole
        # A window over most of the input (a filter gradient's: the output
        # gradient slid over the input) sums over the kernel's dim: split
        # by output, every block would need nearly all of the input. Windows
        # side by side (patches: stride >= the dilated window) split by
        # output, however long.
        span_ = (rhs[rhs_sp[s]] - 1) * rhs_dil[s] + 1
        apart = lhs_dil[s] == 1 and strides[s] >= span_
        padded = window.padded
        if not apart and 2 * span_ > padded:
            b.factor([lhs_sp[s], rhs_sp[s]], [NULL_DIM], rhs[rhs_sp[s]], REDUCTION)
            spatial.append((s, WindowedFactor(count, lhs_sp[s], ((0, window),), True)))
        else:
            b.factor([lhs_sp[s], NULL_DIM], [out_sp[s]], out[out_sp[s]], PERMUTATION)
            spatial.append((s, WindowedFactor(count, lhs_sp[s], ((0, window),))))
        count += 1
    if feature_groups > 1:
        b.factor([in_feat, k_out], [out_feat], feature_groups)
        fg_factor, count = count, count + 1
    b.factor([in_feat, k_in], [NULL_DIM], rhs[k_in], REDUCTION)
    per_group = out[out_feat] // (batch_groups * feature_groups)
    b.factor([NULL_DIM, k_out], [out_feat], per_group)
    return ConvFactors(b.build(), tuple(spatial), bg_factor, fg_factor)


def convolution(node: Node, ctx: PartitionCtx) -> None:
    """Batch, groups and output features split as they are; input features
    into partial sums; spatial dims by windows (halo exchange, or an
    all-gather where the cost model prefers it). The local op keeps its
    window and dilations; its padding becomes the blocks' local padding, and
    a split group count shrinks with the split."""
    edges = edge_parts(ctx, node) if node.operands[0] in ctx.lazy else None
    if edges is not None and _over_edges(node, ctx, edges):
        return
    conv = conv_factors(ctx.graph, node)
    if conv is None:
        run_replicated(ctx, node, "dimension numbers not understood")
        return
    limits = FactorLimits(reductions=True, windowed=tuple(w for _, w in conv.spatial))
    lop = prepare(ctx, node, conv.rule, limits)
    _emit_convolution(ctx, node, conv, lop, None)


def _over_edges(node: Node, ctx: PartitionCtx, edges: EdgeParts) -> bool:
    """The convolution run on the core of its input as if padded by the
    edges, its window's edge positions filled with the edge pieces
    (`edges.py`); False (nothing emitted) where the op's best layout does
    not split the edges' dim as the concatenation is split."""
    conv = conv_factors(ctx.graph, node, edges)
    if conv is None or not any(w.dim == edges.dim for _, w in conv.spatial):
        return False
    limits = FactorLimits(reductions=True, windowed=tuple(w for _, w in conv.spatial))
    factors = choose_factors(ctx, node, conv.rule, limits)
    wants, whole = operand_layouts(ctx, node, conv.rule, factors, limits)
    if wants[0] != ctx.layout(edges.value) or (0, edges.dim) in whole:
        return False
    core = core_value(ctx, edges, node)
    ctx.bind(edges.value, core)  # what the local op reads as its input
    try:
        lop = prepare(ctx, node, conv.rule, limits, factors)
    finally:
        ctx.scope.names.pop(edges.value, None)
    lop.windowed.add(0)  # a gather of the window gathers the core
    _emit_convolution(ctx, node, conv, lop, edges)
    return True


def _emit_convolution(
    ctx: PartitionCtx,
    node: Node,
    conv: ConvFactors,
    lop: LocalOp,
    edges: EdgeParts | None,
) -> None:
    pads = padding_values(
        node.attrs.get("padding"), len(lop.results[0].shape or ()) - 2
    )
    for s, w in conv.spatial:
        axes = lop.factors[w.factor]
        if not axes:
            # (the edges' dim is split: its operand layout is the
            # concatenation's, which splits it)
            assert edges is None or w.dim != edges.dim
            continue
        plans = w.plans(span(axes, ctx.mesh))
        assert plans is not None
        (plan,) = plans
        window = gather_window(ctx, node, lop, 0, w.dim, axes, plan, None)
        if edges is not None and w.dim == edges.dim:
            window = fill_edges(ctx, edges, node, window, axes, plan)
        lop.operands[0] = window
        pads[s] = (plan.low, plan.high)
    lop.attrs["padding"] = padding_attr(pads)
    for key, f in (
        ("batch_group_count", conv.batch_groups),
        ("feature_group_count", conv.feature_groups),
    ):
        groups = node.attrs.get(key, 1)
        if f >= 0 and isinstance(groups, int):
            lop.attrs[key] = i64(groups // span(lop.factors[f], ctx.mesh))
    emit(ctx, node, lop)
