"""Gathers that index a dim by its own position become batched gathers.

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
vector dim, one of whose pieces is `broadcast_in_dim` or `reshape` of an
iota (or of jax's negative-index normalization of one, `select(iota < 0,
iota + n, iota)`, which picks the iota: it is never negative), whose
varying dim becomes an index batch dim of the operand dim's full length,
where that operand dim is collapsed with slice size 1 and is not batched
yet. Not Shardy's: meshjit's own, run by `meshjit.jit` and `spmd-pipeline`
before propagation.
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

_DN = "dimension_numbers"


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
    """The dim along which value `vid` counts 0, 1, 2, ... (an iota, or
    jax's normalization of one for negative indices), else None."""
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
    dim = node.attrs.get("iota_dimension")
    value = graph.value(vid)
    if node.op != "stablehlo.iota" or not isinstance(dim, int) or not value.shape:
        return None
    # an iota of a narrow integer type wraps past its largest value
    bits = re.fullmatch(r"u?i(\d+)", value.dtype)
    if bits is None or value.shape[dim] > 1 << (int(bits.group(1)) - 1):
        return None
    return dim


def _is_zero(graph: Graph, vid: int) -> bool:
    node = _producer(graph, vid)
    while node is not None and node.op == "stablehlo.broadcast_in_dim":
        node = _producer(graph, node.operands[0])
    if node is None or node.op != "stablehlo.constant":
        return False
    return getattr(node.attrs.get("value"), "splat", None) == 0


def _piece_batch_dim(graph: Graph, vid: int, vector_dim: int) -> int | None:
    """The index dim along which piece `vid` (one component wide along
    `vector_dim`) counts 0, 1, 2, ... over the whole dim, else None."""
    node = _producer(graph, vid)
    if node is None:
        return None
    shape = graph.value(vid).shape
    source = graph.value(node.operands[0]).shape if node.operands else None
    if shape is None or source is None:
        return None
    if node.op == "stablehlo.broadcast_in_dim":
        attr = node.attrs.get("broadcast_dimensions")
        if not isinstance(attr, tuple):
            return None
        dims = tuple(d for d in attr if isinstance(d, int))
    elif node.op == "stablehlo.reshape":
        # only a unit dim inserted at the vector dim
        if list(source) != [s for d, s in enumerate(shape) if d != vector_dim]:
            return None
        dims = tuple(d if d < vector_dim else d + 1 for d in range(len(source)))
    else:
        return None
    counting = _iota_dim(graph, node.operands[0])
    if counting is None:
        return None
    target = dims[counting]
    if target == vector_dim or source[counting] != shape[target]:
        return None
    return target


def plan_batching(graph: Graph, node: Node) -> Batching | None:
    """The rewrite of gather `node`, or None where it does not match."""
    info = op_info(graph, node)
    if info is None or len(node.operands) != 2:
        return None
    operand = info.operand_shapes[0]
    indices = info.operand_shapes[1]
    vector_dim = info.struct_int(_DN, "index_vector_dim")
    if vector_dim >= len(indices):
        return None
    start_map = info.struct_ints(_DN, "start_index_map")
    collapsed = info.struct_ints(_DN, "collapsed_slice_dims")
    batching = info.struct_ints(_DN, "operand_batching_dims")
    index_batching = info.struct_ints(_DN, "start_indices_batching_dims")
    sizes = info.int_array("slice_sizes")
    concat = _producer(graph, node.operands[1])
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
            index_dim = _piece_batch_dim(graph, piece, vector_dim)
            dim = start_map[component]
            if (
                index_dim is not None
                and dim in collapsed
                and dim not in batching
                and index_dim not in index_batching
                and sizes[dim] == 1
                and operand[dim] == indices[index_dim]
            ):
                return Batching(node.id, component, dim, index_dim, k)
        component += width[vector_dim]
    return None


def _dims(values: list[int]) -> str:
    return "[" + ", ".join(map(str, values)) + "]"


def _rewrite(graph: Graph, op: ir.Operation, plan: Batching) -> None:
    node = graph.node(plan.node)
    info = op_info(graph, node)
    assert info is not None
    vector_dim = info.struct_int(_DN, "index_vector_dim")
    start_map = list(info.struct_ints(_DN, "start_index_map"))
    del start_map[plan.component]
    collapsed = list(info.struct_ints(_DN, "collapsed_slice_dims"))
    collapsed.remove(plan.operand_dim)
    pairs = sorted(
        zip(
            (*info.struct_ints(_DN, "operand_batching_dims"), plan.operand_dim),
            (*info.struct_ints(_DN, "start_indices_batching_dims"), plan.index_dim),
            strict=True,
        )
    )
    text = (
        "#stablehlo.gather<offset_dims = "
        f"{_dims(list(info.struct_ints(_DN, 'offset_dims')))}, "
        f"collapsed_slice_dims = {_dims(collapsed)}, "
        f"operand_batching_dims = {_dims([a for a, _ in pairs])}, "
        f"start_indices_batching_dims = {_dims([b for _, b in pairs])}, "
        f"start_index_map = {_dims(start_map)}, index_vector_dim = {vector_dim}>"
    )
    with op.location, ir.InsertionPoint(op):
        concat = op.operands[1].owner
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
        # the index vectors were sorted with the iota first; what remains
        # need not be
        attrs = {"slice_sizes": op.attributes["slice_sizes"]}
        attrs["indices_are_sorted"] = ir.BoolAttr.get(False)
        attrs[_DN] = ir.Attribute.parse(text)
        new = ir.Operation.create(
            "stablehlo.gather",
            results=[op.result.type],
            operands=[op.operands[0], indices],
            attributes=attrs,
        )
    op.result.replace_all_uses_with(new.result)
    op.erase()
    if next(iter(concat.result.uses), None) is None:
        concat.erase()


@dataclass(frozen=True)
class BatchGathersPass(ModulePass):
    """Write gathers indexed by arange(n) along a batch dim as batched gathers."""

    name: ClassVar[str] = "batch-gathers"

    def run(self, module: ir.Module, diags: Diagnostics) -> None:
        graph = read_graph(module, diags.source_name)
        plans = [
            plan
            for node in graph.nodes
            if node.op == "stablehlo.gather"
            and (plan := plan_batching(graph, node)) is not None
        ]
        if not plans:
            return
        handles = op_handles(module)
        for plan in plans:
            _rewrite(graph, handles[plan.node], plan)
        invalidate_graphs(module)
