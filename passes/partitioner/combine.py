"""Combining independent collectives: fewer, larger ones (the latency is paid
once), as XLA's AllReduce/ReduceScatter/AllGather combiners do on HLO.

Runs on the per-device program the partitioner wrote, one block at a time.
Reduce-scatters, all-gathers with small results and, where the platform's
variadic all-reduce launches once per operand, small all-reduces
(`cost.SMALL_REDUCE_BYTES`), with the same replica groups, reduction and element
type, none of which depends on another, become one collective on their
operands side by side: each operand with its collective's dim moved first, as
`k` rows (the group size) for a reduce-scatter or one row otherwise,
concatenated along dim 1; each result is cut back out (at offsets XLA sees
only at run time where the cost model says so and the group may share
kernels: `runtime_offsets.py`, SHARED_CUTS below) and put back in shape.
Ops between the first and the last member that use an earlier member's result
move after the combined collective (they cannot feed a later member: the
members are independent).

`plan_groups` is the choice, on plain data (testable without MLIR);
`combine_collectives` does the rewrite with the MLIR bindings.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from jaxlib.mlir import ir

from meshjit.compiler.ir import is_dense_ints
from meshjit.passes.partitioner.builder import itemsize
from meshjit.passes.partitioner.runtime_offsets import RuntimeOffsets, create_op

# All-gathers and reduce-scatters are combined here; all-reduces are left to
# XLA's own combiner (on CPU and GPU it makes one variadic all-reduce with no
# copies; concatenating every all-reduce here measured 1.33x jax.jit's memory
# on the bench's DP train steps) except small ones where the platform's
# variadic all-reduce launches once per operand (`CostModel.variadic_launches`:
# XLA's CPU backend, where a variadic all-reduce of 16 small operands costs
# 16 single ones, 2.6 ms against 0.23 ms for one of the same bytes).
COMBINABLE = frozenset(
    {"stablehlo.reduce_scatter", "stablehlo.all_gather", "stablehlo.all_reduce"}
)
# At most this many bytes (per device, the combined operand) in one
# collective; it bounds how long unreduced data waits (XLA's combiners have
# such a threshold too).
COMBINE_LIMIT_BYTES = 32 << 20
# All-gathers are combined only while the gathered results together stay this
# small: combining the parameter gathers of an FSDP step holds the gathered
# weights at once (measured on the bench's Llama step, 128 KiB weights: with
# no limit step time 0.80x jax.jit's but memory 0.80x -> 1.37x; with 1 MiB
# 0.76x and 1.20x; gathers left alone: 0.96x and 0.98x). Small gathers (norm
# scales, biases) are latency-bound and combine.
GATHER_LIMIT_BYTES = 64 << 10
# All-reduces (where their launches are not shared otherwise): operands of at
# most SMALL_REDUCE_BYTES (`cost.py`), while the concatenation stays under
# this many bytes.
REDUCE_LIMIT_BYTES = 1 << 20
_GATHER = "stablehlo.all_gather"
_REDUCE = "stablehlo.all_reduce"
_DIM_ATTR = {
    "stablehlo.reduce_scatter": "scatter_dimension",
    "stablehlo.all_gather": "all_gather_dim",
}


@dataclass(frozen=True, slots=True)
class Combined:
    """Independent collectives written as one."""

    kind: str  # "all-reduce", "reduce-scatter", "all-gather"
    count: int
    bytes: int  # per device, the combined operand


@dataclass(frozen=True, slots=True)
class Candidate:
    """A collective that may be combined: its position among the block's
    ops, its combining key, operand bytes, and which candidates its operand
    depends on (bit i: candidate i)."""

    position: int
    key: tuple[str, ...]
    nbytes: int
    depends_on: int


def plan_groups(
    candidates: Sequence[Candidate], limit: int = COMBINE_LIMIT_BYTES
) -> list[list[int]]:
    """Runs of candidates (indices, in order) to combine: one open group per
    key and kind (below); a candidate joins it unless it depends on a member
    or the group would pass its limit (`limit` bytes; GATHER_LIMIT_BYTES for
    all-gathers, whose `nbytes` are their results', REDUCE_LIMIT_BYTES for
    all-reduces), else the group closes and a new one opens. Groups of one
    are left out.

    The kinds: a candidate that a later one depends on (a batch norm's
    statistics in a backward pass) and one that none does (a parameter's
    gradient) group apart. Mixed, each statistic closed the group before it
    and the gradients spread over as many groups, each cut from a buffer of
    its own size (XLA compiles same-shape consumers of different buffers as
    different kernels: the bench's ResNet train step, 11 groups). The ones
    nothing depends on can all wait for the last of them."""
    fed = 0
    for c in candidates:
        fed |= c.depends_on
    groups: list[list[int]] = []
    open_: dict[tuple[tuple[str, ...], bool], tuple[list[int], int, int]] = {}
    own = {_GATHER: GATHER_LIMIT_BYTES, _REDUCE: REDUCE_LIMIT_BYTES}
    for i, c in enumerate(candidates):
        at = (c.key, bool(fed >> i & 1))
        found = open_.get(at)
        most = min(limit, own.get(c.key[0], limit))
        if found is not None:
            members, mask, size = found
            if not c.depends_on & mask and size + c.nbytes <= most:
                members.append(i)
                open_[at] = (members, mask | 1 << i, size + c.nbytes)
                continue
            groups.append(members)
        open_[at] = ([i], 1 << i, c.nbytes)
    groups.extend(members for members, _, _ in open_.values())
    return sorted((g for g in groups if len(g) > 1), key=lambda g: g[0])


# -- the rewrite ------------------------------------------------------------------


def combine_collectives(
    module: ir.Module,
    limit: int = COMBINE_LIMIT_BYTES,
    small_reduce: int = 0,
    gathers: bool = True,
    runtime_offsets: bool = False,
) -> list[Combined]:
    """Combines in every block of `module`; returns what it combined.
    All-reduces take part when their operand is at most `small_reduce` bytes
    (0: none, XLA's combiner shares their launch); all-gathers unless
    `gathers` is False (under a memory limit: a combined gather holds its
    results from the first member's place on, which the partitioner's
    memory estimate did not plan). `runtime_offsets`: results are cut out
    at offsets XLA sees only at run time (`CostModel.runtime_cut_offsets`)."""
    done: list[Combined] = []
    with module.context, ir.Location.unknown():
        for block in list(_blocks(module.operation)):
            offsets = RuntimeOffsets(block) if runtime_offsets else None
            while True:
                found = _combine_in(block, limit, small_reduce, gathers, offsets)
                if not found:
                    break
                done.extend(found)
    return done


def _blocks(op: ir.Operation) -> Iterator[ir.Block]:
    """The blocks that may hold collectives: not a collective's own reducer
    (erased with it when combined)."""
    for region in op.regions:
        for block in region.blocks:
            yield block
            for inner in block.operations:
                if inner.operation.name not in COMBINABLE and inner.operation.regions:
                    yield from _blocks(inner.operation)


def _nested_operands(op: ir.Operation) -> Iterator[ir.Value[ir.Type]]:
    yield from op.operands
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield from _nested_operands(inner.operation)


def _ranked(ty: ir.Type) -> ir.RankedTensorType | None:
    if isinstance(ty, ir.RankedTensorType):
        return ty
    if ty.typeid == ir.RankedTensorType.static_typeid:
        return ir.RankedTensorType(ty)
    return None


def _operand_bytes(op: ir.Operation) -> int:
    tensor = _ranked(op.operands[0].type) if len(op.operands) == 1 else None
    if tensor is None or not tensor.has_static_shape:
        return 1 << 62  # not a candidate
    return math.prod(tensor.shape) * itemsize(str(tensor.element_type))


def _key(op: ir.Operation, printed: dict[ir.Attribute, str]) -> tuple[str, ...] | None:
    if len(op.operands) != 1 or len(op.results) != 1:
        return None
    tensor = _ranked(op.operands[0].type)
    if tensor is None or not tensor.has_static_shape or math.prod(tensor.shape) == 0:
        return None
    attrs = op.attributes
    if "replica_groups" not in attrs or "channel_handle" not in attrs:
        return None
    reducer = ""
    if op.regions:
        body = op.regions[0].blocks[0]
        ops = list(body.operations)
        if len(ops) != 2 or len(body.arguments) != 2:
            return None
        reducer = ops[0].operation.name
    global_ids = "use_global_device_ids" in attrs
    groups = attrs["replica_groups"]
    if not is_dense_ints(groups):  # named by mesh axes (a user's, jax 0.11)
        return None
    shown = printed.get(groups)
    if shown is None:  # attributes are uniqued: each distinct one printed once
        shown = printed[groups] = str(groups)
    return (
        op.name,
        shown,
        reducer,
        str(tensor.element_type),
        str(global_ids),
    )


def _combine_in(
    block: ir.Block,
    limit: int,
    small_reduce: int,
    gathers: bool = True,
    offsets: RuntimeOffsets | None = None,
) -> list[Combined]:
    """One planning pass over `block`: rewrites the planned groups whose
    spans (first to last member) do not overlap an earlier rewritten one's.
    Rewriting moves ops only within a span, so the later groups' plans stay
    valid; the overlapping ones are planned again on the next pass."""
    ops = [o.operation for o in block.operations]
    printed: dict[ir.Attribute, str] = {}
    keys = [
        _key(op, printed)
        if op.name in COMBINABLE
        and (op.name != _REDUCE or _operand_bytes(op) <= small_reduce)
        and (gathers or op.name != _GATHER)
        else None
        for op in ops
    ]
    seen: dict[tuple[str, ...], int] = {}
    for key in keys:
        if key is not None:
            seen[key] = seen.get(key, 0) + 1
    if all(n < 2 for n in seen.values()):
        return []  # nothing to combine: no dependency masks needed
    start = next(i for i, key in enumerate(keys) if key is not None)
    index = {op: i for i, op in enumerate(ops[start:], start)}
    masks = [0] * len(ops)  # before the first candidate: depends on none
    candidates: list[Candidate] = []
    members_of: list[ir.Operation] = []
    for i in range(start, len(ops)):
        op = ops[i]
        mask = 0
        operands = _nested_operands(op) if len(op.regions) else op.operands
        for v in operands:
            owner = v.owner
            if isinstance(owner, ir.Block):
                continue
            j = index.get(owner.operation)
            if j is not None and j < i:
                mask |= masks[j]
        key = keys[i]
        if key is not None:
            # An all-gather counts its result (what combining keeps live).
            value = op.results[0] if op.name == _GATHER else op.operands[0]
            tensor = ir.RankedTensorType(value.type)
            nbytes = math.prod(tensor.shape) * itemsize(str(tensor.element_type))
            candidates.append(Candidate(i, key, nbytes, mask))
            mask |= 1 << (len(candidates) - 1)
            members_of.append(op)
        masks[i] = mask
    done: list[Combined] = []
    busy_until = -1
    for group in plan_groups(candidates, limit):
        first, last = candidates[group[0]].position, candidates[group[-1]].position
        if first <= busy_until:
            continue
        busy_until = last
        members = [members_of[g] for g in group]
        group_mask = sum(1 << g for g in group)
        member_positions = {candidates[g].position for g in group}
        movers = [
            ops[i]
            for i in range(first + 1, last)
            if masks[i] & group_mask and i not in member_positions
        ]
        after_last = ops[last + 1]  # the block's terminator at the latest
        done.append(_rewrite(members, offsets))
        for op in movers:
            op.move_before(after_last)
    return done


def _i64_array(values: Sequence[int]) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get(list(values))


def _i64(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


# Cuts at run-time offsets let consumers of same-type members share a kernel;
# the block's offsets loop is a kernel itself. So a group takes them when it
# has at least this many members of one type (a batch norm's two statistics,
# whose consumers differ anyway, cut as constants: ResNet forward's blocks
# then need no loop), or when another group of its block made the loop.
SHARED_CUTS = 3


def _runtime_cuts(members: Sequence[ir.Operation], offsets: RuntimeOffsets) -> bool:
    if offsets.loop is not None:
        return True
    types = Counter(str(m.results[0].type) for m in members)
    return max(types.values()) >= SHARED_CUTS


def _rewrite(
    members: Sequence[ir.Operation], offsets: RuntimeOffsets | None
) -> Combined:
    """The combined collective, written just before the last member; each
    result cut out by a slice, or by a dynamic_slice at a run-time offset
    (from `offsets`, the block's)."""
    first, last = members[0], members[-1]
    ip = ir.InsertionPoint(last)
    loc = first.location
    kind = first.name
    groups = ir.RankedTensorType(first.attributes["replica_groups"].type)
    k = groups.shape[1]
    rows = k if kind == "stablehlo.reduce_scatter" else 1
    element = ir.RankedTensorType(first.operands[0].type).element_type
    pieces: list[tuple[ir.Operation, list[int], int]] = []
    flat: list[ir.Value[ir.Type]] = []
    for m in members:
        shape = list(ir.RankedTensorType(m.operands[0].type).shape)
        dim = (
            ir.IntegerAttr(m.attributes[_DIM_ATTR[kind]]).value
            if kind in _DIM_ATTR
            else 0
        )
        perm = [dim] + [d for d in range(len(shape)) if d != dim] if shape else []
        value = m.operands[0]
        if perm != list(range(len(perm))):
            moved = [shape[d] for d in perm]
            value = create_op(
                "stablehlo.transpose",
                [value],
                ir.RankedTensorType.get(moved, element),
                {"permutation": _i64_array(perm)},
                ip,
                loc,
            )
        width = math.prod(shape) // rows
        value = create_op(
            "stablehlo.reshape",
            [value],
            ir.RankedTensorType.get([rows, width], element),
            {},
            ip,
            loc,
        )
        flat.append(value)
        pieces.append((m, perm, width))
    total = sum(w for _, _, w in pieces)
    joined = create_op(
        "stablehlo.concatenate",
        flat,
        ir.RankedTensorType.get([rows, total], element),
        {"dimension": _i64(1)},
        ip,
        loc,
    )
    collective = first.clone(ip=ip)
    collective.operands[0] = joined
    lead = {"stablehlo.reduce_scatter": 1, "stablehlo.all_gather": k}.get(kind, 1)
    collective.results[0].set_type(ir.RankedTensorType.get([lead, total], element))
    if kind in _DIM_ATTR:
        collective.attributes[_DIM_ATTR[kind]] = _i64(0)
    out = collective.results[0]
    starts = [0, *itertools.accumulate(w for _, _, w in pieces[:-1])]
    # the row (0) and each piece's column, as values XLA sees at run time
    at = (
        offsets.get([0, *starts], loc)
        if offsets is not None and _runtime_cuts(members, offsets)
        else []
    )
    for i, (m, perm, width) in enumerate(pieces):
        target = ir.RankedTensorType(m.results[0].type)
        piece = ir.RankedTensorType.get([lead, width], element)
        if at:
            cut = create_op(
                "stablehlo.dynamic_slice",
                [out, at[0], at[1 + i]],
                piece,
                {"slice_sizes": _i64_array([lead, width])},
                ip,
                loc,
            )
        else:
            cut = create_op(
                "stablehlo.slice",
                [out],
                piece,
                {
                    "start_indices": _i64_array([0, starts[i]]),
                    "limit_indices": _i64_array([lead, starts[i] + width]),
                    "strides": _i64_array([1, 1]),
                },
                ip,
                loc,
            )
        shape = list(target.shape)
        if perm == list(range(len(perm))):
            value = create_op("stablehlo.reshape", [cut], target, {}, ip, loc)
        else:
            moved = [shape[d] for d in perm]
            back = create_op(
                "stablehlo.reshape",
                [cut],
                ir.RankedTensorType.get(moved, element),
                {},
                ip,
                loc,
            )
            inverse = [perm.index(d) for d in range(len(perm))]
            value = create_op(
                "stablehlo.transpose",
                [back],
                target,
                {"permutation": _i64_array(inverse)},
                ip,
                loc,
            )
        m.results[0].replace_all_uses_with(value)
    nbytes = rows * total * itemsize(str(element))
    for m in members:
        m.erase()
    names = {
        "stablehlo.all_reduce": "all-reduce",
        "stablehlo.reduce_scatter": "reduce-scatter",
        "stablehlo.all_gather": "all-gather",
    }
    return Combined(names[kind], len(members), nbytes)
