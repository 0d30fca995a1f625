"""Partition a sharded module into the program every device runs.

Input: a module whose values carry Shardy shardings (`sdy.sharding` on function
arguments and results, `#sdy.sharding_per_value` on ops, as propagation leaves
them; a value without one is replicated). Output: the same public function with
global types, whose body is one `sdy.manual_computation` over every mesh axis;
inside it every op runs on local shapes and data moves by explicit StableHLO
collectives (replica groups over mesh positions, `use_global_device_ids`).

For each op the pass picks factor shardings from the op's rule (results first,
then reduction factors from operands), brings each operand to the sharding the
factors ask for with the cheapest collectives (`dialects/reshard.py`), emits the
op on local shapes, resolves partial sums of sharded reduction factors, and
brings each result to its assigned sharding. Ops it cannot yet partition are
computed replicated (operands gathered, result sliced) and reported.

The new module is built as text and replaces the old one in one sweep.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from meshjit.compiler.diagnostics import Diagnostics, SourceLoc
from meshjit.compiler.graph import Block, DenseElements, Graph, Node, Opaque
from meshjit.compiler.op_info import combiner as _combiner
from meshjit.compiler.op_info import op_info
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
    merge_axes,
    neighbor_pairs,
    plan_reshard,
    replica_groups,
    reshard_bytes,
    step_bytes,
)
from meshjit.dialects.rules import FactorKind, ShardingRule, pointwise_rule
from meshjit.dialects.sdy_text import (
    parse_mesh,
    parse_sharding,
    parse_sharding_per_value,
    print_mesh_op,
    print_string,
)
from meshjit.dialects.sharding import AxisRef, MeshModel, TensorSharding
from meshjit.dialects.stablehlo_rules import REDUCIBLE_COMBINERS, RULES
from meshjit.errors import InternalError

# Ops whose local form differs from the global one only in its result types
# (once the factor choice keeps their special dims unsharded).
_LOCAL_BY_TYPE = frozenset(
    {
        "chlo.top_k",
        "stablehlo.broadcast_in_dim",
        "stablehlo.concatenate",
        "stablehlo.convolution",
        "stablehlo.dot_general",
        "stablehlo.dynamic_update_slice",
        "stablehlo.optimization_barrier",
        "stablehlo.pad",
        "stablehlo.reduce",
        "stablehlo.reduce_window",
        "stablehlo.reshape",
        "stablehlo.reverse",
        "stablehlo.sort",
        "stablehlo.transpose",
    }
)
# Ops never run on local pieces yet, whatever their rule says.
_ALWAYS_REPLICATED = frozenset(
    {
        "stablehlo.all_gather",
        "stablehlo.all_reduce",
        "stablehlo.all_to_all",
        "stablehlo.cholesky",
        "stablehlo.collective_permute",
        "stablehlo.custom_call",
        "stablehlo.fft",
        "stablehlo.reduce_scatter",
        "stablehlo.rng_bit_generator",
        "stablehlo.select_and_scatter",
        "stablehlo.triangular_solve",
    }
)
# Ops linear in (some of) their operands: a partial sum can flow through them
# unreduced (`_Emitter.linear_in` has the per-op conditions).
_LINEAR_OPS = frozenset(
    {
        "stablehlo.add",
        "stablehlo.broadcast_in_dim",
        "stablehlo.divide",
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
# Ops whose result is their operand: the partitioner only reshards.
_IDENTITY_OPS = frozenset(
    {"sdy.sharding_constraint", "sdy.propagation_barrier", "sdy.reshard"}
)
_ITEMSIZE = {
    "i1": 1,
    "i8": 1,
    "ui8": 1,
    "i16": 2,
    "ui16": 2,
    "f16": 2,
    "bf16": 2,
    "i32": 4,
    "ui32": 4,
    "f32": 4,
    "i64": 8,
    "ui64": 8,
    "f64": 8,
    "complex<f32>": 8,
    "complex<f64>": 16,
}


def itemsize(dtype: str) -> int:
    if dtype in _ITEMSIZE:
        return _ITEMSIZE[dtype]
    m = re.match(r"[a-z]*?(\d+)", dtype)
    return max(1, int(m.group(1)) // 8) if m else 4


class PartitionFailure(Exception):
    """Input the partitioner cannot handle, with where it is."""

    def __init__(self, loc: SourceLoc, message: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message


@dataclass(frozen=True, slots=True)
class Collective:
    """One collective the partitioner inserted, and why."""

    kind: str  # "all-gather", "all-reduce", ...
    axes: tuple[str, ...]  # as Shardy prints them: '"x"', '"y":(2)2'
    bytes_per_device: int
    op: str  # the op that needed it
    loc: SourceLoc
    reason: str  # "operand 0: [{"x"}, {}] -> [{}, {}]"


@dataclass(frozen=True, slots=True)
class Remark:
    loc: SourceLoc
    message: str


@dataclass(slots=True)
class PartitionReport:
    collectives: list[Collective] = field(default_factory=list)
    remarks: list[Remark] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(c.bytes_per_device for c in self.collectives)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.collectives:
            out[c.kind] = out.get(c.kind, 0) + 1
        return out

    def collectives_text(self) -> str:
        lines = ["collectives inserted by partition (bytes sent per device):"]
        for c in self.collectives:
            axes = ",".join(c.axes)
            lines.append(
                f"  {c.kind:<15} axes {{{axes}}} {c.bytes_per_device:>10} B  "
                f"{c.op} at {c.loc}: {c.reason}"
            )
        counts = ", ".join(f"{k} x{v}" for k, v in sorted(self.counts().items()))
        lines.append(
            f"  total: {len(self.collectives)} collectives ({counts or 'none'}), "
            f"{self.total_bytes} B per device"
        )
        return "\n".join(lines) + "\n"

    def remarks_text(self) -> str:
        return "".join(f"{r.loc}: remark: {r.message}\n" for r in self.remarks)


def _layout_text(layout: Layout) -> str:
    dims = []
    for axes in layout:
        dims.append("{" + ", ".join(_axis_text(a) for a in axes) + "}")
    return "[" + ", ".join(dims) + "]"


def _axis_text(axis: AxisRef) -> str:
    text = print_string(axis.name)
    return text if axis.size is None else f"{text}:({axis.pre_size}){axis.size}"


def _shape_of_type(text: str) -> tuple[int, ...]:
    """`tensor<4x16xf32>` -> (4, 16); `tensor<f32>` -> ()."""
    body = text[len("tensor<") : -1]
    parts = body.split("x")
    return tuple(int(p) for p in parts[:-1])


def _tensor_type(shape: Sequence[int], dtype: str) -> str:
    if not shape:
        return f"tensor<{dtype}>"
    return "tensor<" + "x".join(str(s) for s in shape) + f"x{dtype}>"


def _span(axes: Sequence[AxisRef], mesh: MeshModel) -> int:
    """Devices the axes span together (product of their sizes)."""
    if not axes:
        return 1
    return _span_cached(tuple(axes), mesh)


@functools.lru_cache(maxsize=4096)
def _span_cached(axes: tuple[AxisRef, ...], mesh: MeshModel) -> int:
    return math.prod(a.full_size(mesh) for a in axes)


def _replicated(rank: int) -> Layout:
    return tuple(() for _ in range(rank))


class _Scope:
    """SSA names of one region nesting level; outer levels stay visible."""

    def __init__(self, parent: _Scope | None) -> None:
        self.parent = parent
        self.names: dict[int, str] = {}  # graph value id -> local SSA name
        self.cache: dict[object, str] = {}  # coordinate/constant values
        # Other layouts a value is available in locally (graph value id ->
        # [(layout, SSA name)]): what an op computed before its result was
        # resharded, and earlier reshards. A later use picks the cheapest.
        self.versions: dict[int, list[tuple[Layout, str]]] = {}

    def lookup(self, vid: int) -> str | None:
        scope: _Scope | None = self
        while scope is not None:
            if vid in scope.names:
                return scope.names[vid]
            scope = scope.parent
        return None

    def versions_of(self, vid: int) -> list[tuple[Layout, str]]:
        found: list[tuple[Layout, str]] = []
        scope: _Scope | None = self
        while scope is not None:
            found += scope.versions.get(vid, ())
            scope = scope.parent
        return found

    def cached(self, key: object) -> str | None:
        scope: _Scope | None = self
        while scope is not None:
            if key in scope.cache:
                return scope.cache[key]
            scope = scope.parent
        return None


class _Emitter:
    """Writes the per-device body as MLIR text (generic op syntax)."""

    def __init__(
        self,
        graph: Graph,
        mesh_name: str,
        mesh: MeshModel,
        layouts: dict[int, Layout],
        report: PartitionReport,
    ) -> None:
        self.graph = graph
        self.mesh_name = mesh_name
        self.mesh = mesh
        self.layouts = layouts
        self.report = report
        self.lines: list[str] = []
        self.indent = 2
        self.counter = 0
        self.channel = 0
        self.scope = _Scope(None)
        self.inline_depth = 0
        self.factor_cache: dict[object, tuple[DimAxes, ...]] = {}
        # Partial sums left unreduced while they flow through a linear op:
        # value id -> (its layout now, the axes it still has to be summed over).
        self.deferred: dict[int, tuple[Layout, DimAxes]] = {}

    # -- text ------------------------------------------------------------------

    def fresh(self) -> str:
        self.counter += 1
        return f"%v{self.counter}"

    def line(self, text: str) -> None:
        self.lines.append("  " * self.indent + text)

    def op(
        self,
        name: str,
        operands: Sequence[str],
        operand_types: Sequence[str],
        result_types: Sequence[str],
        attrs: Mapping[str, str] | None = None,
        regions: Sequence[list[str]] = (),
    ) -> list[str]:
        """Emits one op in generic form; returns its result names."""
        base = self.fresh() if result_types else ""
        n = len(result_types)
        results = [base] if n == 1 else [f"{base}#{i}" for i in range(n)]
        lhs = "" if n == 0 else (f"{base} = " if n == 1 else f"{base}:{n} = ")
        text = f'{lhs}"{name}"({", ".join(operands)})'
        if regions:
            text += (
                " (" + ", ".join("{\n" + "\n".join(r) + "\n}" for r in regions) + ")"
            )
        if attrs:
            # An empty value is a unit attribute (`use_global_device_ids`).
            items = (f"{k} = {v}" if v else k for k, v in attrs.items())
            text += " {" + ", ".join(items) + "}"
        outs = ", ".join(result_types)
        text += f" : ({', '.join(operand_types)}) -> ({outs})"
        for piece in text.split("\n"):
            self.line(piece)
        return results

    def region(self, arg_types: Sequence[str]) -> tuple[list[str], list[str]]:
        """Starts a region: returns (its argument names, the header lines)."""
        names = [self.fresh() for _ in arg_types]
        args = ", ".join(f"{n}: {t}" for n, t in zip(names, arg_types, strict=True))
        return names, [f"^bb0({args}):"] if arg_types else []

    def capture(self) -> tuple[list[str], int]:
        saved = self.lines
        self.lines = []
        return saved, self.indent

    def restore(self, saved: tuple[list[str], int]) -> list[str]:
        body = self.lines
        self.lines, self.indent = saved
        return body

    # -- values ----------------------------------------------------------------

    def name(self, vid: int) -> str:
        found = self.scope.lookup(vid)
        if found is None:
            raise InternalError(f"partition: value {vid} used before it was emitted")
        return found

    def layout(self, vid: int) -> Layout:
        """The value's layout now: its assigned one, or while it is a deferred
        partial sum, the layout it was produced with."""
        deferred = self.deferred.get(vid)
        if deferred is not None:
            return deferred[0]
        shape = self.graph.value(vid).shape or ()
        return self.layouts.get(vid, _replicated(len(shape)))

    def local_shape(self, shape: Sequence[int], layout: Layout) -> tuple[int, ...]:
        return tuple(
            s // _span(axes, self.mesh) for s, axes in zip(shape, layout, strict=True)
        )

    def local_type(self, vid: int, layout: Layout | None = None) -> str:
        v = self.graph.value(vid)
        if v.shape is None:
            return v.type
        lay = self.layout(vid) if layout is None else layout
        return _tensor_type(self.local_shape(v.shape, lay), v.dtype)

    # -- device coordinates ----------------------------------------------------

    def const_i32(self, value: int) -> str:
        key = ("i32", value)
        found = self.scope.cached(key)
        if found is not None:
            return found
        name = self.op(
            "stablehlo.constant",
            [],
            [],
            ["tensor<i32>"],
            {"value": f"dense<{value}> : tensor<i32>"},
        )[0]
        self.scope.cache[key] = name
        return name

    def partition_position(self) -> str:
        key = "position"
        found = self.scope.cached(key)
        if found is not None:
            return found
        pid = self.op("stablehlo.partition_id", [], [], ["tensor<ui32>"])[0]
        pos = self.op("stablehlo.convert", [pid], ["tensor<ui32>"], ["tensor<i32>"])[0]
        self.scope.cache[key] = pos
        return pos

    def coordinate(self, axis: AxisRef) -> str:
        key = ("coord", axis)
        found = self.scope.cached(key)
        if found is not None:
            return found
        t = "tensor<i32>"
        value = self.partition_position()
        stride = axis_stride(self.mesh, axis)
        if stride != 1:
            value = self.binary("stablehlo.divide", value, self.const_i32(stride))
        size = axis.full_size(self.mesh)
        if size * stride != self.mesh.size:
            value = self.binary("stablehlo.remainder", value, self.const_i32(size))
        del t
        self.scope.cache[key] = value
        return value

    def binary(self, name: str, a: str, b: str, t: str = "tensor<i32>") -> str:
        return self.op(name, [a, b], [t, t], [t])[0]

    def block_index(self, axes: Sequence[AxisRef]) -> str:
        """Row-major index of this device's block over `axes` (major first)."""
        index = ""
        for axis in axes:
            coord = self.coordinate(axis)
            if not index:
                index = coord
                continue
            scaled = self.binary(
                "stablehlo.multiply", index, self.const_i32(axis.full_size(self.mesh))
            )
            index = self.binary("stablehlo.add", scaled, coord)
        return index

    def dim_offset(self, axes: Sequence[AxisRef], block: int) -> str:
        if not axes:
            return self.const_i32(0)
        index = self.block_index(axes)
        if block == 1:
            return index
        return self.binary("stablehlo.multiply", index, self.const_i32(block))

    def per_position(self, values: Sequence[int]) -> str:
        """A scalar that is `values[p]` on the device at mesh position p."""
        if len(set(values)) == 1:
            return self.const_i32(values[0])
        key = ("per-position", tuple(values))
        found = self.scope.cached(key)
        if found is not None:
            return found
        n = len(values)
        table = self.op(
            "stablehlo.constant",
            [],
            [],
            [f"tensor<{n}xi32>"],
            {"value": f"dense<[{', '.join(map(str, values))}]> : tensor<{n}xi32>"},
        )[0]
        one = self.dynamic_slice(
            table, f"tensor<{n}xi32>", [self.partition_position()], [1], "i32"
        )
        value = self.op("stablehlo.reshape", [one], ["tensor<1xi32>"], ["tensor<i32>"])[
            0
        ]
        self.scope.cache[key] = value
        return value

    def cut(
        self,
        name: str,
        t_in: str,
        offsets: Sequence[Sequence[int]],
        part: Sequence[int],
        dtype: str,
    ) -> str:
        """This device's `part`-shaped piece of its block at `offsets[position]`."""
        starts = [
            self.per_position([row[d] for row in offsets]) for d in range(len(part))
        ]
        return self.dynamic_slice(name, t_in, starts, part, dtype)

    def dynamic_slice(
        self,
        name: str,
        t_in: str,
        starts: Sequence[str],
        sizes: Sequence[int],
        dtype: str,
    ) -> str:
        """`sizes` elements of `name` from the scalar offsets `starts`."""
        text = ", ".join(map(str, sizes))
        return self.op(
            "stablehlo.dynamic_slice",
            [name, *starts],
            [t_in, *(["tensor<i32>"] * len(starts))],
            [_tensor_type(sizes, dtype)],
            {"slice_sizes": f"array<i64: {text}>" if text else "array<i64>"},
        )[0]

    # -- collectives -----------------------------------------------------------

    def groups_attr(self, axes: Sequence[AxisRef]) -> str:
        return _groups_text(self.mesh, tuple(axes))

    def channel_attr(self) -> str:
        self.channel += 1
        return f"#stablehlo.channel_handle<handle = {self.channel}, type = 1>"

    def reducer_region(self, combiner: str, dtype: str) -> list[str]:
        t = _tensor_type((), dtype)
        saved = self.capture()
        (a, b), header = self.region([t, t])
        self.indent = 1
        s = self.op(combiner, [a, b], [t, t], [t])[0]
        self.op("stablehlo.return", [s], [t], [])
        return header + self.restore(saved)

    def reshard(
        self,
        name: str,
        vid_shape: Sequence[int],
        dtype: str,
        src: Layout,
        dst: Layout,
        why: tuple[str, SourceLoc, str],
        partial: DimAxes = (),
        combiner: str = "stablehlo.add",
    ) -> str:
        """Emits the collectives taking `name` from `src` (+ partial) to `dst`."""
        if src == dst and not partial:
            return name
        if math.prod(vid_shape) == 0:
            # No elements: nothing to move (collectives reject zero-size dims).
            t = _tensor_type(self.local_shape(vid_shape, dst), dtype)
            return self.op(
                "stablehlo.constant", [], [], [t], {"value": f"dense<> : {t}"}
            )[0]
        steps = plan_reshard(src, dst, vid_shape, self.mesh, partial)
        cur = [list(d) for d in src]
        for step in steps:
            name = self.emit_step(name, vid_shape, dtype, cur, step, why, combiner)
        return name

    def emit_step(
        self,
        name: str,
        shape: Sequence[int],
        dtype: str,
        cur: list[list[AxisRef]],
        step: Step,
        why: tuple[str, SourceLoc, str],
        combiner: str,
    ) -> str:
        local_before = self.local_shape(shape, tuple(tuple(d) for d in cur))
        t_in = _tensor_type(local_before, dtype)
        apply_step(cur, step)  # `cur` is now the layout after the step
        local_after = self.local_shape(shape, tuple(tuple(d) for d in cur))
        op_name, loc, reason = why
        if isinstance(step, LocalSlice):
            starts = [
                self.dim_offset(added, local_after[d])
                for d, added in enumerate(step.added)
            ]
            return self.dynamic_slice(name, t_in, starts, local_after, dtype)
        moved = step_bytes(step, local_before, itemsize(dtype), self.mesh)
        axes_names = tuple(_axis_text(a) for a in step.axes)
        if isinstance(step, CollectivePermute):
            self.report.collectives.append(
                Collective(
                    "collective-permute", axes_names, moved, op_name, loc, reason
                )
            )
            rows = ", ".join(f"[{a}, {b}]" for a, b in step.pairs)
            pairs = f"dense<[{rows}]> : tensor<{len(step.pairs)}x2xi64>"
            if step.offsets is not None:
                name = self.cut(name, t_in, step.offsets, step.part, dtype)
                t_in = _tensor_type(step.part, dtype)
            return self.op(
                "stablehlo.collective_permute",
                [name],
                [t_in],
                [t_in],
                {"source_target_pairs": pairs, "channel_handle": self.channel_attr()},
            )[0]
        kind = {
            AllGather: "all-gather",
            AllToAll: "all-to-all",
            AllReduce: "all-reduce",
            ReduceScatter: "reduce-scatter",
        }[type(step)]
        self.report.collectives.append(
            Collective(kind, axes_names, moved, op_name, loc, reason)
        )
        groups = self.groups_attr(step.axes)
        if isinstance(step, AllGather):
            return self.op(
                "stablehlo.all_gather",
                [name],
                [t_in],
                [_tensor_type(local_after, dtype)],
                {
                    "all_gather_dim": f"{step.dim} : i64",
                    "replica_groups": groups,
                    "channel_handle": self.channel_attr(),
                    "use_global_device_ids": "",
                },
            )[0]
        if isinstance(step, AllToAll):
            return self.op(
                "stablehlo.all_to_all",
                [name],
                [t_in],
                [_tensor_type(local_after, dtype)],
                {
                    "split_dimension": f"{step.split_dim} : i64",
                    "concat_dimension": f"{step.concat_dim} : i64",
                    "split_count": f"{_span(step.axes, self.mesh)} : i64",
                    "replica_groups": groups,
                    "channel_handle": self.channel_attr(),
                },
            )[0]
        t_out = _tensor_type(local_after, dtype)
        reduced = self.reduce_across(name, t_in, t_out, dtype, step, combiner)
        if combiner not in ("stablehlo.maximum", "stablehlo.minimum"):
            return reduced
        if not dtype.startswith(("f", "bf")):
            return reduced
        # XLA's CPU all-reduce computes max/min without propagating NaN, while
        # the unsharded reduce does: a 1-byte flag says where a NaN was.
        flag_in, flag_out = (
            _tensor_type(_shape_of_type(t), "i8") for t in (t_in, t_out)
        )
        pred_in, pred_out = (
            _tensor_type(_shape_of_type(t), "i1") for t in (t_in, t_out)
        )
        ne = {"comparison_direction": "#stablehlo<comparison_direction NE>"}
        is_nan = self.op(
            "stablehlo.compare", [name, name], [t_in, t_in], [pred_in], ne
        )[0]
        flag = self.op("stablehlo.convert", [is_nan], [pred_in], [flag_in])[0]
        self.report.collectives.append(
            Collective(
                kind,
                axes_names,
                moved // 4 or moved,
                op_name,
                loc,
                "NaN flag of " + reason,
            )
        )
        any_nan = self.reduce_across(
            flag, flag_in, flag_out, "i8", step, "stablehlo.maximum"
        )
        zero = self.op(
            "stablehlo.constant",
            [],
            [],
            [flag_out],
            {"value": f"dense<0> : {flag_out}"},
        )[0]
        has_nan = self.op(
            "stablehlo.compare", [any_nan, zero], [flag_out, flag_out], [pred_out], ne
        )[0]
        scalar = _tensor_type((), dtype)
        fzero = self.op(
            "stablehlo.constant", [], [], [scalar], {"value": f"dense<0.0> : {scalar}"}
        )[0]
        nan = self.op("stablehlo.divide", [fzero, fzero], [scalar, scalar], [scalar])[0]
        nans = self.op(
            "stablehlo.broadcast_in_dim",
            [nan],
            [scalar],
            [t_out],
            {"broadcast_dimensions": "array<i64>"},
        )[0]
        return self.op(
            "stablehlo.select",
            [has_nan, nans, reduced],
            [pred_out, t_out, t_out],
            [t_out],
        )[0]

    def reduce_across(
        self,
        name: str,
        t_in: str,
        t_out: str,
        dtype: str,
        step: AllReduce | ReduceScatter,
        combiner: str,
    ) -> str:
        """One all-reduce or reduce-scatter of `name` with `combiner`."""
        attrs = {
            "replica_groups": self.groups_attr(step.axes),
            "channel_handle": self.channel_attr(),
            "use_global_device_ids": "",
        }
        region = self.reducer_region(combiner, dtype)
        if isinstance(step, AllReduce):
            return self.op(
                "stablehlo.all_reduce", [name], [t_in], [t_in], attrs, [region]
            )[0]
        attrs = {"scatter_dimension": f"{step.dim} : i64", **attrs}
        return self.op(
            "stablehlo.reduce_scatter", [name], [t_in], [t_out], attrs, [region]
        )[0]

    # -- ops -------------------------------------------------------------------

    def value_reshard(
        self, vid: int, dst: Layout, node: Node, reason: str, op_name: str = ""
    ) -> str:
        v = self.graph.value(vid)
        src = self.layout(vid)
        partial = self.deferred.get(vid, ((), ()))[1]
        if v.shape is None or (src == dst and not partial):
            return self.name(vid)
        # A value resharded once to a layout is reused by every later use that
        # the same definition dominates (same or inner scope).
        key = ("reshard", vid, dst)
        found = self.scope.cached(key)
        if found is not None:
            return found
        name = self.name(vid)
        versions = [] if partial else self.scope.versions_of(vid)
        if versions:
            # Start from whichever local copy of the value is cheapest to
            # take to `dst` (a replicated copy an op computed before its
            # result was sliced costs nothing to slice again).
            size = itemsize(v.dtype)
            best = reshard_bytes(src, dst, v.shape, size, self.mesh)
            for lay, other in versions:
                cost = reshard_bytes(lay, dst, v.shape, size, self.mesh)
                if cost < best:
                    best, src, name = cost, lay, other
            if src == dst:
                return name
        text = f"{reason}: {_layout_text(src)} -> {_layout_text(dst)}"
        if partial:
            text += f" (partial over {','.join(_axis_text(a) for a in partial)})"
        name = self.reshard(
            name,
            v.shape,
            v.dtype,
            src,
            dst,
            (op_name or node.op, node.loc, text),
            partial,
        )
        self.scope.cache[key] = name
        self.scope.versions.setdefault(vid, []).append((dst, name))
        return name

    def bind_result(
        self,
        vid: int,
        name: str,
        produced: Layout,
        node: Node,
        partial: DimAxes = (),
        combiner: str = "stablehlo.add",
    ) -> None:
        v = self.graph.value(vid)
        self.deferred.pop(vid, None)
        target = self.layout(vid)
        if (
            partial
            and combiner == "stablehlo.add"
            and v.shape is not None
            and self.can_defer(vid, node)
        ):
            self.deferred[vid] = (produced, partial)
            self.scope.names[vid] = name
            return
        if v.shape is not None and (produced != target or partial):
            if not partial:
                self.scope.versions.setdefault(vid, []).append((produced, name))
            text = f"result: {_layout_text(produced)} -> {_layout_text(target)}"
            if partial:
                text += (
                    " (partial over " + ",".join(_axis_text(a) for a in partial) + ")"
                )
            name = self.reshard(
                name,
                v.shape,
                v.dtype,
                produced,
                target,
                (node.op, node.loc, text),
                partial,
                combiner,
            )
        self.scope.names[vid] = name

    def can_defer(self, vid: int, producer: Node) -> bool:
        """Leave a partial sum unreduced when its only use is an op linear in
        it, in the same block, whose result is no larger: the reduction then
        happens later, on a tensor no bigger than this one."""
        users = self.graph.users(vid)
        if len(users) != 1:
            return False
        user = self.graph.node(users[0])
        if user.op not in _LINEAR_OPS or user.parent != producer.parent:
            return False
        if len(user.results) != 1:
            return False
        size = self.graph.value(vid).shape
        out = self.graph.value(user.results[0]).shape
        if size is None or out is None:
            return False
        return math.prod(out) <= math.prod(size)

    def linear_in(
        self, node: Node, pending: Mapping[int, DimAxes], wants: Sequence[Layout]
    ) -> bool:
        """Whether `node` may run on the deferred partial operands `pending`
        (operand index -> axes) as they are and pass the partial sum on."""
        axes = set(pending.values())
        if len(axes) != 1 or node.op not in _LINEAR_OPS:
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
        if node.op not in ("stablehlo.constant", "sdy.constant"):
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

    def emit_block(self, nodes: Sequence[int]) -> list[int] | None:
        """Emits the ops of a block; returns the terminator's operand ids."""
        for nid in nodes:
            node = self.graph.node(nid)
            if node.op in ("func.return", "stablehlo.return", "sdy.return"):
                return list(node.operands)
            self.emit_node(node)
        return None

    def emit_node(self, node: Node) -> None:
        if node.op in _IDENTITY_OPS:
            vid = node.results[0]
            name = self.value_reshard(
                node.operands[0], self.layout(vid), node, "operand 0"
            )
            self.scope.names[vid] = name
            return
        if node.op == "func.call":
            self.emit_call(node)
            return
        if node.op == "stablehlo.while":
            self.emit_while(node)
            return
        if node.op == "stablehlo.case":
            self.emit_case(node)
            return
        if node.op in ("stablehlo.constant", "sdy.constant"):
            self.emit_constant(node)
            return
        if node.op == "stablehlo.iota":
            self.emit_iota(node)
            return
        if node.op == "sdy.manual_computation":
            self.emit_manual(node)
            return
        if node.op == "sdy.sharding_group":
            return  # a propagation hint with no result
        if node.op.startswith("sdy."):
            raise PartitionFailure(
                node.loc, f"partition does not handle '{node.op}' yet"
            )
        self.emit_by_rule(node)

    def emit_manual(self, node: Node) -> None:
        """A shard_map body: already per-device code. Over every mesh axis it is
        emitted as it is, on operands brought to its in_shardings."""
        manual = node.attrs.get("manual_axes")
        names = re.findall(
            r'"([^"]*)"', manual.text if isinstance(manual, Opaque) else ""
        )
        if set(names) != set(self.mesh.axis_names):
            raise PartitionFailure(
                node.loc,
                "partition handles sdy.manual_computation only when it is manual "
                f"over every mesh axis; this one is manual over {names or 'none'} "
                f"of {list(self.mesh.axis_names)}",
            )
        ins, outs = node.attrs.get("in_shardings"), node.attrs.get("out_shardings")
        in_lay = [_layout_of(t) for t in _per_value(ins)]
        out_lay = [_layout_of(t) for t in _per_value(outs)]
        block = node.regions[0][0]
        operands = [
            self.value_reshard(v, lay, node, f"operand {i}")
            for i, (v, lay) in enumerate(zip(node.operands, in_lay, strict=True))
        ]
        self.scope = _Scope(self.scope)
        inner = self.scope
        inner.names.update(zip(block.args, operands, strict=True))
        returned: list[int] = []
        for nid in block.nodes:
            child = self.graph.node(nid)
            if child.op == "sdy.return":
                returned = list(child.operands)
                break
            self.emit_verbatim(child)
        names_out = [self.name(v) for v in returned]
        # The body is one block inlined here: its names stay valid after it.
        self.scope = inner.parent or inner
        for vid, name, lay in zip(node.results, names_out, out_lay, strict=True):
            self.bind_result(vid, name, lay, node)

    def emit_call(self, node: Node) -> None:
        callee_ref = node.attrs.get("callee")
        callee_name = getattr(callee_ref, "name", None)
        if not isinstance(callee_name, str) or callee_name not in self.graph.symbols:
            raise PartitionFailure(node.loc, f"call to unknown function {callee_ref}")
        if self.inline_depth > 64:
            raise PartitionFailure(node.loc, "calls nest deeper than 64 (recursion?)")
        func = self.graph.node(self.graph.symbols[callee_name])
        block = func.regions[0][0]
        operands = []
        for i, (vid, arg) in enumerate(zip(node.operands, block.args, strict=True)):
            operands.append(
                self.value_reshard(vid, self.layout(arg), node, f"argument {i}")
            )
        self.scope = _Scope(self.scope)
        inner = self.scope
        for arg, name in zip(block.args, operands, strict=True):
            inner.names[arg] = name
        self.inline_depth += 1
        returned = self.emit_block(block.nodes) or []
        self.inline_depth -= 1
        names = [self.name(v) for v in returned]
        layouts = [self.layout(v) for v in returned]
        # Names made inside the callee stay valid: inlined code is one block.
        self.scope = inner.parent or inner
        # Device coordinates stay valid after the inlined body; reshards of the
        # callee's values must not, or a second call of it would reuse them.
        self.scope.cache.update(
            (k, v)
            for k, v in inner.cache.items()
            if not (isinstance(k, tuple) and k[0] == "reshard")
        )
        for vid, name, lay in zip(node.results, names, layouts, strict=True):
            self.bind_result(vid, name, lay, node)

    def emit_region(
        self,
        block_args: Sequence[int],
        nodes: Sequence[int],
        results: Sequence[int],
        arg_layouts: Sequence[Layout],
        node: Node,
    ) -> list[str]:
        """A partitioned region whose terminator returns values laid out like
        `results` (the op's results)."""
        saved = self.capture()
        arg_types = [
            self.local_type(a, lay)
            for a, lay in zip(block_args, arg_layouts, strict=True)
        ]
        names, header = self.region(arg_types)
        self.scope = _Scope(self.scope)
        for a, n, lay in zip(block_args, names, arg_layouts, strict=True):
            self.scope.names[a] = n
            self.layouts[a] = lay
        self.indent = 1
        returned = self.emit_block(nodes) or []
        outs = []
        types = []
        for i, (vid, res) in enumerate(zip(returned, results, strict=True)):
            outs.append(
                self.value_reshard(vid, self.layout(res), node, f"region result {i}")
            )
            types.append(self.local_type(res))
        self.op("stablehlo.return", outs, types, [])
        self.scope = self.scope.parent or self.scope
        return header + self.restore(saved)

    def emit_while(self, node: Node) -> None:
        lays = [self.layout(r) for r in node.results]
        operands = [
            self.value_reshard(v, lay, node, f"operand {i}")
            for i, (v, lay) in enumerate(zip(node.operands, lays, strict=True))
        ]
        types = [self.local_type(r) for r in node.results]
        cond, body = node.regions
        cond_block, body_block = cond[0], body[0]
        # The condition returns a scalar predicate: emitted without resharding.
        saved = self.capture()
        names, header = self.region(
            [
                self.local_type(a, lay)
                for a, lay in zip(cond_block.args, lays, strict=True)
            ]
        )
        self.scope = _Scope(self.scope)
        for a, n, lay in zip(cond_block.args, names, lays, strict=True):
            self.scope.names[a] = n
            self.layouts[a] = lay
        self.indent = 1
        returned = self.emit_block(cond_block.nodes) or []
        pred = self.value_reshard(returned[0], (), node, "loop condition")
        self.op("stablehlo.return", [pred], ["tensor<i1>"], [])
        self.scope = self.scope.parent or self.scope
        cond_region = header + self.restore(saved)
        body_region = self.emit_region(
            body_block.args, body_block.nodes, node.results, lays, node
        )
        results = self.op(
            "stablehlo.while", operands, types, types, {}, [cond_region, body_region]
        )
        for vid, name, lay in zip(node.results, results, lays, strict=True):
            self.bind_result(vid, name, lay, node)

    def emit_case(self, node: Node) -> None:
        index = self.value_reshard(node.operands[0], (), node, "branch index")
        regions = [
            self.emit_region((), region[0].nodes, node.results, (), node)
            for region in node.regions
        ]
        types = [self.local_type(r) for r in node.results]
        results = self.op(
            "stablehlo.case", [index], ["tensor<i32>"], types, {}, regions
        )
        for vid, name in zip(node.results, results, strict=True):
            self.scope.names[vid] = name

    def emit_constant(self, node: Node) -> None:
        vid = node.results[0]
        v = self.graph.value(vid)
        lay = self.layout(vid)
        value = node.attrs.get("value")
        text = node.attr_text.get("value", "")
        if v.shape is None or not any(lay):
            name = self.op("stablehlo.constant", [], [], [v.type], {"value": text})[0]
            self.scope.names[vid] = name
            return
        local = self.local_type(vid)
        if isinstance(value, DenseElements) and value.splat is not None:
            splat_text = text.rsplit(":", 1)[0].strip()
            name = self.op(
                "stablehlo.constant",
                [],
                [],
                [local],
                {"value": f"{splat_text} : {local}"},
            )[0]
            self.scope.names[vid] = name
            return
        full = self.op("stablehlo.constant", [], [], [v.type], {"value": text})[0]
        self.bind_result(vid, full, _replicated(len(v.shape)), node)

    def emit_iota(self, node: Node) -> None:
        vid = node.results[0]
        v = self.graph.value(vid)
        lay = self.layout(vid)
        dim = node.attrs.get("iota_dimension")
        assert isinstance(dim, int)
        assert v.shape is not None
        local = self.local_type(vid)
        name = self.op(
            "stablehlo.iota", [], [], [local], {"iota_dimension": f"{dim} : i64"}
        )[0]
        if lay[dim]:
            local_shape = self.local_shape(v.shape, lay)
            offset = self.dim_offset(lay[dim], local_shape[dim])
            scalar = _tensor_type((), v.dtype)
            if v.dtype != "i32":
                offset = self.op(
                    "stablehlo.convert", [offset], ["tensor<i32>"], [scalar]
                )[0]
            bcast = self.op(
                "stablehlo.broadcast_in_dim",
                [offset],
                [scalar],
                [local],
                {"broadcast_dimensions": "array<i64>"},
            )[0]
            name = self.op("stablehlo.add", [name, bcast], [local, local], [local])[0]
        self.scope.names[vid] = name

    def emit_by_rule(self, node: Node) -> None:
        info = op_info(self.graph, node)
        rule = RULES.lookup(info).rule if info is not None else None
        if (
            rule is None
            or node.op in _ALWAYS_REPLICATED
            or not self.local_ok(node, rule)
        ):
            why = "no sharding rule" if rule is None else "not partitioned yet"
            self.emit_replicated(node, why)
            return
        combiner = _combiner(self.graph, node)
        factors = self.choose_factors(node, rule, combiner)
        wants = [_project(t, factors, self.mesh) for t in rule.operands]
        pending = {
            i: self.deferred[v][1]
            for i, v in enumerate(node.operands)
            if v in self.deferred
        }
        carried: DimAxes = ()
        if pending and self.linear_in(node, pending, wants):
            carried = next(iter(pending.values()))
        operands = []
        for i, (vid, want) in enumerate(zip(node.operands, wants, strict=True)):
            if carried and i in pending:
                operands.append(self.name(vid))  # still partial: the op is linear
            else:
                operands.append(self.value_reshard(vid, want, node, f"operand {i}"))
        produced = [_project(t, factors, self.mesh) for t in rule.results]
        partial = tuple(
            a
            for f in range(rule.num_factors)
            if rule.kind(f) is FactorKind.REDUCTION
            for a in factors[f]
        )
        partial += tuple(a for a in carried if a not in partial)
        in_types = [
            self.local_type(v, _project(t, factors, self.mesh))
            for v, t in zip(node.operands, rule.operands, strict=True)
        ]
        out_types = [
            self.local_type(v, lay)
            for v, lay in zip(node.results, produced, strict=True)
        ]
        attrs = self.local_attrs(node, produced, rule, factors)
        halos = _halo_factors(self.graph, node, rule)
        split_halos = {f: h for f, h in halos.items() if factors[f]}
        if split_halos:
            operands[0], in_types[0] = self.exchange_halos(
                operands[0], in_types[0], split_halos, factors
            )
            attrs["padding"] = _padding_text(node, split_halos)
        if node.op == "stablehlo.scatter" and len(node.operands) == 3:
            operand_layout = _project(rule.operands[0], factors, self.mesh)
            if any(operand_layout):
                name = self.local_scatter(
                    node, operands, in_types, out_types[0], attrs, operand_layout
                )
                self.bind_result(node.results[0], name, produced[0], node)
                return
        if node.op == "stablehlo.gather" and partial:
            table_layout = _project(rule.operands[0], factors, self.mesh)
            names = [
                self.masked_gather(
                    node, operands, in_types, out_types[0], attrs, table_layout
                )
            ]
            for vid, name, lay in zip(node.results, names, produced, strict=True):
                self.bind_result(vid, name, lay, node, partial, "stablehlo.add")
            return
        regions = [self.verbatim_region(r[0]) for r in node.regions]
        names = self.op(node.op, operands, in_types, out_types, attrs, regions)
        for vid, name, lay in zip(node.results, names, produced, strict=True):
            self.bind_result(vid, name, lay, node, partial, combiner or "stablehlo.add")

    def index_blocks(
        self,
        index_map: Sequence[int],
        layout: Layout,
        shape: Sequence[int],
        idx_dtype: str,
    ) -> tuple[list[str], list[str]]:
        """Per index component: this device's block offset along the operand
        dim it indexes, and the block's size, as scalars of the index type."""
        scalar = _tensor_type((), idx_dtype)
        offsets, limits = [], []
        for d in index_map:
            axes = layout[d]
            local = shape[d] // _span(axes, self.mesh)
            off = self.dim_offset(axes, local) if axes else self.const_i32(0)
            if idx_dtype != "i32":
                off = self.op("stablehlo.convert", [off], ["tensor<i32>"], [scalar])[0]
            offsets.append(off)
            limit = local if axes else shape[d]
            value = {"value": f"dense<{limit}> : {scalar}"}
            limits.append(self.op("stablehlo.constant", [], [], [scalar], value)[0])
        return offsets, limits

    def spread_components(
        self, parts: Sequence[str], idx_t: str, idx_dtype: str, vector_dim: int
    ) -> str:
        """Per-component scalars broadcast to an index tensor's local shape."""
        scalar = _tensor_type((), idx_dtype)
        if vector_dim >= len(_shape_of_type(idx_t)):
            return self.op(
                "stablehlo.broadcast_in_dim",
                [parts[0]],
                [scalar],
                [idx_t],
                {"broadcast_dimensions": "array<i64>"},
            )[0]
        one = _tensor_type((1,), idx_dtype)
        pieces = [self.op("stablehlo.reshape", [p], [scalar], [one])[0] for p in parts]
        vec_t = _tensor_type((len(parts),), idx_dtype)
        vec = self.op(
            "stablehlo.concatenate",
            pieces,
            [one] * len(pieces),
            [vec_t],
            {"dimension": "0 : i64"},
        )[0]
        return self.op(
            "stablehlo.broadcast_in_dim",
            [vec],
            [vec_t],
            [idx_t],
            {"broadcast_dimensions": f"array<i64: {vector_dim}>"},
        )[0]

    def local_scatter(
        self,
        node: Node,
        operands: Sequence[str],
        in_types: Sequence[str],
        out_type: str,
        attrs: Mapping[str, str],
        operand_layout: Layout,
    ) -> str:
        """A scatter into this device's block of an operand split along the
        dims it scatters into: indices are shifted into the block, and updates
        for other blocks are sent to a scratch row appended to the block (the
        behaviour of out-of-bounds scatter indices is implementation-defined,
        so none is relied on), which is sliced off afterwards."""
        dims = node.attrs.get("scatter_dimension_numbers")
        assert isinstance(dims, Mapping)
        index_map = _ints(dims.get("scattered_dims_to_operand_dims"))
        vector_dim = dims.get("index_vector_dim")
        assert isinstance(vector_dim, int)
        operand = self.graph.value(node.operands[0])
        idx_dtype = self.graph.value(node.operands[1]).dtype
        assert operand.shape is not None
        idx_t = in_types[1]
        idx_shape = _shape_of_type(idx_t)
        offsets, limits = self.index_blocks(
            index_map, operand_layout, operand.shape, idx_dtype
        )
        shifted = self.op(
            "stablehlo.subtract",
            [
                operands[1],
                self.spread_components(offsets, idx_t, idx_dtype, vector_dim),
            ],
            [idx_t, idx_t],
            [idx_t],
        )[0]
        limit_vec = self.spread_components(limits, idx_t, idx_dtype, vector_dim)
        mask, mask_t = self.index_mask(shifted, limit_vec, idx_t, vector_dim)
        keep = [d for d in range(len(idx_shape)) if d != vector_dim]
        if mask_t != _tensor_type(idx_shape, "i1"):
            mask = self.op(
                "stablehlo.broadcast_in_dim",
                [mask],
                [mask_t],
                [_tensor_type(idx_shape, "i1")],
                {"broadcast_dimensions": _i64_array(keep)},
            )[0]
        scalar = _tensor_type((), idx_dtype)
        scratch_parts = []
        for d, limit in zip(index_map, limits, strict=True):
            if operand_layout[d]:
                scratch_parts.append(limit)
            else:
                value = {"value": f"dense<0> : {scalar}"}
                scratch_parts.append(
                    self.op("stablehlo.constant", [], [], [scalar], value)[0]
                )
        scratch = self.spread_components(scratch_parts, idx_t, idx_dtype, vector_dim)
        routed = self.op(
            "stablehlo.select",
            [mask, shifted, scratch],
            [_tensor_type(idx_shape, "i1"), idx_t, idx_t],
            [idx_t],
        )[0]
        local = _shape_of_type(in_types[0])
        dtype = operand.dtype
        high = [
            1 if (d in index_map and operand_layout[d]) else 0
            for d in range(len(local))
        ]
        padded_shape = [n + h for n, h in zip(local, high, strict=True)]
        padded_t = _tensor_type(padded_shape, dtype)
        zero_text = "false" if dtype == "i1" else ("0" if dtype[0] in "iu" else "0.0")
        pad_value = self.op(
            "stablehlo.constant",
            [],
            [],
            [_tensor_type((), dtype)],
            {"value": f"dense<{zero_text}> : {_tensor_type((), dtype)}"},
        )[0]
        padded = self.op(
            "stablehlo.pad",
            [operands[0], pad_value],
            [in_types[0], _tensor_type((), dtype)],
            [padded_t],
            {
                "edge_padding_low": _i64_array([0] * len(local)),
                "edge_padding_high": _i64_array(high),
                "interior_padding": _i64_array([0] * len(local)),
            },
        )[0]
        scattered = self.op(
            "stablehlo.scatter",
            [padded, routed, operands[2]],
            [padded_t, idx_t, in_types[2]],
            [padded_t],
            attrs,
            [self.verbatim_region(node.regions[0][0])],
        )[0]
        return self.op(
            "stablehlo.slice",
            [scattered],
            [padded_t],
            [out_type],
            {
                "start_indices": _i64_array([0] * len(local)),
                "limit_indices": _i64_array(local),
                "strides": _i64_array([1] * len(local)),
            },
        )[0]

    def index_mask(
        self, shifted: str, limits: str, idx_t: str, vector_dim: int
    ) -> tuple[str, str]:
        """Whether each index (a row along `vector_dim`) lies in [0, limits)."""
        idx_shape = _shape_of_type(idx_t)
        pred_t = _tensor_type(idx_shape, "i1")
        zero = self.op(
            "stablehlo.constant", [], [], [idx_t], {"value": f"dense<0> : {idx_t}"}
        )[0]
        lower = self.op(
            "stablehlo.compare",
            [shifted, zero],
            [idx_t, idx_t],
            [pred_t],
            {"comparison_direction": "#stablehlo<comparison_direction GE>"},
        )[0]
        upper = self.op(
            "stablehlo.compare",
            [shifted, limits],
            [idx_t, idx_t],
            [pred_t],
            {"comparison_direction": "#stablehlo<comparison_direction LT>"},
        )[0]
        inside = self.op("stablehlo.and", [lower, upper], [pred_t, pred_t], [pred_t])[0]
        if vector_dim >= len(idx_shape):
            return inside, pred_t
        batch_shape = [s for d, s in enumerate(idx_shape) if d != vector_dim]
        mask_t = _tensor_type(batch_shape, "i1")
        init = self.op(
            "stablehlo.constant",
            [],
            [],
            ["tensor<i1>"],
            {"value": "dense<true> : tensor<i1>"},
        )[0]
        mask = self.op(
            "stablehlo.reduce",
            [inside, init],
            [pred_t, "tensor<i1>"],
            [mask_t],
            {"dimensions": f"array<i64: {vector_dim}>"},
            [self.reducer_region("stablehlo.and", "i1")],
        )[0]
        return mask, mask_t

    def masked_gather(
        self,
        node: Node,
        operands: Sequence[str],
        in_types: Sequence[str],
        out_type: str,
        attrs: Mapping[str, str],
        table_layout: Layout,
    ) -> str:
        """A gather whose indexed (collapsed) operand dims are split: each device
        looks up the indices that fall in its block (shifted to local offsets)
        and zeros the rest; the partial results are summed by the caller."""
        dims = node.attrs.get("dimension_numbers")
        assert isinstance(dims, Mapping)
        index_map = _ints(dims.get("start_index_map"))
        vector_dim = dims.get("index_vector_dim")
        assert isinstance(vector_dim, int)
        table = self.graph.value(node.operands[0])
        indices = self.graph.value(node.operands[1])
        assert table.shape is not None
        assert indices.shape is not None
        idx_t = in_types[1]
        idx_dtype = indices.dtype
        offsets, limits = self.index_blocks(
            index_map, table_layout, table.shape, idx_dtype
        )

        def spread(parts: list[str]) -> str:
            return self.spread_components(parts, idx_t, idx_dtype, vector_dim)

        shifted = self.op(
            "stablehlo.subtract",
            [operands[1], spread(offsets)],
            [idx_t, idx_t],
            [idx_t],
        )[0]
        inside, mask_t = self.index_mask(shifted, spread(limits), idx_t, vector_dim)
        gathered = self.op(
            "stablehlo.gather",
            [operands[0], shifted],
            [in_types[0], idx_t],
            [out_type],
            attrs,
        )[0]
        offset_dims = set(_ints(dims.get("offset_dims")))
        out_shape = _shape_of_type(out_type)
        batch_out = [d for d in range(len(out_shape)) if d not in offset_dims]
        mask_out = self.op(
            "stablehlo.broadcast_in_dim",
            [inside],
            [mask_t],
            [_tensor_type(out_shape, "i1")],
            {
                "broadcast_dimensions": "array<i64: "
                + ", ".join(map(str, batch_out))
                + ">"
            },
        )[0]
        dtype = table.dtype
        zero_value = "false" if dtype == "i1" else ("0" if dtype[0] in "iu" else "0.0")
        zeros = self.op(
            "stablehlo.constant",
            [],
            [],
            [out_type],
            {"value": f"dense<{zero_value}> : {out_type}"},
        )[0]
        return self.op(
            "stablehlo.select",
            [mask_out, gathered, zeros],
            [_tensor_type(out_shape, "i1"), out_type, out_type],
            [out_type],
        )[0]

    def exchange_halos(
        self,
        name: str,
        local_type: str,
        halos: Mapping[int, _Halo],
        factors: Sequence[DimAxes],
    ) -> tuple[str, str]:
        """Extends each split spatial dim of the local input by the rows the
        window reaches into the neighbours' blocks: `low` rows from the previous
        block, `high` from the next, by collective-permute. The first and last
        blocks receive nothing, i.e. zeros: the convolution's own padding."""
        shape = list(_shape_of_type(local_type))
        dtype = local_type[local_type.rindex("x") + 1 : -1] if shape else ""
        for f, halo in sorted(halos.items()):
            axes = factors[f]
            d = halo.dim
            size = shape[d]
            pieces: list[tuple[int, str, str]] = []
            for width, start, shift in (
                (halo.low, size - halo.low, 1),
                (halo.high, 0, -1),
            ):
                if width == 0:
                    continue
                part_shape = list(shape)
                part_shape[d] = width
                part_t = _tensor_type(part_shape, dtype)
                starts = [0] * len(shape)
                starts[d] = start
                limits = list(shape)
                limits[d] = start + width
                part = self.op(
                    "stablehlo.slice",
                    [name],
                    [_tensor_type(shape, dtype)],
                    [part_t],
                    {
                        "start_indices": _i64_array(starts),
                        "limit_indices": _i64_array(limits),
                        "strides": _i64_array([1] * len(shape)),
                    },
                )[0]
                pairs = neighbor_pairs(self.mesh, axes, shift)
                rows = ", ".join(f"[{a}, {b}]" for a, b in pairs)
                moved = math.prod(part_shape) * itemsize(dtype)
                self.report.collectives.append(
                    Collective(
                        "collective-permute",
                        tuple(_axis_text(a) for a in axes),
                        moved,
                        "stablehlo.convolution",
                        halo.loc,
                        f"halo of {width} along dim {d} from the "
                        + ("previous" if shift == 1 else "next")
                        + " block",
                    )
                )
                got = self.op(
                    "stablehlo.collective_permute",
                    [part],
                    [part_t],
                    [part_t],
                    {
                        "source_target_pairs": f"dense<[{rows}]> : "
                        f"tensor<{len(pairs)}x2xi64>",
                        "channel_handle": self.channel_attr(),
                    },
                )[0]
                pieces.append((shift, got, part_t))
            ordered = [p for p in pieces if p[0] == 1]
            ordered += [(0, name, _tensor_type(shape, dtype))]
            ordered += [p for p in pieces if p[0] == -1]
            new_shape = list(shape)
            new_shape[d] = size + halo.low + halo.high
            new_t = _tensor_type(new_shape, dtype)
            name = self.op(
                "stablehlo.concatenate",
                [p[1] for p in ordered],
                [p[2] for p in ordered],
                [new_t],
                {"dimension": f"{d} : i64"},
            )[0]
            shape = new_shape
        return name, _tensor_type(shape, dtype)

    def local_ok(self, node: Node, rule: ShardingRule) -> bool:
        if node.op == "stablehlo.convolution" and (
            node.attrs.get("feature_group_count", 1) != 1
            or node.attrs.get("batch_group_count", 1) != 1
        ):
            return False  # grouped: the group count would need local rewriting
        if node.op in _LOCAL_BY_TYPE or node.op in (
            "stablehlo.slice",
            "stablehlo.dynamic_slice",
            "stablehlo.gather",
            "stablehlo.scatter",
        ):
            return True
        if node.regions:
            return False
        return _is_elementwise(rule)

    def choose_factors(
        self, node: Node, rule: ShardingRule, combiner: str | None
    ) -> list[DimAxes]:
        """The factor shardings that move the fewest bytes.

        Candidates come from reading the current shardings in different orders
        (results first, operands first, each operand first): the first tensor
        to name an axis for a factor wins it. Ties go to the candidate that
        splits the work more ways.
        """
        # The choice depends only on this signature; ops that repeat it (layers
        # of a deep model) reuse the decision.
        values = (*node.operands, *node.results)
        signature = (
            node.op,
            rule,
            combiner,
            tuple(self.layout(v) for v in values),
            tuple(self.graph.value(v).shape for v in values),
            tuple(self.graph.value(v).dtype for v in values),
            frozenset(_unsplittable_factors(self.graph, node, rule)),
            tuple(
                (f, h.dim, h.low, h.high)
                for f, h in sorted(_halo_factors(self.graph, node, rule).items())
            ),
            frozenset(_tiled_window_factors(self.graph, node, rule)),
        )
        cached = self.factor_cache.get(signature)
        if cached is not None:
            return list(cached)
        chosen = self.cheapest_factors(node, rule, combiner)
        self.factor_cache[signature] = tuple(chosen)
        return chosen

    def cheapest_factors(
        self, node: Node, rule: ShardingRule, combiner: str | None
    ) -> list[DimAxes]:
        results = list(zip(node.results, rule.results, strict=True))
        operands = list(zip(node.operands, rule.operands, strict=True))
        orders = [results + operands, operands + results]
        for i in range(len(operands)):
            orders.append([operands[i], *results, *operands[:i], *operands[i + 1 :]])
        best: tuple[int, int, int] | None = None
        chosen: list[DimAxes] = []
        seen: set[tuple[DimAxes, ...]] = set()
        for index, order in enumerate(orders):
            factors = self.factors_from(order, node, rule, combiner)
            key_factors = tuple(factors)
            if key_factors in seen:
                continue
            seen.add(key_factors)
            ways = math.prod(_span(f, self.mesh) for f in factors)
            key = (self.factor_cost(node, rule, factors), -ways, index)
            if best is None or key < best:
                best, chosen = key, factors
        return chosen

    def factors_from(
        self,
        order: Sequence[tuple[int, tuple[tuple[int, ...], ...]]],
        node: Node,
        rule: ShardingRule,
        combiner: str | None,
    ) -> list[DimAxes]:
        """Factor shardings read from tensors in `order`; an axis serves one
        factor, a factor's axes must divide its size, and factors the op
        cannot split locally stay unsplit."""
        factors: list[list[AxisRef]] = [[] for _ in range(rule.num_factors)]
        used: list[AxisRef] = []
        forbidden = _unsplittable_factors(self.graph, node, rule)
        halos = _halo_factors(self.graph, node, rule)
        tiled = _tiled_window_factors(self.graph, node, rule)
        in_results = {f for t in rule.results for dim in t for f in dim}

        def allowed(f: int) -> bool:
            if f in forbidden:
                return False
            kind = rule.kind(f)
            if kind is FactorKind.PASS_THROUGH:
                # A pass-through factor of operands only means "gather that
                # operand first" (the rule table's convention).
                return f in in_results or not rule.results
            if kind is FactorKind.REDUCTION:
                if node.op in (
                    "stablehlo.dot_general",
                    "stablehlo.convolution",
                    "stablehlo.gather",
                ):
                    return True
                return (
                    node.op == "stablehlo.reduce"
                    and len(node.results) == 1
                    and combiner in REDUCIBLE_COMBINERS
                )
            # A convolution's spatial dim splits with a halo exchange; a window
            # that tiles its dim (stride = size, no padding) splits as it is.
            return f in halos or f in tiled

        for vid, tensor in order:
            split = _split_to_factors(tensor, self.layout(vid), rule, self.mesh)
            for f, axes in split.items():
                if factors[f] or not allowed(f):
                    continue
                for a in axes:
                    if any(a.overlaps(u, self.mesh) for u in used):
                        break
                    span = _span([*factors[f], a], self.mesh)
                    if rule.sizes[f] % span != 0:
                        break
                    if f in halos and rule.sizes[f] // span < halos[f].width:
                        break  # a block must hold the whole halo
                    factors[f].append(a)
                used.extend(factors[f])
        _keep_compound_dims_valid(rule, factors, self.mesh)
        return [tuple(f) for f in factors]

    def factor_cost(
        self, node: Node, rule: ShardingRule, factors: Sequence[DimAxes]
    ) -> int:
        """Bytes per device to bring operands to `factors` and results to
        their assigned shardings (partial sums included)."""
        partial = tuple(
            a
            for f in range(rule.num_factors)
            if rule.kind(f) is FactorKind.REDUCTION
            for a in factors[f]
        )
        total = 0
        none: DimAxes = ()
        pairs: list[tuple[int, Layout, Layout, DimAxes]] = [
            (vid, self.layout(vid), _project(t, factors, self.mesh), none)
            for vid, t in zip(node.operands, rule.operands, strict=True)
        ]
        pairs += [
            (vid, _project(t, factors, self.mesh), self.layout(vid), partial)
            for vid, t in zip(node.results, rule.results, strict=True)
        ]
        for vid, src, dst, part in pairs:
            v = self.graph.value(vid)
            if v.shape is None:
                continue
            total += reshard_bytes(
                src, dst, v.shape, itemsize(v.dtype), self.mesh, part
            )
        return total

    def local_attrs(
        self,
        node: Node,
        produced: Sequence[Layout],
        rule: ShardingRule,
        factors: Sequence[DimAxes],
    ) -> dict[str, str]:
        attrs = {
            k: v
            for k, v in node.attr_text.items()
            if not k.startswith(("sdy.", "mhlo.sharding"))
        }
        if node.op == "stablehlo.slice":
            operand = self.graph.value(node.operands[0])
            lay = _project(rule.operands[0], factors, self.mesh)
            assert operand.shape is not None
            local = self.local_shape(operand.shape, lay)
            limits = list(_ints(node.attrs.get("limit_indices")))
            for d, axes in enumerate(lay):
                if axes:
                    limits[d] = local[d]
            attrs["limit_indices"] = "array<i64: " + ", ".join(map(str, limits)) + ">"
        if node.op == "stablehlo.gather":
            operand = self.graph.value(node.operands[0])
            assert operand.shape is not None
            lay = _project(rule.operands[0], factors, self.mesh)
            local = self.local_shape(operand.shape, lay)
            sizes = list(_ints(node.attrs.get("slice_sizes")))
            for d, axes in enumerate(lay):
                if axes and sizes[d] == operand.shape[d]:
                    sizes[d] = local[d]
            attrs["slice_sizes"] = "array<i64: " + ", ".join(map(str, sizes)) + ">"
        if node.op == "stablehlo.dynamic_slice":
            result = self.graph.value(node.results[0])
            assert result.shape is not None
            local = self.local_shape(result.shape, produced[0])
            attrs["slice_sizes"] = "array<i64: " + ", ".join(map(str, local)) + ">"
        return attrs

    def verbatim_region(self, block: Block) -> list[str]:
        """A scalar region (reduce body, comparator) copied with its own types."""
        saved = self.capture()
        arg_types = [self.graph.value(a).type for a in block.args]
        names, header = self.region(arg_types)
        self.scope = _Scope(self.scope)
        for a, n in zip(block.args, names, strict=True):
            self.scope.names[a] = n
        self.indent = 1
        for nid in block.nodes:
            self.emit_verbatim(self.graph.node(nid))
        self.scope = self.scope.parent or self.scope
        return header + self.restore(saved)

    def emit_verbatim(self, node: Node) -> None:
        operands = [self.name(v) for v in node.operands]
        in_types = [self.graph.value(v).type for v in node.operands]
        out_types = [self.graph.value(v).type for v in node.results]
        attrs = {k: v for k, v in node.attr_text.items() if not k.startswith("sdy.")}
        regions = [self.verbatim_region(r[0]) for r in node.regions]
        names = self.op(node.op, operands, in_types, out_types, attrs, regions)
        for vid, name in zip(node.results, names, strict=True):
            self.scope.names[vid] = name

    def emit_replicated(self, node: Node, why: str) -> None:
        """Gathers every operand, runs the op on global shapes, slices results."""
        self.report.remarks.append(
            Remark(
                node.loc,
                f"'{node.op}' computed replicated ({why}): its operands "
                "are all-gathered first",
            )
        )
        operands = []
        for i, vid in enumerate(node.operands):
            rank = len(self.graph.value(vid).shape or ())
            operands.append(
                self.value_reshard(vid, _replicated(rank), node, f"operand {i}")
            )
        captured = _captured_values(self.graph, node)
        saved_names = {}
        for vid in captured:
            rank = len(self.graph.value(vid).shape or ())
            saved_names[vid] = self.value_reshard(
                vid, _replicated(rank), node, "captured value"
            )
        self.scope = _Scope(self.scope)
        self.scope.names.update(saved_names)
        in_types = [self.graph.value(v).type for v in node.operands]
        out_types = [self.graph.value(v).type for v in node.results]
        attrs = {k: v for k, v in node.attr_text.items() if not k.startswith("sdy.")}
        regions = [self.verbatim_region(r[0]) for r in node.regions]
        names = self.op(node.op, operands, in_types, out_types, attrs, regions)
        self.scope = self.scope.parent or self.scope
        for vid, name in zip(node.results, names, strict=True):
            rank = len(self.graph.value(vid).shape or ())
            self.bind_result(vid, name, _replicated(rank), node)


@functools.lru_cache(maxsize=1024)
def _groups_text(mesh: MeshModel, axes: tuple[AxisRef, ...]) -> str:
    groups = replica_groups(mesh, axes)
    rows = ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups)
    return f"dense<[{rows}]> : tensor<{len(groups)}x{len(groups[0])}xi64>"


def _ints(value: object) -> tuple[int, ...]:
    if isinstance(value, tuple):
        return tuple(int(v) for v in value)
    return ()


@dataclass(frozen=True, slots=True)
class _Halo:
    """A convolution spatial dim that can be split with a halo exchange."""

    dim: int  # input dim
    spatial: int  # index among the spatial dims (row of `padding`)
    low: int
    high: int
    loc: SourceLoc

    @property
    def width(self) -> int:
        return max(self.low, self.high)


def _halo_factors(graph: Graph, node: Node, rule: ShardingRule) -> dict[int, _Halo]:
    """Spatial factors of a stride-1, undilated, ungrouped convolution whose
    output keeps the input's size (`lo + hi == window - 1`)."""
    if node.op != "stablehlo.convolution":
        return {}
    attrs = node.attrs
    if (
        attrs.get("feature_group_count", 1) != 1
        or attrs.get("batch_group_count", 1) != 1
    ):
        return {}
    dims = attrs.get("dimension_numbers")
    if not isinstance(dims, Mapping):
        return {}
    spatial = _ints(dims.get("input_spatial_dimensions"))
    kernel_spatial = _ints(dims.get("kernel_spatial_dimensions"))
    n = len(spatial)
    strides = _ints(attrs.get("window_strides")) or (1,) * n
    lhs = _ints(attrs.get("lhs_dilation")) or (1,) * n
    rhs = _ints(attrs.get("rhs_dilation")) or (1,) * n
    reversal = attrs.get("window_reversal")
    if isinstance(reversal, tuple) and any(reversal):
        return {}
    padding = _padding_values(attrs.get("padding"), n)
    kernel = graph.value(node.operands[1]).shape or ()
    out: dict[int, _Halo] = {}
    for i, d in enumerate(spatial):
        window = kernel[kernel_spatial[i]]
        lo, hi = padding[i]
        if strides[i] != 1 or lhs[i] != 1 or rhs[i] != 1:
            continue
        if lo < 0 or hi < 0 or lo + hi != window - 1:
            continue
        for f in rule.operands[0][d]:
            if rule.kind(f) is FactorKind.PERMUTATION:
                out[f] = _Halo(d, i, lo, hi, node.loc)
    return out


def _tiled_window_factors(graph: Graph, node: Node, rule: ShardingRule) -> set[int]:
    """reduce_window factors whose windows tile the dim: each block of the
    output comes from one block of the input, so the op runs locally."""
    if node.op != "stablehlo.reduce_window" or len(node.operands) != 2:
        return set()
    attrs = node.attrs
    operand = graph.value(node.operands[0]).shape or ()
    result = graph.value(node.results[0]).shape or ()
    n = len(operand)
    window = _ints(attrs.get("window_dimensions"))
    strides = _ints(attrs.get("window_strides")) or (1,) * n
    base = _ints(attrs.get("base_dilations")) or (1,) * n
    wdil = _ints(attrs.get("window_dilations")) or (1,) * n
    padding = _padding_values(attrs.get("padding"), n)
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


def _padding_values(value: object, n: int) -> list[tuple[int, int]]:
    if isinstance(value, DenseElements):
        if value.values is not None:
            flat = value.values
        elif isinstance(value.splat, int) and not isinstance(value.splat, bool):
            flat = (value.splat,) * (2 * n)
        else:
            flat = (0,) * (2 * n)
        return [(flat[2 * i], flat[2 * i + 1]) for i in range(n)]
    return [(0, 0)] * n


def _padding_text(node: Node, halos: Mapping[int, _Halo]) -> str:
    """The padding attribute with split spatial dims padded by halos instead."""
    dims = node.attrs.get("dimension_numbers")
    assert isinstance(dims, Mapping)
    n = len(_ints(dims.get("input_spatial_dimensions")))
    pads = _padding_values(node.attrs.get("padding"), n)
    for halo in halos.values():
        pads[halo.spatial] = (0, 0)
    rows = ", ".join(f"[{lo}, {hi}]" for lo, hi in pads)
    return f"dense<[{rows}]> : tensor<{n}x2xi64>"


def _i64_array(values: Sequence[int]) -> str:
    return "array<i64: " + ", ".join(map(str, values)) + ">" if values else "array<i64>"


def _unsplittable_factors(graph: Graph, node: Node, rule: ShardingRule) -> set[int]:
    """Factors a rule lets propagation split but whose local op would differ.

    dynamic_update_slice: along a dim the update does not cover whole, the
    update lands at a runtime offset that may straddle blocks; that dim stays
    whole (gathered) on every device.
    """
    if node.op == "stablehlo.scatter":
        return _scatter_unsplittable(graph, node, rule)
    if node.op != "stablehlo.dynamic_update_slice":
        return set()
    operand = graph.value(node.operands[0]).shape or ()
    update = graph.value(node.operands[1]).shape or ()
    out: set[int] = set()
    for d, (full, part) in enumerate(zip(operand, update, strict=False)):
        if full != part:
            out.update(rule.operands[0][d])
    return out


def _scatter_unsplittable(graph: Graph, node: Node, rule: ShardingRule) -> set[int]:
    """A scatter runs on a block of its operand with shifted indices when every
    split operand dim is one it scatters into with window size 1 (inserted):
    then each update lands in exactly one block. Other split dims (a window
    that may straddle blocks, variadic scatters) stay whole."""
    if len(node.operands) != 3:
        return {f for t in (*rule.operands, *rule.results) for d in t for f in d}
    dims = node.attrs.get("scatter_dimension_numbers")
    if not isinstance(dims, Mapping):
        return set()
    scattered = set(_ints(dims.get("scattered_dims_to_operand_dims")))
    inserted = set(_ints(dims.get("inserted_window_dims")))
    out: set[int] = set()
    for d, factors in enumerate(rule.operands[0]):
        if d in scattered and d not in inserted:
            out.update(factors)
    return out


def _is_elementwise(rule: ShardingRule) -> bool:
    """Every tensor of full rank maps dim d to factor d, one factor per dim."""
    tensors = [*rule.operands, *rule.results]
    rank = max((len(t) for t in tensors), default=0)
    for t in tensors:
        if len(t) == 0:
            continue
        if len(t) != rank or any(dims != (d,) for d, dims in enumerate(t)):
            return False
    return True


def _split_to_factors(
    tensor: Sequence[tuple[int, ...]],
    layout: Layout,
    rule: ShardingRule,
    mesh: MeshModel,
) -> dict[int, list[AxisRef]]:
    """A tensor's dim axes assigned to the dim's factors, major factor first; an
    axis that does not fit whole into the current factor ends the assignment."""
    out: dict[int, list[AxisRef]] = {}
    for dim_factors, axes in zip(tensor, layout, strict=False):
        pending = list(axes)
        for f in dim_factors:
            chosen: list[AxisRef] = []
            while pending and rule.sizes[f] % _span([*chosen, pending[0]], mesh) == 0:
                chosen.append(pending.pop(0))
            out[f] = chosen
            if _span(chosen, mesh) != rule.sizes[f]:
                break
    return out


def _keep_compound_dims_valid(
    rule: ShardingRule, factors: list[list[AxisRef]], mesh: MeshModel
) -> None:
    """In a dim of several factors, a factor after one that is not fully split
    must stay unsplit (its blocks would not be contiguous). Clearing a factor
    can make another dim invalid, so this runs to a fixed point."""
    changed = True
    while changed:
        changed = False
        for tensor in (*rule.operands, *rule.results):
            for dim_factors in tensor:
                whole = True
                for f in dim_factors:
                    if not whole and factors[f]:
                        factors[f] = []
                        changed = True
                    elif _span(factors[f], mesh) != rule.sizes[f]:
                        whole = False


def _project(
    tensor: Sequence[tuple[int, ...]], factors: Sequence[DimAxes], mesh: MeshModel
) -> Layout:
    """A tensor's layout from its factors' axes; consecutive sub-axes that
    factors split an axis into are merged back (`"y":(1)2, "y":(2)2` is "y"),
    so that the same layout always has the same spelling."""
    return tuple(
        merge_axes(tuple(a for f in dims for a in factors[f]), mesh) for dims in tensor
    )


def _captured_values(graph: Graph, node: Node) -> list[int]:
    """Values used inside `node`'s regions but defined outside them."""
    inside: set[int] = set()
    used: list[int] = []

    def walk(n: Node) -> Iterator[Node]:
        for region in n.regions:
            for block in region:
                inside.update(block.args)
                for nid in block.nodes:
                    child = graph.node(nid)
                    inside.update(child.results)
                    yield child
                    yield from walk(child)

    children = list(walk(node))
    for child in children:
        for v in child.operands:
            if v not in inside and v not in used:
                used.append(v)
    return used


def _layout_of(sharding: TensorSharding) -> Layout:
    return tuple(tuple(d.axes) for d in sharding.dims)


def _read_layouts(graph: Graph, mesh_name: str) -> dict[int, Layout]:
    """Value id -> layout from the shardings in the module."""
    layouts: dict[int, Layout] = {}

    def put(vid: int, sharding: TensorSharding, loc: SourceLoc) -> None:
        if sharding.mesh_name != mesh_name:
            raise PartitionFailure(
                loc,
                f"partition handles one mesh; found @{sharding.mesh_name} beside "
                f"@{mesh_name}",
            )
        layouts[vid] = _layout_of(sharding)

    for node in graph.walk():
        if node.op == "func.func":
            block = node.regions[0][0]
            for i, entry in enumerate(_dicts(node.attrs.get("arg_attrs"))):
                s = entry.get("sdy.sharding")
                if isinstance(s, Opaque):
                    put(block.args[i], parse_sharding(s.text), node.loc)
            continue
        if node.op == "sdy.sharding_constraint":
            s = node.attrs.get("sharding")
            if isinstance(s, Opaque):
                put(node.results[0], parse_sharding(s.text), node.loc)
            continue
        per_value = node.attrs.get("sdy.sharding")
        if isinstance(per_value, Opaque):
            for vid, s in zip(
                node.results, _parse_per_value(per_value.text), strict=False
            ):
                put(vid, s, node.loc)
    return layouts


@functools.lru_cache(maxsize=4096)
def _parse_per_value(text: str) -> tuple[TensorSharding, ...]:
    """Per-value shardings repeat across a module; each text is parsed once."""
    return parse_sharding_per_value(text)


def _per_value(value: object) -> tuple[TensorSharding, ...]:
    if not isinstance(value, Opaque):
        return ()
    return parse_sharding_per_value(value.text)


def _dicts(value: object) -> list[Mapping[str, object]]:
    if not isinstance(value, tuple):
        return []
    return [v if isinstance(v, Mapping) else {} for v in value]


def _find_mesh(graph: Graph) -> tuple[str, MeshModel, SourceLoc] | None:
    meshes: dict[str, tuple[MeshModel, SourceLoc]] = {}
    for node in graph.walk():
        if node.op != "sdy.mesh":
            continue
        mesh_attr, sym = node.attrs.get("mesh"), node.attrs.get("sym_name")
        if isinstance(mesh_attr, Opaque) and isinstance(sym, str):
            meshes[sym] = (parse_mesh(mesh_attr.text), node.loc)
    if len(meshes) > 1:
        names = ", ".join("@" + m for m in sorted(meshes))
        raise PartitionFailure(
            list(meshes.values())[1][1],
            f"partition handles modules with one sdy.mesh; found {names}",
        )
    for name, (mesh, loc) in meshes.items():
        return name, mesh, loc
    return None


def _entry_function(graph: Graph) -> Node:
    """@main, or else the module's only public function."""
    if "main" in graph.symbols:
        return graph.node(graph.symbols["main"])
    public = [
        f for f in graph.funcs() if f.attrs.get("sym_visibility") in (None, "public")
    ]
    if len(public) != 1:
        raise PartitionFailure(
            public[1].loc if len(public) > 1 else SourceLoc(graph.source_name, 1, 1),
            "partition needs a function @main or exactly one public function; found "
            + (", ".join(f"@{f.attrs.get('sym_name')}" for f in public) or "none"),
        )
    return public[0]


def _interface_attrs(entry: Mapping[str, object], sharding: str) -> str:
    """A function argument's or result's attributes: meshjit's sharding plus
    the plain ones JAX writes (`jax.result_info`, `tf.aliasing_output`)."""
    items = []
    for key, value in sorted(entry.items()):
        if key.startswith("sdy.") or key == "mhlo.sharding":
            continue
        if isinstance(value, str):
            items.append(f"{key} = {print_string(value)}")
        elif isinstance(value, int) and not isinstance(value, bool):
            items.append(f"{key} = {value} : i32")
    items.append(f"sdy.sharding = #sdy.sharding{sharding}")
    return "{" + ", ".join(items) + "}"


def partition_module_text(
    graph: Graph, diags: Diagnostics
) -> tuple[str, PartitionReport] | None:
    """The per-device module as text, or None when the module has no mesh."""
    found = _find_mesh(graph)
    if found is None:
        return None
    mesh_name, mesh, mesh_loc = found
    declared = graph.module_attrs.get("mhlo.num_partitions")
    if isinstance(declared, int) and declared != mesh.size:
        sizes = " x ".join(f"{a.name}={a.size}" for a in mesh.axes)
        raise PartitionFailure(
            mesh_loc,
            f"mesh @{mesh_name} has {mesh.size} devices ({sizes}) but the module "
            f"declares mhlo.num_partitions = {declared}; the axis sizes must "
            "multiply to the device count",
        )
    main = _entry_function(graph)
    report = PartitionReport()
    emitter = _Emitter(graph, mesh_name, mesh, _read_layouts(graph, mesh_name), report)
    _check_divisible(graph, emitter, diags)
    args = main.regions[0][0].args
    emitter.indent = 3
    local_args = [emitter.fresh() for _ in args]
    emitter.scope.names.update(zip(args, local_args, strict=True))
    returned = emitter.emit_block(main.regions[0][0].nodes) or []
    res_info = _dicts(main.attrs.get("res_attrs"))
    arg_info = _dicts(main.attrs.get("arg_attrs"))
    out_layouts: list[Layout] = []
    for i, vid in enumerate(returned):
        s = res_info[i].get("sdy.sharding") if i < len(res_info) else None
        rank = len(graph.value(vid).shape or ())
        text = s.text if isinstance(s, Opaque) else None
        out_layouts.append(
            _layout_of(parse_sharding(text)) if text else _replicated(rank)
        )
    outs, out_types = [], []
    for i, (vid, lay) in enumerate(zip(returned, out_layouts, strict=True)):
        name = emitter.value_reshard(
            vid, lay, main, f"function result {i}", op_name="func.return"
        )
        outs.append(name)
        out_types.append(emitter.local_type(vid, lay))

    def body(lay: Layout) -> str:
        return f"<@{mesh_name}, {_layout_text(lay)}>"

    in_layouts = [emitter.layout(a) for a in args]
    arg_decls = [
        f"%arg{i}: {graph.value(a).type} "
        + _interface_attrs(arg_info[i] if i < len(arg_info) else {}, body(lay))
        for i, (a, lay) in enumerate(zip(args, in_layouts, strict=True))
    ]
    global_out = [graph.value(v).type for v in returned]
    res_decls = [
        f"{t} " + _interface_attrs(res_info[i] if i < len(res_info) else {}, body(lay))
        for i, (t, lay) in enumerate(zip(global_out, out_layouts, strict=True))
    ]
    n_out = len(returned)
    lhs = "" if n_out == 0 else ("%out = " if n_out == 1 else f"%out:{n_out} = ")
    refs = ["%out"] if n_out == 1 else [f"%out#{i}" for i in range(n_out)]
    block_args = ", ".join(
        f"{n}: {emitter.local_type(a)}" for n, a in zip(local_args, args, strict=True)
    )
    manual = (
        f"{lhs}sdy.manual_computation("
        + ", ".join(f"%arg{i}" for i in range(len(args)))
        + f") in_shardings=[{', '.join(body(lay) for lay in in_layouts)}]"
        + f" out_shardings=[{', '.join(body(lay) for lay in out_layouts)}]"
        + " manual_axes={"
        + ", ".join(print_string(a.name) for a in mesh.axes)
        + f"}} ({block_args}) {{"
    )
    sdy_return = "sdy.return" + (
        f" {', '.join(outs)} : {', '.join(out_types)}" if outs else ""
    )
    in_types = ", ".join(graph.value(a).type for a in args)
    lines = [
        f"module @partitioned attributes {{mhlo.num_partitions = {mesh.size} : i32, "
        "mhlo.num_replicas = 1 : i32} {",
        "  " + print_mesh_op(mesh_name, mesh),
        f"  func.func public @{main.attrs['sym_name']}({', '.join(arg_decls)}) -> "
        f"({', '.join(res_decls)}) {{",
        f"    {manual}",
        *emitter.lines,
        f"      {sdy_return}",
        f"    }} : ({in_types}) -> ({', '.join(global_out)})",
        "    return"
        + (f" {', '.join(refs)} : {', '.join(global_out)}" if refs else ""),
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n", report


def _check_divisible(graph: Graph, emitter: _Emitter, diags: Diagnostics) -> None:
    """A value whose sharding does not divide its shape is kept replicated (and
    said so); an argument or result of @main is an error."""
    interface = set(_entry_function(graph).regions[0][0].args)
    for vid, layout in list(emitter.layouts.items()):
        v = graph.value(vid)
        if v.shape is None:
            continue
        for d, (size, axes) in enumerate(zip(v.shape, layout, strict=False)):
            ways = _span(axes, emitter.mesh)
            if size % ways == 0:
                continue
            axes_text = ", ".join(_axis_text(a) for a in axes)
            message = (
                f"dim {d} of value {v.type} has size {size}, not divisible by "
                f"{ways} (axes {axes_text})"
            )
            if vid in interface:
                raise PartitionFailure(v.loc, f"cannot partition: {message}")
            emitter.report.remarks.append(Remark(v.loc, f"{message}; kept replicated"))
            emitter.layouts[vid] = _replicated(len(v.shape))
            break


_SPECIAL = {
    "func.call": "yes (inlined)",
    "sdy.mesh": "n/a",
    "sdy.named_computation": "no: an error names it",
    "sdy.sharding_group": "yes (dropped: propagation used it)",
    "stablehlo.bitcast_convert": "yes when the width is kept, else replicated",
    "sdy.constant": "yes",
    "sdy.manual_computation": "yes (manual over every axis)",
    "sdy.propagation_barrier": "yes (reshard)",
    "sdy.reshard": "yes (reshard)",
    "sdy.sharding_constraint": "yes (reshard)",
    "stablehlo.case": "yes (branches partitioned)",
    "stablehlo.constant": "yes (splat: local; else sliced)",
    "stablehlo.convolution": "yes (spatial: halo exchange; grouped: replicated)",
    "stablehlo.dynamic_slice": "yes",
    "stablehlo.gather": "yes (split table: masked lookup + sum)",
    "stablehlo.iota": "yes (block offset)",
    "stablehlo.reduce_window": "yes (tiling windows split)",
    "stablehlo.slice": "yes",
    "stablehlo.scatter": "yes (split operand: shifted, routed indices)",
    "stablehlo.while": "yes (regions partitioned)",
}


def partition_support(op_name: str) -> str:
    """How the partitioner handles an op kind, for the coverage ledger."""
    if op_name in _SPECIAL:
        return _SPECIAL[op_name]
    if op_name in _ALWAYS_REPLICATED:
        return "replicated (operands gathered)"
    if op_name in _LOCAL_BY_TYPE:
        return "yes"
    entry = RULES.entry(op_name)
    if entry is pointwise_rule:
        return "yes (elementwise)"
    if op_name.startswith(("func.", "stablehlo.return", "sdy.return")):
        return "n/a"
    return "replicated (operands gathered)"
