"""Windows along a split dim, as arithmetic (no IR): which part of the
global input each block of a windowed op reads, and how to bring it there.

A windowed op (convolution, reduce_window, select_and_scatter, pad, slice)
reads, for output position o and window offset k, the input at position
`o * stride + k * window_dilation` of the input dilated by `base` (holes of
`base - 1` pad values between elements) and padded by `low` (negative:
cropped). When the output dim (or, for a convolution's filter gradient, the
kernel dim) is split in n equal blocks, block i reads a window of the input
that starts `i * advance` further along in that padded, dilated space and
has the same length for every block. In real elements that is
`[start + i * step, start + i * step + length)`, where positions outside
`[0, size)` are the op's padding value: every block can run the op with the
same local padding (`low`, `high`), so one program serves all devices.

`plan_exchange` says how each block gets its window from the blocks of the
input split the same way: rounds of collective-permutes, one per distance
between source and target block, each moving one piece of the same length
to every target that needs one. Where every target's pieces have the same
offsets (`step == block`: the halo exchange of a stride-matched window), the
pieces are static slices concatenated in order; otherwise, where each
block's pieces end and start its neighbours' blocks (a shifted or strided
window: `aligned_exchange`), the local block and the pieces form one run the
window is cut from at a per-device offset; else they are cut at per-device
offsets and written into a buffer at per-device offsets. The
same pieces can instead come from one all-gather of what every block sends
(`pack_pieces`); `choose_exchange` weighs the ways.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from meshjit.passes.partitioner.cost import CostModel


@dataclass(frozen=True, slots=True)
class Window:
    """One windowed dim of an op, in the op's own terms."""

    size: int  # input elements along the dim
    window: int  # window elements
    stride: int = 1
    low: int = 0  # padding before (negative: cropping)
    high: int = 0
    base: int = 1  # base (lhs) dilation: input elements are this far apart
    dilation: int = 1  # window (rhs) dilation

    @property
    def padded(self) -> int:
        """Length of the padded, dilated input."""
        return self.low + (self.size - 1) * self.base + 1 + self.high

    @property
    def out_size(self) -> int:
        span = (self.window - 1) * self.dilation + 1
        return max(0, (self.padded - span) // self.stride + 1)


@dataclass(frozen=True, slots=True)
class WindowPlan:
    """Block i reads input `[start + i * step, ... + length)` and runs the op
    with padding (`low`, `high`) on it; the input is split in `n` blocks of
    `block` elements."""

    size: int
    n: int
    start: int
    step: int
    length: int
    low: int
    high: int
    # Where each block's window starts, when not `start + i * step`.
    firsts: tuple[int, ...] = ()
    # How much of each block's window its outputs read, when not all of it:
    # the outputs past the op's end (an uneven split's padding) read nothing
    # (data movement, whose padding outputs may hold anything).
    needed: tuple[int, ...] = ()

    @property
    def block(self) -> int:
        """Elements per block: ceil(size / n), the last blocks padded when n
        does not divide the size."""
        return -(-self.size // self.n)

    @property
    def linear(self) -> bool:
        return not self.firsts

    def first(self, i: int) -> int:
        return self.firsts[i] if self.firsts else self.start + i * self.step

    @property
    def reaches_outside(self) -> bool:
        """Whether some block's window covers positions outside the input
        (or the padding of its last blocks)."""
        starts = [self.first(i) for i in range(self.n)]
        return min(starts) < 0 or max(starts) + self.length > self.size


def plan_window(
    size: int, n: int, advance: int, length: int, low: int, base: int
) -> WindowPlan | None:
    """The plan for blocks whose windows start `advance` apart in the padded,
    dilated input and span `length` of it, or None when blocks cannot share
    one local form (the dilation does not divide the advance)."""
    if n <= 1 or advance % base or length <= 0:
        return None
    step = advance // base
    first = -(low // base)  # ceil(-low / base): the first element read
    last = (length - 1 - low) // base  # floor: the last element read
    count = last - first + 1
    if count <= 0:
        return None
    local_low = low + first * base
    local_high = length - 1 - low - last * base
    return WindowPlan(size, n, first, step, count, local_low, local_high)


@functools.lru_cache(maxsize=4096)
def output_parallel(w: Window, n: int, trim: bool = False) -> WindowPlan | None:
    """Output split in n blocks: block i computes outputs [i*m, (i+1)*m)
    (m = ceil(outputs / n): the last blocks' extra outputs are padding).
    `trim` (a slice or concatenate, window 1): the padding outputs read
    nothing (`WindowPlan.needed`), so no block fetches input for them."""
    out = w.out_size
    if n <= 1 or out < 1:
        return None
    m = -(-out // n)
    length = (m - 1) * w.stride + (w.window - 1) * w.dilation + 1
    plan = plan_window(w.size, n, m * w.stride, length, w.low, w.base)
    if plan is None or not trim or out % n == 0 or w.window != 1 or w.base != 1:
        return plan
    needed = []
    for i in range(n):
        valid = max(0, min(m, out - i * m))
        # the window's elements up to the last valid output's
        needed.append(0 if valid == 0 else (valid - 1) * w.stride + 1 - plan.low)
    return dataclasses.replace(plan, needed=tuple(max(0, k) for k in needed))


@functools.lru_cache(maxsize=4096)
def window_split(w: Window, n: int) -> WindowPlan | None:
    """Window split in n blocks (a convolution's filter gradient): block i
    sums window offsets [i*k, (i+1)*k) for every output; partial results."""
    if n <= 1 or w.window % n:
        return None
    k = w.window // n
    length = (w.out_size - 1) * w.stride + (k - 1) * w.dilation + 1
    return plan_window(w.size, n, k * w.dilation, length, w.low, w.base)


@dataclass(frozen=True, slots=True)
class Round:
    """One collective-permute (or, for shift 0, the local piece): the source
    block is the target block + `shift`. Targets listed in `dst` receive a
    piece of `length` that their source cuts at `src[source block]` of its
    block and they place at `dst[target block]` of the window (-1: no
    piece)."""

    shift: int
    length: int
    src: tuple[int, ...]
    dst: tuple[int, ...]

    @property
    def targets(self) -> tuple[int, ...]:
        return tuple(i for i, off in enumerate(self.dst) if off >= 0)


@dataclass(frozen=True, slots=True)
class Exchange:
    """How every block gets its window: the rounds in increasing shift, and
    whether the pieces are static (`uniform`: the window is the rounds'
    pieces concatenated, edge blocks receiving zeros where they read
    outside the input) or at per-block offsets into a buffer with a margin
    of `margin` on each side."""

    rounds: tuple[Round, ...]
    uniform: bool
    margin: int

    def moved_elements(self) -> int:
        """Elements one device sends along the dim (the largest piece of
        each round with a remote source)."""
        return sum(r.length for r in self.rounds if r.shift != 0)

    @property
    def remote_rounds(self) -> int:
        return sum(1 for r in self.rounds if r.shift != 0)


@functools.lru_cache(maxsize=4096)
def plan_exchange(plan: WindowPlan) -> Exchange:
    """The pieces each block's window is made of, grouped by source distance."""
    n, block = plan.n, plan.block
    pieces: dict[int, dict[int, tuple[int, int]]] = {}  # shift -> target -> piece
    for i in range(n):
        lo = max(plan.first(i), 0)
        reads = plan.needed[i] if plan.needed else plan.length
        hi = min(plan.first(i) + reads, plan.size)
        if lo >= hi:
            continue
        for j in range(lo // block, (hi - 1) // block + 1):
            piece = (max(lo, j * block), min(hi, (j + 1) * block))
            pieces.setdefault(j - i, {})[i] = piece
    uniform = plan.linear and plan.step == block
    rounds = []
    margin = max(
        (max(b - a for a, b in by_target.values()) for by_target in pieces.values()),
        default=0,
    )
    for shift in sorted(pieces):
        by_target = pieces[shift]
        length = max(b - a for a, b in by_target.values())
        src = [0] * n
        dst = [-1] * n
        for i, (a, _end) in by_target.items():
            j = i + shift
            cut = min(a, (j + 1) * block - length)  # a whole piece inside block j
            src[j] = cut - j * block
            where = cut - plan.first(i)
            dst[i] = where if uniform else where + margin
        rounds.append(Round(shift, length, tuple(src), tuple(dst)))
    return Exchange(tuple(rounds), uniform, 0 if uniform else margin)


@dataclass(frozen=True, slots=True)
class Aligned:
    """A window whose pieces lie at per-block offsets, brought as one run:
    the local block with, before it, the end of each earlier block a round
    reaches and, after it, the start of each later one (inner rounds whole
    blocks), so every source cuts at one offset. Block i's run covers the
    input from `i * block - before`; padded by `low` and `high` positions
    of the fill, its window is cut at `offsets[i]`. The run holds the block
    and its halos, where a buffer with a margin holds about three blocks."""

    rounds: tuple[Round, ...]  # increasing shift, the local block's (0) too
    before: int  # positions of the run before the local block
    low: int
    high: int
    offsets: tuple[int, ...]

    @property
    def total(self) -> int:
        return self.low + sum(r.length for r in self.rounds) + self.high


def _needed(plan: WindowPlan, i: int) -> tuple[int, int]:
    """The input positions block i's outputs read: [lo, hi), inside [0, size)."""
    reads = plan.needed[i] if plan.needed else plan.length
    return max(plan.first(i), 0), min(plan.first(i) + reads, plan.size)


@functools.lru_cache(maxsize=4096)
def aligned_exchange(plan: WindowPlan) -> Aligned | None:
    """`plan_exchange`'s rounds as one run per block (`Aligned`), with the
    same lengths (the same bytes), or None: the pieces are static already,
    the rounds' distances leave a gap, an inner round is not a whole block,
    or a target's piece is not at the end (before) or start (after) of its
    source block."""
    ex = plan_exchange(plan)
    if ex.uniform:
        return None
    n, block = plan.n, plan.block
    remote = {r.shift: r for r in ex.rounds if r.shift != 0}
    first, last = min([0, *remote]), max([0, *remote])
    if set(range(first, last + 1)) - {0} != set(remote):
        return None
    length = {s: r.length for s, r in remote.items()}
    length[0] = block
    for s in remote:
        if s not in (first, last) and length[s] != block:
            return None
    needs = [_needed(plan, i) for i in range(n)]
    for i, (lo, hi) in enumerate(needs):
        if lo >= hi:
            continue
        for j in range(lo // block, (hi - 1) // block + 1):
            s = j - i
            a, b = max(lo, j * block), min(hi, (j + 1) * block)
            cut = (j + 1) * block - length[s] if s < 0 else j * block
            if s not in length or a < cut or b > cut + length[s]:
                return None
    before = sum(length[s] for s in remote if s < 0)
    span = before + block + sum(length[s] for s in remote if s > 0)
    at = [plan.first(i) - (i * block - before) for i in range(n)]
    for i in range(n):
        # Outputs that read nothing (an uneven result's padding, in data
        # movement): any cut. Not a window wholly outside the input: its
        # outputs read the padding, which the run's margins hold (clamped
        # into the run, a strided convolution's last block read real data).
        if plan.needed and plan.needed[i] == 0:
            at[i] = max(0, min(at[i], span - plan.length))
    low = max(0, -min(at))
    high = max(0, max(a + plan.length for a in at) - span)
    rounds = []
    local = Round(0, block, (0,) * n, (0,) * n)
    for s in sorted([*remote, 0]):
        r = remote.get(s, local)
        cut = block - r.length if s < 0 else 0
        rounds.append(dataclasses.replace(r, src=(cut,) * n))
    return Aligned(tuple(rounds), before, low, high, tuple(a + low for a in at))


@dataclass(frozen=True, slots=True)
class Packing:
    """What every block contributes to one all-gather of the pieces of one or
    more exchanges (the windows of one op's operands, or of several ops on
    one value), and where each piece lies in it.

    A contribution is `len(lengths)` slots side by side; block j fills slot
    s with the `lengths[s]` elements of part `fills[s][j][0]` (the exchange's
    index) from `fills[s][j][1]` of its block (None: the slot is unused on
    block j, which fills it with anything). `at[(part, round, j)]` is where
    the piece block j sends in that round starts in its contribution."""

    lengths: tuple[int, ...]
    fills: tuple[tuple[tuple[int, int] | None, ...], ...]
    at: dict[tuple[int, int, int], int]

    @property
    def total(self) -> int:
        """Elements every block contributes along the dim."""
        return sum(self.lengths)


@functools.lru_cache(maxsize=4096)
def pack_pieces(
    exchanges: tuple[Exchange, ...], blocks: tuple[int, ...], n: int
) -> Packing | None:
    """Every block's remote pieces (of every exchange, each over blocks of
    `blocks[part]` elements, n of them) packed into slots. A piece inside a
    longer piece of the same part that the block sends too is cut from that
    one. The rest go by (part, round), longest first: a round's pieces take
    the first slot none of its sources fills yet (and no longer than their
    part's block), else a new slot as long as they are. Rounds whose
    sources differ share a slot (the first and last blocks send one halo
    each), and a round's pieces keep one place in it, so where every source
    cuts at the same offset the slot is a static slice. The contribution is
    at most the sum of the rounds' lengths. None when nothing moves."""
    # (part, round) -> {source block: start}; pieces inside another one
    rounds: dict[tuple[int, int], dict[int, int]] = {}
    lengths_of: dict[tuple[int, int], int] = {}
    for part, ex in enumerate(exchanges):
        for k, r in enumerate(ex.rounds):
            if r.shift == 0:
                continue
            for i in r.targets:
                j = i + r.shift
                rounds.setdefault((part, k), {})[j] = r.src[j]
                lengths_of[(part, k)] = r.length
    if not rounds:
        return None
    order = sorted(rounds, key=lambda key: (-lengths_of[key], key))
    inside: dict[tuple[int, int, int], tuple[int, int, int]] = {}  # -> (part, k, j)
    owned: dict[tuple[int, int], list[int]] = {key: [] for key in order}
    for key in order:
        part, k = key
        length = lengths_of[key]
        for j, start in rounds[key].items():
            for other in order:
                if other == key or other[0] != part or j not in owned[other]:
                    continue
                first = rounds[other][j]
                if first <= start and start + length <= first + lengths_of[other]:
                    inside[(part, k, j)] = (other[0], other[1], j)
                    break
            else:
                owned[key].append(j)
    slot_len: list[int] = []
    taken: list[set[int]] = []
    fills: list[list[tuple[int, int] | None]] = []
    where: dict[tuple[int, int, int], int] = {}  # (part, k, j) -> offset in slot
    slot_of: dict[tuple[int, int, int], int] = {}
    for key in order:
        part, k = key
        sources = owned[key]
        if not sources:
            continue
        slot = next(
            (
                s
                for s, length in enumerate(slot_len)
                if not taken[s] & set(sources) and length <= blocks[part]
            ),
            len(slot_len),
        )
        if slot == len(slot_len):
            slot_len.append(lengths_of[key])
            taken.append(set())
            fills.append([None] * n)
        length = slot_len[slot]
        for j in sources:
            start = rounds[key][j]
            cut = min(start, blocks[part] - length)  # the slot inside the block
            fills[slot][j] = (part, cut)
            taken[slot].add(j)
            slot_of[(part, k, j)] = slot
            where[(part, k, j)] = start - cut
    offsets = [sum(slot_len[:s]) for s in range(len(slot_len))]
    at: dict[tuple[int, int, int], int] = {}
    for piece, offset in where.items():
        at[piece] = offsets[slot_of[piece]] + offset
    for (part, k, j), (_, host, _) in inside.items():
        at[(part, k, j)] = (
            at[(part, host, j)] + rounds[(part, k)][j] - rounds[(part, host)][j]
        )
    return Packing(tuple(slot_len), tuple(tuple(f) for f in fills), at)


# Within this fraction of the exchange's estimate a gather is not taken: the
# cost model cannot tell the two apart (its estimates are off by more than
# that), and the exchange sends fewer bytes and holds no whole copy of the
# operand. (On a ResNet stem and pool with the height split 4 ways, a gather
# estimated 1.5% faster measured the same step as the exchange, with 3.3x
# the bytes and 1.8x XLA's temporaries.)
NEAR = 0.05

PERMUTE = "collective-permute"
EDGES = "all-gather of the pieces"
GATHER = "all-gather"


@dataclass(frozen=True, slots=True)
class WindowChoice:
    """How a window is brought to every block, and what the cost model says
    of it and of the best other way."""

    way: str  # PERMUTE (a round each), EDGES (one gather), GATHER (the dim)
    seconds: float
    nbytes: int  # sent per device
    other_seconds: float  # the best way not taken
    other: str  # that way

    @property
    def by_gather(self) -> bool:
        return self.way == GATHER


def choose_exchange(
    plan: WindowPlan, inner_bytes: int, cost: CostModel, edges: bool = True
) -> WindowChoice:
    """The fastest of three ways by the cost model's estimate: a
    collective-permute per round of pieces; one all-gather of the pieces
    alone (every block contributes the pieces it sends in the remote rounds
    and takes its own from its sources' contributions; where they are
    shorter than a block); one all-gather of the dim and a local cut. A way
    that sends more bytes than the best so far must be more than NEAR faster
    (the estimates cannot tell closer ones apart, and fewer bytes hold less).
    `inner_bytes`: bytes of one position along the dim (the product of the
    other local dims). `edges=False`: permutes or the gather only (data
    movement asks whether its windows would be cut from a whole copy, which
    its later uses can slice again).

    The pieces' gather replaces permutes too where it is estimated faster:
    one launch instead of one per round (two for a centred window). On the
    bench's convolutions split along height that measured 3-12% faster steps
    (conv net over batch x height 3.16 against 3.57 ms, conv train height8
    13.0 against 14.0 ms, the deconv stack 1.91 against 2.14 ms; medians of
    11 alternating runs, the U-Net over height8 within noise), with as many
    kernels or fewer, and more bytes (the pieces to every member)."""
    ex = plan_exchange(plan)
    moved = ex.moved_elements()
    permute = sum(
        cost.collective_seconds(PERMUTE, r.length * inner_bytes, 2)
        for r in ex.rounds
        if r.shift != 0
    )
    # Local copies: the pieces into the window; or the gathered value into a
    # padded copy and the window out of it.
    permute += cost.compute_seconds(0, 2 * plan.length * inner_bytes)
    gather_bytes = (plan.n - 1) * plan.block * inner_bytes
    gather = cost.collective_seconds(GATHER, gather_bytes, plan.n)
    gather += cost.compute_seconds(0, 2 * plan.size * inner_bytes)
    ways = [(permute, PERMUTE, moved * inner_bytes), (gather, GATHER, gather_bytes)]
    if edges:
        packing = pack_pieces((ex,), (plan.block,), plan.n)
        if packing is not None and packing.total < plan.block:
            seconds, edge_bytes = _pieces_gather(packing, (plan,), inner_bytes, cost)
            ways.append((seconds, EDGES, edge_bytes))
    ways.sort(key=lambda w: w[2])  # fewest bytes first (stable: permutes)
    taken = 0
    for i in range(1, len(ways)):
        if ways[i][0] < ways[taken][0] * (1 - NEAR):
            taken = i
    best = ways[taken]
    # the fastest way not taken (where the gather is taken: the fastest
    # exchange, the way taken where a memory limit refuses the gather);
    # ways are told apart by name (compiled, tuples are not kept by identity)
    other = min((w for w in ways if w[1] != best[1]), key=lambda w: w[0])
    return WindowChoice(best[1], best[0], best[2], other[0], other[1])


def _pieces_gather(
    packing: Packing,
    plans: tuple[WindowPlan, ...],
    inner_bytes: int,
    cost: CostModel,
) -> tuple[float, int]:
    """Estimated seconds and bytes sent per device of one all-gather of the
    packed pieces: the gather, the pieces into the contribution and the
    windows out of the gathered."""
    n = plans[0].n
    nbytes = (n - 1) * packing.total * inner_bytes
    seconds = cost.collective_seconds(GATHER, nbytes, n)
    copies = 2 * (sum(p.length for p in plans) + n * packing.total) * inner_bytes
    return seconds + cost.compute_seconds(0, copies), nbytes


@dataclass(frozen=True, slots=True)
class JointChoice:
    """One all-gather of the pieces of several windows along one split dim,
    against each window brought its own way."""

    packing: Packing
    seconds: float
    nbytes: int
    alone_seconds: float  # the windows each their own way
    alone_bytes: int

    @property
    def taken(self) -> bool:
        """The joint gather wins where it sends no more bytes and is at most
        NEAR slower (a near tie goes to the one collective); sending more it
        must be more than NEAR faster."""
        if self.nbytes <= self.alone_bytes:
            return self.seconds <= self.alone_seconds * (1 + NEAR)
        return self.seconds < self.alone_seconds * (1 - NEAR)

    @property
    def tie_note(self) -> str:
        """Why a taken joint gather estimated slower than the other way was
        taken (for remarks); empty where it is not slower."""
        if self.seconds <= self.alone_seconds:
            return ""
        return f": within {NEAR:.0%}, the one all-gather sending no more bytes is taken"


def choose_joint(
    plans: tuple[WindowPlan, ...],
    inner_bytes: int,
    cost: CostModel,
    values: tuple[int, ...] = (),
) -> JointChoice | None:
    """The pieces of several windows (a concatenate's operands, slices of
    one value) over the same n blocks, packed into one all-gather
    (`pack_pieces`), weighed against each window's own best way
    (`choose_exchange`: permutes, a gather of its pieces or of the dim);
    windows of one value (`values[i]`: which value window i reads; default
    all different) against permutes for each of them or one gather of the
    dim that serves them all. None where nothing moves or the pieces cannot
    be packed."""
    packing = pack_pieces(
        tuple(plan_exchange(p) for p in plans),
        tuple(p.block for p in plans),
        plans[0].n,
    )
    if packing is None:
        return None
    seconds, nbytes = _pieces_gather(packing, plans, inner_bytes, cost)
    groups: dict[int, list[WindowPlan]] = {}
    for i, plan in enumerate(plans):
        groups.setdefault(values[i] if values else -1 - i, []).append(plan)
    alone_seconds, alone_bytes = 0.0, 0
    for group in groups.values():
        if len(group) == 1:
            c = choose_exchange(group[0], inner_bytes, cost)
            alone_seconds += c.seconds
            alone_bytes += c.nbytes
            continue
        ways = [choose_exchange(p, inner_bytes, cost, edges=False) for p in group]
        permutes = (
            sum(c.other_seconds if c.by_gather else c.seconds for c in ways),
            sum(plan_exchange(p).moved_elements() * inner_bytes for p in group),
        )
        first = ways[0]
        gather = (
            first.seconds if first.by_gather else first.other_seconds,
            (group[0].n - 1) * group[0].block * inner_bytes,
        )
        best = min(permutes, gather)
        alone_seconds += best[0]
        alone_bytes += best[1]
    return JointChoice(packing, seconds, nbytes, alone_seconds, alone_bytes)
