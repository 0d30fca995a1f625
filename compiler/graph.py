"""A module read once into a compact Python graph, and results written back once.

Nodes and values hold plain Python data (ids, shapes, dtypes, attributes converted
to Python values, source locations); no `ir.Operation` or `ir.Value` outlives
`read_graph`. Region bodies are nested blocks of node ids. Passes compute new data
from the graph and hand an `AttrPlan` to `write_attrs`, which walks the module in the
same order as `read_graph` and applies it in one sweep.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple, TypeAlias

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from meshjit.compiler.diagnostics import (
    Diagnostic,
    DiagnosticError,
    Severity,
    SourceLoc,
    parse_loc_text,
)
from meshjit.errors import InternalError


@dataclass(frozen=True, slots=True)
class Opaque:
    """An attribute meshjit keeps as its printed text (e.g. `#sdy.sharding<...>`)."""

    text: str


@dataclass(frozen=True, slots=True)
class SymbolRef:
    name: str


@dataclass(frozen=True, slots=True)
class TypeRef:
    text: str


@dataclass(frozen=True, slots=True)
class DenseElements:
    """A dense constant: its shape and element type, and its value when a splat.

    Integer constants that are not splats keep their elements (row-major) when
    there are at most `_MAX_INT_ELEMENTS` of them: padding and index attributes.
    """

    shape: tuple[int, ...]
    dtype: str
    splat: bool | int | float | None
    values: tuple[int, ...] | None = None


AttrValue: TypeAlias = (
    bool
    | int
    | float
    | str
    | Opaque
    | SymbolRef
    | TypeRef
    | DenseElements
    | tuple["AttrValue", ...]
    | Mapping[str, "AttrValue"]
    | None
)

_STRUCT_ATTRS: tuple[tuple[type, tuple[str, ...]], ...] = (
    (
        stablehlo.DotDimensionNumbers,
        (
            "lhs_batching_dimensions",
            "rhs_batching_dimensions",
            "lhs_contracting_dimensions",
            "rhs_contracting_dimensions",
        ),
    ),
    (
        stablehlo.GatherDimensionNumbers,
        (
            "offset_dims",
            "collapsed_slice_dims",
            "operand_batching_dims",
            "start_indices_batching_dims",
            "start_index_map",
            "index_vector_dim",
        ),
    ),
    (
        stablehlo.ScatterDimensionNumbers,
        (
            "update_window_dims",
            "inserted_window_dims",
            "input_batching_dims",
            "scatter_indices_batching_dims",
            "scattered_dims_to_operand_dims",
            "index_vector_dim",
        ),
    ),
    (
        stablehlo.ConvDimensionNumbers,
        (
            "input_batch_dimension",
            "input_feature_dimension",
            "input_spatial_dimensions",
            "kernel_input_feature_dimension",
            "kernel_output_feature_dimension",
            "kernel_spatial_dimensions",
            "output_batch_dimension",
            "output_feature_dimension",
            "output_spatial_dimensions",
        ),
    ),
)
_ENUM_ATTRS: tuple[type, ...] = (
    stablehlo.ComparisonDirectionAttr,
    stablehlo.ComparisonTypeAttr,
    stablehlo.PrecisionAttr,
    stablehlo.FftTypeAttr,
    stablehlo.RngAlgorithmAttr,
    stablehlo.RngDistributionAttr,
    stablehlo.TransposeAttr,
)
_DENSE_ARRAYS = (
    ir.DenseI64ArrayAttr,
    ir.DenseI32ArrayAttr,
    ir.DenseI16ArrayAttr,
    ir.DenseI8ArrayAttr,
    ir.DenseBoolArrayAttr,
    ir.DenseF32ArrayAttr,
    ir.DenseF64ArrayAttr,
)


def _plain(v: object) -> AttrValue:
    if isinstance(v, bool | int | float | str):
        return v
    return tuple(int(x) for x in v)  # type: ignore[attr-defined]


def convert_attr(attr: ir.Attribute) -> AttrValue:
    """An MLIR attribute as a plain Python value; unknown kinds stay `Opaque` text."""
    if isinstance(attr, ir.BoolAttr):
        return bool(attr.value)
    if isinstance(attr, ir.IntegerAttr):
        return int(attr.value)
    if isinstance(attr, ir.FloatAttr):
        return float(attr.value)
    if isinstance(attr, ir.StringAttr):
        try:
            return str(attr.value)
        except (RuntimeError, UnicodeDecodeError):  # bytes, not UTF-8 text
            return Opaque(str(attr))  # (jax's callback pointers, printed escaped)
    if isinstance(attr, _DENSE_ARRAYS):
        return tuple(attr)
    if isinstance(attr, ir.ArrayAttr):
        return tuple(convert_attr(a) for a in attr)
    if isinstance(attr, ir.DictAttr):
        return MappingProxyType(
            {attr[i].name: convert_attr(attr[i].attr) for i in range(len(attr))}
        )
    if isinstance(attr, ir.UnitAttr):
        return True
    if isinstance(attr, ir.FlatSymbolRefAttr):
        return SymbolRef(str(attr.value))
    if isinstance(attr, ir.TypeAttr):
        return TypeRef(str(attr.value))
    if isinstance(attr, ir.DenseElementsAttr):
        return _dense(attr)
    for cls, fields in _STRUCT_ATTRS:
        if cls.isinstance(attr):  # type: ignore[attr-defined]
            obj = cls(attr)
            return MappingProxyType({f: _plain(getattr(obj, f)) for f in fields})
    for cls in _ENUM_ATTRS:
        if cls.isinstance(attr):  # type: ignore[attr-defined]
            return str(cls(attr).value)
    return Opaque(str(attr))


def _dense(attr: ir.DenseElementsAttr) -> DenseElements:
    shaped = attr.type
    shape = tuple(int(d) for d in shaped.shape)  # type: ignore[attr-defined]
    dtype = str(shaped.element_type)  # type: ignore[attr-defined]
    splat: bool | int | float | None = None
    values: tuple[int, ...] | None = None
    if attr.is_splat:
        text = str(attr.get_splat_value())
        value = text.split(":", 1)[0].strip()
        splat = _number(value)
    elif isinstance(attr, ir.DenseIntElementsAttr) and len(attr) <= _MAX_INT_ELEMENTS:
        values = tuple(int(attr[i]) for i in range(len(attr)))
    return DenseElements(shape, dtype, splat, values)


_MAX_INT_ELEMENTS = 4096
_MISSING = object()
_NO_TEXT: Mapping[str, str] = MappingProxyType({})


def _number(text: str) -> bool | int | float | None:
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


class Value(NamedTuple):
    """An SSA value: an op result (owner = node id) or a block argument (owner = -1).

    A named tuple (immutable, and several times cheaper to create than a
    frozen dataclass: a module has one per SSA value)."""

    id: int
    type: str  # printed MLIR type: "tensor<8x16xf32>"
    shape: tuple[int, ...] | None  # None unless a ranked tensor; dynamic dims are -1
    dtype: str  # element type ("f32"), "" unless a shaped type
    owner: int
    # result number, or block-argument number (shadows tuple.index, unused here)
    index: int  # type: ignore[assignment]
    loc: SourceLoc

    @property
    def rank(self) -> int:
        return -1 if self.shape is None else len(self.shape)


class Block(NamedTuple):
    args: tuple[int, ...]  # value ids
    nodes: tuple[int, ...]  # node ids, in order


class Node(NamedTuple):
    """One operation; `regions` hold its nested bodies as blocks of node ids."""

    id: int
    op: str  # "stablehlo.dot_general"
    operands: tuple[int, ...]  # value ids
    results: tuple[int, ...]
    attrs: Mapping[str, AttrValue]
    loc: SourceLoc
    regions: tuple[tuple[Block, ...], ...]
    parent: int  # enclosing node id; -1 for ops directly in the module body
    # Printed attributes (name -> MLIR text), kept only when `read_graph` is asked
    # to (`keep_attr_text=True`): passes that re-emit ops need the exact text.
    attr_text: Mapping[str, str] = _NO_TEXT

    def attr(self, name: str) -> AttrValue:
        return self.attrs.get(name)


@dataclass(slots=True)
class Graph:
    """The whole module: `body` is the module's block, every node reachable from it."""

    values: list[Value]
    nodes: list[Node]
    body: Block
    module_attrs: Mapping[str, AttrValue]
    source_name: str
    symbols: dict[str, int] = field(default_factory=dict)  # sym_name -> node id
    keeps_attr_text: bool = False  # read with keep_attr_text=True
    # What passes derived from this graph and may reuse while it is unchanged
    # (cleared when `write_attrs` changes it).
    memo: dict[str, object] = field(default_factory=dict)
    # Rule lookups by op content (`op_info.rule_lookup`): valid for the
    # graph's life, since the key holds what the rule reads.
    rules: dict[object, object] = field(default_factory=dict)
    _users: list[list[int]] | None = None

    def value(self, vid: int) -> Value:
        return self.values[vid]

    def node(self, nid: int) -> Node:
        return self.nodes[nid]

    def users(self, vid: int) -> list[int]:
        """Node ids that use value `vid` as an operand (computed once, on demand)."""
        if self._users is None:
            users: list[list[int]] = [[] for _ in self.values]
            for n in self.nodes:
                for v in n.operands:
                    users[v].append(n.id)
            self._users = users
        return self._users[vid]

    def funcs(self) -> Iterator[Node]:
        for nid in self.body.nodes:
            if self.nodes[nid].op == "func.func":
                yield self.nodes[nid]

    def walk(self, block: Block | None = None) -> Iterator[Node]:
        """Nodes in pre-order, region bodies after their parent op."""
        for nid in (block or self.body).nodes:
            node = self.nodes[nid]
            yield node
            for region in node.regions:
                for b in region:
                    yield from self.walk(b)


def _walk_ops(block: ir.Block) -> Iterator[ir.Operation]:
    """Operations in the same pre-order as `read_graph` numbers them."""
    for op in block.operations:
        operation = op.operation
        yield operation
        for region in operation.regions:
            for b in region.blocks:
                yield from _walk_ops(b)


def op_handles(module: ir.Module) -> list[ir.Operation]:
    """The module's operations indexed by the node ids `read_graph` gives."""
    return list(_walk_ops(module.body))


def nested_op_handles(op: ir.Operation) -> list[ir.Operation]:
    """The operations nested in `op`'s regions, in `read_graph`'s order."""
    return [o for region in op.regions for b in region.blocks for o in _walk_ops(b)]


def _shape_of(t: ir.Type) -> tuple[tuple[int, ...] | None, str]:
    if isinstance(t, ir.RankedTensorType):
        dims = tuple(
            -1 if t.is_dynamic_dim(i) else int(d) for i, d in enumerate(t.shape)
        )
        return dims, str(t.element_type)
    if isinstance(t, ir.ShapedType):
        return None, str(t.element_type)
    return None, ""


# A constant as jax writes it, and as Shardy's import (and meshjit's
# `split-constants`) rewrites it: both hold the value as `value`.
CONSTANT_OPS = frozenset(("stablehlo.constant", "sdy.constant"))


def _complex_constant(op: ir.Operation) -> bool:
    """A dense constant of complex numbers. jaxlib 0.10.2 aborts the interpreter
    when such an attribute is fetched from Python (it cannot downcast it), so
    these are read from the op's printed form instead."""
    if op.name not in CONSTANT_OPS or len(op.results) != 1:
        return False
    t = op.results[0].type
    return isinstance(t, ir.ShapedType) and "complex" in str(t.element_type)


def _constant_text(op: ir.Operation) -> str:
    """`dense<...> : tensor<...>` from `%c = stablehlo.constant dense<...> : ...`."""
    printed = str(op).split("\n", 1)[0]
    _, _, rest = printed.partition("constant ")
    return rest.strip()


# Every walk over the graph recurses per region level; past this depth input is
# rejected with a diagnostic instead of exhausting Python's stack.
MAX_REGION_DEPTH = 64


class _Reader:
    def __init__(self, source_name: str, keep_attr_text: bool) -> None:
        self.source_name = source_name
        self.keep_attr_text = keep_attr_text
        self.values: list[Value] = []
        self.nodes: list[Node | None] = []
        self.handles: list[ir.Operation] = []  # node id -> its operation
        self.ids: dict[ir.Value[ir.Type], int] = {}
        self.symbols: dict[str, int] = {}
        self.loc_cache: dict[str, SourceLoc] = {}
        self.loc_by_attr: dict[ir.Attribute, SourceLoc] = {}
        # MLIR attributes are uniqued too: equal ones convert once, and ops
        # that share an attribute share its (immutable) Python value
        self.attr_cache: dict[ir.Attribute, object] = {}
        self.attr_text_cache: dict[ir.Attribute, str] = {}
        # MLIR types are uniqued, so a type object is a key
        self.types: dict[ir.Type, tuple[str, tuple[int, ...] | None, str]] = {}
        self.depth = 0

    def loc(self, loc: ir.Location) -> SourceLoc:
        # Locations are uniqued attributes: one printed (a call-site chain of
        # JAX's can be long) and parsed once however many ops share it.
        key = loc.attr
        cached = self.loc_by_attr.get(key)
        if cached is None:
            text = str(loc)
            cached = self.loc_cache.get(text)
            if cached is None:
                cached = parse_loc_text(text, self.source_name)
                self.loc_cache[text] = cached
            self.loc_by_attr[key] = cached
        return cached

    def new_value(
        self, v: ir.Value[ir.Type], owner: int, index: int, loc: SourceLoc
    ) -> int:
        vid = len(self.values)
        t = v.type
        known = self.types.get(t)
        if known is None:  # types repeat: each distinct one is analysed once
            known = self.types[t] = (str(t), *_shape_of(t))
        text, shape, dtype = known
        self.values.append(Value(vid, text, shape, dtype, owner, index, loc))
        self.ids[v] = vid
        return vid

    def block(self, block: ir.Block, parent: int, parent_loc: SourceLoc) -> Block:
        args = tuple(
            self.new_value(a, -1, i, parent_loc) for i, a in enumerate(block.arguments)
        )
        nodes = tuple(self.op(op.operation, parent) for op in block.operations)
        return Block(args, nodes)

    def op(self, op: ir.Operation, parent: int) -> int:
        nid = len(self.nodes)
        self.nodes.append(None)  # reserve the pre-order id before nested ops
        self.handles.append(op)
        loc = self.loc(op.location)
        op_name = op.name
        ids = self.ids
        try:
            operands = tuple([ids[v] for v in op.operands])
        except KeyError:
            raise InternalError(
                f"{loc}: operand of '{op_name}' defined after its use"
            ) from None
        op_results = op.results
        new_value = self.new_value
        results = tuple([new_value(r, nid, i, loc) for i, r in enumerate(op_results)])
        if op_name in CONSTANT_OPS and _complex_constant(op):
            text = _constant_text(op)
            value = DenseElements(*_shape_of(op_results[0].type), None)  # type: ignore[arg-type]
            attrs: Mapping[str, AttrValue] = MappingProxyType({"value": value})
            attr_text: Mapping[str, str] = MappingProxyType({"value": text})
        else:
            cache = self.attr_cache
            converted: dict[str, AttrValue] = {}
            op_attrs = op.attributes
            for key in op_attrs:
                attr = op_attrs[key]
                found = cache.get(attr, _MISSING)
                if found is _MISSING:
                    found = cache[attr] = convert_attr(attr)
                converted[key] = found  # type: ignore[assignment]
            attrs = MappingProxyType(converted)
            attr_text = _NO_TEXT
            if self.keep_attr_text:
                attr_text = _attr_texts(op, self.attr_text_cache)
        op_regions = op.regions
        regions: tuple[tuple[Block, ...], ...] = ()
        if len(op_regions):
            if self.depth >= MAX_REGION_DEPTH:
                raise DiagnosticError(
                    [
                        Diagnostic(
                            Severity.ERROR,
                            loc,
                            f"'{op_name}' nests regions more than "
                            f"{MAX_REGION_DEPTH} deep; meshjit reads at most "
                            "that many levels",
                        )
                    ]
                )
            self.depth += 1
            regions = tuple(
                tuple(self.block(b, nid, loc) for b in region.blocks)
                for region in op_regions
            )
            self.depth -= 1
        name = attrs.get("sym_name")
        if isinstance(name, str) and parent == -1:
            self.symbols[name] = nid
        self.nodes[nid] = Node(
            nid, op_name, operands, results, attrs, loc, regions, parent, attr_text
        )
        return nid


class GraphSession:
    """The graphs read from one module while a pipeline runs on it.

    Passes of a pipeline read the module that the previous pass left; inside a
    session `read_graph` returns the graph already read, `write_attrs` updates
    it along with the module, and `invalidate_graphs` (passes that rebuild
    the module, upstream MLIR passes) drops it. Outside a session every
    `read_graph` walks the module.
    """

    def __init__(self, module: ir.Module) -> None:
        self.module = module
        self.graphs: dict[tuple[str, bool], Graph] = {}
        # The module's operations in node-id order, from the last read; what
        # `write_attrs` changes (attributes only) leaves them valid.
        self.handles: list[ir.Operation] | None = None
        # Attribute changes `write_attrs` made since the graphs were last
        # handed out; applied when one is read again (often none is).
        self.pending: list[
            Mapping[int, Mapping[str, tuple[AttrValue, str] | None]]
        ] = []

    def take(self, key: tuple[str, bool]) -> Graph | None:
        graph = self.graphs.get(key)
        if graph is not None and self.pending:
            for g in self.graphs.values():
                for changes in self.pending:
                    _refresh(g, changes)
            self.pending.clear()
        return graph


_SESSIONS: list[GraphSession] = []
# Whole-module walks so far (`walks()`): tests check that a compile walks once.
_WALKS = [0]


def walks() -> int:
    """How many times `read_graph` has walked a module in this process."""
    return _WALKS[0]


@contextmanager
def graph_session(module: ir.Module) -> Iterator[GraphSession]:
    session = GraphSession(module)
    _SESSIONS.append(session)
    try:
        yield session
    finally:
        _SESSIONS.remove(session)


def _sessions_of(module: ir.Module) -> list[GraphSession]:
    return [s for s in _SESSIONS if s.module is module]


def invalidate_graphs(module: ir.Module) -> None:
    """The module changed other than by `write_attrs`: forget its graphs."""
    for session in _sessions_of(module):
        session.graphs.clear()
        session.pending.clear()
        session.handles = None


def move_to_end(module: ir.Module, nids: Sequence[int]) -> None:
    """Moves the module's top-level operations `nids` (node ids of the graph
    the session holds) to the end of the module, in that order. The graphs a
    `graph_session` holds are renumbered as a new read would number them
    (walk order), so the passes after read no new one."""
    sessions = [s for s in _sessions_of(module) if s.handles is not None]
    for session in sessions:
        for key in list(session.graphs):
            session.take(key)  # attribute changes still pending, applied
    handles = sessions[0].handles if sessions else None
    ops = handles if handles is not None else op_handles(module)
    end = ir.InsertionPoint(module.body)
    for nid in nids:
        op = ops[nid]
        op.detach_from_parent()
        end.insert(op)
    moved = set(nids)
    for session in sessions:
        order: list[int] | None = None
        for key, graph in list(session.graphs.items()):
            top = [n for n in graph.body.nodes if n not in moved] + list(nids)
            session.graphs[key], order = _renumbered(graph, top)
        if order is not None and session.handles is not None:
            session.handles = [session.handles[old] for old in order]
    for session in _sessions_of(module):
        if session.handles is None:  # no operations at hand to renumber
            session.graphs.clear()
            session.pending.clear()


def _renumbered(graph: Graph, top: Sequence[int]) -> tuple[Graph, list[int]]:
    """`graph` with its top-level nodes in `top`'s order, every node and value
    renumbered in walk order as `read_graph` numbers them; and the old node
    ids in the new order."""
    node_ids: dict[int, int] = {}
    value_ids: dict[int, int] = {}
    nodes_in_order: list[int] = []
    values_in_order: list[int] = []

    def value(vid: int) -> None:
        value_ids[vid] = len(values_in_order)
        values_in_order.append(vid)

    def visit(nid: int) -> None:
        node_ids[nid] = len(nodes_in_order)
        nodes_in_order.append(nid)
        node = graph.nodes[nid]
        for r in node.results:
            value(r)
        for region in node.regions:
            for block in region:
                for a in block.args:
                    value(a)
                for inner in block.nodes:
                    visit(inner)

    for a in graph.body.args:
        value(a)
    for nid in top:
        visit(nid)
    if len(nodes_in_order) != len(graph.nodes) or len(values_in_order) != len(
        graph.values
    ):
        raise InternalError("a renumbered graph lost nodes or values")

    def block(b: Block) -> Block:
        return Block(
            tuple([value_ids[a] for a in b.args]),
            tuple([node_ids[n] for n in b.nodes]),
        )

    values = []
    for new, old in enumerate(values_in_order):
        v = graph.values[old]
        owner = node_ids[v.owner] if v.owner >= 0 else v.owner
        values.append(Value(new, v.type, v.shape, v.dtype, owner, v.index, v.loc))
    nodes = []
    for new, old in enumerate(nodes_in_order):
        n = graph.nodes[old]
        nodes.append(
            Node(
                new,
                n.op,
                tuple([value_ids[v] for v in n.operands]),
                tuple([value_ids[v] for v in n.results]),
                n.attrs,
                n.loc,
                tuple(tuple(block(b) for b in region) for region in n.regions),
                node_ids[n.parent] if n.parent >= 0 else n.parent,
                n.attr_text,
            )
        )
    renumbered = Graph(
        values,
        nodes,
        Block(
            tuple([value_ids[a] for a in graph.body.args]),
            tuple([node_ids[n] for n in top]),
        ),
        graph.module_attrs,
        graph.source_name,
        {name: node_ids[nid] for name, nid in graph.symbols.items()},
        graph.keeps_attr_text,
    )
    renumbered.rules = graph.rules  # keyed by op content, not ids
    return renumbered, nodes_in_order


def read_graph(
    module: ir.Module, source_name: str = "-", *, keep_attr_text: bool = False
) -> Graph:
    """Walks the module once; the result holds no MLIR handles.

    Values used before their definition in a graph region (not produced by JAX)
    are rejected as an internal error rather than read wrongly. Inside a
    `graph_session` the graph is shared by the passes that read it; they must
    treat it as read-only.
    """
    sessions = _sessions_of(module)
    for session in sessions:
        for keep in (keep_attr_text, True):
            found = session.take((source_name, keep))
            if found is not None:
                return found
    for session in sessions:
        # A graph read without attribute texts, its operations still at hand:
        # add the texts rather than walk the module again.
        bare = session.take((source_name, False))
        if bare is not None and session.handles is not None:
            graph = _with_attr_text(bare, session.handles)
            for s in sessions:
                s.graphs[(source_name, True)] = graph
            return graph
    graph, handles = _read(module, source_name, keep_attr_text)
    for session in sessions:
        session.graphs[(source_name, keep_attr_text)] = graph
        session.handles = handles
    return graph


def _attr_texts(
    op: ir.Operation, printed: dict[ir.Attribute, str]
) -> Mapping[str, str]:
    """The op's attributes as MLIR prints them; attributes are uniqued, so
    `printed` keeps each one's text for the next op that has it."""
    op_attrs = op.attributes
    text: dict[str, str] = {}
    for name in op_attrs:
        attr = op_attrs[name]
        shown = printed.get(attr)
        if shown is None:
            shown = printed[attr] = str(attr)
        text[name] = shown
    return MappingProxyType(text) if text else _NO_TEXT


def _with_attr_text(graph: Graph, handles: list[ir.Operation]) -> Graph:
    """`graph` (read without attribute texts) with each node's printed
    attributes, from its operation (`handles`: node id -> operation)."""
    printed: dict[ir.Attribute, str] = {}
    nodes: list[Node] = []
    for node, op in zip(graph.nodes, handles, strict=True):
        if node.attr_text:  # a complex constant keeps its value's text
            nodes.append(node)
            continue
        nodes.append(node._replace(attr_text=_attr_texts(op, printed)))
    return Graph(
        graph.values,
        nodes,
        graph.body,
        graph.module_attrs,
        graph.source_name,
        graph.symbols,
        True,
    )


def _read(
    module: ir.Module, source_name: str, keep_attr_text: bool
) -> tuple[Graph, list[ir.Operation]]:
    _WALKS[0] += 1
    reader = _Reader(source_name, keep_attr_text)
    body_op = module.operation
    body = reader.block(module.body, -1, reader.loc(body_op.location))
    module_attrs = MappingProxyType(
        {name: convert_attr(body_op.attributes[name]) for name in body_op.attributes}
    )
    nodes = [n for n in reader.nodes if n is not None]
    if len(nodes) != len(reader.nodes):
        raise InternalError("read_graph left a node unfilled")
    graph = Graph(
        reader.values,
        nodes,
        body,
        module_attrs,
        source_name,
        reader.symbols,
        keep_attr_text,
    )
    return graph, reader.handles


@dataclass(frozen=True, slots=True)
class FuncInterface:
    """A function's signature and argument/result attributes, without its body."""

    arg_types: tuple[Value, ...]  # owner -1, index = position
    result_types: tuple[Value, ...]
    arg_attrs: tuple[Mapping[str, AttrValue], ...]
    res_attrs: tuple[Mapping[str, AttrValue], ...]


@dataclass(frozen=True, slots=True)
class Interface:
    """A module's top-level symbols read without walking any function body:
    what the frontend needs between passes (meshes, @main's signature and its
    argument/result shardings) at a small fraction of `read_graph`'s cost."""

    meshes: tuple[tuple[str, Opaque], ...]  # (sym_name, the mesh attribute)
    funcs: Mapping[str, FuncInterface]


def read_interface(module: ir.Module, source_name: str = "-") -> Interface:
    reader = _Reader(source_name, False)
    meshes: list[tuple[str, Opaque]] = []
    funcs: dict[str, FuncInterface] = {}
    for top in module.body.operations:
        op = top.operation
        attrs = op.attributes
        if op.name == "sdy.mesh":
            mesh = convert_attr(attrs["mesh"])
            sym = convert_attr(attrs["sym_name"])
            if isinstance(mesh, Opaque) and isinstance(sym, str):
                meshes.append((sym, mesh))
        elif op.name == "func.func":
            name = convert_attr(attrs["sym_name"])
            ftype = ir.FunctionType(ir.TypeAttr(attrs["function_type"]).value)
            loc = reader.loc(op.location)
            inputs, results = list(ftype.inputs), list(ftype.results)
            if isinstance(name, str):
                funcs[name] = FuncInterface(
                    _signature_values(inputs, loc),
                    _signature_values(results, loc),
                    _entries(attrs, "arg_attrs", len(inputs)),
                    _entries(attrs, "res_attrs", len(results)),
                )
    return Interface(tuple(meshes), MappingProxyType(funcs))


def _signature_values(types: list[ir.Type], loc: SourceLoc) -> tuple[Value, ...]:
    out = []
    for i, t in enumerate(types):
        shape, dtype = _shape_of(t)
        out.append(Value(i, str(t), shape, dtype, -1, i, loc))
    return tuple(out)


def _entries(
    attrs: ir.OpAttributeMap, key: str, count: int
) -> tuple[Mapping[str, AttrValue], ...]:
    found = convert_attr(attrs[key]) if key in attrs else ()
    listed = found if isinstance(found, tuple) else ()
    empty: Mapping[str, AttrValue] = MappingProxyType({})
    padded = (*listed, *([empty] * (count - len(listed))))
    return tuple(e if isinstance(e, Mapping) else empty for e in padded)


@dataclass(slots=True)
class AttrPlan:
    """Attribute changes to apply in one sweep; `None` removes an attribute.

    Values are attribute text in MLIR syntax (`#sdy.sharding<@mesh, [{"x"}]>`).
    Argument and result attributes of `func.func` nodes are keyed by (node id, index).
    """

    ops: dict[int, dict[str, str | None]] = field(default_factory=dict)
    args: dict[tuple[int, int], dict[str, str | None]] = field(default_factory=dict)
    results: dict[tuple[int, int], dict[str, str | None]] = field(default_factory=dict)

    def set_op(self, nid: int, name: str, text: str | None) -> None:
        self.ops.setdefault(nid, {})[name] = text

    def set_arg(self, func: int, index: int, name: str, text: str | None) -> None:
        self.args.setdefault((func, index), {})[name] = text

    def set_result(self, func: int, index: int, name: str, text: str | None) -> None:
        self.results.setdefault((func, index), {})[name] = text

    def __bool__(self) -> bool:
        return bool(self.ops or self.args or self.results)


def _update_dict_array(
    op: ir.Operation,
    attr_name: str,
    count: int,
    changes: dict[int, dict[str, str | None]],
) -> None:
    old = op.attributes.get(attr_name, None)
    dicts: list[dict[str, ir.Attribute]] = []
    for i in range(count):
        entry: dict[str, ir.Attribute] = {}
        if old is not None:
            d = ir.DictAttr(old[i])  # type: ignore[index]
            entry = {d[j].name: d[j].attr for j in range(len(d))}
        for name, text in changes.get(i, {}).items():
            if text is None:
                entry.pop(name, None)
            else:
                entry[name] = ir.Attribute.parse(text)
        dicts.append(entry)
    op.attributes[attr_name] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in dicts])


def write_attrs(
    module: ir.Module,
    plan: AttrPlan,
    handles: Mapping[int, ir.Operation] | Sequence[ir.Operation] | None = None,
) -> None:
    """Applies `plan` to the module `read_graph` read (ids are walk order).

    Graphs a `graph_session` holds for the module are updated to what a new
    read would give. `handles`: the operations the ids stand for, where the
    module changed since it was read (the caller then invalidates graphs).
    """
    if not plan:
        return
    sessions = [] if handles is not None else _sessions_of(module)
    known = next((s.handles for s in sessions if s.handles is not None), None)
    ops: Mapping[int, ir.Operation] | Sequence[ir.Operation]
    if handles is not None:
        ops = handles
    else:
        ops = known if known is not None else list(_walk_ops(module.body))
    # Attribute texts repeat (the same sharding on every layer): each distinct
    # one is parsed, and read back for the graphs, once.
    parsed: dict[str, tuple[ir.Attribute, AttrValue, str]] = {}

    def attribute(text: str) -> tuple[ir.Attribute, AttrValue, str]:
        found = parsed.get(text)
        if found is None:
            attr = ir.Attribute.parse(text)
            found = parsed[text] = (attr, convert_attr(attr), str(attr))
        return found

    op_changes: dict[int, dict[str, tuple[AttrValue, str] | None]] = {}
    with module.context:
        for nid, changes in plan.ops.items():
            op = ops[nid]
            now = op_changes.setdefault(nid, {})
            for name, text in changes.items():
                if text is None:
                    if name in op.attributes:
                        del op.attributes[name]
                    now[name] = None
                else:
                    attr, value, printed = attribute(text)
                    op.attributes[name] = attr
                    now[name] = (value, printed)
        for key, attr_name, store in (
            ("args", "arg_attrs", plan.args),
            ("results", "res_attrs", plan.results),
        ):
            by_func: dict[int, dict[int, dict[str, str | None]]] = {}
            for (fid, index), changes in store.items():
                by_func.setdefault(fid, {})[index] = changes
            for fid, changes_by_index in by_func.items():
                op = ops[fid]
                ftype = ir.FunctionType(
                    ir.TypeAttr(op.attributes["function_type"]).value
                )
                count = len(ftype.inputs if key == "args" else ftype.results)
                _update_dict_array(op, attr_name, count, changes_by_index)
                array = op.attributes[attr_name]
                op_changes.setdefault(fid, {})[attr_name] = (
                    convert_attr(array),
                    str(array),
                )
        for session in sessions:
            if session.graphs:
                session.pending.append(op_changes)
                for graph in session.graphs.values():
                    graph.memo.clear()


def _refresh(
    graph: Graph, changes: Mapping[int, Mapping[str, tuple[AttrValue, str] | None]]
) -> None:
    """Sets the changed attributes of `graph`'s nodes (None: removed)."""
    for nid, by_name in changes.items():
        node = graph.nodes[nid]
        renamed = by_name.get("sym_name")
        if "sym_name" in by_name and node.parent == -1:
            old = node.attrs.get("sym_name")
            if isinstance(old, str) and graph.symbols.get(old) == nid:
                del graph.symbols[old]
            if renamed is not None and isinstance(renamed[0], str):
                graph.symbols[renamed[0]] = nid
        attrs = dict(node.attrs)
        text = dict(node.attr_text)
        keep_text = graph.keeps_attr_text or bool(node.attr_text)
        for name, new in by_name.items():
            if new is None:
                attrs.pop(name, None)
                text.pop(name, None)
                continue
            attrs[name] = new[0]
            if keep_text:
                text[name] = new[1]
        graph.nodes[nid] = Node(
            node.id,
            node.op,
            node.operands,
            node.results,
            MappingProxyType(attrs),
            node.loc,
            node.regions,
            node.parent,
            MappingProxyType(text) if text else _NO_TEXT,
        )
