"""Pads that only widen a window become the windowed op's own padding.

`jnp.pad(x, ((0, 0), (k - 1, 0), (0, 0)))` before a VALID convolution (a
causal convolution, as WaveNet, TCN and Mamba-style blocks write it), or
`jnp.pad(x, ..., constant_values=-jnp.inf)` before a VALID max pool, lowers
to a `stablehlo.pad` and then the windowed op. Along a split dim the pad is
data movement on its own: its result's blocks no longer line up with its
operand's (a causal pad of 7 rows shifts every block by 7), so the
partitioner moved whole blocks (or gathered them) before the window's halo
exchange. Folded into the op's padding, the op sees its real operand and its
window's halo exchange fetches only the rows the window reads: a causal
convolution over time split 8 ways exchanges a (k - 1) * dilation row halo
with one neighbour.

Folded: a `stablehlo.pad` (or a call of the private function `jnp.pad`
wraps it in, inlined first) whose value is a constant equal to what the op
pads with (zero for `stablehlo.convolution`'s input; the init value for a
one-input `stablehlo.reduce_window`), with non-negative edge padding and no
interior padding, on dims the op pads (a convolution's spatial dims, with
lhs dilation 1 there; any dim of a reduce_window, with base dilation 1
there). The pad stays for its other users, if any. XLA's algebraic
simplifier folds pads into convolutions the same way after its partitioner;
here it happens before propagation, so the partitioner sees the window. Not
Shardy's: meshjit's own, run by `meshjit.jit` and `spmd-pipeline`.

Pads of the other modes (reflect, symmetric, wrap, edge: concatenations of slices
of the value) before a convolution are rewritten by `edge_pads.py` into
concatenations of edges around the convolution's real input, which the
partitioner reads through (`partitioner/edges.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from meshjit.compiler.diagnostics import Diagnostics
from meshjit.compiler.graph import (
    Graph,
    Node,
    invalidate_graphs,
    op_handles,
    read_graph,
)
from meshjit.compiler.inline import inline_call
from meshjit.compiler.ir import ir
from meshjit.compiler.pass_base import ModulePass
from meshjit.passes.edge_pads import canonicalize_edges
from meshjit.passes.partitioner.builder import padding_attr
from meshjit.passes.partitioner.windows import ints, padding_values

__all__ = ["Fold", "FoldPadsPass", "plan_fold"]


@dataclass(frozen=True, slots=True)
class Fold:
    """Op `node`'s operand 0 (made by pad `pad`) becomes the pad's operand,
    and the op's padding becomes `padding` (one (low, high) pair per dim the
    op pads, in the order of its `padding` attribute)."""

    node: int
    pad: int
    padding: tuple[tuple[int, int], ...]


def _splat(graph: Graph, node: Node, op: ir.Operation) -> object | None:
    """A splat constant's value as a Python number (infinities too, which
    the graph's reading leaves out: MLIR prints them in hex), else None."""
    if graph.value(node.results[0]).dtype.startswith("complex"):
        text = node.attr_text.get("value", "")
        # a complex constant, which the graph keeps as printed (its
        # attribute cannot be fetched from Python)
        found = _COMPLEX.fullmatch(text)
        if found is None:
            return None
        try:
            return complex(float(found[1]), float(found[2]))
        except ValueError:  # a part printed in hex (an infinity, a NaN)
            return None
    try:
        attr = ir.DenseElementsAttr(op.attributes["value"])
    except ValueError:  # a resource or other non-inline constant
        return None
    if not attr.is_splat:
        return None
    value = attr.get_splat_value()
    if isinstance(value, ir.FloatAttr):
        return value.value
    if isinstance(value, ir.IntegerAttr):
        return value.value
    return None


def _constant(graph: Graph, vid: int, handles: Sequence[ir.Operation]) -> object | None:
    """The splat value of a constant (through broadcasts and converts, as
    `jnp.pad` converts its integer 0), else None."""
    owner = graph.value(vid).owner
    node = graph.node(owner) if owner >= 0 else None
    while node is not None and node.op in (
        "stablehlo.broadcast_in_dim",
        "stablehlo.convert",
    ):
        owner = graph.value(node.operands[0]).owner
        node = graph.node(owner) if owner >= 0 else None
    if node is None or node.op != "stablehlo.constant":
        return None
    return _splat(graph, node, handles[node.id])


def _same(a: object, b: object) -> bool:
    if a is None or b is None or isinstance(a, bool) != isinstance(b, bool):
        return False
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return False  # a NaN pad is not a NaN init: keep both as written
    return a == b


def _pad_of(graph: Graph, node: Node) -> Node | None:
    owner = graph.value(node.operands[0]).owner
    pad = graph.node(owner) if owner >= 0 else None
    return pad if pad is not None and pad.op == "stablehlo.pad" else None


def _widened(
    pad: Node, rank: int, dims: Sequence[int], dilation: Sequence[int]
) -> list[tuple[int, int]] | None:
    """The pad's (low, high) on each of `dims` where it pads only those, by
    non-negative amounts, with no interior padding and dilation 1 there."""
    low = ints(pad.attrs.get("edge_padding_low"))
    high = ints(pad.attrs.get("edge_padding_high"))
    interior = ints(pad.attrs.get("interior_padding"))
    if not len(low) == len(high) == len(interior) == rank:
        return None
    if any(interior) or min(low + high) < 0:
        return None
    if any((low[d] or high[d]) and d not in dims for d in range(rank)):
        return None
    out = []
    for k, d in enumerate(dims):
        if (low[d] or high[d]) and dilation[k] != 1:
            return None
        out.append((low[d], high[d]))
    return out if any(lo or hi for lo, hi in out) else None


def plan_fold(graph: Graph, node: Node, handles: Sequence[ir.Operation]) -> Fold | None:
    """The fold of the pad before convolution or reduce_window `node`, or
    None where there is none to fold (`handles`: the module's operations by
    node id, for constants' values)."""
    pad = _pad_of(graph, node) if node.operands else None
    if pad is None or any(a in pad.attrs for a in _SHARDING_ATTRS):
        return None  # a sharding on the pad would go with it
    shape = graph.value(pad.results[0]).shape
    if shape is None:
        return None
    rank = len(shape)
    value = _constant(graph, pad.operands[1], handles)
    if node.op == "stablehlo.convolution":
        numbers = node.attrs.get("dimension_numbers")
        dims = ints(
            numbers.get("input_spatial_dimensions")
            if isinstance(numbers, Mapping)
            else None
        )
        if not dims or not _same(value, 0):
            return None
        dilation = ints(node.attrs.get("lhs_dilation")) or (1,) * len(dims)
    elif node.op == "stablehlo.reduce_window" and len(node.operands) == 2:
        if not _same(value, _constant(graph, node.operands[1], handles)):
            return None
        dims = tuple(range(rank))
        dilation = ints(node.attrs.get("base_dilations")) or (1,) * rank
    else:
        return None
    if len(dilation) != len(dims):
        return None
    widen = _widened(pad, rank, dims, dilation)
    if widen is None:
        return None
    old = padding_values(node.attrs.get("padding"), len(dims))
    padding = tuple(
        (a + lo, b + hi) for (a, b), (lo, hi) in zip(old, widen, strict=True)
    )
    return Fold(node.id, pad.id, padding)


def _rewrite(op: ir.Operation, handles: Sequence[ir.Operation], plan: Fold) -> None:
    pad = handles[plan.pad]
    with op.location:
        op.operands[0] = pad.operands[0]
        op.attributes["padding"] = ir.Attribute.parse(padding_attr(plan.padding))
    if next(iter(pad.result.uses), None) is None:
        pad.erase()


_WINDOWED = ("stablehlo.convolution", "stablehlo.reduce_window")
_VALUE_OPS = ("stablehlo.convert", "stablehlo.constant")
_SHARDING_ATTRS = ("sdy.sharding", "mhlo.sharding")
_COMPLEX = re.compile(r"dense<\(([^,()]+),([^,()]+)\)> : .*")


def _pad_wrappers(module: ir.Module) -> dict[str, ir.Operation]:
    """Private functions whose body pads their first argument and returns
    the pad (the pad value converted from another argument or a constant),
    as `jnp.pad` wraps its `stablehlo.pad`."""
    out = {}
    for op in module.body.operations:
        func = op.operation
        if func.name != "func.func" or "sym_visibility" not in func.attributes:
            continue
        if ir.StringAttr(func.attributes["sym_visibility"]).value != "private":
            continue
        blocks = list(func.regions[0].blocks)
        signature = " ".join(
            str(func.attributes[a])
            for a in ("arg_attrs", "res_attrs")
            if a in func.attributes
        )
        if len(blocks) != 1 or any(s in signature for s in _SHARDING_ATTRS):
            continue
        ops = [o.operation for o in blocks[0].operations]
        names = [o.name for o in ops]
        if (
            names[-2:] != ["stablehlo.pad", "func.return"]
            or any(n not in _VALUE_OPS for n in names[:-2])
            or len(ops[-1].operands) != 1
            or ops[-1].operands[0] != ops[-2].result
            or ops[-2].operands[0] != blocks[0].arguments[0]
        ):
            continue
        out[ir.StringAttr(func.attributes["sym_name"]).value] = func
    return out


def _inline_pad_calls(module: ir.Module) -> bool:
    """Inlines each call of a pad wrapper whose result a convolution or
    reduce_window reads, so the pad sits beside the op; erases wrappers no
    call uses any more. Whether it inlined any."""
    wrappers = _pad_wrappers(module)
    if not wrappers:
        return False
    calls: list[ir.Operation] = []
    remaining: set[str] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.call":
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            if callee in wrappers:
                uses = [u.owner.name for u in op.results[0].uses]
                # a sharding on the call's result would go with the call
                sharded = any(a in op.attributes for a in _SHARDING_ATTRS)
                if not sharded and any(name in _WINDOWED for name in uses):
                    calls.append(op)
                else:
                    remaining.add(callee)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    inlined = set()
    with module.context, ir.Location.unknown():
        for call in calls:
            callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
            inline_call(call, wrappers[callee])
            inlined.add(callee)
    for name in inlined - remaining:
        wrappers[name].erase()
    return bool(calls)


@dataclass(frozen=True)
class FoldPadsPass(ModulePass):
    """Fold pads into convolutions' and reduce_windows' padding; edge pads as edges.

    A pad of the value the op pads with becomes the op's padding; edge
    padding (jnp.pad's reflect, symmetric, wrap, edge) before a convolution is
    written as edges around its input, which the partitioner reads
    through."""

    name: ClassVar[str] = "fold-pads"

    def run(self, module: ir.Module, diags: Diagnostics) -> None:
        if _inline_pad_calls(module) | canonicalize_edges(module):
            invalidate_graphs(module)
        graph = read_graph(module, diags.source_name)
        if not any(node.op == "stablehlo.pad" for node in graph.nodes):
            return
        handles = op_handles(module)
        plans = [
            plan
            for node in graph.nodes
            if node.op in _WINDOWED
            and (plan := plan_fold(graph, node, handles)) is not None
        ]
        for plan in plans:
            _rewrite(handles[plan.node], handles, plan)
        if plans:
            invalidate_graphs(module)
