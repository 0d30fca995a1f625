"""Resharding as data: which collectives take a value from one sharding to another.

Pure Python over per-dim axis lists (major to minor) on one mesh. The partitioner
turns each step into StableHLO collectives; the report prices each step in bytes
moved per device. Nothing here touches MLIR.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from meshjit.dialects.sharding import AxisRef, MeshModel

DimAxes = tuple[AxisRef, ...]
Layout = tuple[DimAxes, ...]  # one entry per tensor dim


@dataclass(frozen=True, slots=True)
class AllGather:
    """Concatenate the blocks of `dim` held across `axes` (major to minor)."""

    dim: int
    axes: DimAxes


@dataclass(frozen=True, slots=True)
class AllToAll:
    """Move `axes` from the minor end of `concat_dim` to that of `split_dim`."""

    axes: DimAxes
    split_dim: int
    concat_dim: int


@dataclass(frozen=True, slots=True)
class LocalSlice:
    """Keep this device's block: append `added[d]` to each dim's axes (no traffic)."""

    added: Layout


@dataclass(frozen=True, slots=True)
class AllReduce:
    """Sum (or the op's reduction) of partial values across `axes`."""

    axes: DimAxes


@dataclass(frozen=True, slots=True)
class ReduceScatter:
    """Reduce partial values across `axes` and keep this device's block of `dim`."""

    dim: int
    axes: DimAxes


@dataclass(frozen=True, slots=True)
class CollectivePermute:
    """Send each device's block to the device that holds it in the new layout:
    (source position, target position) pairs; devices absent keep nothing.

    With `offsets`, each source first cuts out the part the target needs:
    `offsets[p]` is where, per dim, that part starts in position p's local
    block; the part has the target's local shape (`dst`'s blocks)."""

    axes: DimAxes  # the axes whose coordinates change, for the report
    pairs: tuple[tuple[int, int], ...]
    dst: Layout = ()  # the layout after the step
    offsets: tuple[tuple[int, ...], ...] | None = None
    part: tuple[int, ...] = ()  # the shape cut out (with offsets)


Step = AllGather | AllToAll | LocalSlice | AllReduce | ReduceScatter | CollectivePermute


def merge_axes(axes: DimAxes, mesh: MeshModel) -> DimAxes:
    """Merges consecutive sub-axes of one axis (`"y":(1)2, "y":(2)2` becomes
    `"y"` on a mesh where y=4, `"y":(1)4` where y=8): one spelling per layout."""
    if len(axes) < 2:
        return axes
    out: list[AxisRef] = []
    for a in axes:
        last = out[-1] if out else None
        if (
            last is not None
            and last.name == a.name
            and last.is_sub_axis
            and a.is_sub_axis
            and last.pre_size * last.full_size(mesh) == a.pre_size
        ):
            size = last.full_size(mesh) * a.full_size(mesh)
            whole = last.pre_size == 1 and size == mesh.axis_size(a.name)
            out[-1] = AxisRef(a.name) if whole else AxisRef(a.name, last.pre_size, size)
            continue
        out.append(a)
    return tuple(out) if len(out) != len(axes) else axes


def _is_prefix(short: DimAxes, long: DimAxes) -> bool:
    return len(short) <= len(long) and tuple(long[: len(short)]) == tuple(short)


def plan_reshard(
    src: Layout,
    dst: Layout,
    shape: Sequence[int],
    mesh: MeshModel,
    partial: DimAxes = (),
) -> list[Step]:
    """Collectives that take a value laid out as `src` to `dst`.

    `partial` lists axes over which the value is an unreduced partial result
    (from a sharded reduction factor); they are resolved first, by a
    reduce-scatter where `dst` wants those axes on a dim, else an all-reduce.
    Axes leave a dim only from its minor end: an axis that `dst` wants on
    another dim moves there by all-to-all (never through a replicated copy);
    any other leaves by all-gather. Axes `dst` adds are a local slice.

    A dim its axes do not divide is split in blocks of ceil(size / ways),
    the last ones padded: where such a dim changes, it is gathered whole
    (the padding cut off) and sliced again into the new blocks, never moved
    block by block (blocks of different layouts do not line up).
    """
    uneven = [
        d
        for d, n in enumerate(shape)
        if src[d] != dst[d] and (n % _span(src[d], mesh) or n % _span(dst[d], mesh))
    ]
    if uneven:
        return _plan_uneven(src, dst, shape, mesh, partial, uneven)
    if not partial:
        permute = _plan_permute(src, dst, mesh)
        if permute is not None:
            return [permute]
    fine_src, fine_dst, fine_partial = _refined(src, dst, partial, mesh)
    steps = _plan_collectives(fine_src, fine_dst, shape, mesh, fine_partial)
    if fine_src is not src or fine_dst is not dst or fine_partial is not partial:
        steps = [_merged(s, mesh) for s in steps]
    if not partial and any(isinstance(s, AllGather) for s in steps):
        # Where every block of `dst` lies inside one block of `src`, cutting
        # it out and sending it moves one target block per device, which
        # can beat gathering (e.g. `[{x}]` to `[{y}]` with x=2, y=4).
        sliced = _plan_slice_permute(src, dst, tuple(shape), mesh)
        if sliced is not None and _elements_sent(
            [sliced], src, shape, mesh
        ) < _elements_sent(steps, src, shape, mesh):
            return [sliced]
    return steps


def _elements_sent(
    steps: Sequence[Step], src: Layout, shape: Sequence[int], mesh: MeshModel
) -> int:
    cur = [list(d) for d in src]
    total = 0
    for step in steps:
        local = _local_shape(shape, cur, mesh)
        total += step_bytes(step, local, 1, mesh)
        apply_step(cur, step)
    return total


def _local_shape(
    shape: Sequence[int], layout: Sequence[Sequence[AxisRef]], mesh: MeshModel
) -> tuple[int, ...]:
    """Blocks of ceil(size / ways): a dim its axes do not divide is padded."""
    return tuple(
        -(-n // _span(axes, mesh)) for n, axes in zip(shape, layout, strict=True)
    )


def _block_start(
    layout: Layout, shape: Sequence[int], mesh: MeshModel, position: int
) -> tuple[int, ...]:
    """Where position's block of each dim starts in the global tensor."""
    starts = []
    for n, axes in zip(shape, layout, strict=True):
        index = 0
        for a in axes:
            index = index * a.full_size(mesh) + coordinate(mesh, a, position)
        starts.append(index * (n // _span(axes, mesh)))
    return tuple(starts)


@functools.lru_cache(maxsize=4096)
def _plan_slice_permute(
    src: Layout, dst: Layout, shape: tuple[int, ...], mesh: MeshModel
) -> CollectivePermute | None:
    """One collective-permute of pre-cut parts, when each block of `dst` lies
    inside one block of `src` (per dim, the dst block size divides the src
    block size). As many devices hold each src block as need a part of it,
    so sources and targets pair one to one; a device that holds what it
    needs is paired with itself."""
    if len(src) != len(dst) or not shape or 0 in shape:
        return None  # (a zero-size value: no blocks to move)
    src_block = []
    for n, s_axes, d_axes in zip(shape, src, dst, strict=True):
        s, t = _span(s_axes, mesh), _span(d_axes, mesh)
        if n % t or n % s or t % s:
            return None
        src_block.append(n // s)
    holders: dict[tuple[int, ...], list[int]] = {}
    targets: dict[tuple[int, ...], list[int]] = {}
    want: list[tuple[int, ...]] = []
    for p in range(mesh.size):
        holders.setdefault(_block_start(src, shape, mesh, p), []).append(p)
        start = _block_start(dst, shape, mesh, p)
        want.append(start)
        key = tuple(x - x % b for x, b in zip(start, src_block, strict=True))
        targets.setdefault(key, []).append(p)
    source_of = [-1] * mesh.size
    for key, tgts in targets.items():
        srcs = holders.get(key, [])
        if len(srcs) != len(tgts):
            return None
        held, wanted = set(srcs), set(tgts)
        free = iter([p for p in srcs if p not in wanted])
        for q in tgts:
            source_of[q] = q if q in held else next(free)
    offsets: list[tuple[int, ...]] = [()] * mesh.size
    for q, p in enumerate(source_of):
        origin = _block_start(src, shape, mesh, p)
        offsets[p] = tuple(w - o for w, o in zip(want[q], origin, strict=True))
    pairs = tuple(sorted((p, q) for q, p in enumerate(source_of)))
    moved = tuple(
        sorted(
            {a for d in src for a in d} ^ {a for d in dst for a in d},
            key=str,
        )
    )
    part = _local_shape(shape, dst, mesh)
    return CollectivePermute(moved, pairs, dst, tuple(offsets), part)


def _plan_uneven(
    src: Layout,
    dst: Layout,
    shape: Sequence[int],
    mesh: MeshModel,
    partial: DimAxes,
    uneven: Sequence[int],
) -> list[Step]:
    """Partial sums reduced first (all-reduce: a reduce-scatter would cut
    even blocks), the uneven dims that change gathered whole, then the rest
    as usual (the uneven dims sliced at once into their new blocks)."""
    steps: list[Step] = []
    if partial:
        steps.append(AllReduce(tuple(partial)))
    cur = [list(d) for d in src]
    for d in uneven:
        if cur[d]:
            steps.append(AllGather(d, tuple(cur[d])))
            cur[d] = []
    middle = tuple(tuple(d) for d in cur)
    steps += _plan_collectives(middle, dst, shape, mesh, ())
    return steps


def _refined(
    src: Layout, dst: Layout, partial: DimAxes, mesh: MeshModel
) -> tuple[Layout, Layout, DimAxes]:
    """`src`, `dst` and `partial` with each axis cut into the sub-axes that
    the others use of it: `[{x}]` against `[{x:(1)4}]` (x=8) plans as
    `[{x:(1)4, x:(4)2}]`, so that only the minor 2 leave the dim (a gather or
    all-to-all over 2 devices, not over 8 and a slice back). Unchanged (the
    same objects) where no axis is used at two granularities."""
    cuts: dict[str, set[int]] = {}
    for axes in (*src, *dst, partial):
        for a in axes:
            lo, hi = a.pre_size, a.pre_size * a.full_size(mesh)
            cuts.setdefault(a.name, set()).update((lo, hi))
    # an axis used whole everywhere has the cuts {1, n} only
    if all(len(c) == 2 for c in cuts.values()):
        return src, dst, partial

    def cut(axes: DimAxes) -> DimAxes:
        out: list[AxisRef] = []
        for a in axes:
            lo, hi = a.pre_size, a.pre_size * a.full_size(mesh)
            inner = sorted(c for c in cuts[a.name] if lo <= c <= hi)
            if len(inner) == 2:
                out.append(a)
                continue
            out.extend(AxisRef(a.name, p, q // p) for p, q in itertools.pairwise(inner))
        return tuple(out)

    return (
        tuple(cut(axes) for axes in src),
        tuple(cut(axes) for axes in dst),
        cut(partial),
    )


def _merged(step: Step, mesh: MeshModel) -> Step:
    """`step` with consecutive sub-axes of one axis spelled as one again."""
    if isinstance(step, AllGather):
        return AllGather(step.dim, merge_axes(step.axes, mesh))
    if isinstance(step, AllToAll):
        return dataclasses.replace(step, axes=merge_axes(step.axes, mesh))
    if isinstance(step, ReduceScatter):
        return ReduceScatter(step.dim, merge_axes(step.axes, mesh))
    if isinstance(step, AllReduce):
        return AllReduce(merge_axes(step.axes, mesh))
    if isinstance(step, LocalSlice):
        return LocalSlice(tuple(merge_axes(a, mesh) for a in step.added))
    return step


def _plan_collectives(
    src: Layout,
    dst: Layout,
    shape: Sequence[int],
    mesh: MeshModel,
    partial: DimAxes,
) -> list[Step]:
    cur = [list(d) for d in src]
    steps: list[Step] = []
    # A dim `dst` splits unevenly is cut at once, at the end: cut axis by
    # axis, its padded blocks would not be the compound split's (2 rows over
    # ("x"=2, "y"=4): row 1 on device (0, 1), not on (1, 0)).
    early = tuple(
        add if shape[d] % _span(dst[d], mesh) == 0 else ()
        for d, add in enumerate(_free_additions(cur, dst, partial))
    )
    if any(early):
        # Cut first: every collective below then moves blocks that much
        # smaller (the cut's index is the device's coordinate along the
        # added axis, whatever comes before it).
        steps.append(LocalSlice(early))
        apply_step(cur, steps[-1])
    pending = list(partial)
    if pending:
        for d, want in enumerate(dst):
            take: list[AxisRef] = []
            nxt = list(want[len(cur[d]) :]) if _is_prefix(tuple(cur[d]), want) else []
            for axis in nxt:
                if (
                    axis in pending
                    and shape[d] % _span(cur[d] + take + [axis], mesh) == 0
                ):
                    take.append(axis)
                else:
                    break
            if take:
                steps.append(ReduceScatter(d, tuple(take)))
                cur[d].extend(take)
                for a in take:
                    pending.remove(a)
        if pending:
            steps.append(AllReduce(tuple(pending)))
    while True:
        # All-to-alls first: an axis that leaves a dim may make room for
        # another dim's axis to move in (instead of being gathered).
        moved = False
        for d in range(len(cur)):
            if _is_prefix(tuple(cur[d]), dst[d]):
                continue
            axis = cur[d][-1]
            target = _all_to_all_target(axis, d, cur, dst, shape, mesh)
            if target is not None:
                steps.append(AllToAll((axis,), target, d))
                cur[target].append(axis)
                cur[d].pop()
                moved = True
        if moved:
            continue
        # Else one gather (of the first dim still to change), then again.
        left = [d for d in range(len(cur)) if not _is_prefix(tuple(cur[d]), dst[d])]
        if not left:
            break
        _append_gather(steps, left[0], cur[left[0]].pop())
    added = tuple(tuple(dst[d][len(cur[d]) :]) for d in range(len(cur)))
    if any(added):
        steps.append(LocalSlice(added))
    return steps


def _free_additions(cur: list[list[AxisRef]], dst: Layout, partial: DimAxes) -> Layout:
    """Per dim, the axes `dst` adds next after the dim's axes already in
    place, while each is free: no dim uses an axis of its name and the value
    is not a partial sum over it. A dim still to be gathered adds none."""
    used = {a.name for axes in cur for a in axes} | {a.name for a in partial}
    added: list[tuple[AxisRef, ...]] = []
    for have, want in zip(cur, dst, strict=True):
        take: list[AxisRef] = []
        if _is_prefix(tuple(have), want):
            for axis in want[len(have) :]:
                if axis.name in used:
                    break
                take.append(axis)
        added.append(tuple(take))
    return tuple(added)


def _plan_permute(
    src: Layout, dst: Layout, mesh: MeshModel
) -> CollectivePermute | None:
    """A layout that renames axes of equal sizes dim by dim (e.g. `[{x}, {y}]` to
    `[{y}, {x}]` on x=y=2) moves each block to one other device: one
    collective-permute of the local block instead of gathers and slices."""
    if src == dst or len(src) != len(dst):
        return None
    used_src = {a for d in src for a in d}
    used_dst = {a for d in dst for a in d}
    if used_src != used_dst:
        return None
    if any(a.is_sub_axis for a in used_src):
        return None
    for s_axes, d_axes in zip(src, dst, strict=True):
        if [a.full_size(mesh) for a in s_axes] != [a.full_size(mesh) for a in d_axes]:
            return None
    rename = {
        d_axes[i].name: s_axes[i]
        for s_axes, d_axes in zip(src, dst, strict=True)
        for i in range(len(d_axes))
    }
    pairs = []
    for p in range(mesh.size):
        q = 0
        for axis in mesh.axes:
            source_axis = rename.get(axis.name)
            c = coordinate(mesh, source_axis or AxisRef(axis.name), p)
            q = q * axis.size + c
        # Devices that keep their block still need a (p, p) pair: a device
        # that receives nothing gets zeros.
        pairs.append((p, q))
    moved = tuple(sorted({a for a in used_src if rename.get(a.name) != a}, key=str))
    return CollectivePermute(moved, tuple(pairs), dst)


def _span(axes: Sequence[AxisRef], mesh: MeshModel) -> int:
    return math.prod(a.full_size(mesh) for a in axes)


def _all_to_all_target(
    axis: AxisRef,
    d: int,
    cur: list[list[AxisRef]],
    dst: Layout,
    shape: Sequence[int],
    mesh: MeshModel,
) -> int | None:
    for e, want in enumerate(dst):
        if e == d or not _is_prefix(tuple(cur[e]), want):
            continue
        # Only into a dim that ends up even: uneven blocks are cut at once.
        fits = (
            shape[e] % _span([*cur[e], axis], mesh) == 0
            and shape[e] % _span(want, mesh) == 0
        )
        if len(want) > len(cur[e]) and want[len(cur[e])] == axis and fits:
            return e
    return None


def _append_gather(steps: list[Step], d: int, axis: AxisRef) -> None:
    """Gathers of the same dim in a row merge into one multi-axis all-gather."""
    last = steps[-1] if steps else None
    if isinstance(last, AllGather) and last.dim == d:
        steps[-1] = AllGather(d, (axis, *last.axes))
    else:
        steps.append(AllGather(d, (axis,)))


# Device coordinates ---------------------------------------------------------


def axis_stride(mesh: MeshModel, axis: AxisRef) -> int:
    """Mesh positions between neighbours along `axis` (row-major positions)."""
    stride = 1
    for a in reversed(mesh.axes):
        if a.name == axis.name:
            break
        stride *= a.size
    if axis.size is not None:
        full = mesh.axis_size(axis.name)
        stride *= full // (axis.pre_size * axis.size)
    return stride


def coordinate(mesh: MeshModel, axis: AxisRef, position: int) -> int:
    """The index along `axis` of the device at row-major mesh `position`."""
    return (position // axis_stride(mesh, axis)) % axis.full_size(mesh)


def replica_groups(mesh: MeshModel, axes: Sequence[AxisRef]) -> list[list[int]]:
    """Mesh positions grouped by equal coordinates off `axes`; within a group the
    order is row-major over `axes` as given (major first), the order in which an
    all-gather concatenates blocks."""
    return [list(g) for g in _replica_groups(mesh, tuple(axes))]


@functools.lru_cache(maxsize=1024)
def _replica_groups(
    mesh: MeshModel, axes: tuple[AxisRef, ...]
) -> tuple[tuple[int, ...], ...]:
    sizes = [a.full_size(mesh) for a in axes]
    groups: dict[tuple[int, ...], list[tuple[tuple[int, ...], int]]] = {}
    for pos in range(mesh.size):
        inside = tuple(coordinate(mesh, a, pos) for a in axes)
        base = pos - sum(
            c * axis_stride(mesh, a) for c, a in zip(inside, axes, strict=True)
        )
        groups.setdefault((base,), []).append((inside, pos))
    out = []
    for _, members in sorted(groups.items()):
        members.sort(key=lambda m: _row_major(m[0], sizes))
        out.append(tuple(pos for _, pos in members))
    return tuple(out)


def _row_major(coords: tuple[int, ...], sizes: Sequence[int]) -> int:
    index = 0
    for c, s in zip(coords, sizes, strict=True):
        index = index * s + c
    return index


# Cost -----------------------------------------------------------------------


def step_bytes(
    step: Step, local_shape: Sequence[int], itemsize: int, mesh: MeshModel
) -> int:
    """Bytes one device sends for `step`, given its local shape before the step
    (ring algorithms: an all-gather of k blocks sends k-1 blocks)."""
    local = math.prod(local_shape) * itemsize
    if isinstance(step, LocalSlice):
        return 0
    if isinstance(step, CollectivePermute):
        if not any(p != q for p, q in step.pairs):
            return 0
        if step.offsets is not None:
            return math.prod(step.part) * itemsize
        return local
    k = _span(step.axes, mesh)
    if isinstance(step, AllGather):
        return local * (k - 1)
    if isinstance(step, AllToAll):
        return local * (k - 1) // k
    if isinstance(step, AllReduce):
        return 2 * local * (k - 1) // k
    return local * (k - 1) // k  # ReduceScatter


def apply_step(layout: list[list[AxisRef]], step: Step) -> None:
    """Updates a per-dim axis list in place as `step` changes it."""
    if isinstance(step, LocalSlice):
        for d, added in enumerate(step.added):
            layout[d].extend(added)
    elif isinstance(step, AllGather):
        _drop_minor(layout[step.dim], step.axes)
    elif isinstance(step, AllToAll):
        _drop_minor(layout[step.concat_dim], step.axes)
        layout[step.split_dim].extend(step.axes)
    elif isinstance(step, ReduceScatter):
        layout[step.dim].extend(step.axes)
    elif isinstance(step, CollectivePermute) and step.dst:
        layout[:] = [list(d) for d in step.dst]


def _drop_minor(axes: list[AxisRef], leaving: DimAxes) -> None:
    """Removes `leaving` from the minor end of a dim's `axes`; a sub-axis at
    the minor end of a larger one (`"x":(4)2` of `"x"`, a plan refined by
    `_refined`) leaves the major part in place (`"x":(1)4`)."""
    for gone in reversed(leaving):
        last = axes[-1]
        inside = gone.name == last.name and gone.is_sub_axis
        if inside and gone != last and gone.pre_size > last.pre_size:
            axes[-1] = AxisRef(last.name, last.pre_size, gone.pre_size // last.pre_size)
        else:
            axes.pop()


def reshard_bytes(
    src: Layout,
    dst: Layout,
    shape: Sequence[int],
    itemsize: int,
    mesh: MeshModel,
    partial: DimAxes = (),
) -> int:
    """Bytes one device sends to take a value from `src` (+ partial) to `dst`."""
    if src == dst and not partial:
        return 0
    cur = [list(d) for d in src]
    total = 0
    for step in plan_reshard(src, dst, shape, mesh, partial):
        local = _local_shape(shape, cur, mesh)
        total += step_bytes(step, local, itemsize, mesh)
        apply_step(cur, step)
    return total


def neighbor_pairs(
    mesh: MeshModel, axes: Sequence[AxisRef], shift: int
) -> tuple[tuple[int, int], ...]:
    """(source, target) positions: each device sends to the device whose block
    index over `axes` (row-major, major first) is `shift` larger, with equal
    coordinates on every other axis; blocks shifted off either end send nothing."""
    sizes = [a.full_size(mesh) for a in axes]
    total = math.prod(sizes)
    by_key: dict[tuple[int, int], int] = {}
    for pos in range(mesh.size):
        coords = tuple(coordinate(mesh, a, pos) for a in axes)
        base = pos - sum(
            c * axis_stride(mesh, a) for c, a in zip(coords, axes, strict=True)
        )
        by_key[(base, _row_major(coords, sizes))] = pos
    pairs = []
    for (base, block), pos in sorted(by_key.items(), key=lambda kv: kv[1]):
        target = block + shift
        if 0 <= target < total:
            pairs.append((pos, by_key[(base, target)]))
    return tuple(pairs)
