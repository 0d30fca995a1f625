"""Windowed ops along split dims: reduce_window, pad, select_and_scatter,
and the window exchange that convolution and slices share.

Every block of a windowed op's output reads one window of the input
(`halo.py` has the arithmetic). `gather_window` brings that window to each
device from the blocks of the input: by collective-permutes of the pieces
it needs (a halo exchange when windows follow the blocks), or by one
all-gather and a local slice where the cost model says that is cheaper
(of the pieces alone where they are shorter than a block).
"""

from __future__ import annotations

import collections
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from meshjit.compiler.diagnostics import SourceLoc
from meshjit.compiler.graph import DenseElements, Graph, Node
from meshjit.dialects.reshard import DimAxes, Layout, neighbor_pairs
from meshjit.dialects.rules import FactorKind, ShardingRule
from meshjit.passes.partitioner.builder import (
    Ty,
    Val,
    combiner_identity,
    i64_array,
    itemsize,
    padding_attr,
)
from meshjit.passes.partitioner.context import (
    PartitionCtx,
    reshard_key,
    window_key,
)
from meshjit.passes.partitioner.factors import (
    FactorLimits,
    WindowedFactor,
    choose_factors,
    operand_layouts,
    window_seconds,
)
from meshjit.passes.partitioner.halo import (
    EDGES,
    GATHER,
    NEAR,
    PERMUTE,
    Aligned,
    Exchange,
    JointChoice,
    Packing,
    Round,
    Window,
    WindowChoice,
    WindowPlan,
    aligned_exchange,
    choose_exchange,
    output_parallel,
    pack_pieces,
    plan_exchange,
)
from meshjit.passes.partitioner.layouts import span
from meshjit.passes.partitioner.local import (
    LocalOp,
    emit,
    finish,
    prepare,
    rule_of,
    run_replicated,
)
from meshjit.passes.partitioner.memory import fmt_bytes, value_bytes

Why = tuple[str, SourceLoc, str]


def ints(value: object) -> tuple[int, ...]:
    if isinstance(value, tuple):
        return tuple(int(v) for v in value)
    return ()


def padding_values(value: object, n: int) -> list[tuple[int, int]]:
    if isinstance(value, DenseElements):
        if value.values is not None:
            flat = value.values
        elif isinstance(value.splat, int) and not isinstance(value.splat, bool):
            flat = (value.splat,) * (2 * n)
        else:
            flat = (0,) * (2 * n)
        return [(flat[2 * i], flat[2 * i + 1]) for i in range(n)]
    return [(0, 0)] * n


def gather_window(
    ctx: PartitionCtx,
    node: Node,
    lop: LocalOp,
    k: int,
    dim: int,
    axes: DimAxes,
    plan: WindowPlan,
    pad: Val | None,
) -> Val:
    """This device's window of operand `k`, split in blocks along `dim` over
    `axes` (or whole along `dim`: the window is cut locally): positions
    outside the operand hold `pad` (None: zero)."""
    x = lop.operands[k]
    first = k not in lop.windowed
    lop.windowed.add(k)
    if (k, dim) in lop.whole:
        return _cut_window(ctx, x, dim, axes, plan, pad)
    # A window of the same local value with the same pieces (a forward
    # convolution's input halo and its filter gradient's) is made once and
    # reused where its definition dominates, as resharded copies are; not
    # under a memory limit, whose estimate does not hold windows that long.
    key = window_key(x, dim, axes, plan, pad)
    if ctx.memory is None:
        found = ctx.scope.cached(key)
        if found is not None:
            return found
    window = _exchanged_window(ctx, node, lop, k, dim, axes, plan, pad, first)
    if ctx.memory is None:
        ctx.scope.cache[key] = window
        ctx.windowed.add(node.operands[k])
    return window


def _exchanged_window(
    ctx: PartitionCtx,
    node: Node,
    lop: LocalOp,
    k: int,
    dim: int,
    axes: DimAxes,
    plan: WindowPlan,
    pad: Val | None,
    first: bool,
) -> Val:
    """The window brought by the way the cost model chooses (with its
    remarks): permutes, one gather of the pieces, or a gather of the dim."""
    x = lop.operands[k]
    reason = f"operand {k} window along dim {dim}"
    why = (node.op, node.loc, reason)
    choice = window_choice(ctx, x, dim, plan)
    refused = ""
    if choice.by_gather:
        refused = _gather_refused(ctx, node, lop, k, dim, axes, first)
    # the exchange taken (where a gather is refused: the better other way)
    exchange = choice.other if choice.by_gather else choice.way
    if (
        exchange == EDGES
        and ctx.memory is not None
        and not (choice.by_gather and not refused)
    ):
        # everyone's pieces, held until the window is cut from them
        packed = _packing_of(plan)
        held = plan.n * packed.total * _position_bytes(x, dim)
        too_big = ctx.hold_or_refuse(held)
        if too_big:
            ctx.remark(
                node.loc,
                f"{reason}: exchanging the window's pieces rather than one "
                f"all-gather of them: {too_big}",
            )
            exchange = PERMUTE
    pieces = _way_text(exchange)
    if refused:
        ctx.remark(
            node.loc,
            f"{reason}: {pieces} (estimated {choice.other_seconds * 1e6:.1f} us) "
            f"rather than one all-gather of the dim ({choice.seconds * 1e6:.1f} "
            f"us): {refused}",
        )
    elif choice.other_seconds < choice.seconds:
        ctx.remark(
            node.loc,
            f"{reason}: {pieces} (estimated {choice.seconds * 1e6:.1f} us) rather "
            f"than {_way_text(choice.other)} ({choice.other_seconds * 1e6:.1f} us): "
            f"within {NEAR:.0%} the way that sends fewer bytes is taken",
        )
    elif choice.by_gather:
        ctx.remark(
            node.loc,
            f"{reason}: one all-gather of the dim (estimated "
            f"{choice.seconds * 1e6:.1f} us) is cheaper than "
            f"{_way_text(choice.other)} ({choice.other_seconds * 1e6:.1f} us)",
        )
        return _cut_window(
            ctx, _gathered(ctx, node, lop, k, dim, axes, first), dim, axes, plan, pad
        )
    elif exchange == EDGES:
        ctx.remark(
            node.loc,
            f"{reason}: one all-gather of the window's pieces (estimated "
            f"{choice.seconds * 1e6:.1f} us) rather than "
            f"{_way_text(choice.other)} ({choice.other_seconds * 1e6:.1f} us)",
        )
    ex = plan_exchange(plan)
    if exchange == EDGES:
        fetch = fetch_packed(ctx, x, dim, axes, ex, _packing_of(plan), why)
    else:
        fetch = _fetch_by_permute(ctx, x, dim, axes, ex, why)
    return _build_window(ctx, x, dim, axes, plan, pad, fetch, exchange == EDGES)


def _build_window(
    ctx: PartitionCtx,
    x: Val,
    dim: int,
    axes: DimAxes,
    plan: WindowPlan,
    pad: Val | None,
    fetch: Fetch,
    junk: bool,
) -> Val:
    """The window from the local piece and the fetched ones. `junk`: blocks
    that take no piece in a round get another block's piece (from gathered
    pieces) rather than zeros (from a permute)."""
    ex = plan_exchange(plan)
    run = None if junk else aligned_exchange(plan)
    # The run is a new buffer of the block and its pieces: not where a buffer
    # with margins would be smaller (a short window of a long block).
    if run and len(run.rounds) > 1 and run.total > plan.length + 2 * ex.margin:
        run = None
    uneven = plan.size % plan.n != 0
    outside = plan.reaches_outside and (pad is not None or uneven or junk)
    if ex.uniform and outside and not uneven:
        # Blocks split evenly: a piece lies wholly inside the input (its
        # source block exists) or wholly outside, so each remote piece is
        # set to the padding by one scalar test, not the whole window by a
        # mask of positions (a select over the window that XLA's CPU backend
        # compiles as a kernel of its own and runs over every element).
        fill = pad if pad is not None else ctx.b.zeros(Ty((), x.ty.dtype))
        edge = (window_start(ctx, axes, plan), fill)
        return _window_by_pieces(ctx, x, dim, plan, ex, pad, fetch, edge)
    if ex.uniform:
        window = _window_by_pieces(ctx, x, dim, plan, ex, pad, fetch)
    elif run is not None:
        window = _window_by_run(ctx, x, dim, axes, run, plan.length, pad, fetch)
    else:
        window = _window_into_buffer(ctx, x, dim, axes, plan, ex, pad, fetch)
    # Past the end of the input a window holds zeros (nothing received), the
    # garbage of an uneven split's last block, or junk from gathered pieces
    # (only where the pieces are static: a buffer keeps it in its margin):
    # set it to the padding.
    if plan.reaches_outside and (pad is not None or uneven or (junk and ex.uniform)):
        fill = pad if pad is not None else ctx.b.zeros(Ty((), x.ty.dtype))
        window = _mask_outside(ctx, window, dim, axes, plan, fill)
    return window


def _packing_of(plan: WindowPlan) -> Packing:
    """The packed pieces of a window the cost model gathers by its pieces."""
    packing = pack_pieces((plan_exchange(plan),), (plan.block,), plan.n)
    assert packing is not None
    return packing


def _gathered_bytes(ctx: PartitionCtx, x: Val, axes: DimAxes) -> int:
    """Per-device bytes of `x` gathered whole along a dim split over `axes`."""
    return math.prod(x.ty.shape or ()) * itemsize(x.ty.dtype) * span(axes, ctx.mesh)


def _gather_refused(
    ctx: PartitionCtx,
    node: Node,
    lop: LocalOp,
    k: int,
    dim: int,
    axes: DimAxes,
    first: bool,
) -> str:
    """Why operand `k` gathered whole along `dim` would break the memory
    limit; "" when it stays under it (the copy is then counted) or there is
    no limit."""
    memory = ctx.memory
    if memory is None:
        return ""
    key = None
    if first:
        key = reshard_key(node.operands[k], _whole_along(lop, k, dim))
        if ctx.scope.cached(key) is not None:
            return ""  # made before: reusing it costs no new memory
    return ctx.hold_or_refuse(_gathered_bytes(ctx, lop.operands[k], axes), key)


def joint_choice(
    ctx: PartitionCtx,
    node: Node,
    rule: ShardingRule,
    limits: FactorLimits,
    factors: list[DimAxes],
) -> JointChoice | None:
    """For an op whose split dim makes several windows (a concatenate's
    operands): one all-gather of all their pieces, where the cost model
    prefers it to each window's own way (`halo.choose_joint`); a remark
    says so. None: each window goes its own way."""
    if len(limits.windowed) != 1:
        return None
    (w,) = limits.windowed
    axes = factors[w.factor]
    if not axes:
        return None
    _, whole = operand_layouts(ctx, node, rule, factors, limits)
    _, choice = window_seconds(ctx, node, rule, factors, w, whole)
    if choice is None:
        return None
    what = (
        f"{node.op} along dim {w.dim}: one all-gather of every operand's pieces "
        f"(estimated {choice.seconds * 1e6:.1f} us, {fmt_bytes(choice.nbytes)} per "
        f"device)"
    )
    alone = (
        f"each operand's window its own way ({choice.alone_seconds * 1e6:.1f} us, "
        f"{fmt_bytes(choice.alone_bytes)})"
    )
    if ctx.memory is not None:
        n = span(axes, ctx.mesh)
        refused = ctx.hold_or_refuse(n * choice.nbytes // (n - 1))
        if refused:
            ctx.remark(node.loc, f"{what} not taken: {refused}; {alone} instead")
            return None
    ctx.remark(node.loc, f"{what} rather than {alone}{choice.tie_note}")
    return choice


def whole_where_gathered(
    ctx: PartitionCtx,
    node: Node,
    rule: ShardingRule,
    limits: FactorLimits,
    factors: list[DimAxes],
) -> list[DimAxes]:
    """For data movement (slice, pad, concatenate): a split windowed factor
    whose every window would be cut from a whole copy (one the value has, or
    an all-gather the cost model prefers to the pieces) is left unsplit: the
    op then runs whole along that dim on the same gathered copies, and its
    whole result stays available to later uses (slicing it is free)."""
    wants, whole = operand_layouts(ctx, node, rule, factors, limits)
    out = list(factors)
    for w in limits.windowed:
        axes = factors[w.factor]
        plans = w.plans(span(axes, ctx.mesh)) if axes else None
        if plans is None:
            continue
        gathered = True
        for (k, _), plan in zip(w.windows, plans, strict=True):
            v = ctx.graph.value(node.operands[k])
            if (k, w.dim) in whole or v.shape is None:
                continue
            local = ctx.local_shape(v.shape, wants[k])
            inner = math.prod(n for d, n in enumerate(local) if d != w.dim)
            row = inner * itemsize(v.dtype)
            if not choose_exchange(plan, row, ctx.cost, edges=False).by_gather:
                gathered = False
        if gathered and ctx.memory is not None:
            refused = ctx.hold_or_refuse(
                _whole_bytes(ctx, node, wants, whole, w.windows, axes, w.dim)
            )
            if refused:
                gathered = False
                ctx.remark(
                    node.loc,
                    f"{node.op} stays split along its dim {w.dim} rather than "
                    f"running whole on gathered copies: {refused}",
                )
        if gathered:
            out[w.factor] = ()
    return out


def _whole_bytes(
    ctx: PartitionCtx,
    node: Node,
    wants: Sequence[Layout],
    whole: frozenset[tuple[int, int]],
    windows: Sequence[tuple[int, Window]],
    axes: DimAxes,
    dim: int,
) -> int:
    """Per-device bytes of the copies an op run whole along a dim split over
    `axes` makes: its gathered operands and its whole results."""
    n = span(axes, ctx.mesh)
    total = 0
    for k, _ in windows:
        v = ctx.graph.value(node.operands[k])
        if (k, dim) not in whole and v.shape is not None:
            local = ctx.local_shape(v.shape, wants[k])
            total += value_bytes(v.shape, v.dtype, local) * n
    for r in node.results:
        v = ctx.graph.value(r)
        if v.shape is not None:
            total += value_bytes(v.shape, v.dtype, ctx.local_ty(r).shape or ()) * n
    return total


def _whole_along(lop: LocalOp, k: int, dim: int) -> Layout:
    """Operand `k`'s layout for the local op, whole along `dim`."""
    return tuple(() if d == dim else a for d, a in enumerate(lop.wants[k]))


def _gathered(
    ctx: PartitionCtx,
    node: Node,
    lop: LocalOp,
    k: int,
    dim: int,
    axes: DimAxes,
    first: bool,
) -> Val:
    """Operand `k` all-gathered along `dim`: as a reshard of the value like any
    other (later uses reuse the gathered copy) unless an earlier window along
    another dim replaced it already."""
    reason = f"operand {k} window along dim {dim}"
    if first:
        whole = _whole_along(lop, k, dim)
        return ctx.value_reshard(node.operands[k], whole, node, reason)
    x = lop.operands[k]
    shape = list(x.ty.shape or ())
    nbytes = (span(axes, ctx.mesh) - 1) * math.prod(shape) * itemsize(x.ty.dtype)
    ctx.record("all-gather", axes, nbytes, (node.op, node.loc, reason))
    shape[dim] *= span(axes, ctx.mesh)
    return ctx.b.all_gather(x, dim, ctx.groups(axes), x.ty.with_shape(shape))


def window_choice(
    ctx: PartitionCtx, x: Val, dim: int, plan: WindowPlan
) -> WindowChoice:
    return choose_exchange(plan, _position_bytes(x, dim), ctx.cost)


def _position_bytes(x: Val, dim: int) -> int:
    """Bytes of one position of `x` along `dim` (the other dims' product)."""
    shape = x.ty.shape or ()
    return math.prod(n for d, n in enumerate(shape) if d != dim) * itemsize(x.ty.dtype)


def _way_text(way: str) -> str:
    if way == EDGES:
        return "one all-gather of the window's pieces"
    if way == GATHER:
        return "one all-gather of the dim"
    return "exchanging the window's pieces"


Fetch = Callable[[Round], Val]


def _fetch_by_permute(
    ctx: PartitionCtx, x: Val, dim: int, axes: DimAxes, ex: Exchange, why: Why
) -> Fetch:
    """A remote round's piece for this device: cut by its source (at the
    source's offset) and moved by one collective-permute."""
    blocks = ctx.block_of_position(axes)

    def fetch(r: Round) -> Val:
        piece = cut_along(ctx, x, dim, _sources_cut(ex, r, blocks), r.length)
        _record_round(ctx, x, dim, axes, r.length, r.shift, why)
        return ctx.b.collective_permute(piece, _pairs(ctx, axes, r.shift, r.targets))

    return fetch


def fetch_packed(
    ctx: PartitionCtx,
    x: Val,
    dim: int,
    axes: DimAxes,
    ex: Exchange,
    packing: Packing,
    why: Why,
) -> Fetch:
    """One all-gather of what every block sends in the remote rounds of `ex`
    (a window of `x`), packed into slots (`pack_pieces`); a round's piece
    for this device is cut from its source's contribution (a block that
    takes none in the round cuts its own: the caller masks or discards
    it)."""
    gathered = gather_pieces(ctx, [x], dim, axes, [ex], packing, why)
    blocks = ctx.block_of_position(axes)
    total = packing.total
    index = {r.shift: k for k, r in enumerate(ex.rounds)}

    def fetch(r: Round) -> Val:
        k = index[r.shift]
        starts = []
        for i in blocks:
            if r.dst[i] >= 0:
                j = i + r.shift
                starts.append(j * total + packing.at[(0, k, j)])
            else:
                starts.append(i * total)  # junk, masked or discarded
        return cut_along(ctx, gathered, dim, starts, r.length)

    return fetch


def gather_pieces(
    ctx: PartitionCtx,
    xs: Sequence[Val],
    dim: int,
    axes: DimAxes,
    exchanges: Sequence[Exchange],
    packing: Packing,
    why: Why,
) -> Val:
    """Every block's contribution (its slots, each cut from the part that
    fills it on that block) all-gathered along `dim` over `axes`."""
    b = ctx.b
    blocks = ctx.block_of_position(axes)
    n = len(set(blocks))
    values = list(dict.fromkeys(xs))  # parts that are one value: one source
    sizes = [full_size(v, dim) for v in values]
    base = {v: sum(sizes[:k]) for k, v in enumerate(values)}
    origin: list[list[int | None]] = []
    for i in range(n):
        row: list[int | None] = []
        for length, fills in zip(packing.lengths, packing.fills, strict=True):
            fill = fills[i]
            if fill is None:
                row += [None] * length
            else:
                first = base[xs[fill[0]]] + fill[1]
                row += range(first, first + length)
        origin.append(row)
    sent = assemble(ctx, values, dim, axes, packing.total, origin)
    shape = list(sent.ty.shape or ())
    nbytes = (n - 1) * math.prod(shape) * itemsize(sent.ty.dtype)
    op, loc, reason = why
    shifts = sorted({r.shift for ex in exchanges for r in ex.rounds if r.shift != 0})
    moved = ", ".join(f"{shift:+d}" for shift in shifts)
    ctx.record(
        GATHER,
        axes,
        nbytes,
        (
            op,
            loc,
            f"{reason}: {packing.total} along dim {dim}, the pieces from blocks "
            f"{moved}",
        ),
    )
    shape[dim] *= n
    return b.all_gather(sent, dim, ctx.groups(axes), sent.ty.with_shape(shape))


def piece_origin(
    packing: Packing, ex: Exchange, part: int, i: int, j: int, at: int
) -> int:
    """Where position `at` of block j's block of part `part` lies in what
    block j contributes to the gather of the packed pieces, for target
    block i (the piece of the round that brings block j's positions to
    block i holds it)."""
    for k, r in enumerate(ex.rounds):
        if r.shift == j - i and r.dst[i] >= 0:
            start = r.src[j]
            assert start <= at < start + r.length
            return packing.at[(part, k, j)] + at - start
    raise AssertionError(f"block {i} takes nothing from block {j}")


def assemble(
    ctx: PartitionCtx,
    parts: Sequence[Val],
    dim: int,
    axes: DimAxes,
    length: int,
    origin: Sequence[Sequence[int | None]],
) -> Val:
    """A block of `length` positions along `dim` whose position p on block i
    is position `origin[i][p]` of the parts concatenated along `dim` (None:
    any). Positions that follow each other in the source on every block
    form one segment: one cut at per-device offsets each, concatenated. (A
    block assembled so takes a few kernels, where writing every piece into
    a buffer takes one per piece: XLA's compile time counts.)"""
    b = ctx.b
    source = parts[0] if len(parts) == 1 else b.concatenate(list(parts), dim)
    size = full_size(source, dim)
    filled = _origin_filled(origin, size)
    bounds = [0]
    for p in range(1, length):
        if any(o[p] != o[p - 1] + 1 for o in filled):
            bounds.append(p)
    bounds.append(length)
    blocks = ctx.block_of_position(axes)
    pieces = [
        cut_along(ctx, source, dim, [filled[i][lo] for i in blocks], hi - lo)
        for lo, hi in itertools.pairwise(bounds)
    ]
    return pieces[0] if len(pieces) == 1 else b.concatenate(pieces, dim)


def _origin_filled(
    origin: Sequence[Sequence[int | None]], size: int
) -> list[list[int]]:
    """`origin` with every position any block may fill (None) set: it
    continues the block's run, or where it cannot, takes what most blocks
    take there (a cut where every block cuts at one offset is a static
    slice), else 0."""
    rows = [list(o) for o in origin]
    for p in range(len(rows[0]) if rows else 0):
        column = [o[p] for o in rows]
        if None not in column:
            continue
        known = collections.Counter(v for v in column if v is not None)
        common = known.most_common(1)[0][0] if known else 0
        for o in rows:
            if o[p] is None:
                before = o[p - 1] if p else None
                if before is not None and before + 1 < size:
                    o[p] = before + 1
                else:
                    o[p] = common
    return [[v if v is not None else 0 for v in o] for o in rows]


def _sources_cut(ex: Exchange, r: Round, blocks: Sequence[int]) -> list[int]:
    """Where each device cuts what it sends in round `r` (static pieces: the
    same offset on every device, those that send nothing included)."""
    if ex.uniform:
        return [r.src[r.targets[0] + r.shift]] * len(blocks)
    return [r.src[j] for j in blocks]


def cut_along(
    ctx: PartitionCtx, x: Val, dim: int, starts: Sequence[int], length: int
) -> Val:
    """`length` positions of `x` along `dim` from `starts[p]` on the device
    at mesh position p (a static slice where every device cuts the same)."""
    if len(set(starts)) == 1:
        return ctx.b.slice_dim(x, dim, starts[0], length)
    shape = list(x.ty.shape or ())
    zero = ctx.const_i32(0)
    offset = ctx.per_position(list(starts))
    at = [offset if d == dim else zero for d in range(len(shape))]
    shape[dim] = length
    return ctx.b.dynamic_slice(x, at, shape)


def _record_round(
    ctx: PartitionCtx,
    x: Val,
    dim: int,
    axes: DimAxes,
    length: int,
    shift: int,
    why: Why,
) -> None:
    shape = list(x.ty.shape or ())
    shape[dim] = length
    nbytes = math.prod(shape) * itemsize(x.ty.dtype)
    op, loc, reason = why
    side = f"block {shift:+d}"
    ctx.record(
        "collective-permute",
        axes,
        nbytes,
        (op, loc, f"{reason}: {length} along dim {dim} from {side}"),
    )


def _pairs(
    ctx: PartitionCtx, axes: DimAxes, shift: int, targets: Sequence[int]
) -> tuple[tuple[int, int], ...]:
    """(source, target) positions: a target at block i receives from block
    i + shift; only the listed target blocks."""
    blocks = ctx.block_of_position(axes)
    wanted = set(targets)
    return tuple(
        (p, q) for p, q in neighbor_pairs(ctx.mesh, axes, -shift) if blocks[q] in wanted
    )


def _window_by_pieces(
    ctx: PartitionCtx,
    x: Val,
    dim: int,
    plan: WindowPlan,
    ex: Exchange,
    pad: Val | None,
    fetch: Fetch,
    edge: tuple[Val, Val] | None = None,
) -> Val:
    """Static pieces concatenated: the classic halo exchange. Blocks whose
    window reaches outside the value receive zeros or junk there: with
    `edge` (the window's start in the input, the padding value) each remote
    piece whose positions lie outside the input is set to the padding here,
    else the caller masks the window."""
    b = ctx.b
    parts = []
    covered = 0  # window positions the parts so far cover
    for r in ex.rounds:
        target = r.targets[0]
        source = target + r.shift
        if r.dst[target] > covered:  # before every block: the op's padding
            parts.append(_filled(ctx, x, dim, r.dst[target] - covered, pad))
        if r.shift == 0:
            parts.append(b.slice_dim(x, dim, r.src[source], r.length))
        elif edge is not None:
            parts.append(_padded_if_outside(ctx, fetch(r), r.dst[target], plan, edge))
        else:
            parts.append(fetch(r))
        covered = r.dst[target] + r.length
    if covered < plan.length:
        parts.append(_filled(ctx, x, dim, plan.length - covered, pad))
    return b.concatenate(parts, dim)


def _padded_if_outside(
    ctx: PartitionCtx, piece: Val, at: int, plan: WindowPlan, edge: tuple[Val, Val]
) -> Val:
    """A remote piece at window position `at`, or the padding where it lies
    outside the input (a block split evenly: all of it or none)."""
    b = ctx.b
    first, fill = edge
    start = b.binary("stablehlo.add", first, ctx.const_i32(at))
    inside = b.binary(
        "stablehlo.and",
        b.compare(start, ctx.const_i32(0), "GE"),
        b.compare(start, ctx.const_i32(plan.size), "LT"),
    )
    return b.select(
        b.broadcast(inside, piece.ty.with_dtype("i1")),
        piece,
        b.broadcast(fill, piece.ty),
    )


def _mask_outside(
    ctx: PartitionCtx, window: Val, dim: int, axes: DimAxes, plan: WindowPlan, pad: Val
) -> Val:
    """Positions of the window outside [0, size) set to `pad`."""
    b = ctx.b
    index_ty = window.ty.with_dtype("i32")
    first = window_start(ctx, axes, plan)
    position = b.binary(
        "stablehlo.add", b.iota(index_ty, dim), b.broadcast(first, index_ty)
    )
    inside = b.binary(
        "stablehlo.and",
        b.compare(position, b.splat(index_ty, "0"), "GE"),
        b.compare(position, b.splat(index_ty, str(plan.size)), "LT"),
    )
    return b.select(inside, window, b.broadcast(pad, window.ty))


def _filled(ctx: PartitionCtx, x: Val, dim: int, length: int, pad: Val | None) -> Val:
    """`length` positions along `dim` shaped like `x`, all `pad`."""
    shape = list(x.ty.shape or ())
    shape[dim] = length
    return _fill(ctx, x.ty.with_shape(shape), pad)


def _fill(ctx: PartitionCtx, ty: Ty, pad: Val | None) -> Val:
    if pad is None:
        return ctx.b.zeros(ty)
    return ctx.b.broadcast(pad, ty)


def _window_by_run(
    ctx: PartitionCtx,
    x: Val,
    dim: int,
    axes: DimAxes,
    run: Aligned,
    length: int,
    pad: Val | None,
    fetch: Fetch,
) -> Val:
    """Pieces at per-device offsets as one run (`aligned_exchange`): the
    local block between the ends and starts of its neighbours' blocks (each
    source cuts at one offset: static slices), the window cut from the run
    at the device's offset. A block that takes no piece in a round receives
    zeros there: positions its outputs do not read, or outside the input
    (masked by the caller where that is not the padding)."""
    parts = []
    if run.low:
        parts.append(_filled(ctx, x, dim, run.low, pad))
    parts += [x if r.shift == 0 else fetch(r) for r in run.rounds]
    if run.high:
        parts.append(_filled(ctx, x, dim, run.high, pad))
    joined = parts[0] if len(parts) == 1 else ctx.b.concatenate(parts, dim)
    blocks = ctx.block_of_position(axes)
    return cut_along(ctx, joined, dim, [run.offsets[i] for i in blocks], length)


def _window_into_buffer(
    ctx: PartitionCtx,
    x: Val,
    dim: int,
    axes: DimAxes,
    plan: WindowPlan,
    ex: Exchange,
    pad: Val | None,
    fetch: Fetch,
) -> Val:
    """Pieces cut at per-device offsets and written at per-device offsets
    into a buffer of `pad` with a margin on both sides (a target without a
    piece in a round writes into the margin)."""
    b = ctx.b
    blocks = ctx.block_of_position(axes)
    shape = list(x.ty.shape or ())
    full = list(shape)
    full[dim] = plan.length + 2 * ex.margin
    buffer = _fill(ctx, x.ty.with_shape(full), pad)
    zero = ctx.const_i32(0)
    for r in ex.rounds:
        if r.shift == 0:
            piece = cut_along(ctx, x, dim, [r.src[j] for j in blocks], r.length)
        else:
            piece = fetch(r)
        put_at = ctx.per_position([max(r.dst[i], 0) for i in blocks])
        starts = [put_at if d == dim else zero for d in range(len(shape))]
        buffer = b.dynamic_update_slice(buffer, piece, starts)
    return b.slice_dim(buffer, dim, ex.margin, plan.length)


def _cut_window(
    ctx: PartitionCtx,
    full: Val,
    dim: int,
    axes: DimAxes,
    plan: WindowPlan,
    pad: Val | None,
) -> Val:
    """This device's window of a value whole along `dim`: padded with `pad`
    where windows reach outside it, then sliced at the device's offset.
    At most one window's length of padding on each side: a window wholly
    outside the value (a piece of a concatenation that other devices' blocks
    hold) has its start clamped by dynamic_slice onto the padding, instead
    of the value being padded to the whole dim (CycleGAN's 3 reflected edge
    rows placed in a 70-row result: 9 rows each side, not 72 rows, on every
    device)."""
    b = ctx.b
    shape = list(full.ty.shape or ())
    firsts = [plan.first(i) for i in range(plan.n)]
    low = min(plan.length, max(0, -min(firsts)))
    high = min(plan.length, max(0, max(firsts) + plan.length - full_size(full, dim)))
    if low or high:
        lows = [low if d == dim else 0 for d in range(len(shape))]
        highs = [high if d == dim else 0 for d in range(len(shape))]
        dtype = full.ty.dtype
        value = pad if pad is not None else b.zeros(Ty((), dtype))
        full = b.pad(full, value, lows, highs)
    offset = b.binary(
        "stablehlo.add", window_start(ctx, axes, plan), ctx.const_i32(low)
    )
    zero = ctx.const_i32(0)
    starts = [offset if d == dim else zero for d in range(len(shape))]
    sizes = list(shape)
    sizes[dim] = plan.length
    return b.dynamic_slice(full, starts, sizes)


def full_size(x: Val, dim: int) -> int:
    return (x.ty.shape or ())[dim]


def window_start(ctx: PartitionCtx, axes: DimAxes, plan: WindowPlan) -> Val:
    """Where this device's window starts in the input (a scalar)."""
    if plan.linear:
        return ctx.b.binary(
            "stablehlo.add", ctx.dim_offset(axes, plan.step), ctx.const_i32(plan.start)
        )
    blocks = ctx.block_of_position(axes)
    return ctx.per_position([plan.first(i) for i in blocks])


# -- reduce_window and pad -------------------------------------------------------


def _reduce_window_windows(
    graph: Graph, node: Node, rule: ShardingRule
) -> dict[int, tuple[int, Window]]:
    """Per windowed factor: its dim and window."""
    attrs = node.attrs
    operand = graph.value(node.operands[0]).shape or ()
    n = len(operand)
    window = ints(attrs.get("window_dimensions"))
    strides = ints(attrs.get("window_strides")) or (1,) * n
    base = ints(attrs.get("base_dilations")) or (1,) * n
    wdil = ints(attrs.get("window_dilations")) or (1,) * n
    padding = padding_values(attrs.get("padding"), n)
    out: dict[int, tuple[int, Window]] = {}
    for d in range(n):
        w = Window(operand[d], window[d], strides[d], *padding[d], base[d], wdil[d])
        for f in rule.operands[0][d]:
            if rule.kind(f) is FactorKind.PERMUTATION:
                out[f] = (d, w)
    return out


def reduce_window(node: Node, ctx: PartitionCtx) -> None:
    """A dim with a real window splits when every output block reads one
    window of the input: each input's window is exchanged (padded with its
    init value) and the op runs with local padding."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    windows = _reduce_window_windows(ctx.graph, node, rule)
    count = len(node.operands) // 2
    scan = _scan_dim(ctx, node)
    if scan is not None:
        _scan(node, ctx, rule, windows, *scan)
        return
    limits = FactorLimits(
        windowed=tuple(
            WindowedFactor(f, d, tuple((k, w) for k in range(count)))
            for f, (d, w) in sorted(windows.items())
        )
    )
    lop = prepare(ctx, node, rule, limits)
    pads = padding_values(node.attrs.get("padding"), len(lop.results[0].shape or ()))
    for f, (d, w) in sorted(windows.items()):
        axes = lop.factors[f]
        if not axes:
            continue
        plan = output_parallel(w, span(axes, ctx.mesh))
        assert plan is not None
        for k in range(count):
            lop.operands[k] = gather_window(
                ctx, node, lop, k, d, axes, plan, lop.operands[count + k]
            )
        pads[d] = (plan.low, plan.high)
    lop.attrs["padding"] = padding_attr(pads)
    emit(ctx, node, lop)


# The combiners a scan can use; its init value must be the combiner's
# identity (`combiner_identity`: then padding adds nothing).
_SCAN_COMBINERS = frozenset(
    {"stablehlo.add", "stablehlo.multiply", "stablehlo.maximum", "stablehlo.minimum"}
)


def _is_identity(ctx: PartitionCtx, vid: int, combiner: str | None) -> bool:
    """Whether the value is the combiner's identity: a constant (through
    broadcasts) whose literal is `combiner_identity`'s for its element
    type."""
    if combiner not in _SCAN_COMBINERS:
        return False
    init = ctx.graph.value(vid)
    owner = init.owner
    while owner >= 0 and ctx.graph.node(owner).op == "stablehlo.broadcast_in_dim":
        owner = ctx.graph.value(ctx.graph.node(owner).operands[0]).owner
    if owner < 0:
        return False
    text = ctx.graph.node(owner).attr_text.get("value", "")
    literal = text[len("dense<") : text.find(">")] if text.startswith("dense<") else ""
    is_float = init.dtype.startswith(("f", "bf"))
    want = combiner_identity(combiner, init.dtype)
    return want is not None and _same_literal(literal, want, is_float)


def _scan_dim(ctx: PartitionCtx, node: Node) -> tuple[int, bool] | None:
    """(dim, prefix?) of a cumulative reduce_window (JAX's cumsum, cumprod,
    cummax...): one input, a window as long as the dim, stride 1, padded by
    its length - 1 before (prefix) or after (suffix), an identity as init;
    every other dim untouched."""
    if len(node.operands) != 2:
        return None
    if not _is_identity(ctx, node.operands[1], _region_op(ctx, node, 0)):
        return None
    shape = ctx.graph.value(node.operands[0]).shape or ()
    attrs = node.attrs
    rank = len(shape)
    window = ints(attrs.get("window_dimensions"))
    strides = ints(attrs.get("window_strides")) or (1,) * rank
    base = ints(attrs.get("base_dilations")) or (1,) * rank
    wdil = ints(attrs.get("window_dilations")) or (1,) * rank
    padding = padding_values(attrs.get("padding"), rank)
    found = None
    for d, n in enumerate(shape):
        if (window[d], strides[d], base[d], wdil[d], padding[d]) == (
            1,
            1,
            1,
            1,
            (0, 0),
        ):
            continue
        if found is not None or n < 2 or strides[d] != 1 or window[d] != n:
            return None
        if base[d] != 1 or wdil[d] != 1 or padding[d] not in ((n - 1, 0), (0, n - 1)):
            return None
        found = (d, padding[d] == (n - 1, 0))
    return found


def _same_literal(literal: str, want: str, is_float: bool) -> bool:
    if literal == want:
        return True
    if not is_float or want.startswith("0x"):
        return False
    try:
        return float(literal) == float(want)
    except ValueError:
        return False


def _scan(
    node: Node,
    ctx: PartitionCtx,
    rule: ShardingRule,
    windows: dict[int, tuple[int, Window]],
    dim: int,
    prefix: bool,
) -> None:
    """A cumulative reduce_window along a split dim (`_add_earlier_blocks`)."""
    factors = [f for f, (d, _) in windows.items() if d == dim]
    lop = prepare(ctx, node, rule, FactorLimits(movable=frozenset(factors)))
    axes = tuple(a for f in factors for a in lop.factors[f])
    if not axes:
        emit(ctx, node, lop)
        return
    x, init = lop.operands
    shape = list(x.ty.shape or ())
    combiner = _region_op(ctx, node, 0) or "stablehlo.add"

    def scan(v: Val) -> Val:
        length = (v.ty.shape or ())[dim]
        pads = [(0, 0)] * len(shape)
        pads[dim] = (length - 1, 0) if prefix else (0, length - 1)
        dims = [1] * len(shape)
        dims[dim] = length
        attrs = {
            "window_dimensions": i64_array(dims),
            "window_strides": i64_array([1] * len(shape)),
            "padding": padding_attr(pads),
        }
        region = ctx.verbatim_region(node.regions[0][0])
        return ctx.b.op1("stablehlo.reduce_window", [v, init], v.ty, attrs, [region])

    out, _ = _add_earlier_blocks(
        ctx, node, scan(x), dim, axes, prefix, combiner, scan, init
    )
    finish(ctx, node, lop, [out])


def _add_earlier_blocks(
    ctx: PartitionCtx,
    node: Node,
    local: Val,
    dim: int,
    axes: DimAxes,
    prefix: bool,
    combiner: str,
    scan: Callable[[Val], Val],
    fill: Val,
) -> tuple[Val, Val]:
    """A cumulative op along a split dim, from each device's scan of its
    block (`local`): the blocks' totals are all-gathered (one element per
    block and row), each device combines the totals of the blocks before it
    (after it, for a suffix scan) and adds that to its local scan. Returns
    that and the inclusive scan of the totals (length n along `dim`). `scan`
    scans a value along `dim`; `fill` is the combiner's identity (a scalar)."""
    b = ctx.b
    shape = list(local.ty.shape or ())
    block = shape[dim]
    n = span(axes, ctx.mesh)
    total = b.slice_dim(local, dim, block - 1 if prefix else 0, 1)
    gathered_shape = list(shape)
    gathered_shape[dim] = n
    nbytes = (n - 1) * math.prod(total.ty.shape or ()) * itemsize(local.ty.dtype)
    ctx.record(
        "all-gather", axes, nbytes, (node.op, node.loc, f"block totals along dim {dim}")
    )
    totals = b.all_gather(
        total, dim, ctx.groups(axes), local.ty.with_shape(gathered_shape)
    )
    # Exclusive scan of the totals: shift the inclusive one by one block.
    inclusive = scan(totals)
    lows = [0] * len(shape)
    highs = [0] * len(shape)
    if prefix:
        lows[dim] = 1
    else:
        highs[dim] = 1
    shifted = b.pad(inclusive, fill, lows, highs)
    exclusive = b.slice_dim(shifted, dim, 0 if prefix else 1, n)
    zero = ctx.const_i32(0)
    starts = [ctx.block_index(axes) if d == dim else zero for d in range(len(shape))]
    mine = b.dynamic_slice(exclusive, starts, total.ty.shape or ())
    # `mine` has length 1 along `dim`: spread it over the block.
    others = [d for d in range(len(shape)) if d != dim]
    rows = b.reshape(mine, [n for d, n in enumerate(shape) if d != dim])
    earlier = b.broadcast(rows, local.ty, others)
    return b.binary(combiner, local, earlier), inclusive


def chlo_scan(node: Node, ctx: PartitionCtx) -> None:
    """chlo.scan, JAX's cumulative ops on GPUs from jax 0.11 (one input, one
    init, a body `r = combiner(slice, carry); return r, r`; the rule table
    has no rule for other scans). The other dims split freely: the body is
    made again on the local slices. Along a split scanned dim, when the scan
    is associative and its init the combiner's identity, each device scans
    its block and combines the totals of the blocks before it
    (`_add_earlier_blocks`); otherwise that dim is made whole first."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    dim = node.attrs.get("dimension")
    assert isinstance(dim, int)  # the op's verifier requires it
    if dim < 0:
        dim += len(ctx.graph.value(node.operands[0]).shape or ())
    prefix = not bool(node.attrs.get("is_reverse", False))
    combiner = _region_op(ctx, node, 0) or "stablehlo.add"
    scanned = [
        f for f in rule.operands[0][dim] if rule.kind(f) is FactorKind.PERMUTATION
    ]
    splits = _is_identity(ctx, node.operands[1], combiner)
    movable = frozenset(scanned) if splits else frozenset()
    lop = prepare(ctx, node, rule, FactorLimits(movable=movable))
    x, init = lop.operands
    b = ctx.b
    attrs = dict(lop.attrs)
    attrs.pop("scan_dim_size", None)  # a static dim: the op reads it off the type

    def scan(v: Val, start: Val) -> tuple[Val, Val]:
        """(outputs, carry) of the scan of `v` from `start`."""
        saved = b.capture()
        (a, c), header = b.block_args([start.ty, start.ty])
        r = b.binary(combiner, a, c)
        b.ret("stablehlo.return", [r, r])
        body = header + b.restore(saved)
        out, carry = b.op(node.op, [v, start], [v.ty, start.ty], attrs, [body])
        return out, carry

    axes = tuple(a for f in scanned for a in lop.factors[f])
    out, carry = scan(x, init)
    if not axes:
        finish(ctx, node, lop, [out, carry])
        return
    is_float = x.ty.dtype.startswith(("f", "bf"))
    literal = combiner_identity(combiner, x.ty.dtype)
    assert literal is not None  # `_is_identity` held
    if is_float and not literal.startswith("0x"):
        literal = repr(float(literal))
    fill = b.splat(x.ty.with_shape(()), literal)

    def scan_totals(v: Val) -> Val:
        return scan(v, b.broadcast(fill, init.ty))[0]

    out, inclusive = _add_earlier_blocks(
        ctx, node, out, dim, axes, prefix, combiner, scan_totals, fill
    )
    # The carry: the whole dim's total, every block's combined.
    n = span(axes, ctx.mesh)
    last = b.slice_dim(inclusive, dim, n - 1 if prefix else 0, 1)
    carry = b.reshape(last, init.ty.shape or ())
    finish(ctx, node, lop, [out, carry])


def pad(node: Node, ctx: PartitionCtx) -> None:
    """A padded dim splits like a window of size 1 over the input dilated by
    the interior padding: each block gets the input elements its part of the
    result holds and pads them locally."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    operand = ctx.graph.value(node.operands[0]).shape or ()
    low = ints(node.attrs.get("edge_padding_low"))
    high = ints(node.attrs.get("edge_padding_high"))
    interior = ints(node.attrs.get("interior_padding"))
    windows: dict[int, tuple[int, Window]] = {}
    for d, n in enumerate(operand):
        w = Window(n, 1, 1, low[d], high[d], interior[d] + 1)
        for f in rule.operands[0][d]:
            if rule.kind(f) is FactorKind.PERMUTATION:
                windows[f] = (d, w)
    limits = FactorLimits(
        windowed=tuple(
            WindowedFactor(f, d, ((0, w),)) for f, (d, w) in sorted(windows.items())
        )
    )
    factors = choose_factors(ctx, node, rule, limits)
    factors = whole_where_gathered(ctx, node, rule, limits, factors)
    lop = prepare(ctx, node, rule, limits, factors)
    lows, highs = list(low), list(high)
    for f, (d, w) in sorted(windows.items()):
        axes = lop.factors[f]
        if not axes:
            continue
        plan = output_parallel(w, span(axes, ctx.mesh))
        assert plan is not None
        lop.operands[0] = gather_window(
            ctx, node, lop, 0, d, axes, plan, lop.operands[1]
        )
        lows[d], highs[d] = plan.low, plan.high
    if not any((*lows, *highs, *interior)) and lop.results[0] == lop.operands[0].ty:
        # the windows hold the padding: nothing is left to pad locally
        finish(ctx, node, lop, [lop.operands[0]])
        return
    lop.attrs["edge_padding_low"] = i64_array(lows)
    lop.attrs["edge_padding_high"] = i64_array(highs)
    emit(ctx, node, lop)


# -- select_and_scatter ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ScatterWindow:
    """A select_and_scatter dim split in blocks: block i takes every window
    that touches its block of the operand (the source's values for them and
    the operand they read), scatters locally and keeps its own block, which
    starts `skips[i]` into its operand window."""

    dim: int
    operand: WindowPlan
    source: WindowPlan
    skips: tuple[int, ...]


def _scatter_window(
    size: int, window: int, stride: int, out: int, n: int
) -> tuple[WindowPlan, WindowPlan, tuple[int, ...]] | None:
    """Per block of the operand (ceil(size / n) elements): its first window
    and how many windows every block takes (the most any block touches, and
    enough to cover the block); windows past the source's end get source 0."""
    if n <= 1:
        return None
    block = -(-size // n)
    firsts = []
    count = 1
    for i in range(n):
        lo = max(0, -(-(i * block - window + 1) // stride))
        hi = min(out - 1, ((i + 1) * block - 1) // stride)
        firsts.append(min(lo, max(hi, 0)))
        count = max(count, hi - lo + 1)
    skips = tuple(i * block - f * stride for i, f in enumerate(firsts))
    if min(skips) < 0:
        return None
    while (count - 1) * stride + window < max(skips) + block:
        count += 1  # windows past the block's last one cover its tail
    length = (count - 1) * stride + window
    operand = WindowPlan(size, n, 0, 0, length, 0, 0, tuple(f * stride for f in firsts))
    source = WindowPlan(out, n, 0, 0, count, 0, 0, tuple(firsts))
    return operand, source, skips


def _select_fill(ctx: PartitionCtx, node: Node, dtype: str) -> str | None:
    """The operand value the select never prefers (the first region is
    `compare(a, b)` GE/GT: -inf; LE/LT: +inf), or None."""
    block = node.regions[0][0]
    if len(block.nodes) != 2 or not dtype.startswith(("f", "bf")):
        return None
    cmp = ctx.graph.node(block.nodes[0])
    if cmp.op != "stablehlo.compare" or tuple(cmp.operands) not in (
        tuple(block.args),
        tuple(reversed(block.args)),
    ):
        return None
    direction = cmp.attr_text.get("comparison_direction", "")
    swapped = tuple(cmp.operands) != tuple(block.args)
    if "GE" in direction or "GT" in direction:
        return "0x7F800000" if swapped else "0xFF800000"
    if "LE" in direction or "LT" in direction:
        return "0xFF800000" if swapped else "0x7F800000"
    return None


def select_and_scatter(node: Node, ctx: PartitionCtx) -> None:
    """Unwindowed dims split as they are. A windowed dim without padding
    splits when blocks of the operand match blocks of the source: each block
    takes every window touching it (their source values, padded with 0 for
    windows that do not exist, and the operand they read, padded with a
    value the select never prefers), scatters them locally and keeps its own
    block, as XLA's partitioner does; the scatter must be an add."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    operand = ctx.graph.value(node.operands[0])
    source = ctx.graph.value(node.operands[1]).shape or ()
    shape = operand.shape or ()
    attrs = node.attrs
    rank = len(shape)
    window = ints(attrs.get("window_dimensions")) or (1,) * rank
    strides = ints(attrs.get("window_strides")) or (1,) * rank
    padding = padding_values(attrs.get("padding"), rank)
    fill = _select_fill(ctx, node, operand.dtype)
    adds = len(node.regions) > 1 and _region_op(ctx, node, 1) == "stablehlo.add"
    windowed: dict[int, int] = {}  # factor -> dim
    for d in range(rank):
        if window[d] == 1 and strides[d] == 1 and padding[d] == (0, 0):
            continue
        if padding[d] != (0, 0) or fill is None or not adds:
            continue
        for f in rule.operands[0][d]:
            windowed[f] = d
    # The rule gives the source its own factor on a windowed dim: the split
    # is planned here, on the operand's factor, for all three tensors.
    limits = FactorLimits(movable=frozenset(windowed), uneven=True)
    factors = choose_factors(ctx, node, rule, limits)
    plans: dict[int, _ScatterWindow] = {}
    for f, d in windowed.items():
        if not factors[f]:
            continue
        found = _scatter_window(
            shape[d], window[d], strides[d], source[d], span(factors[f], ctx.mesh)
        )
        if found is None:
            factors[f] = ()
            continue
        plans[f] = _ScatterWindow(d, *found)
        for g in rule.operands[1][d]:
            factors[g] = factors[f]
    lop = prepare(ctx, node, rule, limits, factors)
    if not plans:
        emit(ctx, node, lop)
        return
    b = ctx.b
    pick = b.splat(Ty((), operand.dtype), fill or "0")
    zero = b.zeros(Ty((), operand.dtype))
    for f, sw in plans.items():
        axes = lop.factors[f]
        lop.operands[0] = gather_window(
            ctx, node, lop, 0, sw.dim, axes, sw.operand, pick
        )
        lop.operands[1] = gather_window(
            ctx, node, lop, 1, sw.dim, axes, sw.source, zero
        )
    regions = [ctx.verbatim_region(r[0]) for r in node.regions]
    out = b.op1(node.op, lop.operands, lop.operands[0].ty, lop.attrs, regions)
    for f, sw in plans.items():
        own = (lop.results[0].shape or ())[sw.dim]
        if len(set(sw.skips)) == 1:
            out = b.slice_dim(out, sw.dim, sw.skips[0], own)
            continue
        blocks = ctx.block_of_position(lop.factors[f])
        skip = ctx.per_position([sw.skips[i] for i in blocks])
        zero_i = ctx.const_i32(0)
        starts = [skip if e == sw.dim else zero_i for e in range(len(shape))]
        sizes = list(out.ty.shape or ())
        sizes[sw.dim] = own
        out = b.dynamic_slice(out, starts, sizes)
    finish(ctx, node, lop, [out])


def _region_op(ctx: PartitionCtx, node: Node, index: int) -> str | None:
    block = node.regions[index][0]
    if len(block.nodes) != 2:
        return None
    return ctx.graph.node(block.nodes[0]).op
