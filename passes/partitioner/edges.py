"""Windows over edge pieces: a convolution whose input is its real operand
with a few rows concatenated on each side along a split dim.

`jnp.pad(x, ..., mode="reflect")` (also "symmetric", "edge", "wrap") before
a VALID convolution, as CycleGAN- and pix2pix-style generators write it,
builds the padded input by concatenating slices of `x` around it. Along a
split dim that concatenation is data movement: its result is longer than
`x`, so its blocks no longer line up with the convolution's output blocks
(66 rows over 8 devices: blocks of 9, while each output block of 8 reads
rows 8i..8i+10), and the window's halo exchange ran on misaligned blocks or
gathered the dim. XLA's partitioner does the same.

Read through instead, the convolution runs on the core (the big piece) as
if padded by the edge pieces' lengths: its window's halo exchange is the one
a SAME convolution of the core has, and where a device's window reaches
past the core, the positions hold the edge pieces (small: each device takes
them whole) instead of zeros. The concatenation is never made. Two forms:

- `concatenate(lo..., core, hi...)` along the split dim;
- a grid: `concatenate(column_1, ..., column_m)` along another dim, whole
  there, each column such a concatenation along the split dim with the same
  edge lengths (a pad of two dims, once `fold-pads` has moved the slices and
  reverses of the second pad into the first's pieces): the core is the
  columns' cores side by side.

A concatenation some other op reads too is made when that op asks for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from meshjit.compiler.graph import Node
from meshjit.dialects.reshard import DimAxes, Layout
from meshjit.passes.partitioner.builder import Ty, Val
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.halo import WindowPlan
from meshjit.passes.partitioner.layouts import span
from meshjit.passes.partitioner.windows import ints, window_start

__all__ = [
    "Column",
    "EdgeParts",
    "absorbed",
    "core_value",
    "edge_parts",
    "fill_edges",
    "whole_edges",
]


@dataclass(frozen=True, slots=True)
class Column:
    """Pieces along the split dim: `lo` values, the core, `hi` values."""

    lo: tuple[int, ...]
    core: int
    hi: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EdgeParts:
    """A convolution input read through as edges around a core."""

    value: int  # the concatenation (the convolution's operand 0)
    dim: int  # the split dim the edges are along
    low: int  # elements of edge before the core along `dim`
    high: int
    size: int  # the core's elements along `dim`
    columns: tuple[Column, ...]
    across: int  # the dim the columns are side by side along (-1: one column)
    column_values: tuple[int, ...] = ()  # a grid's columns (concatenations)

    @property
    def concats(self) -> tuple[int, ...]:
        """The concatenations read through (never made)."""
        return (self.value, *self.column_values)


def _concat(ctx: PartitionCtx, vid: int) -> Node | None:
    owner = ctx.graph.value(vid).owner
    node = ctx.graph.node(owner) if owner >= 0 else None
    if node is None or node.op != "stablehlo.concatenate":
        return None
    return node


def _column(ctx: PartitionCtx, vid: int, dim: int) -> tuple[Column, int, int] | None:
    """The value as (edges, core, edges) along `dim`, with the edges'
    lengths, or None: a concatenation along `dim` with one piece longer than
    twice all the others together."""
    node = _concat(ctx, vid)
    if node is None or node.attrs.get("dimension") != dim or len(node.operands) < 2:
        return None
    sizes = [(ctx.graph.value(v).shape or ())[dim] for v in node.operands]
    core = max(range(len(sizes)), key=lambda i: sizes[i])
    edges = sum(sizes) - sizes[core]
    if 2 * edges >= sizes[core]:
        return None
    ops = node.operands
    column = Column(tuple(ops[:core]), ops[core], tuple(ops[core + 1 :]))
    return column, sum(sizes[:core]), sum(sizes[core + 1 :])


def edge_parts(ctx: PartitionCtx, node: Node) -> EdgeParts | None:
    """How convolution `node` reads its operand 0 through edge pieces along
    a spatial dim its layout splits (lhs dilation 1, no reversal there), or
    None."""
    if ctx.memory is not None or not node.operands:
        return None
    vid = node.operands[0]
    if node.operands.count(vid) > 1:
        return None
    numbers = node.attrs.get("dimension_numbers")
    if not isinstance(numbers, Mapping):
        return None
    spatial = ints(numbers.get("input_spatial_dimensions"))
    dilation = ints(node.attrs.get("lhs_dilation")) or (1,) * len(spatial)
    reversal = node.attrs.get("window_reversal")
    flipped = ints(reversal) if isinstance(reversal, tuple) else (0,) * len(spatial)
    layout = ctx.layout(vid)
    top = _concat(ctx, vid)
    if top is None or top.parent != node.parent:
        return None
    for s, dim in enumerate(spatial):
        if not layout[dim] or dilation[s] != 1 or flipped[s]:
            continue
        ways = span(layout[dim], ctx.mesh)
        found = _column(ctx, vid, dim)
        if found is not None:
            column, low, high = found
            size = (ctx.graph.value(column.core).shape or ())[dim]
            if size % ways == 0:
                return EdgeParts(vid, dim, low, high, size, (column,), -1)
            continue
        across = top.attrs.get("dimension")
        if not isinstance(across, int) or across == dim or layout[across]:
            continue
        columns = []
        made = []
        for piece in top.operands:
            found = _column(ctx, piece, dim)
            owner = ctx.graph.value(piece).owner
            if found is None or ctx.graph.users(piece) != [top.id]:
                break
            if ctx.graph.node(owner).parent != node.parent:
                break
            columns.append(found)
            made.append(piece)
        else:
            ends = {(low, high) for _, low, high in columns}
            if len(ends) != 1:
                continue
            ((low, high),) = ends
            size = (ctx.graph.value(columns[0][0].core).shape or ())[dim]
            if size % ways:
                continue
            return EdgeParts(
                vid,
                dim,
                low,
                high,
                size,
                tuple(c for c, _, _ in columns),
                across,
                tuple(made),
            )
    return None


def absorbed(ctx: PartitionCtx, node: Node) -> bool:
    """Whether concatenation `node` is read through by every op that reads
    it (convolutions taking it as their input, or the grid it is a column
    of), so it is not made here (`PartitionCtx.val` makes it if some op asks
    for it after all)."""
    if node.id in ctx.forced or node.id in ctx.placed or ctx.memory is not None:
        return False
    (vid,) = node.results
    users = ctx.graph.users(vid)
    if not users:
        return False
    if len(users) == 1:
        user = ctx.graph.node(users[0])
        if user.op == "stablehlo.concatenate" and vid in user.operands:
            # a column of a grid: read through where the grid is
            return _absorbed_value(ctx, user.results[0], vid)
    return _absorbed_value(ctx, vid, vid)


def _absorbed_value(ctx: PartitionCtx, vid: int, part: int) -> bool:
    users = ctx.graph.users(vid)
    if not users:
        return False
    for uid in users:
        user = ctx.graph.node(uid)
        if user.op != "stablehlo.convolution":
            return False
        parts = edge_parts(ctx, user)
        if parts is None or parts.value != vid or part not in parts.concats:
            return False
    return True


def _without(layout: Layout, dim: int) -> Layout:
    return tuple(() if d == dim else axes for d, axes in enumerate(layout))


def core_value(ctx: PartitionCtx, parts: EdgeParts, node: Node) -> Val:
    """The core, in the concatenation's layout (its blocks along the split
    dim are the core's: the same axes over fewer elements)."""
    layout = ctx.layout(parts.value)
    cores = [
        ctx.value_reshard(c.core, layout, node, "operand 0 (core)")
        for c in parts.columns
    ]
    if len(cores) == 1:
        return cores[0]
    return ctx.b.concatenate(cores, parts.across)


def _edge(ctx: PartitionCtx, parts: EdgeParts, node: Node, high: bool) -> Val:
    """The edge pieces before (or after) the core, whole along the split
    dim (other dims as the concatenation's layout has them)."""
    layout = _without(ctx.layout(parts.value), parts.dim)
    pieces = []
    for column in parts.columns:
        vids = column.hi if high else column.lo
        vals = [ctx.value_reshard(v, layout, node, "operand 0 (edge)") for v in vids]
        pieces.append(vals[0] if len(vals) == 1 else ctx.b.concatenate(vals, parts.dim))
    if len(pieces) == 1:
        return pieces[0]
    return ctx.b.concatenate(pieces, parts.across)


def fill_edges(
    ctx: PartitionCtx,
    parts: EdgeParts,
    node: Node,
    window: Val,
    axes: DimAxes,
    plan: WindowPlan,
) -> Val:
    """The window of the core (zeros outside it) with the positions in
    `[-low, 0)` and `[size, size + high)` of the core's coordinates set to
    the edge pieces: each device cuts, at its window's start, the stretch of
    each edge padded by a window's length (positions it does not cover are
    left as they are)."""
    b = ctx.b
    dim = parts.dim
    length = plan.length
    shape = list(window.ty.shape or ())
    firsts = [plan.first(i) for i in range(plan.n)]
    start = window_start(ctx, axes, plan)
    index_ty = window.ty.with_dtype("i32")
    position = b.binary(
        "stablehlo.add", b.iota(index_ty, dim), b.broadcast(start, index_ty)
    )
    zero = ctx.const_i32(0)
    out = window
    for high in (False, True):
        count = parts.high if high else parts.low
        if not count:
            continue
        if high:
            lo_edge, hi_edge = parts.size, parts.size + count
            before = length
            after = max(0, max(firsts) - parts.size + length - count)
            offset = length - parts.size
        else:
            lo_edge, hi_edge = -count, 0
            before = max(0, -(min(firsts) + count))
            after = length
            offset = count + before
        if max(firsts) + length <= lo_edge or min(firsts) >= hi_edge:
            continue  # no device's window reaches this edge
        edge = _edge(ctx, parts, node, high)
        lows = [before if d == dim else 0 for d in range(len(shape))]
        highs = [after if d == dim else 0 for d in range(len(shape))]
        padded = b.pad(edge, b.zeros(Ty((), edge.ty.dtype)), lows, highs)
        at = b.binary("stablehlo.add", start, ctx.const_i32(offset))
        starts = [at if d == dim else zero for d in range(len(shape))]
        cut = b.dynamic_slice(padded, starts, shape)
        inside = b.binary(
            "stablehlo.and",
            b.compare(position, b.splat(index_ty, str(lo_edge)), "GE"),
            b.compare(position, b.splat(index_ty, str(hi_edge)), "LT"),
        )
        out = b.select(inside, cut, out)
    return out


def whole_edges(ctx: PartitionCtx) -> None:
    """The edge pieces of concatenations read through, and the slices,
    reverses, broadcasts, reshapes and concatenations (along other dims)
    that only make them, laid out whole along the edges' dim: propagation
    passes the core's axes on to a slice of three rows at its end (three
    rows over eight devices), which the partitioner would make by
    exchanging pieces and then gather; made whole, the slice is cut from
    the blocks that hold it and assembled by one collective."""
    if ctx.memory is not None:
        return
    graph = ctx.graph
    for node in graph.nodes:
        if node.op != "stablehlo.convolution":
            continue
        parts = edge_parts(ctx, node)
        if parts is None:
            continue
        owners = [graph.node(graph.value(v).owner) for v in parts.concats]
        if not all(absorbed(ctx, owner) for owner in owners):
            continue
        # the pieces and what makes them, back through slices, reverses,
        # broadcasts and unit-dim reshapes (value -> its edges' dim)
        pieces = {v: parts.dim for c in parts.columns for v in (*c.lo, *c.hi)}
        stack = list(pieces)
        while stack:
            vid = stack.pop()
            for source, dim in _made_from(ctx, vid, pieces[vid]):
                if source not in pieces:
                    pieces[source] = dim
                    stack.append(source)
        # less the cores, arguments, and those something else reads too
        for column in parts.columns:
            pieces.pop(column.core, None)
        pieces = {v: d for v, d in pieces.items() if graph.value(v).owner >= 0}
        readers = {o.id for o in owners}
        while True:
            makers = readers | {graph.value(v).owner for v in pieces}
            kept = {v: d for v, d in pieces.items() if set(graph.users(v)) <= makers}
            if len(kept) == len(pieces):
                break
            pieces = kept
        for vid, dim in pieces.items():
            shape = graph.value(vid).shape
            if shape is None:
                continue
            layout = ctx.layout(vid)
            for d, n in enumerate(shape):
                if d == dim or n == 1:  # (a size-1 dim split is all padding)
                    layout = _without(layout, d)
            ctx.layouts[vid] = layout
            ctx.edge_pieces.add(vid)


def _made_from(ctx: PartitionCtx, vid: int, dim: int) -> list[tuple[int, int]]:
    """The operands an edge piece is cut, reversed, broadcast, reshaped
    (unit dims only) or concatenated (along another dim: a grid's edge
    column) from, each with the dim of it that `dim` comes from (-1: an
    edge one element long along it, which a reshape may move among unit
    dims: every size-1 dim is made whole)."""
    graph = ctx.graph
    owner = graph.value(vid).owner
    if owner < 0:
        return []
    node = graph.node(owner)
    if node.op == "stablehlo.concatenate" and node.attrs.get("dimension") != dim:
        return [(v, dim) for v in node.operands]
    found = _made_from_one(ctx, node, dim)
    return [] if found is None else [found]


def _made_from_one(ctx: PartitionCtx, node: Node, dim: int) -> tuple[int, int] | None:
    graph = ctx.graph
    vid = node.results[0] if node.results else -1
    source = node.operands[0] if node.operands else -1
    if vid < 0 or source < 0:
        return None
    if node.op in ("stablehlo.slice", "stablehlo.reverse"):
        return source, dim
    shape = graph.value(source).shape or ()
    out = graph.value(vid).shape or ()
    if node.op == "stablehlo.broadcast_in_dim":
        dims = ints(node.attrs.get("broadcast_dimensions"))
        if dim >= 0 and dim in dims and shape[dims.index(dim)] == out[dim]:
            return source, dims.index(dim)
        # the edge made by repeating one row (`mode="edge"`): the row
        if dim < 0 or dim not in dims or shape[dims.index(dim)] == 1:
            return source, -1
        return None
    if node.op == "stablehlo.reshape":
        if [n for n in shape if n != 1] != [n for n in out if n != 1]:
            return None
        if dim < 0 or out[dim] == 1:
            return source, -1  # an edge one row long: its size-1 dims
        k = sum(1 for n in out[:dim] if n != 1)
        return source, [d for d, n in enumerate(shape) if n != 1][k]
    return None
