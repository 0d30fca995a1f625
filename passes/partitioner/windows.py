"""Windowed ops along split dims: convolution halos, reduce_window, pad,
select_and_scatter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from meshjit.compiler.diagnostics import SourceLoc
from meshjit.compiler.graph import DenseElements, Graph, Node
from meshjit.dialects.reshard import DimAxes, neighbor_pairs
from meshjit.dialects.rules import FactorKind, ShardingRule
from meshjit.passes.partitioner.builder import Val, itemsize
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.factors import FactorLimits
from meshjit.passes.partitioner.local import emit, prepare, rule_of, run_replicated


def ints(value: object) -> tuple[int, ...]:
    if isinstance(value, tuple):
        return tuple(int(v) for v in value)
    return ()


def padding_values(value: object, n: int) -> list[tuple[int, int]]:
    if isinstance(value, DenseElements):
        if value.values is not None:
            flat = value.values
        elif isinstance(value.splat, int) and not isinstance(value.splat, bool):
            flat = (value.splat,) * (2 * n)
        else:
            flat = (0,) * (2 * n)
        return [(flat[2 * i], flat[2 * i + 1]) for i in range(n)]
    return [(0, 0)] * n


@dataclass(frozen=True, slots=True)
class Halo:
    """A convolution spatial dim that can be split with a halo exchange."""

    dim: int  # input dim
    spatial: int  # index among the spatial dims (row of `padding`)
    low: int
    high: int
    loc: SourceLoc

    @property
    def width(self) -> int:
        return max(self.low, self.high)


def conv_halos(graph: Graph, node: Node, rule: ShardingRule) -> dict[int, Halo]:
    """Spatial factors of a stride-1, undilated, ungrouped convolution whose
    output keeps the input's size (`lo + hi == window - 1`)."""
    attrs = node.attrs
    dims = attrs.get("dimension_numbers")
    if not isinstance(dims, Mapping):
        return {}
    spatial = ints(dims.get("input_spatial_dimensions"))
    kernel_spatial = ints(dims.get("kernel_spatial_dimensions"))
    n = len(spatial)
    strides = ints(attrs.get("window_strides")) or (1,) * n
    lhs = ints(attrs.get("lhs_dilation")) or (1,) * n
    rhs = ints(attrs.get("rhs_dilation")) or (1,) * n
    reversal = attrs.get("window_reversal")
    if isinstance(reversal, tuple) and any(reversal):
        return {}
    padding = padding_values(attrs.get("padding"), n)
    kernel = graph.value(node.operands[1]).shape or ()
    out: dict[int, Halo] = {}
    for i, d in enumerate(spatial):
        window = kernel[kernel_spatial[i]]
        lo, hi = padding[i]
        if strides[i] != 1 or lhs[i] != 1 or rhs[i] != 1:
            continue
        if lo < 0 or hi < 0 or lo + hi != window - 1:
            continue
        for f in rule.operands[0][d]:
            if rule.kind(f) is FactorKind.PERMUTATION:
                out[f] = Halo(d, i, lo, hi, node.loc)
    return out


def padding_text(node: Node, halos: Mapping[int, Halo]) -> str:
    """The padding attribute with split spatial dims padded by halos instead."""
    dims = node.attrs.get("dimension_numbers")
    assert isinstance(dims, Mapping)
    n = len(ints(dims.get("input_spatial_dimensions")))
    pads = padding_values(node.attrs.get("padding"), n)
    for halo in halos.values():
        pads[halo.spatial] = (0, 0)
    rows = ", ".join(f"[{lo}, {hi}]" for lo, hi in pads)
    return f"dense<[{rows}]> : tensor<{n}x2xi64>"


def exchange_halos(
    ctx: PartitionCtx,
    x: Val,
    halos: Mapping[int, Halo],
    factors: Sequence[DimAxes],
) -> Val:
    """Extends each split spatial dim of the local input by the rows the
    window reaches into the neighbours' blocks: `low` rows from the previous
    block, `high` from the next, by collective-permute. The first and last
    blocks receive nothing, i.e. zeros: the convolution's own padding."""
    b = ctx.b
    for f, halo in sorted(halos.items()):
        axes = factors[f]
        d = halo.dim
        size = (x.ty.shape or ())[d]
        before: list[Val] = []
        after: list[Val] = []
        for width, start, shift in ((halo.low, size - halo.low, 1), (halo.high, 0, -1)):
            if width == 0:
                continue
            part = b.slice_dim(x, d, start, width)
            shape = part.ty.shape or ()
            moved = 1
            for n in shape:
                moved *= n
            side = "previous" if shift == 1 else "next"
            ctx.record(
                "collective-permute",
                axes,
                moved * itemsize(x.ty.dtype),
                (
                    "stablehlo.convolution",
                    halo.loc,
                    f"halo of {width} along dim {d} from the {side} block",
                ),
            )
            got = b.collective_permute(part, neighbor_pairs(ctx.mesh, axes, shift))
            (before if shift == 1 else after).append(got)
        x = b.concatenate([*before, x, *after], d)
    return x


def tiled_window_factors(graph: Graph, node: Node, rule: ShardingRule) -> set[int]:
    """reduce_window factors whose windows tile the dim: each block of the
    output comes from one block of the input, so the op runs locally."""
    if len(node.operands) != 2:
        return set()
    attrs = node.attrs
    operand = graph.value(node.operands[0]).shape or ()
    result = graph.value(node.results[0]).shape or ()
    n = len(operand)
    window = ints(attrs.get("window_dimensions"))
    strides = ints(attrs.get("window_strides")) or (1,) * n
    base = ints(attrs.get("base_dilations")) or (1,) * n
    wdil = ints(attrs.get("window_dilations")) or (1,) * n
    padding = padding_values(attrs.get("padding"), n)
    out: set[int] = set()
    for d in range(n):
        w = window[d]
        if w == 1 or strides[d] != w or base[d] != 1 or wdil[d] != 1:
            continue
        if padding[d] != (0, 0) or operand[d] != result[d] * w:
            continue
        for f in rule.operands[0][d]:
            if rule.kind(f) is FactorKind.PERMUTATION and f in rule.results[0][d]:
                out.add(f)
    return out


def reduce_window(node: Node, ctx: PartitionCtx) -> None:
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    tiled = frozenset(tiled_window_factors(ctx.graph, node, rule))
    emit(ctx, node, prepare(ctx, node, rule, FactorLimits(movable=tiled)))


def pad(node: Node, ctx: PartitionCtx) -> None:
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    emit(ctx, node, prepare(ctx, node, rule, FactorLimits()))
