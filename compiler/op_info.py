"""An op as its sharding rule sees it: `OpInfo` built from a graph node."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from meshjit.compiler.graph import CONSTANT_OPS, DenseElements, Graph, Node
from meshjit.dialects.rules import Lookup, OpInfo
from meshjit.dialects.stablehlo_rules import RULES

_SHARDING = "sdy.sharding"


def combiner(graph: Graph, node: Node) -> str | None:
    """The op name if the first region is exactly `r = op(arg0, arg1); return r`
    (`return r, r` in a scan: the output and the carry)."""
    if not node.regions or len(node.regions[0]) != 1:
        return None
    block = node.regions[0][0]
    if len(block.args) != 2 or len(block.nodes) != 2:
        return None
    body, ret = (graph.node(n) for n in block.nodes)
    if len(body.results) != 1 or not ret.operands:
        return None
    if any(v != body.results[0] for v in ret.operands):
        return None
    if sorted(body.operands) != sorted(block.args):
        return None
    return body.op


def _attrs(node: Node) -> Mapping[str, object]:
    """Attributes with integer dense constants (padding, ...) as flat tuples."""
    if not any(
        isinstance(v, DenseElements) and v.values is not None
        for v in node.attrs.values()
    ):
        return node.attrs
    attrs: dict[str, object] = dict(node.attrs)
    for name, value in node.attrs.items():
        if isinstance(value, DenseElements) and value.values is not None:
            attrs[name] = value.values
    return MappingProxyType(attrs)


def scalar_constant(graph: Graph, vid: int) -> int | float | bool | None:
    """The value of `vid` where a scalar constant (StableHLO's or Shardy's)
    defines it, else None."""
    owner = graph.values[vid].owner
    if owner < 0 or graph.nodes[owner].op not in CONSTANT_OPS:
        return None
    value = graph.nodes[owner].attrs.get("value")
    if isinstance(value, DenseElements) and value.shape == ():
        return value.splat
    return None


def _scalar_constants(graph: Graph, node: Node) -> list[tuple[int, int | float | bool]]:
    """(index, value) of each operand a scalar splat constant defines."""
    out: list[tuple[int, int | float | bool]] = []
    for i, vid in enumerate(node.operands):
        value = scalar_constant(graph, vid)
        if value is not None:
            out.append((i, value))
    return out


def _constant_operands(graph: Graph, node: Node) -> Mapping[int, int | float | bool]:
    return MappingProxyType(dict(_scalar_constants(graph, node)))


def op_info(graph: Graph, node: Node) -> OpInfo | None:
    """The node as a rule sees it; None when a tensor is unranked or dynamic."""
    operand_shapes = []
    for vid in node.operands:
        shape = graph.value(vid).shape
        if shape is None or any(s < 0 for s in shape):
            return None
        operand_shapes.append(shape)
    result_shapes = []
    for vid in node.results:
        shape = graph.value(vid).shape
        if shape is None or any(s < 0 for s in shape):
            return None
        result_shapes.append(shape)
    return OpInfo(
        name=node.op,
        operand_shapes=tuple(operand_shapes),
        result_shapes=tuple(result_shapes),
        operand_dtypes=tuple(graph.value(v).dtype for v in node.operands),
        result_dtypes=tuple(graph.value(v).dtype for v in node.results),
        attrs=_attrs(node),
        constant_operands=_constant_operands(graph, node),
        combiner=combiner(graph, node),
        result_users=_result_users(graph, node),
    )


_CUSTOM_CALL = "stablehlo.custom_call"
_NO_USERS: frozenset[str] = frozenset()


def _result_users(graph: Graph, node: Node) -> frozenset[str]:
    """The ops using a custom call's results (`OpInfo.result_users`)."""
    if node.op != _CUSTOM_CALL:
        return _NO_USERS
    return frozenset(graph.node(u).op for v in node.results for u in graph.users(v))


def rule_lookup(graph: Graph, node: Node) -> Lookup | None:
    """`RULES.lookup(op_info(graph, node))`, None where `op_info` is None;
    memoized per graph, shared by every pass that reads it (propagation, the
    partitioner, auto-sharding): a model's repeated layers are looked up
    once. The key holds everything `op_info` reads: the op, operand and
    result types, the attributes (by identity: the graph reader shares one
    Python value per distinct MLIR attribute; the memo keeps them alive so an
    identity is never reused), scalar constant operands, the combiner and
    (custom calls) the ops using the results."""
    values = graph.values
    attrs = tuple([(k, v) for k, v in node.attrs.items() if k != _SHARDING])
    key = (
        node.op,
        tuple([values[v].type for v in node.operands]),
        tuple([values[v].type for v in node.results]),
        tuple([(k, id(v)) for k, v in attrs]),
        tuple(_scalar_constants(graph, node)),
        combiner(graph, node) if node.regions else None,
        _result_users(graph, node) if node.op == _CUSTOM_CALL else None,
    )
    hit = graph.rules.get(key)
    if hit is not None:
        return hit[0]  # type: ignore[index,no-any-return]
    info = op_info(graph, node)
    found = RULES.lookup(info) if info is not None else None
    graph.rules[key] = (found, attrs)
    return found
