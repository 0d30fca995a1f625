"""An op's sharding strategies: every way to put the mesh axes on the factors
of its rule that the partitioner runs locally, each with the layouts it wants
its operands in, the layouts it leaves its results in, and its cost.

A strategy maps each mesh axis to at most one factor (an axis may also stay
unused: the op is then replicated over it); a factor's axes are ordered, so
two axes on one factor give two strategies. Pass-through factors split
freely; reduction factors only for ops whose handler finishes a partial
result (dot_general, convolution, a reduce by add/max/min/...), and then the
partial result is either all-reduced or reduce-scattered onto one of its
dims: separate strategies, costed separately. Factors of other kinds stay
whole (the search does not weigh halo exchanges or moves). Pure Python.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from meshjit.dialects.reshard import DimAxes, Layout
from meshjit.dialects.rules import FactorKind, ShardingRule
from meshjit.dialects.sharding import AxisRef, MeshModel
from meshjit.passes.partitioner.cost import (
    PLAIN,
    CostModel,
    Efficiency,
    reshard_seconds,
)
from meshjit.passes.partitioner.layouts import (
    keep_compound_dims_valid,
    layout_text,
    local_blocks,
    project,
    span,
)

# Seconds added per dim whose axes do not run in the mesh's order (major to
# minor, a sub-axis's major part first): among strategies that cost the
# same, the one a user would write (P(('x', 'y')), not P(('y', 'x'))),
# which is data parallelism's own layout where the search picks data
# parallelism, so arguments laid out by hand need no device reorder. One
# nanosecond: far below any collective or compute difference, above the
# solver's relative gap (1e-6 of a step's estimate).
ORDER_TIEBREAK = 1e-9


def out_of_order(layouts: Sequence[Layout | None], mesh: MeshModel) -> float:
    """ORDER_TIEBREAK per dim of `layouts` whose axes are out of mesh order."""
    rank = {axis.name: i for i, axis in enumerate(mesh.axes)}
    count = 0
    for lay in layouts:
        for axes in lay or ():
            keys = [(rank.get(a.name, -1), a.pre_size) for a in axes]
            count += any(a > b for a, b in itertools.pairwise(keys))
    return count * ORDER_TIEBREAK


# Ops whose partitioner handler finishes a partial result (the factors of
# kind reduction may then be split).
REDUCING_OPS = frozenset(
    {"stablehlo.convolution", "stablehlo.dot_general", "stablehlo.reduce"}
)


@dataclass(frozen=True, slots=True)
class Strategy:
    """One way to run an op: factor axes, operand and result layouts (None
    for a value that is not a ranked tensor), and estimated seconds."""

    factors: tuple[DimAxes, ...]
    operands: tuple[Layout | None, ...]
    results: tuple[Layout | None, ...]
    compute: float  # the op's share of the work on one device
    collective: float  # reducing a partial result (all-reduce / reduce-scatter)
    note: str = ""  # "all-reduce over x", "reduce-scatter over x onto dim 1"
    # The reduction's kind and the launch latency inside `collective` that
    # independent reductions share where they are combined into one
    # collective (meshjit's reduce-scatter and small all-reduce combining,
    # XLA's all-reduce combiner where its variadic all-reduce launches once:
    # `CostModel.shares_launch`); 0 where each pays its own.
    kind: str = ""
    latency: float = 0.0

    @property
    def cost(self) -> float:
        return self.compute + self.collective

    def text(self) -> str:
        ins = " x ".join(
            "-" if lay is None else layout_text(lay) for lay in self.operands
        )
        outs = ", ".join(
            "-" if lay is None else layout_text(lay) for lay in self.results
        )
        text = f"{ins} -> {outs}" if self.operands else outs
        return f"{text} ({self.note})" if self.note else text


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """What costing a tensor needs: its global shape (None if not a ranked
    tensor) and bytes per element."""

    shape: tuple[int, ...] | None
    itemsize: int


def splittable_factors(rule: ShardingRule, op: str, reducible: bool) -> tuple[int, ...]:
    """Factors the partitioner splits locally for this op: pass-through
    factors that reach a result (or any, for an op without results), and
    reduction factors where the op's handler finishes partial results."""
    in_results = {f for t in rule.results for dim in t for f in dim}
    out = []
    for f in range(rule.num_factors):
        kind = rule.kind(f)
        through = kind is FactorKind.PASS_THROUGH
        if (through and (f in in_results or not rule.results)) or (
            kind is FactorKind.REDUCTION and reducible
        ):
            out.append(f)
    return tuple(out)


def factor_assignments(
    rule: ShardingRule, splittable: Sequence[int], mesh: MeshModel
) -> list[tuple[DimAxes, ...]]:
    """Every assignment of mesh axes to splittable factors (each axis to one
    factor or none, both orders where two axes share a factor) whose axes
    divide the factor's size; the replicated assignment first, then in a
    fixed order, duplicates removed."""
    axes = [AxisRef(a.name) for a in mesh.axes if a.size > 1]
    choices: list[int | None] = [None, *splittable]
    seen: set[tuple[DimAxes, ...]] = set()
    out: list[tuple[DimAxes, ...]] = []
    for targets in itertools.product(choices, repeat=len(axes)):
        per_factor: dict[int, list[AxisRef]] = {}
        for axis, f in zip(axes, targets, strict=True):
            if f is not None:
                per_factor.setdefault(f, []).append(axis)
        orders = [
            [(f, list(p)) for p in itertools.permutations(a)]
            for f, a in sorted(per_factor.items())
        ]
        for combo in itertools.product(*orders):
            factors: list[list[AxisRef]] = [[] for _ in range(rule.num_factors)]
            valid = True
            for f, ordered in combo:
                if rule.sizes[f] % span(ordered, mesh):
                    valid = False
                    break
                factors[f] = ordered
            if not valid:
                continue
            keep_compound_dims_valid(rule, factors, mesh)
            key = tuple(tuple(f) for f in factors)
            if key not in seen:
                seen.add(key)
                out.append(key)
    return out


def op_strategies(
    rule: ShardingRule,
    splittable: Sequence[int],
    operands: Sequence[TensorInfo],
    results: Sequence[TensorInfo],
    work: tuple[float, float],
    mesh: MeshModel,
    cost: CostModel,
    slow: Efficiency = PLAIN,
) -> list[Strategy]:
    """The op's strategies (the replicated one first). `work`: the op's
    FLOPs and bytes touched on global shapes; `slow`: what slows it on its
    per-device blocks (`cost.Efficiency`)."""
    flops, nbytes = work
    out: list[Strategy] = []
    for factors in factor_assignments(rule, splittable, mesh):
        ways = math.prod(a.full_size(mesh) for f in factors for a in f)
        ins = tuple(
            None if t.shape is None else project(dims, factors, mesh)
            for dims, t in zip(rule.operands, operands, strict=True)
        )
        outs = tuple(
            None if t.shape is None else project(dims, factors, mesh)
            for dims, t in zip(rule.results, results, strict=True)
        )
        more_flops = more_bytes = 1.0
        if slow is not PLAIN:
            tensors = [(t.shape, t.itemsize) for t in (*operands, *results)]
            blocks = local_blocks(tensors, (*ins, *outs), mesh)
            more_flops, more_bytes = slow.scale(cost, blocks)
        compute = cost.compute_seconds(
            flops * more_flops / ways, nbytes * more_bytes / ways
        )
        order = out_of_order((*ins, *outs), mesh)
        partial = tuple(
            a
            for f in range(rule.num_factors)
            if rule.kind(f) is FactorKind.REDUCTION
            for a in factors[f]
        )
        if not partial:
            out.append(Strategy(factors, ins, outs, compute + order, 0.0))
            continue
        out.extend(
            _reduced(factors, ins, outs, results, partial, compute + order, mesh, cost)
        )
    return out


def _reduced(
    factors: tuple[DimAxes, ...],
    ins: tuple[Layout | None, ...],
    outs: tuple[Layout | None, ...],
    results: Sequence[TensorInfo],
    partial: DimAxes,
    compute: float,
    mesh: MeshModel,
    cost: CostModel,
) -> list[Strategy]:
    """A strategy whose results are partial over `partial`: all-reduced, or
    (one result) reduce-scattered onto a dim the axes divide."""
    names = ",".join(a.name for a in partial)
    bytes_only = cost.without_latency()
    seconds = latency = 0.0
    nbytes = 0
    for lay, t in zip(outs, results, strict=True):
        if lay is not None and t.shape is not None:
            full = reshard_seconds(lay, lay, t.shape, t.itemsize, mesh, partial, cost)
            seconds += full
            latency += full - reshard_seconds(
                lay, lay, t.shape, t.itemsize, mesh, partial, bytes_only
            )
            nbytes += local_bytes(t.shape, lay, t.itemsize, mesh)
    if not cost.shares_launch("all-reduce", nbytes):
        latency = 0.0
    note = f"all-reduce over {names}"
    found = [
        Strategy(factors, ins, outs, compute, seconds, note, "all-reduce", latency)
    ]
    if len(outs) != 1 or outs[0] is None or results[0].shape is None:
        return found
    lay, shape = outs[0], results[0].shape
    for d, n in enumerate(shape):
        scattered = (*lay[d], *partial)
        if n % span(scattered, mesh):
            continue
        dst = tuple(scattered if k == d else axes for k, axes in enumerate(lay))
        size = results[0].itemsize
        seconds = reshard_seconds(lay, dst, shape, size, mesh, partial, cost)
        latency = seconds - reshard_seconds(
            lay, dst, shape, size, mesh, partial, bytes_only
        )
        note = f"reduce-scatter over {names} onto dim {d}"
        # the scattered dim's order on top of the operands' and results'
        order = out_of_order((dst,), mesh) - out_of_order((lay,), mesh)
        found.append(
            Strategy(
                factors,
                ins,
                (dst,),
                compute + order,
                seconds,
                note,
                "reduce-scatter",
                latency,
            )
        )
    return found


def tensor_layouts(shape: tuple[int, ...], mesh: MeshModel) -> list[Layout]:
    """Every layout of a tensor over the mesh's whole axes whose axes divide
    their dims; replicated first."""
    rank = len(shape)
    rule = ShardingRule(shape, (tuple((d,) for d in range(rank)),), ())
    return [
        tuple(factors) for factors in factor_assignments(rule, tuple(range(rank)), mesh)
    ]


def local_bytes(
    shape: tuple[int, ...], layout: Layout, itemsize: int, mesh: MeshModel
) -> int:
    """Bytes of one device's block."""
    return itemsize * math.prod(
        -(-n // span(axes, mesh)) for n, axes in zip(shape, layout, strict=True)
    )
