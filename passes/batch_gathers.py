"""Gathers and scatters that index a dim by its own position become batched.

`x[jnp.arange(n), labels]` (a loss picking each row's label, a Q-value per
action) lowers to a gather whose index vector holds two components: an iota
along the index's batch dim and the labels. To propagation that iota is
data, so the operand's row dim is an indexed (collapsed) dim, a factor of
its own: with the rows split by the batch, the operand and the indices
conflict over the axis, and the partitioner gathers the whole operand. The
iota says more: row i reads operand row i. Written as a batched gather
(`operand_batching_dims` / `start_indices_batching_dims`, same result),
the operand's row and the index's batch dim are one factor, so a batch
split stays local.

Matched: an index vector built by `stablehlo.concatenate` along the index
vector dim, one of whose pieces counts along one of its dims over the
whole dim: an iota, jax's negative-index normalization of one
(`select(iota < 0, iota + n, iota)`, which picks the iota: it is never
negative), and `broadcast_in_dim`s and unit-dim `reshape`s of those that
keep the counted dim whole (`x[arange(b)[:, None], arange(s), labels]`
counts along two dims, one a round), whose
varying dim becomes an index batch dim of the operand dim's full length,
where that operand dim is collapsed with slice size 1 and is not batched
yet. The scatter that is such a gather's gradient (`jax.grad` of the loss
above: a scatter-add of each row's gradient at the same index vector;
`x.at[jnp.arange(n), labels].add(v)` too) is the same match on its indices
(an inserted window dim has size 1): written as a batched scatter, each
device adds into its own rows instead of gathering the indices and
combining replicated results. Not Shardy's: meshjit's own, run by
`meshjit.jit` and `spmd-pipeline` before propagation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from meshjit.compiler.diagnostics import Diagnostics
from meshjit.compiler.graph import (
    Graph,
    Node,
    invalidate_graphs,
    op_handles,
    read_graph,
)
from meshjit.compiler.ir import ir
from meshjit.compiler.op_info import op_info
from meshjit.compiler.pass_base import ModulePass

__all__ = ["BatchGathersPass", "Batching", "plan_batching"]


@dataclass(frozen=True, slots=True)
class Batching:
    """One gather's rewrite: index vector component `component` (an iota
    along index dim `index_dim`, operand `piece` of the concatenate that
    builds the index vector) becomes the batching of operand dim
    `operand_dim`."""

    node: int
    component: int
    operand_dim: int
    index_dim: int
    piece: int


def _producer(graph: Graph, vid: int) -> Node | None:
    owner = graph.value(vid).owner
    return graph.node(owner) if owner >= 0 else None


def _iota_dim(graph: Graph, vid: int) -> int | None:
    """The dim along which value `vid` counts 0, 1, 2, ... over its whole
    length (an iota; jax's normalization of one for negative indices;
    a broadcast or a reshape of one that keeps that dim whole), else None."""
    node = _producer(graph, vid)
    if node is None:
        return None
    if node.op == "stablehlo.select":
        pred, _, picked = node.operands
        test = _producer(graph, pred)
        if (
            test is None
            or test.op != "stablehlo.compare"
            or test.attrs.get("comparison_direction") != "LT"
            or test.operands[0] != picked
            or not _is_zero(graph, test.operands[1])
        ):
            return None
        return _iota_dim(graph, picked)
    value = graph.value(vid)
    if node.op in ("stablehlo.broadcast_in_dim", "stablehlo.reshape"):
        source = graph.value(node.operands[0]).shape
        counting = _iota_dim(graph, node.operands[0])
        if counting is None or source is None or value.shape is None:
            return None
        return _carried(node, counting, source, value.shape)
    dim = node.attrs.get("iota_dimension")
    if node.op != "stablehlo.iota" or not isinstance(dim, int) or not value.shape:
        return None
    # an iota of a narrow integer type wraps past its largest value
    bits = re.fullmatch(r"u?i(\d+)", value.dtype)
    if bits is None or value.shape[dim] > 1 << (int(bits.group(1)) - 1):
        return None
    return dim


def _carried(
    node: Node, counting: int, source: tuple[int, ...], shape: tuple[int, ...]
) -> int | None:
    """Where broadcast or reshape `node` puts its operand's dim `counting`
    whole, else None (a reshape only adds or drops unit dims)."""
    if node.op == "stablehlo.broadcast_in_dim":
        attr = node.attrs.get("broadcast_dimensions")
        if not isinstance(attr, tuple) or counting >= len(attr):
            return None
        target = attr[counting]
        if not isinstance(target, int) or source[counting] != shape[target]:
            return None
        return target
    if [s for s in source if s != 1] != [s for s in shape if s != 1]:
        return None
    if source[counting] == 1:
        return None
    k = sum(1 for d in range(counting) if source[d] != 1)
    return [d for d, s in enumerate(shape) if s != 1][k]


def _is_zero(graph: Graph, vid: int) -> bool:
    node = _producer(graph, vid)
    while node is not None and node.op == "stablehlo.broadcast_in_dim":
        node = _producer(graph, node.operands[0])
    if node is None or node.op != "stablehlo.constant":
        return False
    return getattr(node.attrs.get("value"), "splat", None) == 0


@dataclass(frozen=True, slots=True)
class _Names:
    """Where a gather or a scatter keeps what the match reads: its dimension
    numbers attribute and fields, and the position of its indices among the
    operands."""

    attr: str
    collapsed: str
    batching: str
    index_batching: str
    start_map: str
    # the start map's name in the attribute's text (the bindings read a
    # scatter's as `scattered_dims_to_operand_dims`)
    start_map_text: str


_GATHER = _Names(
    "dimension_numbers",
    "collapsed_slice_dims",
    "operand_batching_dims",
    "start_indices_batching_dims",
    "start_index_map",
    "start_index_map",
)
_SCATTER = _Names(
    "scatter_dimension_numbers",
    "inserted_window_dims",
    "input_batching_dims",
    "scatter_indices_batching_dims",
    "scattered_dims_to_operand_dims",
    "scatter_dims_to_operand_dims",
)
_NAMES = {"stablehlo.gather": _GATHER, "stablehlo.scatter": _SCATTER}


def _indices_position(node: Node) -> int:
    # a scatter's operands: its inputs, the indices, as many updates
    return 1 if node.op == "stablehlo.gather" else (len(node.operands) - 1) // 2


def plan_batching(graph: Graph, node: Node) -> Batching | None:
    """The rewrite of gather or scatter `node`, or None where it does not
    match. A gather's collapsed dims have slice size 1 and a scatter's
    inserted window dims window size 1, by the ops' definitions."""
    names = _NAMES.get(node.op)
    info = op_info(graph, node)
    if names is None or info is None:
        return None
    at = _indices_position(node)
    if node.op == "stablehlo.gather" and len(node.operands) != 2:
        return None
    operand = info.operand_shapes[0]
    indices = info.operand_shapes[at]
    vector_dim = info.struct_int(names.attr, "index_vector_dim")
    if vector_dim >= len(indices):
        return None
    start_map = info.struct_ints(names.attr, names.start_map)
    collapsed = info.struct_ints(names.attr, names.collapsed)
    batching = info.struct_ints(names.attr, names.batching)
    index_batching = info.struct_ints(names.attr, names.index_batching)
    concat = _producer(graph, node.operands[at])
    if concat is None or concat.op != "stablehlo.concatenate":
        return None
    cinfo = op_info(graph, concat)
    if cinfo is None or cinfo.int_attr("dimension") != vector_dim:
        return None
    if len(concat.operands) < 2:
        return None
    component = 0
    for k, piece in enumerate(concat.operands):
        width = graph.value(piece).shape
        assert width is not None
        if width[vector_dim] == 1:
            index_dim = _iota_dim(graph, piece)
            dim = start_map[component]
            if (
                index_dim is not None
                and index_dim != vector_dim
                and dim in collapsed
                and dim not in batching
                and index_dim not in index_batching
                and operand[dim] == indices[index_dim]
            ):
                return Batching(node.id, component, dim, index_dim, k)
        component += width[vector_dim]
    return None


def _dims(values: list[int]) -> str:
    return "[" + ", ".join(map(str, values)) + "]"


def _rewrite(graph: Graph, op: ir.Operation, plan: Batching) -> None:
    """Rewrites gather or scatter `op` in place: the iota's component leaves
    the index vector and its operand dim becomes a batching dim."""
    node = graph.node(plan.node)
    names = _NAMES[node.op]
    info = op_info(graph, node)
    assert info is not None
    at = _indices_position(node)
    vector_dim = info.struct_int(names.attr, "index_vector_dim")
    start_map = list(info.struct_ints(names.attr, names.start_map))
    del start_map[plan.component]
    collapsed = list(info.struct_ints(names.attr, names.collapsed))
    collapsed.remove(plan.operand_dim)
    pairs = sorted(
        zip(
            (*info.struct_ints(names.attr, names.batching), plan.operand_dim),
            (*info.struct_ints(names.attr, names.index_batching), plan.index_dim),
            strict=True,
        )
    )
    window = "offset_dims" if node.op == "stablehlo.gather" else "update_window_dims"
    kind = "gather" if node.op == "stablehlo.gather" else "scatter"
    text = (
        f"#stablehlo.{kind}<{window} = "
        f"{_dims(list(info.struct_ints(names.attr, window)))}, "
        f"{names.collapsed} = {_dims(collapsed)}, "
        f"{names.batching} = {_dims([a for a, _ in pairs])}, "
        f"{names.index_batching} = {_dims([b for _, b in pairs])}, "
        f"{names.start_map_text} = {_dims(start_map)}, "
        f"index_vector_dim = {vector_dim}>"
    )
    with op.location, ir.InsertionPoint(op):
        concat = op.operands[at].owner
        kept = [v for j, v in enumerate(concat.operands) if j != plan.piece]
        if len(kept) == 1:
            indices = kept[0]
        else:
            shape = list(ir.RankedTensorType(concat.result.type).shape)
            shape[vector_dim] = sum(
                ir.RankedTensorType(v.type).shape[vector_dim] for v in kept
            )
            element = ir.RankedTensorType(concat.result.type).element_type
            indices = ir.Operation.create(
                "stablehlo.concatenate",
                results=[ir.RankedTensorType.get(shape, element)],
                operands=kept,
                attributes={"dimension": concat.attributes["dimension"]},
            ).result
    op.operands[at] = indices
    op.attributes[names.attr] = ir.Attribute.parse(text)
    # the index vectors were sorted with the iota first; what remains need
    # not be (each (row, rest) index tuple is unchanged, so uniqueness holds)
    op.attributes["indices_are_sorted"] = ir.BoolAttr.get(False)
    if next(iter(concat.result.uses), None) is None:
        concat.erase()


@dataclass(frozen=True)
class BatchGathersPass(ModulePass):
    """Write gathers and scatters indexed by arange(n) as batched ones."""

    name: ClassVar[str] = "batch-gathers"

    def run(self, module: ir.Module, diags: Diagnostics) -> None:
        # one iota component of an op a round: an index vector with several
        # (`x[arange(b)[:, None], arange(s), labels]`) takes one round each
        for _ in range(_MAX_ROUNDS):
            graph = read_graph(module, diags.source_name)
            plans = [
                plan
                for node in graph.nodes
                if node.op in _NAMES
                and (plan := plan_batching(graph, node)) is not None
            ]
            if not plans:
                return
            handles = op_handles(module)
            for plan in plans:
                _rewrite(graph, handles[plan.node], plan)
            invalidate_graphs(module)


# an index vector with more iota components than this is left partly as is
_MAX_ROUNDS = 8
