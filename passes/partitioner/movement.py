"""Data movement along split dims: slice, concatenate, reverse (pieces moved
by collective-permute, never a gather of the whole dim unless the cost model
says so), dynamic_slice and dynamic_update_slice."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from meshjit.compiler.graph import Graph, Node
from meshjit.dialects.reshard import DimAxes, axis_stride, coordinate, neighbor_pairs
from meshjit.dialects.rules import FactorKind
from meshjit.passes.partitioner.builder import Ty, Val, i64_array, itemsize
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.edges import absorbed
from meshjit.passes.partitioner.factors import (
    FactorLimits,
    WindowedFactor,
    choose_factors,
    factors_from,
    split_blocked,
    whole_copy_along,
)
from meshjit.passes.partitioner.halo import (
    NEAR,
    JointChoice,
    Window,
    WindowPlan,
    choose_joint,
    output_parallel,
    plan_exchange,
)
from meshjit.passes.partitioner.layouts import project, span
from meshjit.passes.partitioner.local import (
    emit,
    finish,
    prepare,
    rule_of,
    run_replicated,
)
from meshjit.passes.partitioner.memory import fmt_bytes
from meshjit.passes.partitioner.windows import (
    assemble,
    cut_along,
    gather_pieces,
    gather_window,
    ints,
    joint_choice,
    piece_origin,
    whole_where_gathered,
)


def _slice_windows(node: Node, shape: Sequence[int]) -> list[tuple[int, Window]]:
    """The dims a slice cuts, each as the window every output block reads."""
    starts = ints(node.attrs.get("start_indices"))
    stops = ints(node.attrs.get("limit_indices"))
    strides = ints(node.attrs.get("strides")) or (1,) * len(shape)
    return [
        (d, Window(n, 1, strides[d], -starts[d], stops[d] - n))
        for d, n in enumerate(shape)
        if (starts[d], stops[d], strides[d]) != (0, n, 1)
    ]


@dataclass(frozen=True, slots=True)
class _SliceGroup:
    """Slices of one value along the same split dim, each result split like
    the value (a fused projection cut into q, k, v): one all-gather of the
    pieces every slice needs serves them all."""

    members: tuple[int, ...]  # node ids, in program order
    dim: int
    axes: DimAxes
    plans: tuple[WindowPlan, ...]
    choice: JointChoice


def _same_block(graph: Graph, a: Node, b: Node) -> bool:
    if a.parent != b.parent:
        return False
    if a.parent < 0:
        return True
    blocks = [blk for region in graph.node(a.parent).regions for blk in region]
    return any(a.id in blk.nodes and b.id in blk.nodes for blk in blocks)


def _slice_group(ctx: PartitionCtx, node: Node) -> _SliceGroup | None:
    """The slices of `node`'s operand in its block that cut only the dim it
    cuts, that dim split over the same axes in the value and every result,
    where one all-gather of all their pieces is estimated cheaper than
    either permutes for each or one gather of the dim that serves them all
    (`halo.choose_joint`); None otherwise."""
    vid = node.operands[0]
    value = ctx.graph.value(vid)
    layout = ctx.layout(vid)
    mine = _slice_windows(node, value.shape or ())
    if value.shape is None or len(mine) != 1 or ctx.layout(node.results[0]) != layout:
        return None
    ((dim, _),) = mine
    axes = layout[dim]
    if not axes:
        return None
    if whole_copy_along(ctx, vid, dim):
        return None  # each slice cuts its block from that copy (`operand_layouts`)
    n = span(axes, ctx.mesh)
    members: list[int] = []
    plans: list[WindowPlan] = []
    for uid in ctx.graph.users(vid):
        user = ctx.graph.node(uid)
        if (
            user.op != "stablehlo.slice"
            or uid in members
            or ctx.layout(user.results[0]) != layout
            or not _same_block(ctx.graph, node, user)
        ):
            continue
        cuts = _slice_windows(user, value.shape)
        plan = output_parallel(cuts[0][1], n, True) if len(cuts) == 1 else None
        if plan is None or cuts[0][0] != dim:
            continue
        members.append(uid)
        plans.append(plan)
    if len(members) < 2:
        return None
    local = ctx.local_shape(value.shape, layout)
    row = math.prod(k for d, k in enumerate(local) if d != dim) * itemsize(value.dtype)
    choice = choose_joint(tuple(plans), row, ctx.cost, (vid,) * len(plans))
    if choice is None or not choice.taken:
        return None
    order = sorted(range(len(members)), key=lambda i: members[i])
    return _SliceGroup(
        tuple(members[i] for i in order),
        dim,
        axes,
        tuple(plans[i] for i in order),
        choice,
    )


def _group_key(ctx: PartitionCtx, group: _SliceGroup, vid: int) -> object:
    """The scope cache's key of the group's gathered pieces (of the value's
    local copy: an inlined function's every call has its own)."""
    local = ctx.scope.lookup(vid)
    return ("sliced-pieces", local.name if local else vid, group.dim, group.members)


def _joined(ctx: PartitionCtx, node: Node, group: _SliceGroup) -> bool:
    """Whether `node` takes its pieces from the group's one all-gather: made
    at the group's first slice (with a remark) unless a memory limit
    refuses it there; the others reuse it. Where it is not made, every
    slice goes its own way."""
    if ctx.scope.cached(_group_key(ctx, group, node.operands[0])) is not None:
        return True
    if node.id != group.members[0]:
        return False
    choice = group.choice
    what = (
        f"{len(group.members)} slices of one value along its dim {group.dim}: "
        f"one all-gather of every slice's pieces (estimated "
        f"{choice.seconds * 1e6:.1f} us, {fmt_bytes(choice.nbytes)} per device)"
    )
    if ctx.memory is not None:
        n = span(group.axes, ctx.mesh)
        refused = ctx.hold_or_refuse(n * choice.nbytes // (n - 1))
        if refused:
            ctx.remark(node.loc, f"{what} not taken: {refused}")
            return False
    ctx.remark(
        node.loc,
        f"{what} rather than a gather of the dim for all of them or permutes "
        f"for each ({choice.alone_seconds * 1e6:.1f} us, "
        f"{fmt_bytes(choice.alone_bytes)}){choice.tie_note}",
    )
    return True


def _group_block(ctx: PartitionCtx, node: Node, group: _SliceGroup, x: Val) -> Val:
    """This slice's result block, assembled (`assemble`) from the value's
    local block `x` and the group's one all-gather of the pieces (made at
    the group's first slice)."""
    exchanges = [plan_exchange(p) for p in group.plans]
    key = _group_key(ctx, group, node.operands[0])
    source = ctx.scope.cached(key)  # the local block, then the gathered pieces
    if source is None:
        why = (node.op, node.loc, f"{len(group.members)} slices along dim {group.dim}")
        gathered = gather_pieces(
            ctx,
            [x] * len(exchanges),
            group.dim,
            group.axes,
            exchanges,
            group.choice.packing,
            why,
        )
        source = ctx.b.concatenate([x, gathered], group.dim)
        ctx.scope.cache[key] = source
    part = group.members.index(node.id)
    plan = group.plans[part]
    start = ints(node.attrs.get("start_indices"))[group.dim]
    strides = ints(node.attrs.get("strides"))
    stride = strides[group.dim] if strides else 1
    out = (ctx.graph.value(node.results[0]).shape or ())[group.dim]
    n = plan.n
    m = -(-out // n)  # outputs per block
    block = plan.block
    total = group.choice.packing.total
    origin: list[list[int | None]] = []
    for i in range(n):
        row: list[int | None] = []
        for p in range(m):
            if i * m + p >= out:
                row.append(None)  # the result's padding
                continue
            j, at = divmod(start + (i * m + p) * stride, block)
            if j == i:
                row.append(at)
            else:
                inside = piece_origin(
                    group.choice.packing, exchanges[part], part, i, j, at
                )
                row.append(block + j * total + inside)
        origin.append(row)
    return assemble(ctx, [source], group.dim, group.axes, m, origin)


def slice_(node: Node, ctx: PartitionCtx) -> None:
    """A dim the slice keeps whole splits as it is (its local limit is the
    local size); a sliced dim splits by output blocks: each block gets the
    part of the input its elements come from (pieces moved by
    collective-permute, or one all-gather of the pieces of every slice of
    the value) and slices it locally with the same stride."""
    users = ctx.graph.users(node.results[0])
    if len(users) == 1 and rotation_of(ctx, ctx.graph.node(users[0])) is not None:
        return  # its concatenate moves the pieces of the sliced value itself
    if node.results[0] in ctx.edge_pieces and _edge_slice(node, ctx):
        return
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    operand = ctx.graph.value(node.operands[0]).shape or ()
    starts = list(ints(node.attrs.get("start_indices")))
    stops = list(ints(node.attrs.get("limit_indices")))
    windowed = []
    for d, window in _slice_windows(node, operand):
        windowed += [
            WindowedFactor(f, d, ((0, window),), trim=True)
            for f in rule.operands[0][d]
            if rule.kind(f) is FactorKind.PERMUTATION
        ]
    limits = FactorLimits(windowed=tuple(windowed), uneven=True)
    group = _slice_group(ctx, node) if len(windowed) == 1 else None
    factors: list[DimAxes] = []
    if group is not None:
        result = [(node.results[0], rule.results[0])]
        factors = factors_from(ctx, node, result, rule, limits)
        if factors[windowed[0].factor] != group.axes or not _joined(ctx, node, group):
            group = None
    if group is None:
        factors = choose_factors(ctx, node, rule, limits)
        factors = whole_where_gathered(ctx, node, rule, limits, factors)
    lop = prepare(ctx, node, rule, limits, factors)
    if group is not None and not lop.whole:  # (whole: cut below, locally)
        finish(ctx, node, lop, [_group_block(ctx, node, group, lop.operands[0])])
        return
    lay = project(rule.operands[0], lop.factors, ctx.mesh)
    local = ctx.local_shape(operand, lay)
    for d, axes in enumerate(lay):
        if axes:
            stops[d] = local[d]
    for w in windowed:
        axes = lop.factors[w.factor]
        if not axes:
            continue
        plans = w.plans(span(axes, ctx.mesh))
        assert plans is not None
        (plan,) = plans
        lop.operands[0] = gather_window(ctx, node, lop, 0, w.dim, axes, plan, None)
        starts[w.dim], stops[w.dim] = 0, plan.length
    lop.attrs["start_indices"] = i64_array(starts)
    lop.attrs["limit_indices"] = i64_array(stops)
    emit(ctx, node, lop)


def _edge_slice(node: Node, ctx: PartitionCtx) -> bool:
    """An edge piece a convolution reads through (`edges.whole_edges`): a
    few rows of an operand split along them, wanted whole there. Each
    device cuts the rows its block holds (zeros elsewhere) and one
    all-reduce assembles them, as `dynamic_slice` does, rather than the
    rows moved to a split slice first (three rows over eight devices) or
    the operand gathered. False (nothing emitted) where the layouts differ
    in more than that dim or a stride is not 1."""
    vid = node.operands[0]
    src, dst = ctx.layout(vid), ctx.layout(node.results[0])
    split = [d for d in range(len(src)) if src[d] != dst[d]]
    starts = list(ints(node.attrs.get("start_indices")))
    stops = list(ints(node.attrs.get("limit_indices")))
    steps = list(ints(node.attrs.get("strides"))) or [1] * len(starts)
    operand = ctx.graph.value(vid).shape or ()
    if len(split) != 1 or dst[split[0]] or set(steps) != {1}:
        return False
    (dim,) = split
    if any(
        src[d] and (starts[d], stops[d]) != (0, operand[d])
        for d in range(len(src))
        if d != dim
    ):
        return False  # a dim split in both is sliced
    x = ctx.value_reshard(vid, src, node, "operand 0")
    block = x.ty.shape or ()
    # split dims other than `dim` are taken whole: local start 0
    shape = [block[d] if src[d] else stops[d] - starts[d] for d in range(len(block))]
    shape[dim] = stops[dim] - starts[dim]
    out = _cut_and_assemble(
        ctx,
        node,
        x,
        lambda d: ctx.const_i32(0 if src[d] and d != dim else starts[d]),
        shape,
        {dim: src[dim]},
    )
    ctx.bind_result(node.results[0], out, dst, node)
    return True


def dynamic_slice(node: Node, ctx: PartitionCtx) -> None:
    """Along a dim the slice takes part of, the operand may stay split: each
    device cuts the part of the slice that lies in its block (zeros
    elsewhere) and one all-reduce of the bit patterns (every element comes
    from exactly one device) assembles it, exactly. The slice itself is never
    split along such a dim (its start is known only at run time)."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    operand = ctx.graph.value(node.operands[0]).shape or ()
    result = ctx.graph.value(node.results[0]).shape or ()
    rule, sliced = split_blocked(rule, [result])
    limits = FactorLimits(
        movable=frozenset(sliced), uneven=True, assembled=frozenset(sliced)
    )
    lop = prepare(ctx, node, rule, limits)
    split = {d: lop.factors[f] for f, d in sliced.items() if lop.factors[f]}
    out_shape = lop.results[0].shape or ()
    if not split:
        lop.attrs["slice_sizes"] = i64_array(out_shape)
        emit(ctx, node, lop)
        return

    def start(d: int) -> Val:
        n = operand[d]
        at = _clamped_start(ctx, lop.operands[1 + d], n - result[d])
        return at if d in split or n != result[d] else ctx.const_i32(0)

    out = _cut_and_assemble(ctx, node, lop.operands[0], start, out_shape, split)
    finish(ctx, node, lop, [out])


def _cut_and_assemble(
    ctx: PartitionCtx,
    node: Node,
    x: Val,
    start: Callable[[int], Val],
    out_shape: Sequence[int],
    split: Mapping[int, DimAxes],
) -> Val:
    """A slice of `out_shape` starting at `start(d)` (global along the
    `split` dims, local along the others) of a value split along `split`:
    each device cuts the part lying in its block (zeros elsewhere) and one
    all-reduce of the bit patterns (every element comes from exactly one
    device) assembles it, exactly."""
    b = ctx.b
    block = list(x.ty.shape or ())
    # Pad each split dim by the slice's length on both sides, so a start
    # outside the block still cuts `length` elements (all masked).
    widths = [out_shape[d] if d in split else 0 for d in range(len(block))]
    padded = b.pad_zeros(x, widths, widths)
    starts = []
    masks = []
    for d in range(len(block)):
        at = start(d)
        if d not in split:
            starts.append(at)
            continue
        first = ctx.dim_offset(split[d], block[d])  # my block's first index
        local = b.binary("stablehlo.subtract", at, first)
        starts.append(b.binary("stablehlo.add", local, ctx.const_i32(out_shape[d])))
        masks.append((d, local, block[d]))
    part = b.dynamic_slice(padded, starts, out_shape)
    mine = _positions_inside(ctx, part.ty, masks)
    part = b.select(mine, part, b.zeros(part.ty))
    axes = tuple(a for d in sorted(split) for a in split[d])
    return _assemble_by_sum(ctx, node, part, axes)


def _clamped_start(ctx: PartitionCtx, index: Val, most: int) -> Val:
    """A start index as the op uses it: i32, clamped to [0, most]."""
    b = ctx.b
    start = b.convert(index, "i32")
    start = b.binary("stablehlo.maximum", start, ctx.const_i32(0))
    return b.binary("stablehlo.minimum", start, ctx.const_i32(max(most, 0)))


def _positions_inside(
    ctx: PartitionCtx, ty: Ty, masks: Sequence[tuple[int, Val, int]]
) -> Val:
    """Where, along each (dim, offset, block), position + offset lies in
    [0, block): a slice position that falls in this device's block."""
    b = ctx.b
    index_ty = ty.with_dtype("i32")
    inside: Val | None = None
    for d, offset, block in masks:
        position = b.binary(
            "stablehlo.add", b.iota(index_ty, d), b.broadcast(offset, index_ty)
        )
        here = b.binary(
            "stablehlo.and",
            b.compare(position, b.splat(index_ty, "0"), "GE"),
            b.compare(position, b.splat(index_ty, str(block)), "LT"),
        )
        inside = here if inside is None else b.binary("stablehlo.and", inside, here)
    assert inside is not None
    return inside


def _assemble_by_sum(ctx: PartitionCtx, node: Node, part: Val, axes: DimAxes) -> Val:
    """Pieces that are zero except on the one device that holds each element,
    combined exactly (`PartitionCtx.sum_bits`)."""
    nbytes = math.prod(part.ty.shape or ()) * max(itemsize(part.ty.dtype), 1)
    moved = 2 * nbytes * (span(axes, ctx.mesh) - 1) // span(axes, ctx.mesh)
    ctx.record(
        "all-reduce", axes, moved, (node.op, node.loc, "slice pieces of the blocks")
    )
    return ctx.sum_bits(part, axes)


def dynamic_update_slice(node: Node, ctx: PartitionCtx) -> None:
    """Along a dim the update covers part of, the operand may stay split:
    each device takes the window of the (whole) update that falls on its
    block and keeps its own elements elsewhere: no collective. The window is
    as long as the update where the update is no longer than the block
    (clamped into the block, where the update's part on this block lies
    inside it), so a step writes update-sized windows (in place, where the
    operand's buffer is donated), not whole blocks (a KV cache split along
    its sequence, written one position per decoding step)."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    operand = ctx.graph.value(node.operands[0]).shape or ()
    update = ctx.graph.value(node.operands[1]).shape or ()
    # The update stays whole along the dims it covers part of.
    whole = {
        f
        for d, (n, u) in enumerate(zip(operand, update, strict=True))
        if n != u
        for f in rule.operands[1][d]
    }
    lop = prepare(
        ctx, node, rule, FactorLimits(forbidden=frozenset(whole), uneven=True)
    )
    lay = lop.produced[0]
    partial = [
        d for d, (n, u) in enumerate(zip(operand, update, strict=True)) if n != u
    ]
    if not any(lay[d] for d in partial):
        emit(ctx, node, lop)
        return
    b = ctx.b
    block, upd = lop.operands[0], lop.operands[1]
    local = list(block.ty.shape or ())
    # Along each such dim a window of `sizes[d]` positions of the block, at
    # `at[d]` in it: the update's length, or the block's where the update is
    # longer (then the whole block, at 0).
    sizes = [
        min(update[d], local[d]) if d in partial else local[d]
        for d in range(len(local))
    ]
    whole_block = all(sizes[d] == local[d] for d in partial)
    # Pad the update by a window on both sides along each such dim, then cut
    # the window aligned with the block's.
    widths = [sizes[d] if d in partial else 0 for d in range(len(local))]
    padded = b.pad_zeros(upd, widths, widths)
    zero = ctx.const_i32(0)
    at: list[Val] = []
    starts = []
    masks = []
    for d, n in enumerate(operand):
        if d not in partial:
            at.append(zero)
            starts.append(zero)
            continue
        start = _clamped_start(ctx, lop.operands[2 + d], n - update[d])
        first = ctx.dim_offset(lay[d], local[d])  # 0 when the dim is whole
        ahead = b.binary("stablehlo.subtract", first, start)  # block start in update
        if sizes[d] < local[d]:  # the update's start in the block, clamped
            inside = b.binary("stablehlo.subtract", start, first)
            inside = b.binary("stablehlo.maximum", inside, zero)
            inside = b.binary(
                "stablehlo.minimum", inside, ctx.const_i32(local[d] - sizes[d])
            )
            ahead = b.binary("stablehlo.add", ahead, inside)  # window start in update
            at.append(inside)
        else:
            at.append(zero)
        starts.append(b.binary("stablehlo.add", ahead, ctx.const_i32(sizes[d])))
        masks.append((d, ahead, update[d]))
    window = b.dynamic_slice(padded, starts, sizes)
    covered = _positions_inside(ctx, window.ty, masks)
    if whole_block:
        finish(ctx, node, lop, [b.select(covered, window, block)])
        return
    kept = b.dynamic_slice(block, at, sizes)
    written = b.select(covered, window, kept)
    finish(ctx, node, lop, [b.dynamic_update_slice(block, written, at)])


@dataclass(frozen=True, slots=True)
class Rotation:
    """A concatenate of slices of one value along one dim, as long as the
    value (`jnp.roll`: x[s:] ++ x[:s]), its result split along that dim in
    n blocks: result block i takes, from each source block j, the positions
    it needs, grouped by the cyclic distance c = (j - i) mod n. Per remote
    c, one piece of `lengths[c]` positions that source j cuts at
    `cuts[c][j]`, for the blocks in `targets[c]`; `origin[i][p]`: where
    result position p of block i lies in the local block followed by the
    pieces (increasing c)."""

    source: int  # the sliced value
    dim: int
    axes: DimAxes
    lengths: dict[int, int]
    cuts: dict[int, tuple[int, ...]]
    targets: dict[int, tuple[int, ...]]
    origin: tuple[tuple[int, ...], ...]


def rotation_of(ctx: PartitionCtx, node: Node) -> Rotation | None:
    """The rotation a concatenate is (`Rotation`), when every operand is a
    unit-stride slice along its dim, of the same value, used only here, the
    result as long as the value and split evenly along the dim, and the
    pieces by collective-permute are estimated cheaper than one all-gather
    of the dim; None otherwise (the slices and the concatenate go their own
    ways)."""
    if node.op != "stablehlo.concatenate" or len(node.operands) < 2:
        return None
    # Asked by each slice and by the concatenate: decided once per layout (a
    # callee's copies may lay the concatenate out differently).
    key = ("rotation", node.id, ctx.layout(node.results[0]))
    if key not in ctx.decided:
        ctx.decided[key] = _find_rotation(ctx, node)
    found = ctx.decided[key]
    return found if isinstance(found, Rotation) else None


def _find_rotation(ctx: PartitionCtx, node: Node) -> Rotation | None:
    dim = node.attrs.get("dimension")
    result = ctx.graph.value(node.results[0])
    if not isinstance(dim, int) or result.shape is None:
        return None
    axes = ctx.layout(node.results[0])[dim]
    n = span(axes, ctx.mesh) if axes else 1
    size = result.shape[dim]
    if n <= 1 or size % n:
        return None
    source = -1
    segments = []  # (first source position, length), in result order
    for vid in node.operands:
        owner = ctx.graph.value(vid).owner
        piece = ctx.graph.node(owner) if owner >= 0 else None
        if (
            piece is None
            or piece.op != "stablehlo.slice"
            or ctx.graph.users(vid) != [node.id]
            or not _same_block(ctx.graph, node, piece)
        ):
            return None
        x = ctx.graph.value(piece.operands[0])
        windows = _slice_windows(piece, x.shape or ())
        if source not in (-1, x.id) or x.shape != result.shape or len(windows) != 1:
            return None
        (d, w), source = windows[0], x.id
        if d != dim or w.stride != 1:
            return None
        segments.append((-w.low, w.out_size))
    block = size // n
    where: list[int] = []  # per result position: its source position
    for first, length in segments:
        where += range(first, first + length)
    runs: dict[int, dict[int, list[int]]] = {}  # c -> target -> positions
    for g, at in enumerate(where):
        i, j = g // block, at // block
        runs.setdefault((j - i) % n, {}).setdefault(i, []).append(at % block)
    runs.pop(0, None)  # the local block's
    lengths = {
        c: max(max(v) - min(v) + 1 for v in by_target.values())
        for c, by_target in runs.items()
    }
    cuts: dict[int, tuple[int, ...]] = {}
    base: dict[int, int] = {}  # where each piece lies after the local block
    for c in sorted(runs):
        cut = [0] * n
        for i, positions in runs[c].items():
            cut[(i + c) % n] = min(min(positions), block - lengths[c])
        cuts[c] = tuple(cut)
        base[c] = block + sum(lengths[k] for k in base)
    origin = []
    for i in range(n):
        row = []
        for at in where[i * block : (i + 1) * block]:
            j = at // block
            c = (j - i) % n
            row.append(base[c] + at % block - cuts[c][j] if c else at % block)
        origin.append(tuple(row))
    value = ctx.graph.value(source)
    local = ctx.local_shape(value.shape or (), ctx.layout(node.results[0]))
    row_bytes = math.prod(k for d, k in enumerate(local) if d != dim)
    row_bytes *= itemsize(value.dtype)
    permutes = sum(
        ctx.cost.collective_seconds("collective-permute", length * row_bytes, 2)
        for length in lengths.values()
    )
    gather = ctx.cost.collective_seconds("all-gather", (n - 1) * block * row_bytes, n)
    if gather * (1 + NEAR) < permutes:
        return None
    targets = {c: tuple(sorted(by_target)) for c, by_target in runs.items()}
    return Rotation(
        source, dim, axes, lengths, cuts, targets, tuple(tuple(r) for r in origin)
    )


def _rotate(ctx: PartitionCtx, node: Node, rot: Rotation) -> None:
    """The rotated value's block from the sliced value in the result's
    layout: the local block, then per cyclic distance one collective-permute
    of the pieces, assembled at the device's positions."""
    lay = ctx.layout(node.results[0])
    x = ctx.value_reshard(rot.source, lay, node, "the sliced value")
    blocks = ctx.block_of_position(rot.axes)
    n = len(rot.origin)  # blocks
    parts = [x]
    for c in sorted(rot.lengths):
        length = rot.lengths[c]
        piece = cut_along(ctx, x, rot.dim, [rot.cuts[c][j] for j in blocks], length)
        wanted = set(rot.targets[c])
        pairs = tuple(
            (p, q)
            for shift in (c, c - n)
            for p, q in neighbor_pairs(ctx.mesh, rot.axes, -shift)
            if blocks[q] in wanted
        )
        shape = list(piece.ty.shape or ())
        nbytes = math.prod(shape) * itemsize(piece.ty.dtype)
        near = c if c <= n // 2 else c - n  # the shorter way around the ring
        reason = f"rotation along dim {rot.dim}: {length} from block {near:+d}"
        ctx.record("collective-permute", rot.axes, nbytes, (node.op, node.loc, reason))
        parts.append(ctx.b.collective_permute(piece, pairs))
    block = assemble(ctx, parts, rot.dim, rot.axes, len(rot.origin[0]), rot.origin)
    ctx.bind_result(node.results[0], block, lay, node)


def concatenate(node: Node, ctx: PartitionCtx) -> None:
    """Along a split concatenated dim, each block of the result takes from
    every operand the window its positions come from (positions of other
    operands are padding), and selects by position."""
    if absorbed(ctx, node):
        ctx.lazy[node.results[0]] = node
        return
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    dim = node.attrs.get("dimension")
    assert isinstance(dim, int)
    rotation = rotation_of(ctx, node)
    if rotation is not None:
        _rotate(ctx, node, rotation)
        return
    sizes = [(ctx.graph.value(v).shape or ())[dim] for v in node.operands]
    total = sum(sizes)
    windows: list[tuple[int, Window]] = []
    offset = 0
    for k, n in enumerate(sizes):
        windows.append((k, Window(n, 1, 1, offset, total - offset - n)))
        offset += n
    factors = [
        f for f in rule.results[0][dim] if rule.kind(f) is not FactorKind.PASS_THROUGH
    ]
    windowed = tuple(WindowedFactor(f, dim, tuple(windows), trim=True) for f in factors)
    limits = FactorLimits(windowed=windowed, uneven=True)
    chosen = choose_factors(ctx, node, rule, limits)
    joint = joint_choice(ctx, node, rule, limits, chosen)
    if joint is None:
        chosen = whole_where_gathered(ctx, node, rule, limits, chosen)
    lop = prepare(ctx, node, rule, limits, chosen)
    split = [w for w in windowed if lop.factors[w.factor]]
    if not split:
        emit(ctx, node, lop)
        return
    (w,) = split
    axes = lop.factors[w.factor]
    plans = w.plans(span(axes, ctx.mesh))
    assert plans is not None
    if joint is not None:
        xs = [lop.operands[k] for k, _ in w.windows]
        block = _block_from_pieces(ctx, node, xs, dim, axes, plans, joint, sizes)
        finish(ctx, node, lop, [block])
        return
    b = ctx.b
    out = None
    offset = 0
    for (k, _), plan, n in zip(w.windows, plans, sizes, strict=True):
        part = gather_window(ctx, node, lop, k, dim, axes, plan, None)
        if out is None:
            out = part
        else:
            index_ty = part.ty.with_dtype("i32")
            first = ctx.dim_offset(axes, plan.length)
            position = b.binary(
                "stablehlo.add", b.iota(index_ty, dim), b.broadcast(first, index_ty)
            )
            mine = b.compare(position, b.splat(index_ty, str(offset)), "GE")
            out = b.select(mine, part, out)
        offset += n
    assert out is not None
    finish(ctx, node, lop, [out])


def _block_from_pieces(
    ctx: PartitionCtx,
    node: Node,
    xs: Sequence[Val],
    dim: int,
    axes: DimAxes,
    plans: Sequence[WindowPlan],
    joint: JointChoice,
    sizes: Sequence[int],
) -> Val:
    """The result block of a concatenate whose operands' pieces come from one
    all-gather, assembled from this device's operand blocks and the
    gathered contributions (`assemble`)."""
    exchanges = [plan_exchange(p) for p in plans]
    gathered = gather_pieces(
        ctx,
        xs,
        dim,
        axes,
        exchanges,
        joint.packing,
        (node.op, node.loc, f"operands along dim {dim}"),
    )
    n = plans[0].n
    length = plans[0].length  # the result's block
    local = [p.block for p in plans]
    bases = [sum(local[:k]) for k in range(len(local) + 1)]  # then the gathered
    total = joint.packing.total
    starts = [sum(sizes[:k]) for k in range(len(sizes))]
    origin: list[list[int | None]] = []
    for i in range(n):
        row: list[int | None] = []
        for p in range(length):
            g = i * length + p
            k = next((k for k in range(len(sizes)) if g < starts[k] + sizes[k]), -1)
            if k < 0:
                row.append(None)  # the result's padding
                continue
            j, at = divmod(g - starts[k], local[k])
            if j == i:
                row.append(bases[k] + at)
            else:
                inside = piece_origin(joint.packing, exchanges[k], k, i, j, at)
                row.append(bases[-1] + j * total + inside)
        origin.append(row)
    return assemble(ctx, [*xs, gathered], dim, axes, length, origin)


def reverse(node: Node, ctx: PartitionCtx) -> None:
    """Along a split reversed dim, each device reverses its block, which is
    the mirrored block of the result: one collective-permute moves it there."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    shape = ctx.graph.value(node.operands[0]).shape or ()
    reversed_dims = ints(node.attrs.get("dimensions"))
    movable = frozenset(
        f
        for d in reversed_dims
        for f in rule.operands[0][d]
        if rule.kind(f) is FactorKind.PERMUTATION
    )
    # A dim of size 1 reverses to itself: it splits as any other dim (one
    # block holds it, the others padding) and is neither moved nor mirrored.
    dims = tuple(d for d in reversed_dims if shape[d] > 1)
    # Blocks padded at the end of an uneven reversed dim would not mirror
    # into place: the other dims may split unevenly, the reversed ones not.
    even = frozenset(f for d in dims for f in rule.operands[0][d] if f in movable)
    limits = FactorLimits(movable=movable, uneven=True, even=even)
    lop = prepare(ctx, node, rule, limits)
    if not dims:
        finish(ctx, node, lop, list(lop.operands))
        return
    out = ctx.b.op1(node.op, lop.operands, lop.results[0], lop.attrs)
    lay = lop.produced[0]
    split = [axes for d, axes in enumerate(lay) if d in dims and axes]
    if split:
        out = _mirror(ctx, node, out, [(d, lay[d]) for d in dims if lay[d]])
    finish(ctx, node, lop, [out])


def _mirror(
    ctx: PartitionCtx, node: Node, x: Val, dims: list[tuple[int, DimAxes]]
) -> Val:
    """Sends each device's block to the device holding the mirrored block
    index along each of `dims` (over its axes)."""
    mesh = ctx.mesh
    moved = tuple(a for _, axes in dims for a in axes)
    pairs = []
    for p in range(mesh.size):
        q = p
        for _, axes in dims:
            for a in axes:
                c = coordinate(mesh, a, q)
                q += (a.full_size(mesh) - 1 - 2 * c) * axis_stride(mesh, a)
        pairs.append((p, q))
    shape = x.ty.shape or ()
    nbytes = math.prod(shape) * itemsize(x.ty.dtype)
    ctx.record(
        "collective-permute",
        moved,
        nbytes,
        (node.op, node.loc, "reversed blocks to their mirrored place"),
    )
    return ctx.b.collective_permute(x, pairs)
