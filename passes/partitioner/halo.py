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
pieces are static slices concatenated in order; otherwise they are cut at
per-device offsets and written into a buffer at per-device offsets.
"""

from __future__ import annotations

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
def output_parallel(w: Window, n: int) -> WindowPlan | None:
    """Output split in n blocks: block i computes outputs [i*m, (i+1)*m)
    (m = ceil(outputs / n): the last blocks' extra outputs are padding)."""
    out = w.out_size
    if n <= 1 or out < 1:
        return None
    m = -(-out // n)
    length = (m - 1) * w.stride + (w.window - 1) * w.dilation + 1
    return plan_window(w.size, n, m * w.stride, length, w.low, w.base)


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
        hi = min(plan.first(i) + plan.length, plan.size)
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
class AllToAllExchange:
    """An exchange's remote rounds carried by one all-to-all: every source
    sends every target of the group a chunk of `length` (the longest remote
    piece; a target that takes nothing from a source gets a chunk it writes
    into the margin), so one collective replaces the rounds' permutes. The
    rounds keep their shifts and targets; remote pieces are `length` long,
    cut at `src` (moved back inside the block where a longer piece would run
    past its end) and written at `dst` of a buffer with `margin` positions
    on each side of the window (the local round too)."""

    length: int
    margin: int
    rounds: tuple[Round, ...]

    def moved_elements(self, n: int) -> int:
        """Elements one device sends along the dim: a chunk to every other
        member of the group."""
        return (n - 1) * self.length


@functools.lru_cache(maxsize=4096)
def plan_all_to_all(plan: WindowPlan) -> AllToAllExchange | None:
    """The exchange of `plan` with its remote rounds as one all-to-all, or
    None where that saves no collective (fewer than two remote rounds)."""
    ex = plan_exchange(plan)
    remote = [r for r in ex.rounds if r.shift != 0]
    if len(remote) < 2:
        return None
    block = plan.block
    length = max(r.length for r in remote)
    placed = []  # (shift, piece, src, window position per target or None)
    for r in ex.rounds:
        piece = r.length if r.shift == 0 else length
        src = list(r.src)
        where: list[int | None] = [None] * plan.n
        for i in r.targets:
            j = i + r.shift
            cut = min(r.src[j], block - piece)  # inside block j
            src[j] = cut
            where[i] = r.dst[i] - ex.margin - (r.src[j] - cut)
        placed.append((r.shift, piece, src, where))
    # The margin holds what falls outside the window: the ends of pieces
    # longer than needed, and the pieces of targets that take none in a
    # round (written at the buffer's start).
    margin = 0
    for _, piece, _, where in placed:
        for w in where:
            if w is None:
                margin = max(margin, piece)
            else:
                margin = max(margin, -w, w + piece - plan.length)
    rounds = []
    for shift, piece, src, where in placed:
        dst = tuple(-1 if w is None else w + margin for w in where)
        rounds.append(Round(shift, piece, tuple(src), dst))
    return AllToAllExchange(length, margin, tuple(rounds))


# Within this fraction of the exchange's estimate a gather is not taken: the
# cost model cannot tell the two apart (its estimates are off by more than
# that), and the exchange sends fewer bytes and holds no whole copy of the
# operand. (On a ResNet stem and pool with the height split 4 ways, a gather
# estimated 1.5% faster measured the same step as the exchange, with 3.3x
# the bytes and 1.8x XLA's temporaries.) Likewise an all-to-all must beat
# the permutes by this much: they send fewer bytes.
NEAR = 0.05

PERMUTE = "collective-permute"
ALL_TO_ALL = "all-to-all"
GATHER = "all-gather"


@dataclass(frozen=True, slots=True)
class WindowChoice:
    """How a window is brought to every block, and what the cost model says
    of it and of the best other way."""

    way: str  # PERMUTE (a round each), ALL_TO_ALL (one), GATHER (the dim)
    seconds: float
    nbytes: int  # sent per device
    other_seconds: float  # the best way not taken
    other: str  # that way

    @property
    def by_gather(self) -> bool:
        return self.way == GATHER


def choose_exchange(
    plan: WindowPlan, inner_bytes: int, cost: CostModel, all_to_all: bool = True
) -> WindowChoice:
    """Pieces by collective-permutes, or one all-gather of the dim and a
    local slice, whichever the cost model estimates faster (the gather by
    more than NEAR: it sends more bytes); where the gather wins, the same
    pieces by one all-to-all where that beats the permutes, unless the
    gather is estimated more than NEAR faster than it too. `inner_bytes`:
    bytes of one position along the dim (the product of the other local
    dims). `all_to_all=False`: permutes or the gather only (data movement
    asks whether its windows would be cut from a whole copy, which its
    later uses can slice again).

    The all-to-all stands in for the gather only, not for the permutes: on
    the ResNet forward over batch x height (2, 4), one all-to-all in place
    of the stem's two halo permutes (estimated 186 against 330 us) measured
    no faster (steps of 7.25 against 7.19 ms, 8.11 against 8.25 ms in a
    second run) with 1.8x their bytes, where in place of a 3x3/2
    convolution's gather it sent 0.25x the gather's bytes in the same
    time."""
    ex = plan_exchange(plan)
    permute_bytes = ex.moved_elements() * inner_bytes
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
    fewer = (permute, PERMUTE, permute_bytes)
    more = (gather, GATHER, gather_bytes)
    a2a = plan_all_to_all(plan) if all_to_all else None
    if gather < permute * (1 - NEAR) and a2a is not None:
        a2a_bytes = a2a.moved_elements(plan.n) * inner_bytes
        seconds = cost.collective_seconds(ALL_TO_ALL, a2a_bytes, plan.n)
        # the chunks into the send buffer and out of the received one too
        copies = 2 * (plan.length + plan.n * a2a.length) * inner_bytes
        seconds += cost.compute_seconds(0, copies)
        if seconds < permute * (1 - NEAR):
            fewer = (seconds, ALL_TO_ALL, a2a_bytes)
    # (where a gather is refused for memory, `other` is the way taken)
    best, other = (more, fewer) if gather < fewer[0] * (1 - NEAR) else (fewer, more)
    return WindowChoice(best[1], best[0], best[2], other[0], other[1])
