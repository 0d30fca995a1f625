"""Window plans and halo exchanges, checked by simulation on numpy arrays: for
every block, the window built from the exchange's pieces, run through the
op's local form, reads exactly what the global op reads."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from meshjit.passes.partitioner.halo import (
    NEAR,
    Aligned,
    Exchange,
    JointChoice,
    Packing,
    Window,
    WindowPlan,
    aligned_exchange,
    output_parallel,
    pack_pieces,
    plan_exchange,
    plan_window,
    window_split,
)

PAD = -1.0  # the padding value in simulations (inputs are >= 0)
GARBAGE = -7.0  # what the padding of an uneven split's last blocks holds


def _dilate_pad(x: np.ndarray, low: int, high: int, base: int) -> np.ndarray:
    """x with base-1 holes between elements, then low/high padding (negative:
    cropped); holes and padding are PAD."""
    dilated = np.full((len(x) - 1) * base + 1 if len(x) else 0, PAD)
    dilated[::base] = x
    left = np.full(max(low, 0), PAD)
    right = np.full(max(high, 0), PAD)
    out = np.concatenate([left, dilated, right])
    start = -min(low, 0)
    stop = len(out) + min(high, 0)
    return out[start:stop]


def _windows(
    x: np.ndarray, window: int, stride: int, low: int, high: int, base: int, dil: int
) -> np.ndarray:
    """Each output's window contents, [outputs, window]."""
    p = _dilate_pad(x, low, high, base)
    span = (window - 1) * dil + 1
    count = max(0, (len(p) - span) // stride + 1)
    return np.array(
        [[p[o * stride + k * dil] for k in range(window)] for o in range(count)]
    ).reshape(count, window)


def _build_window(
    x: np.ndarray, plan: WindowPlan, ex: Exchange | Aligned, i: int
) -> np.ndarray:
    """Block i's window as the exchange (or its one run) builds it from the
    blocks of x (the last blocks padded with garbage when the split is
    uneven); positions outside x are then masked to PAD, as the partitioner
    does."""
    if isinstance(ex, Aligned):
        got = _run_window(x, plan, ex, i)
    else:
        got = _raw_window(x, plan, ex, i)
    position = plan.first(i) + np.arange(plan.length)
    return np.where((position >= 0) & (position < plan.size), got, PAD)


def _raw_window(x: np.ndarray, plan: WindowPlan, ex: Exchange, i: int) -> np.ndarray:
    block = plan.block
    padded = np.concatenate([x, np.full(block * plan.n - len(x), GARBAGE)])
    blocks = [padded[j * block : (j + 1) * block] for j in range(plan.n)]
    if ex.uniform:
        parts = []
        covered = 0
        for r in ex.rounds:
            at = r.dst[r.targets[0]]  # the same for every target
            parts.append(np.full(at - covered, PAD))  # before every block
            j = i + r.shift
            if 0 <= j < plan.n and r.dst[i] >= 0:
                assert r.dst[i] == at
                parts.append(blocks[j][r.src[j] : r.src[j] + r.length])
            else:  # nothing received: zeros, masked to the padding value
                parts.append(np.full(r.length, PAD))
            covered = at + r.length
        parts.append(np.full(plan.length - covered, PAD))
        got = np.concatenate(parts)
        assert len(got) == plan.length
        return got
    buf = np.full(plan.length + 2 * ex.margin, PAD)
    for r in ex.rounds:
        if r.dst[i] < 0:
            continue
        j = i + r.shift
        piece = blocks[j][r.src[j] : r.src[j] + r.length]
        assert len(piece) == r.length
        buf[r.dst[i] : r.dst[i] + r.length] = piece
    return buf[ex.margin : ex.margin + plan.length]


def _run_window(x: np.ndarray, plan: WindowPlan, run: Aligned, i: int) -> np.ndarray:
    """Block i's window cut from its run: the fill, every round's piece (its
    own block; a remote piece where block i is a target, else zeros), the
    fill."""
    blocks = _blocks_of(x, plan)
    parts = [np.full(run.low, PAD)]
    for r in run.rounds:
        j = i + r.shift
        if r.shift == 0:
            parts.append(blocks[i])
        elif 0 <= j < plan.n and r.dst[i] >= 0:
            assert len(set(r.src)) == 1  # every source cuts at one offset
            parts.append(blocks[j][r.src[j] : r.src[j] + r.length])
        else:
            parts.append(np.full(r.length, GARBAGE))
    parts.append(np.full(run.high, PAD))
    joined = np.concatenate(parts)
    assert len(joined) == run.total
    at = run.offsets[i]
    assert at >= 0
    assert at + plan.length <= len(joined)
    return joined[at : at + plan.length]


def _ways(plan: WindowPlan) -> list[Exchange | Aligned]:
    """The exchange, and its one run where it has one."""
    run = aligned_exchange(plan)
    return [plan_exchange(plan)] + ([run] if run is not None else [])


def _blocks_of(x: np.ndarray, plan: WindowPlan) -> list[np.ndarray]:
    padded = np.concatenate([x, np.full(plan.block * plan.n - len(x), GARBAGE)])
    return [padded[j * plan.block : (j + 1) * plan.block] for j in range(plan.n)]


def _check_packed(
    xs: list[np.ndarray], plans: list[WindowPlan], exchanges: list[Exchange]
) -> Packing:
    """One all-gather of the packed pieces, simulated: every block fills its
    slots (every cut inside its block), the contributions are gathered, and
    every round's piece a target cuts from its source's contribution is
    exactly the piece a collective-permute would bring it; the cuts of
    blocks that take nothing stay inside the gathered array too (the IR's
    dynamic slices would clamp them silently)."""
    n = plans[0].n
    packing = pack_pieces(tuple(exchanges), tuple(p.block for p in plans), n)
    assert packing is not None
    blocks = [_blocks_of(x, plan) for x, plan in zip(xs, plans, strict=True)]
    contributed = []
    for j in range(n):
        slots = []
        for length, fills in zip(packing.lengths, packing.fills, strict=True):
            fill = fills[j] or next(f for f in fills if f is not None)
            part, at = fill
            assert at >= 0
            assert at + length <= plans[part].block
            slots.append(blocks[part][j][at : at + length])
        contributed.append(np.concatenate(slots))
    gathered = np.concatenate(contributed)
    total = packing.total
    assert len(gathered) == n * total
    for part, ex in enumerate(exchanges):
        for k, r in enumerate(ex.rounds):
            if r.shift == 0:
                continue
            for i in range(n):
                if r.dst[i] < 0:
                    assert i * total + r.length <= len(gathered)
                    continue
                j = i + r.shift
                start = j * total + packing.at[(part, k, j)]
                got = gathered[start : start + r.length]
                want = blocks[part][j][r.src[j] : r.src[j] + r.length]
                np.testing.assert_array_equal(got, want)
    return packing


def _check_output_parallel(w: Window, n: int) -> bool:
    plan = output_parallel(w, n)
    if plan is None:
        return False
    x = np.arange(w.size, dtype=float) + 1.0
    want = _windows(x, w.window, w.stride, w.low, w.high, w.base, w.dilation)
    ex = plan_exchange(plan)
    m = -(-w.out_size // n)
    if ex.remote_rounds:  # the same pieces from one gather of the pieces
        packing = _check_packed([x], [plan], [ex])
        assert packing.total <= ex.moved_elements()
    run = aligned_exchange(plan)
    for i in range(n if run is not None else 0):
        if i * m >= w.out_size:
            continue  # only the result's padding: any window
        # Unmasked (a zero-padded convolution on an even split is not
        # masked): a position outside x holds the run's fill or nothing
        # received, never another position's data (a window past the end,
        # clamped into the run, read real data).
        raw = _run_window(x, plan, run, i)
        position = plan.first(i) + np.arange(plan.length)
        outside = (position < 0) | (position >= plan.size)
        assert (raw[outside] <= 0).all(), f"block {i} reads data outside x: {raw}"
    for way, i in itertools.product(_ways(plan), range(n)):
        local = _build_window(x, plan, way, i)
        got = _windows(
            local, w.window, w.stride, plan.low, plan.high, w.base, w.dilation
        )
        assert len(got) == m
        valid = want[i * m : (i + 1) * m]  # the last blocks' extras: padding
        np.testing.assert_array_equal(got[: len(valid)], valid, err_msg=f"block {i}")
    return True


CONFIGS = [
    Window(32, 3, 1, 1, 1),  # SAME 3x3
    Window(64, 7, 2, 2, 3),  # ResNet stem
    Window(32, 3, 2, 0, 1),  # 3x3/2 max pool, SAME
    Window(32, 2, 2),  # tiling pool
    Window(32, 3, 1, 0, 0),  # VALID
    Window(16, 3, 1, 0, 0, base=2, dilation=1),
    Window(16, 7, 1, 3, 4, base=2),  # transposed stride-2 conv
    Window(30, 3, 3, 1, 1, dilation=2),
    Window(24, 5, 1, 4, 4, dilation=3),  # halo wider than a block
    Window(16, 1, 1, 3, 5, base=3),  # pad with interior 2
    Window(24, 1, 2, -3, -5),  # strided slice
    Window(24, 1, 1, -4, -8),  # slice not matching blocks
    Window(16, 16, 1, 15, 0),  # cumulative sum
    Window(32, 32, 1, 31, 0, dilation=1),
    Window(16, 9, 1, 0, 8),  # reverse cumulative window
    # stride 3 over 16 padded (2, 1): 7 outputs, the last block's real output
    # reads only padding (its window lies past the input's end)
    Window(16, 1, 3, 2, 1),
]


@pytest.mark.parametrize("w", CONFIGS, ids=str)
@pytest.mark.parametrize("n", [2, 4, 8])
def test_output_parallel_windows_match_global(w: Window, n: int) -> None:
    _check_output_parallel(w, n)


def test_every_small_window_matches_or_is_refused() -> None:
    planned = 0
    for size, window, stride, low, high, base, dil, n in itertools.product(
        (8, 12, 16),
        (1, 2, 3, 5),
        (1, 2, 3),
        (-2, 0, 1, 3),
        (-1, 0, 2),
        (1, 2),
        (1, 2),
        (2, 4),
    ):
        w = Window(size, window, stride, low, high, base, dil)
        if w.out_size <= 0:
            continue
        planned += _check_output_parallel(w, n)
    assert planned > 500


def test_stride_matched_windows_are_uniform_halos() -> None:
    plan = output_parallel(Window(32, 3, 1, 1, 1), 4)
    assert plan == WindowPlan(32, 4, -1, 8, 10, 0, 0)
    ex = plan_exchange(plan)
    assert ex.uniform
    assert [(r.shift, r.length) for r in ex.rounds] == [(-1, 1), (0, 8), (1, 1)]
    assert ex.moved_elements() == 2


def test_slice_across_blocks_moves_only_the_pieces() -> None:
    # The first third of a dim split in 4 (blocks of 6): block i reads
    # [2i, 2i+2), from block 0 (i <= 2) or block 1 (i = 3).
    plan = output_parallel(Window(24, 1, 1, 0, -16), 4)
    assert plan is not None
    ex = plan_exchange(plan)
    assert not ex.uniform
    assert [r.shift for r in ex.rounds] == [-2, -1, 0]
    assert ex.moved_elements() == 4


def test_filter_gradient_window_split() -> None:
    # out[o] = sum_k x[o + 2k - 1] * g[k]: x 16, g 8 (stride-2 forward conv),
    # 3 outputs; g split in 4 blocks of 2.
    w = Window(16, 8, 1, 1, 0, dilation=2)
    assert w.out_size == 3
    plan = window_split(w, 4)
    assert plan is not None
    x = np.arange(16.0) + 1
    full = _windows(x, 8, 1, 1, 0, 1, 2)
    for way in _ways(plan):
        total = np.zeros_like(full)
        for i in range(4):
            local = _build_window(x, plan, way, i)
            part = _windows(local, 2, 1, plan.low, plan.high, 1, 2)
            total[:, 2 * i : 2 * i + 2] = part
        np.testing.assert_array_equal(total, full)


def test_refusals() -> None:
    assert plan_window(16, 4, 3, 3, 0, 2) is None  # dilation 2 does not divide 3
    assert output_parallel(Window(16, 3, 1, 1, 1), 1) is None  # nothing to split


@pytest.mark.parametrize("n", [3, 5, 8])
@pytest.mark.parametrize(
    "w",
    [Window(13, 3, 1, 1, 1), Window(65, 3, 2, 0, 0), Window(10, 1, 1, 0, 1)],
    ids=str,
)
def test_uneven_splits_pad_the_last_blocks(w: Window, n: int) -> None:
    assert _check_output_parallel(w, n)


def _select_and_scatter(
    x: np.ndarray, src: np.ndarray, window: int, stride: int
) -> np.ndarray:
    """Max-select (first maximum), add-scatter, no padding, init 0."""
    out = np.zeros_like(x)
    for w, value in enumerate(src):
        part = x[w * stride : w * stride + window]
        out[w * stride + int(np.argmax(part))] += value
    return out


@pytest.mark.parametrize(
    ("size", "window", "stride"), [(65, 3, 2), (64, 2, 2), (33, 3, 1), (40, 4, 3)]
)
@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_select_and_scatter_blocks_take_every_window_touching_them(
    size: int, window: int, stride: int, n: int
) -> None:
    from meshjit.passes.partitioner.windows import _scatter_window

    out = (size - window) // stride + 1
    rng = np.random.default_rng(size + n)
    x = rng.permutation(size).astype(float) + 1.0  # no ties
    src = rng.integers(1, 9, out).astype(float)
    want = _select_and_scatter(x, src, window, stride)
    found = _scatter_window(size, window, stride, out, n)
    assert found is not None
    operand, source, skips = found
    block = operand.block
    ways = itertools.product(_ways(operand), _ways(source), range(n))
    for operand_way, source_way, i in ways:
        data = _build_window(x, operand, operand_way, i)
        data = np.where(data == PAD, -np.inf, data)  # never selected
        values = _build_window(src, source, source_way, i)
        values = np.where(values == PAD, 0.0, values)  # windows that do not exist
        local = _select_and_scatter(data, values, window, stride)
        mine = local[skips[i] : skips[i] + block]
        valid = want[i * block : (i + 1) * block]
        np.testing.assert_array_equal(mine[: len(valid)], valid, err_msg=f"block {i}")


def test_a_way_sending_more_bytes_must_beat_the_other_by_more_than_near() -> None:
    """Permutes (fewest bytes), one all-gather of the pieces and one
    all-gather of the dim (most): the fastest by the estimate, where a way
    that sends more bytes than the best so far must be more than NEAR
    faster; the fastest way not taken is kept as the other."""
    from meshjit.passes.partitioner.cost import CostModel
    from meshjit.passes.partitioner.halo import (
        EDGES,
        GATHER,
        NEAR,
        PERMUTE,
        choose_exchange,
    )

    # a 3x3 window, stride 1, padding 1 on 64 rows over 4 blocks: two
    # one-row halos (two permutes, or one gather of the two edge rows)
    # against one gather of three blocks
    plan = output_parallel(Window(64, 3, 1, 1, 1), 4)
    assert plan is not None
    model = CostModel(latency=1e-4, bandwidth=1e9, flops=1e12, memory_bandwidth=1e12)

    def estimates(row_bytes: int) -> tuple[float, float, float]:
        permute = 2 * model.collective_seconds(PERMUTE, row_bytes, 2)
        permute += model.compute_seconds(0, 2 * plan.length * row_bytes)
        edges = model.collective_seconds(GATHER, 3 * 2 * row_bytes, 4)
        edges += model.compute_seconds(0, 2 * (plan.length + 4 * 2) * row_bytes)
        gather = model.collective_seconds(GATHER, 48 * row_bytes, 4)
        gather += model.compute_seconds(0, 2 * 64 * row_bytes)
        return permute, edges, gather

    seen = set()
    for row_bytes in (64, 2048, 4096, 8192, 65536, 1 << 20):
        permute, edges, gather = estimates(row_bytes)
        # bytes: permutes 2 rows < the pieces' gather 6 rows < the dim's 48
        best = (permute, PERMUTE)
        for way in ((edges, EDGES), (gather, GATHER)):
            if way[0] < best[0] * (1 - NEAR):
                best = way
        rest = [
            w
            for w in ((permute, PERMUTE), (edges, EDGES), (gather, GATHER))
            if w[1] != best[1] and not (best[1] == GATHER == w[1])
        ]
        other = min(rest)
        choice = choose_exchange(plan, row_bytes, model)
        assert (choice.way, choice.other) == (best[1], other[1]), row_bytes
        assert choice.other != choice.way
        assert (choice.seconds, choice.other_seconds) == pytest.approx(
            (best[0], other[0])
        )
        seen.add(choice.way)
    # small rows (latency-bound): one launch, the pieces' gather, beats two
    # permutes; big rows (bandwidth-bound): permutes
    assert seen == {EDGES, PERMUTE}
    assert choose_exchange(plan, 64, model).way == EDGES
    assert choose_exchange(plan, 1 << 20, model).way == PERMUTE
    # without the pieces' gather (data movement's question): a gather of the
    # dim that is faster than the permutes, but by less than NEAR, is not
    # taken
    near = []
    for b in range(1024, 65536, 256):
        permute, _, gather = estimates(b)
        if 0 < permute - gather < NEAR * permute:
            near.append(b)
    assert near, "no size lands within NEAR"
    choice = choose_exchange(plan, near[0], model, edges=False)
    assert (choice.way, choice.other) == (PERMUTE, GATHER)
    assert choice.other_seconds < choice.seconds
    small = choose_exchange(plan, 64, model, edges=False)
    assert (small.way, small.other) == (GATHER, PERMUTE)


def test_pieces_as_large_as_a_block_are_gathered_whole() -> None:
    """Halos 3 rows on each side of 4-row blocks (a 3x3 window dilated 3):
    the pieces' gather would send as much as the dim's, so it is not
    offered."""
    from meshjit.passes.partitioner.cost import CostModel
    from meshjit.passes.partitioner.halo import GATHER, choose_exchange

    plan = output_parallel(Window(16, 3, 1, 3, 3, dilation=3), 4)
    assert plan is not None
    assert plan_exchange(plan).moved_elements() >= plan.block
    model = CostModel(latency=1e-4, bandwidth=1e9, flops=1e12, memory_bandwidth=1e12)
    assert choose_exchange(plan, 64, model).way == GATHER


def _concat_plans(sizes: tuple[int, ...], n: int) -> list[WindowPlan] | None:
    """The windows of a concatenate's operands along its split dim (as
    `movement.concatenate` sets them up)."""
    total = sum(sizes)
    plans = []
    offset = 0
    for size in sizes:
        plan = output_parallel(Window(size, 1, 1, offset, total - offset - size), n)
        if plan is None:
            return None
        plans.append(plan)
        offset += size
    return plans


def test_fused_projection_pieces_pack_into_two_blocks_of_a_third() -> None:
    """GPT-2's fused QKV gradient: dq, dk, dv (128 each, blocks of 32 over 4)
    concatenated into 384 split 4 (blocks of 96). Every block sends two
    32-element pieces (one of them stays home), so one gather of the pieces
    sends 3 x 64 per device, against 3 x 96 x 3 for gathering the three."""
    plans = _concat_plans((128, 128, 128), 4)
    assert plans is not None
    exs = [plan_exchange(p) for p in plans]
    xs = [np.arange(128.0) + 1 + 1000 * k for k in range(3)]
    packing = _check_packed(xs, plans, exs)
    assert packing.lengths == (32, 32)
    assert packing.total == 64


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_concatenate_and_sibling_slices_pack_every_piece(n: int) -> None:
    """Concatenates of 2-4 operands and sets of slices of one value, every
    piece cut from the packed gather is the piece a permute would bring; the
    packing never sends more than the rounds' pieces side by side."""
    checked = 0
    for sizes in itertools.product((4, 8, 12, 24), repeat=3):
        for count in (2, 3):
            plans = _concat_plans(sizes[:count], n)
            if plans is None:
                continue
            exs = [plan_exchange(p) for p in plans]
            if not any(ex.remote_rounds for ex in exs):
                continue
            xs = [
                np.arange(p.size, dtype=float) + 1 + 100 * k
                for k, p in enumerate(plans)
            ]
            packing = _check_packed(xs, plans, exs)
            assert packing.total <= sum(ex.moved_elements() for ex in exs)
            checked += 1
    # slices of one value: [0:a), [a:b), [b:size) with strides 1 and 2
    for size, cuts, stride in itertools.product((24, 48), ((8, 16), (4, 20)), (1, 2)):
        bounds = (0, *cuts, size)
        plans = []
        for lo, hi in itertools.pairwise(bounds):
            plan = output_parallel(Window(size, 1, stride, -lo, hi - size), n)
            if plan is not None:
                plans.append(plan)
        if len(plans) < 2 or len({p.n for p in plans}) != 1:
            continue
        exs = [plan_exchange(p) for p in plans]
        if any(ex.remote_rounds for ex in exs):
            x = np.arange(size, dtype=float) + 1
            _check_packed([x] * len(plans), plans, exs)
            checked += 1
    assert checked > 20


def test_padding_outputs_of_data_movement_fetch_nothing() -> None:
    """Slices with an uneven result (`trim`): the blocks' padding outputs
    read nothing, so the exchange moves no more than the untrimmed one (a
    one-row slice of 16 rows over 4 blocks: nothing at all), and every valid
    output still reads what the global slice reads."""
    plan = output_parallel(Window(16, 1, 1, 0, -15), 4, True)
    assert plan is not None
    assert plan_exchange(plan).remote_rounds == 0
    checked = 0
    for size, start, stop, stride, n in itertools.product(
        (12, 16, 24), (0, 1, 5), (1, 7, 12), (1, 2, 3), (2, 3, 4, 8)
    ):
        if stop <= start:
            continue
        w = Window(size, 1, stride, -start, stop - size)
        trimmed = output_parallel(w, n, True)
        whole = output_parallel(w, n)
        if trimmed is None or whole is None:
            continue
        ex = plan_exchange(trimmed)
        assert ex.moved_elements() <= plan_exchange(whole).moved_elements()
        x = np.arange(size, dtype=float) + 1.0
        want = x[start:stop:stride]
        m = -(-len(want) // n)
        for i in range(n):
            local = _build_window(x, trimmed, ex, i)
            got = local[::stride][:m]
            valid = want[i * m : (i + 1) * m]
            np.testing.assert_array_equal(got[: len(valid)], valid, err_msg=f"{w} {i}")
        checked += 1
    assert checked > 100


def test_joint_gather_rule_and_its_remark_on_a_near_tie() -> None:
    """No more bytes and at most NEAR slower: taken, and the remark says why
    (the one collective in a near tie); slower by more, or sending more
    bytes without being more than NEAR faster: not taken."""
    packing = Packing((), (), {})

    def joint(seconds: float, nbytes: int) -> JointChoice:
        return JointChoice(packing, seconds, nbytes, 1.0, 100)

    assert joint(0.9, 100).taken
    assert joint(0.9, 100).tie_note == ""
    near = joint(1 + NEAR / 2, 100)
    assert near.taken
    assert "within" in near.tie_note
    assert not joint(1 + 2 * NEAR, 100).taken
    assert not joint(1 - NEAR / 2, 120).taken
    assert joint(1 - 2 * NEAR, 120).taken
