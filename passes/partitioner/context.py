"""The partitioner's state while it walks the graph, and the services every
handler shares: SSA names per scope, layouts, device coordinates, resharding
by collectives, and binding an op's results (partial sums included).

A handler gets a `Node` and this context; it emits through `ctx.b` (the
builder) and binds the node's results with `ctx.bind_result`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence

from meshjit.compiler.diagnostics import SourceLoc
from meshjit.compiler.graph import CONSTANT_OPS, Block, DenseElements, Graph, Node
from meshjit.compiler.op_info import combiner as _combiner
from meshjit.dialects.reshard import (
    AllGather,
    AllReduce,
    AllToAll,
    CollectivePermute,
    DimAxes,
    Layout,
    LocalSlice,
    ReduceScatter,
    Step,
    apply_step,
    axis_stride,
    coordinate,
    plan_reshard,
    replica_groups,
    reshard_bytes,
    step_bytes,
)
from meshjit.dialects.rules import pointwise_rule
from meshjit.dialects.sharding import AxisRef, MeshModel
from meshjit.dialects.stablehlo_rules import INSPECT_SHARDING, RULES
from meshjit.errors import InternalError
from meshjit.passes.partitioner.builder import (
    I32,
    Builder,
    Ty,
    Val,
    collective_combiner,
    combiner_identity,
    groups_attr,
    has_bits,
    itemsize,
)
from meshjit.passes.partitioner.cost import (
    PLAIN,
    CostModel,
    Efficiency,
    KernelDims,
    op_flops,
    reshard_seconds,
    sums_gather,
)
from meshjit.passes.partitioner.halo import WindowPlan
from meshjit.passes.partitioner.layouts import (
    axes_text,
    axis_text,
    layout_text,
    local_shape,
    replicated,
    span,
)
from meshjit.passes.partitioner.memory import MemoryWatch, fmt_bytes
from meshjit.passes.partitioner.report import (
    Collective,
    PartitionFailure,
    PartitionReport,
    Remark,
)

# How many elementwise ops deep a value made only from iotas and splats is
# made again where it is used instead of being moved (`recomputable`).
RECOMPUTE_DEPTH = 8


def _pointwise(node: Node) -> bool:
    """An elementwise op with one result and no regions (no collective)."""
    return (
        not node.regions
        and len(node.results) == 1
        and bool(node.operands)
        and RULES.entry(node.op) is pointwise_rule
        and node.op
        not in (
            "stablehlo.all_reduce",
            "stablehlo.collective_broadcast",
            "stablehlo.collective_permute",
        )
    )


Handler = Callable[[Node, "PartitionCtx"], None]

# Ops whose result may be a partial sum when a contracted dim is split.
_CONTRACTIONS = frozenset(
    {"stablehlo.dot_general", "stablehlo.convolution", "stablehlo.reduce"}
)

# Ops linear in (some of) their operands: a partial sum can flow through them
# unreduced (`PartitionCtx.linear_in` has the per-op conditions).
LINEAR_OPS = frozenset(
    {
        "stablehlo.add",
        "stablehlo.broadcast_in_dim",
        "stablehlo.convert",
        "stablehlo.divide",
        "stablehlo.dynamic_update_slice",
        "stablehlo.dot_general",
        "stablehlo.multiply",
        "stablehlo.negate",
        "stablehlo.reduce",
        "stablehlo.reshape",
        "stablehlo.select",
        "stablehlo.slice",
        "stablehlo.subtract",
        "stablehlo.transpose",
    }
)
_TERMINATORS = frozenset({"func.return", "stablehlo.return", "sdy.return"})
# Annotations whose result is their operand: a partial sum passes through
# (the handler sums it unless the result is declared unreduced).
_IDENTITY_OPS = frozenset({"sdy.sharding_constraint", "sdy.reshard"})


class Scope:
    """SSA values of one region nesting level; outer levels stay visible."""

    def __init__(self, parent: Scope | None) -> None:
        self.parent = parent
        self.names: dict[int, Val] = {}  # graph value id -> local value
        self.cache: dict[object, Val] = {}  # coordinates, constants, reshards
        # Other layouts a value is available in locally (graph value id ->
        # [(layout, value)]): what an op computed before its result was
        # resharded, and earlier reshards. A later use picks the cheapest.
        self.versions: dict[int, list[tuple[Layout, Val]]] = {}

    def lookup(self, vid: int) -> Val | None:
        scope: Scope | None = self
        while scope is not None:
            found = scope.names.get(vid)
            if found is not None:
                return found
            scope = scope.parent
        return None

    def versions_of(self, vid: int) -> list[tuple[Layout, Val]]:
        found: list[tuple[Layout, Val]] = []
        scope: Scope | None = self
        while scope is not None:
            found += scope.versions.get(vid, ())
            scope = scope.parent
        return found

    def cached(self, key: object) -> Val | None:
        scope: Scope | None = self
        while scope is not None:
            found = scope.cache.get(key)
            if found is not None:
                return found
            scope = scope.parent
        return None


# Float dtypes whose max/min across devices runs on integer keys of the same
# width (`PartitionCtx.reduce_float_extremum`); others reduce as they are.
_ORDERED_KEY_WIDTH = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}


class PartitionCtx:
    """What handlers share while the per-device body is built."""

    def __init__(
        self,
        graph: Graph,
        mesh_name: str,
        mesh: MeshModel,
        layouts: dict[int, Layout],
        report: PartitionReport,
        handlers: Mapping[str, Handler],
        default: Handler,
        cost: CostModel,
        unreduced: Mapping[int, DimAxes] | None = None,
    ) -> None:
        self.graph = graph
        self.mesh_name = mesh_name
        self.mesh = mesh
        self.layouts = layouts
        self.report = report
        self.handlers = handlers
        self.default = default
        self.cost = cost
        self.b = Builder()
        self.b.major_gathers = any(n.op == "stablehlo.fft" for n in graph.nodes)
        self.scope = Scope(None)
        self.inline_depth = 0
        self.factor_cache: dict[object, tuple[DimAxes, ...]] = {}
        # Decisions about one op that other ops' handlers ask for too (a
        # concatenate's rotation, asked by each of its slices first), keyed
        # by what they depend on.
        self.decided: dict[object, object] = {}
        # Graph values some window of which is cached (`windows.gather_window`):
        # what reaching a windowed split costs differs for them.
        self.windowed: set[int] = set()
        # Partial sums left unreduced while they flow through a linear op:
        # value id -> (its layout now, the axes it still has to be summed over).
        self.deferred: dict[int, tuple[Layout, DimAxes]] = {}
        # Values the module declares unreduced (jax's `unreduced=`): value id
        # -> the axes each device's copy is a partial sum over. They are held
        # as deferred partial sums over exactly those axes.
        self.unreduced: Mapping[int, DimAxes] = unreduced or {}
        # sdy.all_reduce (operand, layout, kept axes) -> the first such result
        self.all_reduced: dict[tuple[object, ...], int] = {}
        self._recomputable: dict[tuple[int, int], bool] = {}  # (value, depth)
        # The op of the entry function's body being partitioned (node id; -1
        # between ops): what the report's collectives and remarks point at.
        self.site = -1
        # Ops placed whole on one device (a sharding on a maximal mesh, as
        # jax writes for host callbacks): node id -> the partition that runs
        # it (the device's position in the mesh).
        self.placed: dict[int, int] = {}
        # Values the entry function returns: value id -> the layouts it is
        # returned in (a value may be returned more than once).
        self.returned: dict[int, list[Layout]] = {}
        # Concatenations not made where they stand, since the convolutions
        # reading them read through to their pieces (`edges.py`): value id ->
        # the op, made by `val` if some op asks for the value; and the ops
        # made so.
        self.lazy: dict[int, Node] = {}
        self.forced: set[int] = set()
        # Their edge pieces, laid out whole along the edges' dim.
        self.edge_pieces: set[int] = set()
        # Under partition{memory-limit=...}: the live bytes per op, which
        # choices that gather whole dims consult (memory.py); else None.
        self.memory: MemoryWatch | None = None

    # -- scopes ------------------------------------------------------------------

    def push_scope(self) -> Scope:
        self.scope = Scope(self.scope)
        return self.scope

    def pop_scope(self) -> None:
        self.scope = self.scope.parent or self.scope

    def remark(self, loc: SourceLoc, message: str) -> None:
        self.report.remarks.append(Remark(loc, message, self.site))

    # -- values --------------------------------------------------------------------

    def val(self, vid: int) -> Val:
        found = self.scope.lookup(vid)
        if found is None and vid in self.lazy:
            # a concatenation left to be read through (`edges.py`) that an op
            # asks for after all: made here
            node = self.lazy.pop(vid)
            self.forced.add(node.id)
            self.handlers[node.op](node, self)
            found = self.scope.lookup(vid)
        if found is None:
            raise InternalError(f"partition: value {vid} used before it was emitted")
        return found

    def has_window(
        self, vid: int, layout: Layout, dim: int, axes: DimAxes, plan: WindowPlan
    ) -> bool:
        """Whether value `vid`, in `layout`, already has the window `plan`
        reads along `dim` that a later op may reuse (`windows.gather_window`):
        the cost model counts nothing for it. (Asked with zeros outside the
        value: an op that fills a window reaching past it with another value,
        a pool's init, may find it estimated free and exchange it anyway.)"""
        if self.memory is not None:
            return False  # windows are not reused under a memory limit
        if layout == self.layout(vid) and vid not in self.deferred:
            local = self.scope.lookup(vid)
        else:
            local = self.scope.cached(reshard_key(vid, layout))
        if local is None:
            return False
        return self.scope.cached(window_key(local, dim, axes, plan, None)) is not None

    def bind(self, vid: int, value: Val) -> None:
        self.scope.names[vid] = value

    def global_ty(self, vid: int) -> Ty:
        v = self.graph.value(vid)
        return Ty(v.shape, v.dtype) if v.shape is not None else Ty(None, v.type)

    def layout(self, vid: int) -> Layout:
        """The value's layout now: its assigned one, or while it is a deferred
        partial sum, the layout it was produced with."""
        if self.deferred:
            deferred = self.deferred.get(vid)
            if deferred is not None:
                return deferred[0]
        found = self.layouts.get(vid)
        if found is not None:
            return found
        return replicated(len(self.graph.value(vid).shape or ()))

    def local_shape(self, shape: Sequence[int], layout: Layout) -> tuple[int, ...]:
        return local_shape(shape, layout, self.mesh)

    def local_ty(self, vid: int, layout: Layout | None = None) -> Ty:
        v = self.graph.value(vid)
        if v.shape is None:
            return Ty(None, v.type)
        lay = self.layout(vid) if layout is None else layout
        return Ty(self.local_shape(v.shape, lay), v.dtype)

    # -- device coordinates ----------------------------------------------------

    def const_i32(self, value: int) -> Val:
        key = ("i32", value)
        found = self.scope.cached(key)
        if found is not None:
            return found
        made = self.b.splat(I32, str(value))
        self.scope.cache[key] = made
        return made

    def const_u32(self, value: int) -> Val:
        key = ("ui32", value)
        found = self.scope.cached(key)
        if found is None:
            found = self.scope.cache[key] = self.b.splat(Ty((), "ui32"), str(value))
        return found

    def partition_id(self) -> Val:
        """stablehlo.partition_id (ui32), once per scope."""
        found = self.scope.cached("partition-id")
        if found is None:
            found = self.scope.cache["partition-id"] = self.b.partition_id()
        return found

    def partition_position(self) -> Val:
        key = "position"
        found = self.scope.cached(key)
        if found is not None:
            return found
        pos = self.b.convert(self.partition_id(), "i32")
        self.scope.cache[key] = pos
        return pos

    def coordinate(self, axis: AxisRef) -> Val:
        key = ("coord", axis)
        found = self.scope.cached(key)
        if found is not None:
            return found
        # On the unsigned partition id: XLA turns an unsigned divide or
        # remainder by a power of two into a shift or a mask; a signed one
        # becomes a sign-correcting sequence in every kernel that reads it.
        size = axis.full_size(self.mesh)
        stride = axis_stride(self.mesh, axis)
        if stride == 1 and size == self.mesh.size:
            value = self.partition_position()
        else:
            raw = self.partition_id()
            if stride != 1:
                raw = self.b.binary("stablehlo.divide", raw, self.const_u32(stride))
            if size * stride != self.mesh.size:
                raw = self.b.binary("stablehlo.remainder", raw, self.const_u32(size))
            value = self.b.convert(raw, "i32")
        self.scope.cache[key] = value
        return value

    def block_index(self, axes: Sequence[AxisRef]) -> Val:
        """Row-major index of this device's block over `axes` (major first)."""
        if not axes:
            return self.const_i32(0)
        index = self.coordinate(axes[0])
        for axis in axes[1:]:
            size = self.const_i32(axis.full_size(self.mesh))
            scaled = self.b.binary("stablehlo.multiply", index, size)
            index = self.b.binary("stablehlo.add", scaled, self.coordinate(axis))
        return index

    def dim_offset(self, axes: Sequence[AxisRef], block: int) -> Val:
        if not axes:
            return self.const_i32(0)
        index = self.block_index(axes)
        if block == 1:
            return index
        return self.b.binary("stablehlo.multiply", index, self.const_i32(block))

    def block_of_position(self, axes: Sequence[AxisRef]) -> list[int]:
        """Each mesh position's block index over `axes` (row-major, major
        first)."""
        out = []
        for p in range(self.mesh.size):
            index = 0
            for a in axes:
                index = index * a.full_size(self.mesh) + coordinate(self.mesh, a, p)
            out.append(index)
        return out

    def per_position(self, values: Sequence[int]) -> Val:
        """A scalar that is `values[p]` on the device at mesh position p."""
        if len(set(values)) == 1:
            return self.const_i32(values[0])
        key = ("per-position", tuple(values))
        found = self.scope.cached(key)
        if found is not None:
            return found
        table = self.b.ints(values)
        one = self.b.dynamic_slice(table, [self.partition_position()], [1])
        value = self.b.reshape(one, ())
        self.scope.cache[key] = value
        return value

    def mask_beyond(
        self, x: Val, dim: int, axes: Sequence[AxisRef], size: int, fill: Val
    ) -> Val:
        """`x`, a block of a dim of global `size` split over `axes`, with its
        positions past the end of the dim (the padding of an uneven split)
        set to the scalar `fill`."""
        b = self.b
        block = (x.ty.shape or ())[dim]
        index_ty = x.ty.with_dtype("i32")
        start = b.broadcast(self.dim_offset(axes, block), index_ty)
        position = b.binary("stablehlo.add", b.iota(index_ty, dim), start)
        inside = b.compare(position, b.splat(index_ty, str(size)), "LT")
        return b.select(inside, x, b.broadcast(fill, x.ty))

    def cut(self, a: Val, offsets: Sequence[Sequence[int]], part: Sequence[int]) -> Val:
        """This device's `part`-shaped piece of `a` at `offsets[position]`."""
        starts = [
            self.per_position([row[d] for row in offsets]) for d in range(len(part))
        ]
        return self.b.dynamic_slice(a, starts, part)

    def hold_or_refuse(self, nbytes: int, key: object = None) -> str:
        """Under a memory limit: "" when a copy of `nbytes` made at the op
        being partitioned keeps the live values under it (the copy is then
        counted; `key`: its reshard key, for later reuse), else why not."""
        assert self.memory is not None
        fits, total, _ = self.memory.room(self.site, nbytes)
        if fits:
            self.memory.hold(self.site, nbytes, key)
            return ""
        return (
            f"the gathered copy ({fmt_bytes(nbytes)}) would take the live values "
            f"to {fmt_bytes(total)} per device, above memory-limit "
            f"{fmt_bytes(self.memory.limit)}"
        )

    # -- collectives -----------------------------------------------------------

    def groups(self, axes: Sequence[AxisRef]) -> str:
        return groups_attr(replica_groups(self.mesh, tuple(axes)))

    def record(
        self,
        kind: str,
        axes: Sequence[AxisRef],
        nbytes: int,
        why: tuple[str, SourceLoc, str],
    ) -> None:
        op_name, loc, reason = why
        group = span(axes, self.mesh)
        seconds = self.cost.collective_seconds(kind, nbytes, group)
        names = tuple(axis_text(a) for a in axes)
        self.report.collectives.append(
            Collective(kind, names, nbytes, op_name, loc, reason, seconds, self.site)
        )

    def record_own(self, node: Node, operands: Sequence[Ty]) -> None:
        """Reports a shard_map body's own collective as it runs (on
        `operands`, its local operand types; a variadic one moves them all):
        its kind, the mesh axes its groups span, the bytes one device sends
        as `step_bytes` counts the partitioner's own."""
        mesh = self.mesh
        rows = listed_ids(node)
        whole = (AxisRef(a.name) for a in mesh.axes)
        axes = tuple(a for a in whole if joins_blocks(mesh, a, rows))
        kind = _OWN_KINDS[node.op]
        step = _own_step(kind, axes)
        nbytes = sum(
            math.prod(t.shape or ()) * itemsize(t.dtype)
            if step is None  # a permute or broadcast: the block, to one device
            else step_bytes(step, t.shape or (), itemsize(t.dtype), mesh)
            for t in operands
        )
        group = 2 if step is None else span(axes, mesh)
        seconds = self.cost.collective_seconds(kind, nbytes, group)
        names = tuple(axis_text(a) for a in axes)
        self.report.own.append(
            Collective(
                kind, names, nbytes, node.op, node.loc, "as written", seconds, self.site
            )
        )

    def reshard(
        self,
        a: Val,
        shape: Sequence[int],
        src: Layout,
        dst: Layout,
        why: tuple[str, SourceLoc, str],
        partial: DimAxes = (),
        combiner: str = "stablehlo.add",
    ) -> Val:
        """Emits the collectives taking `a` from `src` (+ partial) to `dst`."""
        if src == dst and not partial:
            return a
        if math.prod(shape) == 0:
            # No elements: nothing to move (collectives reject zero-size dims).
            ty = a.ty.with_shape(self.local_shape(shape, dst))
            return self.b.constant(ty, f"dense<> : {ty.text}")
        steps = plan_reshard(src, dst, shape, self.mesh, partial)
        cur = [list(d) for d in src]
        # A step of a value taken already in this region (and recorded) is
        # reused, no second collective; not under a memory limit, whose plan
        # may let a copy go and make it again where it is read.
        shared = self.b.written if self.memory is None else {}
        for step in steps:
            key = ("reshard", a, tuple(shape), tuple(map(tuple, cur)), step, combiner)
            earlier = shared.get(key)
            if earlier is not None:
                apply_step(cur, step)
                a = earlier[0]
                continue
            a = self.emit_step(a, shape, cur, step, why, combiner)
            shared[key] = [a]
        return a

    def emit_step(
        self,
        a: Val,
        shape: Sequence[int],
        cur: list[list[AxisRef]],
        step: Step,
        why: tuple[str, SourceLoc, str],
        combiner: str,
    ) -> Val:
        dtype = a.ty.dtype
        local_before = self.local_shape(shape, tuple(tuple(d) for d in cur))
        apply_step(cur, step)  # `cur` is now the layout after the step
        local_after = self.local_shape(shape, tuple(tuple(d) for d in cur))
        after = Ty(local_after, dtype)
        if isinstance(step, LocalSlice):
            # A block past the end of an uneven dim starts inside the padding:
            # pad first (dynamic_slice would clamp the start instead).
            need = [
                span(added, self.mesh) * local_after[d]
                for d, added in enumerate(step.added)
            ]
            short = [
                max(0, n - have) for n, have in zip(need, local_before, strict=True)
            ]
            if any(short):
                a = self.b.pad_zeros(a, [0] * len(short), short)
            starts = [
                self.dim_offset(added, local_after[d])
                for d, added in enumerate(step.added)
            ]
            return self.b.dynamic_slice(a, starts, local_after)
        moved = step_bytes(step, local_before, itemsize(dtype), self.mesh)
        if isinstance(step, CollectivePermute):
            self.record("collective-permute", step.axes, moved, why)
            if step.offsets is not None:
                a = self.cut(a, step.offsets, step.part)
            return self.b.collective_permute(a, step.pairs)
        if isinstance(step, AllGather):
            count = span(step.axes, self.mesh)
            size, block = shape[step.dim], local_before[step.dim]
            exact = not dtype.startswith("complex")  # `sum_bits` is exact
            if sums_gather(size, block, count, bool(cur[step.dim])) and exact:
                part = list(local_before)
                part[step.dim] = size
                summed = AllReduce(step.axes)
                nbytes = step_bytes(summed, part, itemsize(dtype), self.mesh)
                self.record("all-reduce", step.axes, nbytes, why)
                return self.gather_by_sum(a, step.dim, step.axes, size)
            self.record("all-gather", step.axes, moved, why)
            gathered = list(local_before)
            gathered[step.dim] *= count
            full = self.b.all_gather(
                a, step.dim, self.groups(step.axes), after.with_shape(gathered)
            )
            # An uneven dim gathered whole: cut the padding of the last blocks.
            return self.b.slice_dim(full, step.dim, 0, local_after[step.dim])
        if isinstance(step, AllToAll):
            self.record("all-to-all", step.axes, moved, why)
            count = span(step.axes, self.mesh)
            groups = self.groups(step.axes)
            return self.b.all_to_all(
                a, step.split_dim, step.concat_dim, count, groups, after
            )
        assert isinstance(step, AllReduce | ReduceScatter)
        if not collective_combiner(combiner, dtype):
            # no all-reduce computes it (XLA's collectives sum, multiply,
            # take max or min): every device's partial value gathered on a
            # new major dim, then reduced where it is
            count = span(step.axes, self.mesh)
            nbytes = (count - 1) * math.prod(local_before) * itemsize(dtype)
            op_name, loc, reason = why
            self.record(
                "all-gather",
                step.axes,
                nbytes,
                (op_name, loc, f"{reason} (partial values of a {combiner} reduce)"),
            )
            return self.gather_and_reduce(a, after, step, combiner)
        kind = "all-reduce" if isinstance(step, AllReduce) else "reduce-scatter"
        self.record(kind, step.axes, moved, why)
        if combiner not in ("stablehlo.maximum", "stablehlo.minimum"):
            return self.reduce_across(a, after, step, combiner)
        if dtype in _ORDERED_KEY_WIDTH:
            return self.reduce_float_extremum(a, after, step, combiner)
        reduced = self.reduce_across(a, after, step, combiner)
        if not dtype.startswith(("f", "bf")):
            return reduced
        # Other floats (8-bit): a 1-byte flag reduced beside the value says
        # where a NaN was.
        op_name, loc, reason = why
        self.record(
            kind,
            step.axes,
            moved // 4 or moved,
            (op_name, loc, "NaN flag of " + reason),
        )
        b = self.b
        flag = b.convert(b.compare(a, a, "NE"), "i8")
        any_nan = self.reduce_across(
            flag, after.with_dtype("i8"), step, "stablehlo.maximum"
        )
        has_nan = b.compare(any_nan, b.splat(any_nan.ty, "0"), "NE")
        zero = b.zeros(Ty((), dtype))
        nan = b.binary("stablehlo.divide", zero, zero)
        return b.select(has_nan, b.broadcast(nan, after), reduced)

    def gather_by_sum(self, a: Val, dim: int, axes: DimAxes, size: int) -> Val:
        """A dim split over `axes` in blocks that are mostly padding (a dim
        of size 1 split 8 ways: 7 of 8 gathered blocks would be padding),
        made whole: each device puts its block's real positions at their
        offset in zeros of the dim's size, and `sum_bits` adds them (one
        device holds each position). It sends 2 (n-1)/n of the dim, where a
        gather sends n-1 blocks."""
        b = self.b
        shape = list(a.ty.shape or ())
        block = shape[dim]
        low = [0] * len(shape)
        high = [0] * len(shape)
        low[dim] = high[dim] = size
        ext = b.pad_zeros(a, low, high)
        offset = self.dim_offset(axes, block)
        size_i32 = self.const_i32(size)
        holds = b.compare(offset, size_i32, "LT")  # the block starts inside
        start = b.select(
            holds, b.binary("stablehlo.subtract", size_i32, offset), self.const_i32(0)
        )
        zero = self.const_i32(0)
        starts = [start if d == dim else zero for d in range(len(shape))]
        whole = list(shape)
        whole[dim] = size
        part = b.dynamic_slice(ext, starts, whole)
        mask = b.broadcast(holds, part.ty.with_dtype("i1"))
        return self.sum_bits(b.select(mask, part, b.zeros(part.ty)), axes)

    def sum_bits(self, part: Val, axes: DimAxes) -> Val:
        """Pieces that are zero except on the one device that holds each
        element, combined exactly: an all-reduce sum of their bit patterns
        as integers (n - 1 zeros and one value; a float sum would turn -0.0
        into +0.0; CPU collectives have no bitwise `or`). Booleans go as i8,
        complex values as they are (only -0.0 parts may turn +0.0)."""
        b = self.b
        dtype = part.ty.dtype
        if not has_bits(dtype):  # complex: as it is; 4-bit integers add exactly
            return b.all_reduce(part, self.groups(axes), "stablehlo.add")
        bits = b.to_bits(part, itemsize(dtype))
        combined = b.all_reduce(bits, self.groups(axes), "stablehlo.add")
        return b.from_bits(combined, dtype)

    def reduce_float_extremum(
        self, a: Val, result: Ty, step: AllReduce | ReduceScatter, combiner: str
    ) -> Val:
        """A float max/min across devices that keeps NaN, as the unsharded
        reduce does (XLA's CPU all-reduce drops it): one collective over
        integer keys ordered as the floats are, NaN past either end.

        The key of a float's bits k (read as a signed integer) is k where k
        >= 0 and k with every bit but the sign flipped where k < 0: then
        -inf < ... < -0.0 < +0.0 < ... < +inf, and the map is its own
        inverse. NaN becomes the largest key for max, the smallest for min,
        which map back to a NaN."""
        b = self.b
        width = _ORDERED_KEY_WIDTH[a.ty.dtype]
        int_type = f"i{width}"

        def ordered(bits: Val) -> Val:
            low_bits = b.splat(bits.ty, str((1 << (width - 1)) - 1))
            negative = b.compare(bits, b.splat(bits.ty, "0"), "LT")
            flipped = b.binary("stablehlo.xor", bits, low_bits)
            return b.select(negative, flipped, bits)

        as_int = a.ty.with_dtype(int_type)
        extreme = (1 << (width - 1)) - 1
        if combiner == "stablehlo.minimum":
            extreme = -extreme - 1
        key = ordered(b.op1("stablehlo.bitcast_convert", [a], as_int))
        key = b.select(b.compare(a, a, "NE"), b.splat(as_int, str(extreme)), key)
        reduced = self.reduce_across(key, result.with_dtype(int_type), step, combiner)
        return b.op1("stablehlo.bitcast_convert", [ordered(reduced)], result)

    def gather_and_reduce(
        self, a: Val, result: Ty, step: AllReduce | ReduceScatter, combiner: str
    ) -> Val:
        """An all-reduce (or reduce-scatter) under a combiner no collective
        computes (bitwise xor; and, or of integers): one all-gather of the
        partial values stacked on a new dim, reduced there locally (then
        this device's block cut, for a reduce-scatter)."""
        b = self.b
        shape = list(a.ty.shape or ())
        count = span(step.axes, self.mesh)
        stacked = b.reshape(a, [1, *shape])
        gathered = b.all_gather(
            stacked, 0, self.groups(step.axes), a.ty.with_shape([count, *shape])
        )
        identity = combiner_identity(combiner, a.ty.dtype)
        assert identity is not None
        init = b.splat(Ty((), a.ty.dtype), identity)
        reduced = b.reduce(gathered, init, [0], combiner)
        if isinstance(step, AllReduce):
            return reduced
        block = (result.shape or ())[step.dim]
        starts = [
            self.dim_offset(step.axes, block) if d == step.dim else self.const_i32(0)
            for d in range(len(shape))
        ]
        return b.dynamic_slice(reduced, starts, list(result.shape or ()))

    def reduce_across(
        self, a: Val, result: Ty, step: AllReduce | ReduceScatter, combiner: str
    ) -> Val:
        """One all-reduce or reduce-scatter of `a` with `combiner`."""
        groups = self.groups(step.axes)
        if isinstance(step, AllReduce):
            return self.b.all_reduce(a, groups, combiner)
        return self.b.reduce_scatter(a, step.dim, groups, combiner, result)

    # -- operands and results --------------------------------------------------

    def recomputable(self, vid: int, depth: int = RECOMPUTE_DEPTH) -> bool:
        """An iota or a splat (maybe broadcast), or an elementwise op of
        such values up to `depth` ops deep (index arithmetic, masks, the
        counters of counter-based random bits): cheaper to make again in any
        layout than to move, and made where it is used, no global copy is
        computed (Shardy's constant splitter gives each use its own copy)."""
        key = (vid, depth)
        found = self._recomputable.get(key)
        if found is None:
            found = self._recomputable[key] = self._recomputable_now(vid, depth)
        return found

    def _recomputable_now(self, vid: int, depth: int) -> bool:
        owner = self.graph.value(vid).owner
        if owner < 0:
            return False
        node = self.graph.node(owner)
        if node.op == "stablehlo.iota":
            return True
        if node.op == "stablehlo.broadcast_in_dim":
            # a splat, or (one level deeper) an index vector spread over a
            # grid: `arange(T)[:, None] - arange(T)[None, :]`
            if not self.graph.value(node.operands[0]).shape:
                return self.recomputable(node.operands[0], depth)
            return depth > 0 and self.recomputable(node.operands[0], depth - 1)
        if node.op in CONSTANT_OPS:
            value = node.attrs.get("value")
            if not isinstance(value, DenseElements):
                return False
            # a splat, hex-printed ones included (the graph reads no number
            # from `dense<0xFF800000>`: -inf, a segment max's initial value)
            text = node.attr_text.get("value", "")
            return (
                value.splat is not None
                or not value.shape
                or (text.startswith("dense<") and text[6:7] not in '["')
            )
        if depth > 0 and _pointwise(node):
            return all(self.recomputable(v, depth - 1) for v in node.operands)
        return False

    def recompute(self, vid: int, layout: Layout) -> Val:
        """A recomputable value made again, at its local shape in `layout`."""
        v = self.graph.value(vid)
        node = self.graph.node(v.owner)
        assert v.shape is not None
        local = Ty(self.local_shape(v.shape, layout), v.dtype)
        if node.op == "stablehlo.iota":
            dim = node.attrs.get("iota_dimension")
            assert isinstance(dim, int)
            return self.iota(local, dim, layout[dim])
        if node.op == "stablehlo.broadcast_in_dim":
            operand = self.graph.value(node.operands[0]).shape
            if not operand:
                return self.b.broadcast(self.val(node.operands[0]), local)
            # The operand made at its own local shape: each of its dims split
            # as the result dim it becomes, unless broadcast from size 1.
            attr = node.attrs.get("broadcast_dimensions")
            dims = (
                tuple(d for d in attr if isinstance(d, int))
                if isinstance(attr, tuple)
                else ()
            )
            inner = tuple(
                layout[d] if operand[k] == v.shape[d] else ()
                for k, d in enumerate(dims)
            )
            return self.b.broadcast(
                self.recompute(node.operands[0], inner), local, dims
            )
        if node.op in ("sdy.sharding_constraint", "sdy.reshard"):
            # per-device code has no sharding annotations: the value itself
            # (jax's explicit mode constrains iotas it makes)
            return self.recompute(node.operands[0], layout)
        if _pointwise(node):  # operands have the result's shape
            operands = [self.recompute(o, layout) for o in node.operands]
            (out,) = self.b.op(node.op, operands, [local], self.op_attrs(node), [])
            return out
        text = node.attr_text.get("value", "")
        return self.b.constant(
            local, f"{text.rsplit(':', 1)[0].strip()} : {local.text}"
        )

    def iota(self, local: Ty, dim: int, axes: DimAxes) -> Val:
        """A local iota along `dim` plus this device's block offset there."""
        b = self.b
        out = b.iota(local, dim)
        if axes:
            shape = local.shape or ()
            offset = b.convert(self.dim_offset(axes, shape[dim]), local.dtype)
            out = b.binary("stablehlo.add", out, b.broadcast(offset, local))
        return out

    def reshard_seconds_to(self, vid: int, dst: Layout) -> float:
        """Estimated seconds of `value_reshard(vid, dst)`: from the cheapest
        local copy of the value (partial sums included); none for a value
        made again in place."""
        v = self.graph.value(vid)
        if v.shape is None:
            return 0.0
        if vid not in self.deferred and self.recomputable(vid):
            return 0.0
        size = itemsize(v.dtype)
        partial = self.deferred.get(vid, ((), ()))[1]
        cost = self.cost
        best = reshard_seconds(
            self.layout(vid), dst, v.shape, size, self.mesh, partial, cost
        )
        if partial or best == 0:
            return best
        for lay, _ in self.scope.versions_of(vid):
            best = min(
                best, reshard_seconds(lay, dst, v.shape, size, self.mesh, (), cost)
            )
        return best

    def work(self, node: Node) -> tuple[float, float]:
        """The op's FLOPs and the bytes it touches, on global shapes."""
        return op_work(self.graph, node)

    def reshard_bytes_to(self, vid: int, dst: Layout) -> int:
        """Bytes per device `value_reshard(vid, dst)` would move: from the
        cheapest local copy of the value (partial sums included)."""
        v = self.graph.value(vid)
        if v.shape is None:
            return 0
        size = itemsize(v.dtype)
        partial = self.deferred.get(vid, ((), ()))[1]
        best = reshard_bytes(self.layout(vid), dst, v.shape, size, self.mesh, partial)
        if partial or best == 0:
            return best
        for lay, _ in self.scope.versions_of(vid):
            best = min(best, reshard_bytes(lay, dst, v.shape, size, self.mesh))
        return best

    def value_reshard(
        self,
        vid: int,
        dst: Layout,
        node: Node,
        reason: str,
        op_name: str = "",
        keep: DimAxes = (),
    ) -> Val:
        """The value in layout `dst`, summed over every axis it is a partial
        sum over but those in `keep` (a result declared unreduced)."""
        v = self.graph.value(vid)
        src = self.layout(vid)
        partial = self.deferred.get(vid, ((), ()))[1]
        if keep and v.shape is not None:
            if src == dst and set(partial) == set(keep):
                return self.val(vid)
            text = f"{reason}: {layout_text(src)} -> {layout_text(dst)}"
            text += f" (partial over {axes_text(partial)})" if partial else ""
            text += f", unreduced over {axes_text(keep)}"
            why = (op_name or node.op, node.loc, text)
            return self.to_unreduced(
                self.val(vid), v.shape, src, partial, dst, keep, why
            )
        if v.shape is None or (src == dst and not partial):
            return self.val(vid)
        # A value resharded once to a layout is reused by every later use that
        # the same definition dominates (same or inner scope).
        key = reshard_key(vid, dst)
        found = self.scope.cached(key)
        again = False  # holding the copy until here would break the memory limit
        if found is not None:
            if self.memory is None or self.memory.reuse(key, self.site):
                return found
            again = True
        if not partial and self.recomputable(vid):
            made = self.recompute(vid, dst)
            self.scope.cache[key] = made
            return made
        value = self.val(vid)
        versions = [] if partial else self.scope.versions_of(vid)
        if again:  # made afresh from the value, not from the copy let go
            versions = [(lay, other) for lay, other in versions if lay != dst]
        if versions:
            # Start from whichever local copy of the value is cheapest to
            # take to `dst` (a replicated copy an op computed before its
            # result was sliced costs nothing to slice again).
            size = itemsize(v.dtype)
            best = reshard_bytes(src, dst, v.shape, size, self.mesh)
            for lay, other in versions:
                cost = reshard_bytes(lay, dst, v.shape, size, self.mesh)
                if cost < best:
                    best, src, value = cost, lay, other
            if src == dst:
                return value
        text = f"{reason}: {layout_text(src)} -> {layout_text(dst)}"
        if partial:
            text += f" (partial over {axes_text(partial)})"
        if again:
            assert self.memory is not None
            self.remark(
                node.loc,
                f"{reason}: {layout_text(dst)} made again here; holding the copy "
                "made before until here would take the live values above "
                f"memory-limit {fmt_bytes(self.memory.limit)}",
            )
        value = self.reshard(
            value, v.shape, src, dst, (op_name or node.op, node.loc, text), partial
        )
        self.scope.cache[key] = value
        self.scope.versions.setdefault(vid, []).append((dst, value))
        return value

    def bind_result(
        self,
        vid: int,
        value: Val,
        produced: Layout,
        node: Node,
        partial: DimAxes = (),
        combiner: str = "stablehlo.add",
    ) -> None:
        v = self.graph.value(vid)
        self.deferred.pop(vid, None)
        keep = self.unreduced.get(vid, ())
        if keep and v.shape is not None:
            # Declared unreduced: the partial sum over `keep` stays as it is.
            target = self.layout(vid)
            text = f"result: {layout_text(produced)} -> {layout_text(target)}"
            text += f" (partial over {axes_text(partial)})" if partial else ""
            text += f", unreduced over {axes_text(keep)}"
            value = self.to_unreduced(
                value,
                v.shape,
                produced,
                partial,
                target,
                keep,
                (node.op, node.loc, text),
                combiner,
            )
            self.deferred[vid] = (target, keep)
            self.bind(vid, value)
            return
        if not self.graph.users(vid):
            self.bind(vid, value)  # unused (e.g. the values of an argsort)
            return
        target = self.layout(vid)
        if (
            partial
            and combiner == "stablehlo.add"
            and v.shape is not None
            and self.can_defer(vid, node)
        ):
            self.deferred[vid] = (produced, partial)
            self.bind(vid, value)
            return
        if v.shape is not None and (produced != target or partial):
            if not partial:
                self.scope.versions.setdefault(vid, []).append((produced, value))
            text = f"result: {layout_text(produced)} -> {layout_text(target)}"
            if partial:
                text += f" (partial over {axes_text(partial)})"
            value = self.reshard(
                value,
                v.shape,
                produced,
                target,
                (node.op, node.loc, text),
                partial,
                combiner,
            )
        self.bind(vid, value)

    def to_unreduced(
        self,
        value: Val,
        shape: Sequence[int],
        src: Layout,
        partial: DimAxes,
        dst: Layout,
        keep: DimAxes,
        why: tuple[str, SourceLoc, str],
        combiner: str = "stablehlo.add",
    ) -> Val:
        """`value` (laid out `src`, a partial sum over `partial`) laid out
        `dst` as a partial sum over exactly `keep`, as jax lays such values
        out: summed over the other partial axes; along an axis of `keep` that
        splits a dim, each device keeps its own block in place and zeros
        elsewhere (no communication); along an axis of `keep` the value is
        replicated over, the devices at coordinate 0 keep it and the others
        hold zeros. Summing over `keep` gives the value back once."""
        add = combiner == "stablehlo.add"
        kept = tuple(a for a in partial if a in keep) if add else ()
        summed = tuple(a for a in partial if a not in kept)
        missing = [a for a in keep if a not in kept]
        # Axes of `missing` that split a dim and stay there (minor to what
        # `dst` puts on it) while the rest of the layout becomes `dst`.
        embed: list[DimAxes] = []
        for d, axes in enumerate(src):
            mine = tuple(a for a in axes if a in missing)
            if mine and shape[d] % span(dst[d] + mine, self.mesh):
                mine = ()  # uneven blocks: gathered, then kept at coordinate 0
            embed.append(mine)
        mid = tuple(dst[d] + embed[d] for d in range(len(dst)))
        value = self.reshard(value, shape, src, mid, why, summed, combiner)
        b = self.b
        if mid != dst:
            whole = Ty(self.local_shape(shape, dst), value.ty.dtype)
            block = self.local_shape(shape, mid)
            starts = [
                self.dim_offset(axes, block[d]) if axes else self.const_i32(0)
                for d, axes in enumerate(embed)
            ]
            value = b.dynamic_update_slice(b.zeros(whole), value, starts)
        held = {a for axes in embed for a in axes}
        return self.only_at_zero(value, [a for a in missing if a not in held])

    def only_at_zero(self, value: Val, axes: Sequence[AxisRef]) -> Val:
        """`value` on the devices at coordinate 0 along every axis of `axes`,
        zeros on the others: a value the sum over `axes` counts once."""
        b = self.b
        first = None
        for axis in axes:
            at_zero = b.compare(self.coordinate(axis), self.const_i32(0), "EQ")
            first = (
                at_zero if first is None else b.binary("stablehlo.and", first, at_zero)
            )
        if first is None:
            return value
        mask = b.broadcast(first, value.ty.with_dtype("i1"))
        return b.select(mask, value, b.zeros(value.ty))

    def can_defer(self, vid: int, producer: Node) -> bool:
        """Leave a partial sum unreduced when its only use is an op linear in
        it, in the same block, whose result is no larger, and deferring pays:
        down that chain of single uses the tensor shrinks (a slice, a
        reduction, a dot) or meets another tensor in an add or subtract (two
        partial sums, one reduction). Otherwise it is reduced where it is
        made, as XLA's partitioner does: a reduction moved past elementwise
        ops saves nothing and splits XLA's fusions (more kernels to compile)."""
        user = self._linear_user(vid, producer.parent)
        return user is not None and self._deferral_pays(vid, user, 8)

    def _linear_user(self, vid: int, parent: int) -> Node | None:
        users = self.graph.users(vid)
        if len(users) != 1:
            return None
        user = self.graph.node(users[0])
        if user.op not in LINEAR_OPS and user.op not in _IDENTITY_OPS:
            return None
        if user.parent != parent:
            return None
        if len(user.results) != 1:
            return None
        size = self.graph.value(vid).shape
        out = self.graph.value(user.results[0]).shape
        if size is None or out is None:
            return None
        if math.prod(out) > math.prod(size) and user.results[0] not in self.unreduced:
            return None
        return user

    def _deferral_pays(self, vid: int, user: Node, steps: int) -> bool:
        size = self.graph.value(vid).shape
        out = self.graph.value(user.results[0]).shape
        assert size is not None
        assert out is not None
        if math.prod(out) < math.prod(size):
            return True
        if user.results[0] in self.unreduced:
            return True  # declared unreduced: the partial sum is what it wants
        if user.op in ("stablehlo.add", "stablehlo.subtract") and any(
            v != vid and self._may_be_partial(v, 8) for v in user.operands
        ):
            return True
        if steps == 0:
            return False
        after = self._linear_user(user.results[0], user.parent)
        return after is not None and self._deferral_pays(
            user.results[0], after, steps - 1
        )

    def _may_be_partial(self, vid: int, steps: int) -> bool:
        """Whether `vid` may be a partial sum: made by a contraction (dot,
        convolution, reduce), maybe through linear ops."""
        owner = self.graph.value(vid).owner
        if owner < 0 or steps < 0:
            return False
        node = self.graph.node(owner)
        if node.op in _CONTRACTIONS:
            return True
        if node.op not in LINEAR_OPS:
            return False
        return any(
            self.graph.value(v).shape and self._may_be_partial(v, steps - 1)
            for v in node.operands
        )

    def linear_in(
        self, node: Node, pending: Mapping[int, DimAxes], wants: Sequence[Layout]
    ) -> bool:
        """Whether `node` may run on the deferred partial operands `pending`
        (operand index -> axes) as they are and pass the partial sum on."""
        axes = set(pending.values())
        if len(axes) != 1 or node.op not in LINEAR_OPS:
            return False
        (summed,) = axes
        names = {a.name for a in summed}
        for i, vid in enumerate(node.operands):
            if i in pending:
                if wants[i] != self.layout(vid):
                    return False
            elif any(a.name in names for d in wants[i] for a in d):
                return False  # must be the same on every device of the sum
        tensor_operands = [
            i for i, v in enumerate(node.operands) if self.graph.value(v).shape
        ]
        if node.op in ("stablehlo.add", "stablehlo.subtract"):
            return set(pending) == set(tensor_operands)
        if node.op in ("stablehlo.multiply", "stablehlo.dot_general"):
            return len(pending) == 1
        if node.op == "stablehlo.divide":
            return set(pending) == {0}
        if node.op == "stablehlo.convert":
            # Between float types, to one at least as wide: the partial sums
            # are then added up no less precisely than before the convert.
            src = self.graph.value(node.operands[0]).dtype
            dst = self.graph.value(node.results[0]).dtype
            return set(pending) == {0} and 0 < _float_bits(src) <= _float_bits(dst)
        if node.op == "stablehlo.dynamic_update_slice":
            # Linear in operand and update together; one of them alone only
            # where the other is a fixed point of summing (zeros).
            if set(pending) == {0, 1}:
                return True
            other = {0: 1, 1: 0}.get(next(iter(pending))) if len(pending) == 1 else None
            return other is not None and self.sum_fixed_point(node.operands[other])
        if node.op == "stablehlo.reduce":
            init = self.graph.value(node.operands[1]).owner
            value = self.graph.node(init).attrs.get("value") if init >= 0 else None
            return (
                set(pending) == {0}
                and len(node.operands) == 2
                and _combiner(self.graph, node) == "stablehlo.add"
                and isinstance(value, DenseElements)
                and value.splat in (0, 0.0)
            )
        if node.op == "stablehlo.select":
            # select(m, p, c) sums to select(m, sum p, c) when the other branch
            # is partial too or a constant that summing leaves as it is.
            if 0 in pending:
                return False
            others = {1, 2} - set(pending)
            return all(self.sum_fixed_point(node.operands[i]) for i in others)
        return set(pending) == {0}  # negate, transpose, reshape, broadcast, slice

    def sum_fixed_point(self, vid: int) -> bool:
        """A splat of 0, NaN or infinity (maybe broadcast): x + x + ... == x."""
        owner = self.graph.value(vid).owner
        if owner < 0:
            return False
        node = self.graph.node(owner)
        if node.op == "stablehlo.broadcast_in_dim":
            return self.sum_fixed_point(node.operands[0])
        if node.op not in CONSTANT_OPS:
            return False
        value = node.attrs.get("value")
        if not isinstance(value, DenseElements) or value.values is not None:
            return False
        if value.splat is not None:
            return value.splat in (0, 0.0) or not math.isfinite(float(value.splat))
        text = node.attr_text.get("value", "")
        m = re.match(r"dense<(0x[0-9A-Fa-f]+)>", text)
        if m is None or len(m.group(1)) != 10:
            return False
        bits = int(m.group(1), 16)
        return (bits & 0x7F800000) == 0x7F800000  # f32 NaN or infinity

    # -- walking ---------------------------------------------------------------

    def emit_block(self, nodes: Sequence[int]) -> list[int] | None:
        """Emits the ops of a block; returns the terminator's operand ids."""
        for nid in nodes:
            node = self.graph.node(nid)
            if node.op in _TERMINATORS:
                return list(node.operands)
            handler = (
                self.handlers.get(node.op, self.default)
                if nid not in self.placed
                else on_one_device
            )
            if self.site < 0:  # an op of the entry function's body
                self.site = nid
                handler(node, self)
                self.declare_unreduced(node)
                self.site = -1
            else:
                handler(node, self)
                self.declare_unreduced(node)
        return None

    def declare_unreduced(self, node: Node) -> None:
        """A result the module declares unreduced that its handler bound
        some other way (a constant, an iota, a value summed already) becomes
        a partial sum over the declared axes."""
        if not self.unreduced:
            return
        for vid in node.results:
            keep = self.unreduced.get(vid)
            if not keep or self.graph.value(vid).shape is None:
                continue
            shape = self.graph.value(vid).shape or ()
            target = self.layouts.get(vid)
            if target is None:
                target = replicated(len(shape))
            layout, partial = self.deferred.get(vid, (target, ()))
            if layout == target and set(partial) == set(keep):
                continue
            value = self.value_reshard(vid, target, node, "result", keep=keep)
            self.deferred[vid] = (target, keep)
            self.bind(vid, value)

    def verbatim_region(self, block: Block) -> list[str]:
        """A region copied with its own (global) types: a scalar body (reduce
        combiner, comparator) or a shard_map body."""
        saved = self.b.capture()
        args, header = self.b.block_args([self.global_ty(a) for a in block.args])
        self.push_scope()
        for a, v in zip(block.args, args, strict=True):
            self.bind(a, v)
        for nid in block.nodes:
            self.emit_verbatim(self.graph.node(nid))
        self.pop_scope()
        return header + self.b.restore(saved)

    def op_attrs(self, node: Node) -> dict[str, str]:
        """The op's attributes to re-emit it: as printed, less sharding
        annotations, with a fresh channel handle for a collective (the
        program's own collectives and the partitioner's share one count)."""
        attrs = plain_attrs(node)
        if "channel_handle" in attrs:
            attrs["channel_handle"] = self.b.channel_handle()
        return attrs

    def emit_verbatim(self, node: Node) -> None:
        """`node` as it is, on the values bound to its operands (sharding
        annotations dropped: this is per-device code already)."""
        if node.op in ("sdy.sharding_constraint", "sdy.reshard") or (
            node.attrs.get("call_target_name") == INSPECT_SHARDING
        ):  # (for InspectSharding see `elementwise.custom_call`)
            self.bind(node.results[0], self.val(node.operands[0]))
            return
        if node.op == "func.call":
            self._inline_verbatim(node)
            return
        operands = [self.val(v) for v in node.operands]
        results = [self.global_ty(v) for v in node.results]
        regions = [self.verbatim_region(r[0]) for r in node.regions]
        outs = self.b.op(node.op, operands, results, self.op_attrs(node), regions)
        if node.op in _OWN_KINDS:
            self.record_own(node, [v.ty for v in operands])
        for vid, out in zip(node.results, outs, strict=True):
            self.bind(vid, out)

    def callee_block(self, node: Node) -> Block:
        """The body of the function a `func.call` calls (refused where it is
        unknown, or where calls nest past 64: recursion)."""
        callee = getattr(node.attrs.get("callee"), "name", None)
        if not isinstance(callee, str) or callee not in self.graph.symbols:
            raise PartitionFailure(
                node.loc, f"call to unknown function {node.attrs.get('callee')}"
            )
        if self.inline_depth > 64:
            raise PartitionFailure(node.loc, "calls nest deeper than 64 (recursion?)")
        return self.graph.node(self.graph.symbols[callee]).regions[0][0]

    def emit_verbatim_body(self, block: Block, terminator: str) -> list[int]:
        """`block`'s ops emitted as they are, up to its `terminator` (whose
        operands are returned)."""
        for nid in block.nodes:
            child = self.graph.node(nid)
            if child.op == terminator:
                return list(child.operands)
            self.emit_verbatim(child)
        return []

    def _inline_verbatim(self, node: Node) -> None:
        """A call in per-device code (a full-manual shard_map body, or a
        region copied as it is): the callee's body emitted here as it is, on
        the call's operands (the partitioned module keeps no private
        functions: calls elsewhere are inlined and partitioned)."""
        block = self.callee_block(node)
        operands = [self.val(v) for v in node.operands]
        self.push_scope()
        for arg, value in zip(block.args, operands, strict=True):
            self.bind(arg, value)
        self.inline_depth += 1
        returned = self.emit_verbatim_body(block, "func.return")
        self.inline_depth -= 1
        values = [self.val(v) for v in returned]
        self.pop_scope()
        for vid, value in zip(node.results, values, strict=True):
            self.bind(vid, value)


# A shard_map body's own collectives, by the kind the report names them.
_OWN_KINDS = {
    "stablehlo.all_gather": "all-gather",
    "stablehlo.all_reduce": "all-reduce",
    "stablehlo.all_to_all": "all-to-all",
    "stablehlo.collective_broadcast": "collective-broadcast",
    "stablehlo.collective_permute": "collective-permute",
    "stablehlo.reduce_scatter": "reduce-scatter",
}


def listed_ids(node: Node) -> list[list[int]]:
    """The device ids of each replica group or source-target pair of a
    collective (none where they are not listed as ids: jax 0.11 names
    groups by mesh axes; or too many to keep)."""
    attr = node.attrs.get("source_target_pairs", node.attrs.get("replica_groups"))
    if not isinstance(attr, DenseElements) or attr.values is None:
        return []
    if len(attr.shape) != 2:
        return []
    width = attr.shape[1]
    return [
        [i for i in attr.values[r * width : (r + 1) * width] if i >= 0]
        for r in range(attr.shape[0])
    ]


def joins_blocks(mesh: MeshModel, axis: AxisRef, rows: list[list[int]]) -> bool:
    """Whether one of `rows` (replica groups or source-target pairs, as
    `listed_ids` gives them) joins devices at different coordinates along
    `axis`."""
    return any(
        len({coordinate(mesh, axis, i) for i in r if i < mesh.size}) > 1 for r in rows
    )


def _own_step(kind: str, axes: DimAxes) -> Step | None:
    """The reshard step whose bytes a body's own collective of `kind` over
    `axes` moves (its dims do not change the count); None for a permute or
    broadcast."""
    if kind == "all-gather":
        return AllGather(0, axes)
    if kind == "all-reduce":
        return AllReduce(axes)
    if kind == "all-to-all":
        return AllToAll(axes, 0, 0)
    if kind == "reduce-scatter":
        return ReduceScatter(0, axes)
    return None


def reshard_key(vid: int, layout: Layout) -> tuple[str, int, Layout]:
    """The scope cache's key of value `vid` resharded to `layout` (the copy
    later uses reuse; the memory watch holds copies by it too)."""
    return ("reshard", vid, layout)


def window_key(
    x: Val, dim: int, axes: DimAxes, plan: WindowPlan, pad: Val | None
) -> tuple[object, ...]:
    """The scope cache's key of the window of local value `x` along `dim`
    (split over `axes`) that `plan` reads: the same key, the same window (what
    each block holds depends on the pieces and, where a window reaches past
    the value, on what fills it there: `pad`, None for zeros; not on the
    padding the op adds around the window)."""
    pieces = dataclasses.replace(plan, low=0, high=0)
    fill = pad.name if pad is not None and plan.reaches_outside else None
    return ("window", x.name, dim, axes, pieces, fill)


def on_one_device(node: Node, ctx: PartitionCtx) -> None:
    """An op placed whole on one device (jax's host callbacks: the op's
    sharding names a maximal mesh): its operands gathered whole, the op run
    under `stablehlo.if` on that device's partition only (a callback is
    called once, as under jax.jit). Elsewhere its tensor results are zeros
    (a token result is its token operand, or a new token), so each tensor
    result is a partial sum over every mesh axis, summed where it is used:
    every device then holds the device's values."""
    b = ctx.b
    operands = []
    for i, vid in enumerate(node.operands):
        shape = ctx.graph.value(vid).shape
        if shape is None:  # a token
            operands.append(ctx.val(vid))
        else:
            operands.append(
                ctx.value_reshard(vid, replicated(len(shape)), node, f"operand {i}")
            )
    results = [ctx.global_ty(v) for v in node.results]
    here = b.compare(ctx.partition_id(), ctx.const_u32(ctx.placed[node.id]), "EQ")
    saved = b.capture()
    regions = [ctx.verbatim_region(r[0]) for r in node.regions]
    outs = b.op(node.op, operands, results, ctx.op_attrs(node), regions)
    b.ret("stablehlo.return", outs)
    on_device = b.restore(saved)
    saved = b.capture()
    tokens = [v for v in operands if v.ty.shape is None and "token" in v.ty.dtype]
    elsewhere = [
        b.zeros(t)
        if t.shape is not None
        else (tokens[0] if tokens else b.op1("stablehlo.after_all", [], t))
        for t in results
    ]
    b.ret("stablehlo.return", elsewhere)
    off_device = b.restore(saved)
    outs = b.op("stablehlo.if", [here], results, {}, [on_device, off_device])
    every = tuple(AxisRef(a.name) for a in ctx.mesh.axes)
    for vid, out, t in zip(node.results, outs, results, strict=True):
        if t.shape is None:
            ctx.bind(vid, out)
            continue
        combiner = "stablehlo.or" if t.dtype == "i1" else "stablehlo.add"
        ctx.bind_result(vid, out, replicated(len(t.shape)), node, every, combiner)


def op_work(graph: Graph, node: Node) -> tuple[float, float]:
    """FLOPs and bytes touched by `node` on global shapes (the cost model's
    compute term; ops that repeat share the answer by shapes)."""
    if node.op == "stablehlo.reshape":
        # a bitcast in XLA (row-major in and out): no copy, wherever it runs
        return 0.0, 0.0
    operands = [graph.value(v) for v in node.operands]
    results = [graph.value(v) for v in node.results]
    contracted = 1
    if node.op == "stablehlo.dot_general":
        dims = node.attrs.get("dot_dimension_numbers")
        lhs = operands[0].shape or ()
        if isinstance(dims, Mapping):
            found = dims.get("lhs_contracting_dimensions")
            if isinstance(found, tuple):
                contracted = math.prod(lhs[int(d)] for d in found if isinstance(d, int))
    elif node.op == "stablehlo.convolution":
        kernel = kernel_dims(node)
        rhs = operands[1].shape or ()
        if kernel is not None and rhs:
            contracted = rhs[kernel.in_feature] * math.prod(
                rhs[d] for d in kernel.spatial
            )
    elif node.op == "stablehlo.sort":
        dim = node.attrs.get("dimension")
        shape = operands[0].shape or ()
        if isinstance(dim, int) and shape:
            contracted = shape[dim % len(shape)]
    elif node.op == "stablehlo.reduce_window":
        window = node.attrs.get("window_dimensions")
        if isinstance(window, tuple):
            contracted = math.prod(int(w) for w in window if isinstance(w, int))
    flops = op_flops(
        node.op, [v.shape for v in operands], [v.shape for v in results], contracted
    )
    # A dynamic_slice touches only what it returns, read and written (twice
    # its bytes): its operand's other elements are not touched (a scan's
    # slice of one layer out of all of them). Static slices keep the
    # operand's bytes: they price the gathered copy a slice of a split dim
    # would cut from (measured: the same change on them took CycleGAN's
    # height8 row to whole-dim gathers, 1.64x -> 2.74x jax.jit's memory).
    touched = (*results, *results) if node.op in _SLICES else (*operands, *results)
    nbytes = sum(
        math.prod(v.shape) * itemsize(v.dtype) for v in touched if v.shape is not None
    )
    return flops, float(nbytes)


_SLICES = frozenset({"stablehlo.dynamic_slice"})


def efficiency(node: Node) -> Efficiency:
    """What slows `node` on its per-device blocks (`cost.Efficiency`)."""
    kernel = kernel_dims(node)
    vectors = node.op == "stablehlo.reduce"
    if kernel is None and not vectors:
        return PLAIN
    return Efficiency(kernel, vectors)


def kernel_dims(node: Node) -> KernelDims | None:
    """A convolution's kernel dims (what `CostModel.gemm_slowdown` reads);
    None for other ops."""
    if node.op != "stablehlo.convolution":
        return None
    dims = node.attrs.get("dimension_numbers")
    if not isinstance(dims, Mapping):
        return None
    out_f = dims.get("kernel_output_feature_dimension")
    in_f = dims.get("kernel_input_feature_dimension")
    spatial = dims.get("kernel_spatial_dimensions")
    if not (isinstance(out_f, int) and isinstance(in_f, int)):
        return None
    if not isinstance(spatial, tuple):
        return None
    return KernelDims(out_f, in_f, tuple(d for d in spatial if isinstance(d, int)))


def _float_bits(dtype: str) -> int:
    """The width of a floating-point element type (`f32`: 32, `bf16`: 16,
    `f8E4M3FN`: 8; `complex<f32>`: 32 per part); 0 for other types."""
    m = re.match(r"(?:complex<)?b?f(\d+)", dtype)
    return int(m.group(1)) if m else 0


def plain_attrs(node: Node) -> dict[str, str]:
    """The op's attributes as printed, less sharding annotations."""
    return {
        k: v
        for k, v in node.attr_text.items()
        if not k.startswith(("sdy.", "mhlo.sharding"))
    }
