"""The propagation algorithm on a compact problem: no MLIR, testable by hand.

A `Problem` is a list of value slots (each holding a `Sh` sharding or None for
"no sharding yet", i.e. fully open) and a list of `POp`s, each relating operand
and result slots through a `ShardingRule`. Data-flow edges (while/case, calls)
and func results are expressed with identity rules on shared slots, so one
factor-propagation routine serves every kind of op.

The algorithm follows Shardy's design (docs/propagation.md of openxla/shardy):
project the shardings of an op onto its rule's factors, find per factor the
axes compatible with every tensor, resolve conflicts, project back. A worklist
revisits the users and producers of every value that changed; shardings only
grow, so it terminates. Around that loop run the op-priority stages (pass-through
ops first, broadcast backward only, then everything) and, around those, the
user-priority rounds (p0 first; a later round never removes what an earlier one
decided). Every axis a value gains is recorded as a `Step` (which op, which
direction, which stage, which value it came from), every user sharding as an
`Origin`, and every conflict resolved as a `Conflict`: that is the provenance.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from math import gcd
from typing import NamedTuple

from meshjit.compiler.diagnostics import UNKNOWN_LOC, SourceLoc
from meshjit.dialects.rules import FactorKind, ShardingRule
from meshjit.passes.partitioner.cost import CostModel, fft_flops, relocation_pays
from meshjit.passes.propagation.axes import (
    Ax,
    Axes,
    append_or_merge,
    contains,
    is_strict_prefix,
    list_prefix_status,
    overlaps,
    prefix_of,
    prefix_without_overlaps,
    total_size,
)

# Propagation directions as bit masks: union is `|`, intersection is `&`.
NONE = 0
FORWARD = 1
BACKWARD = 2
BOTH = 3

# Greedy rewriting in Shardy re-walks the module until nothing changes; two
# walks normally suffice, the bound only guards against a bug.
_MAX_WALKS = 10
_BOTTOM_UP = False


class Strategy(enum.Enum):
    """How conflicting axes of one factor are resolved."""

    BASIC = "basic"  # only the longest prefix every tensor agrees on
    AGGRESSIVE = "aggressive"  # per tensor; the larger source tensor wins


class Sh(NamedTuple):
    """A value's sharding: per dim its axes (major to minor) and closed flag.

    A tuple, so that hashing and comparing it (memo keys, fixed-point checks:
    the propagation's hottest operations) run in C."""

    mesh: str
    dims: tuple[Axes, ...]
    closed: tuple[bool, ...]
    replicated: Axes = ()
    unreduced: Axes = ()

    @classmethod
    def open(cls, mesh: str, rank: int) -> Sh:
        return cls(mesh, ((),) * rank, (False,) * rank)

    def has_axes(self) -> bool:
        return any(self.dims)

    def closed_all(self) -> Sh:
        return Sh(self.mesh, self.dims, (True,) * len(self.dims), (), self.unreduced)


def _without_axes(sh: Sh, names: frozenset[str]) -> Sh:
    """`sh` less every (sub-)axis of the named axes."""
    return Sh(
        sh.mesh,
        tuple(tuple(a for a in d if a[0] not in names) for d in sh.dims),
        sh.closed,
        tuple(a for a in sh.replicated if a[0] not in names),
        tuple(a for a in sh.unreduced if a[0] not in names),
    )


class OpKind(enum.Enum):
    RULE = "rule"  # an op with a sharding rule
    EDGE = "edge"  # sources -> one slot shared by all targets (while, case)
    BARRIER = "barrier"  # sdy.propagation_barrier: identity, fixed direction
    # sdy.manual_computation boundary: a global in/out sharding (operand) and
    # the local value inside (result); the manual axes stay where they are,
    # the free axes propagate both ways.
    MANUAL = "manual"


class POp(NamedTuple):
    """One op of the problem. Slots are value indices into `Problem.values`."""

    name: str  # op name ("stablehlo.add"), or "edge" for data-flow edges
    operands: tuple[int, ...]
    results: tuple[int, ...]
    rule: ShardingRule
    kind: OpKind = OpKind.RULE
    elementwise: bool = False
    stage0: int = NONE  # direction as a pass-through op (op-priority stages 0-1)
    # some non-scalar operand has other uses: not a pass-through op in stage 0
    multi_use: bool = False
    broadcast: bool = False  # broadcast_in_dim: only backward before the last stage
    barrier: int = BOTH  # allowed direction of a propagation barrier
    manual: frozenset[str] = frozenset()  # manual axes (OpKind.MANUAL)
    loc: SourceLoc = UNKNOWN_LOC
    node: int = -1  # graph node id, -1 for virtual ops
    # a manual computation's edge or boundary op: which of its operands or
    # results it stands for ("operand" or "result", index); ("", -1) otherwise
    port: tuple[str, int] = ("", -1)


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a value's initial sharding came from (a user annotation)."""

    value: int
    what: str  # "sdy.sharding on argument 0 of @main"
    loc: SourceLoc
    priority: int | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """A value gained axes on a dim by propagating through an op."""

    value: int
    dim: int
    axes: Axes  # the dim's axes after the step
    op: int  # POp index, -1 for a sharding-group or func-result sync
    op_name: str
    loc: SourceLoc
    direction: str  # forward, backward, sideways, group, func-result
    source: int  # value the factor's axes came from, -1 if unknown
    stage: str  # "p0, op-priority 2 (all ops)"
    source_dim: int = -1  # the dim of `source` holding the factor


@dataclass(frozen=True, slots=True)
class Conflict:
    """A factor whose tensors disagreed, and what propagation kept."""

    op: int
    op_name: str
    loc: SourceLoc
    factor: int
    candidates: tuple[tuple[int, Axes], ...]  # (value, axes of the factor)
    chosen: Axes
    how: str
    stage: str


@dataclass(slots=True)
class Provenance:
    origins: list[Origin] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    visits: int = 0  # ops taken off the worklist: the work done, deterministic
    # with Options.origins: value -> axis -> the name of the user sharding it
    # came from (`Problem.source_names`), as Shardy's sharding origins
    axis_origins: dict[int, dict[Ax, str]] = field(default_factory=dict)
    # with Options.edges: owner -> [(step, [(axis, source, targets)])], the
    # owner ("op", graph node) or ("result", func-result slot); sources and
    # targets as Shardy names them ("operand-0", "result-1")
    edges: dict[
        tuple[object, ...], list[tuple[int, list[tuple[Ax, str, list[str]]]]]
    ] = field(default_factory=dict)


@dataclass(slots=True)
class Problem:
    """Values, ops and constraints to propagate over (built by `build.py`)."""

    meshes: dict[str, dict[str, int]]  # mesh name -> axis name -> size
    values: list[Sh | None]  # initial shardings (dim priorities already split off)
    shapes: list[tuple[int, ...]]
    ops: list[POp]  # in pre-order, which is also the worklist order
    # (return-operand slot, func-result slot): synchronised before and after
    # each propagation stage, as Shardy does for func result attributes.
    func_results: list[tuple[int, int]] = field(default_factory=list)
    groups: list[list[int]] = field(default_factory=list)  # sharding groups
    # value -> {dim: priority} for user shardings with explicit priorities
    priorities: dict[int, dict[int, int]] = field(default_factory=dict)
    # value -> its full user sharding (before priorities were split off)
    user: dict[int, Sh] = field(default_factory=dict)
    origins: list[Origin] = field(default_factory=list)
    defs: list[int] = field(default_factory=list)  # value -> defining op, -1
    names: list[str] = field(default_factory=list)  # value -> readable name
    # maximal meshes (no axes, one device): a value on one is placed whole
    # on that device and takes part in no propagation
    maximal: set[str] = field(default_factory=set)
    # mesh name -> the first mesh declared with the same axes and devices:
    # shardings on either propagate to each other (Shardy compares meshes by
    # their definition, not their name)
    same_mesh: dict[str, str] = field(default_factory=dict)
    # Shardy's sharding-origin names (debug-sharding-origins): value -> the
    # name of the user sharding it is ("input: 0", "output: 1",
    # "constraint_0", "mc_0_input: 0"), and value -> the name its initial
    # axes came from where that is another's (a constraint applied to its
    # input)
    source_names: dict[int, str] = field(default_factory=dict)
    initial_origin: dict[int, str] = field(default_factory=dict)
    # Shardy's apply-sharding-constraints, done under
    # Options.apply_constraints: (input, constraint result or manual
    # computation in_sharding slot, the constraint's graph node or -1, its
    # axes) for each unsharded input that takes a closed sharding of its
    # only constraint; applied constraints are the first propagation steps
    # (Options.edges)
    constraint_applies: list[tuple[int, int, int, tuple[Ax, ...]]] = field(
        default_factory=list
    )
    # func-result slot -> the slot of its function's result 0 (Shardy keeps
    # every result's propagation edges on result 0)
    first_result: dict[int, int] = field(default_factory=dict)
    # value -> axis names propagation never adds to it (a manual
    # computation's in/out shardings take no manual axis from outside:
    # manual axes come first there, as the user wrote them)
    forbidden: dict[int, frozenset[str]] = field(default_factory=dict)
    # slot -> bytes per element, where the builder knew the value's type
    # (op results, arguments); the relocation's estimates read it
    itemsizes: dict[int, int] = field(default_factory=dict)

    def add_value(self, shape: tuple[int, ...], name: str = "") -> int:
        self.values.append(None)
        self.shapes.append(shape)
        self.defs.append(-1)
        self.names.append(name)
        return len(self.values) - 1


@dataclass(frozen=True, slots=True)
class Options:
    strategy: Strategy = Strategy.AGGRESSIVE
    op_priority: bool = True
    user_priority: bool = True
    conservative: bool = False  # never propagate sub-axes
    # keep, per value and axis, the user sharding the axis came from
    # (Shardy's debug-sharding-origins); implies recording provenance
    origins: bool = False
    # an unsharded input of a closed sharding constraint (or manual
    # computation in_sharding) takes it as its own (Shardy's
    # apply-sharding-constraints import pass)
    apply_constraints: bool = False
    # keep, per op application that changed something (a step), which axes
    # went from which operand/result to which (Shardy's
    # debug-propagation-edge-sharding); implies recording provenance
    edges: bool = False
    # after propagating: axes an FFT cannot keep on a dim it transforms go
    # to a free batch dim of its results, where the partitioner's all-to-all
    # puts them, where this cost model estimates that cheaper than gathering
    # the operand; then propagation runs again (`Propagator._relocate`;
    # meshjit's, not Shardy's). None: no relocation.
    relocate: CostModel | None = None


# ---------------------------------------------------------------------------
# Projection: a tensor's sharding seen per factor


class FS:
    """A factor's sharding in one tensor (mutable while propagating one op)."""

    __slots__ = ("axes", "closed", "minor", "overflow")

    def __init__(self, axes: list[Ax], overflow: Axes, closed: bool, minor: bool):
        self.axes = axes
        self.overflow = overflow
        self.closed = closed
        self.minor = minor


class TP:
    """A tensor projected onto factors: factor -> FS, plus replicated axes."""

    __slots__ = ("fs", "replicated", "size", "unreduced")

    def __init__(self, fs: dict[int, FS], replicated: Axes, unreduced: Axes):
        self.fs = fs
        self.replicated = replicated
        self.unreduced = unreduced
        self.size = 1


_DimProjection = tuple[tuple[int, Axes, Axes, bool, bool], ...]


@lru_cache(maxsize=65536)
def _project_dim(
    axes: Axes, closed: bool, factors: tuple[int, ...], sizes: tuple[int, ...]
) -> _DimProjection:
    """Distributes a dim's axes over its factors, major to minor.

    A non-minor factor takes axes (splitting one into sub-axes where needed)
    until its size is used up; what cannot divide it becomes overflow, after
    which later factors of the dim are closed. The minor-most factor takes all
    remaining axes, even when they do not divide it (padding).
    """
    out: list[tuple[int, Axes, Axes, bool, bool]] = []
    index = 0
    rem: Ax | None = axes[0] if axes else None
    overflow_seen = False
    last = len(factors) - 1
    for k, f in enumerate(factors):
        minor = k == last
        if overflow_seen:
            out.append((f, (), (), True, minor))
            break  # later factors are not part of the projection at all
        if minor:
            taken: list[Ax] = []
            while rem is not None:
                append_or_merge(taken, rem)
                index += 1
                rem = axes[index] if index < len(axes) else None
            out.append((f, tuple(taken), (), closed, minor))
            break
        left = sizes[k]
        taken = []
        g = 1
        while rem is not None:
            if rem[2] != 1:
                g = gcd(left, rem[2])
                if g <= 1:
                    break
            if rem[2] > g:
                taken.append((rem[0], rem[1], g))
                rem = (rem[0], rem[1] * g, rem[2] // g)
                left //= g
            else:
                taken.append(rem)
                left //= rem[2]
                index += 1
                rem = axes[index] if index < len(axes) else None
        overflow: list[Ax] = []
        if left > 1 and rem is not None:
            overflow_seen = True
            while rem is not None:
                append_or_merge(overflow, rem)
                index += 1
                rem = axes[index] if index < len(axes) else None
        out.append((f, tuple(taken), tuple(overflow), closed, minor))
    return tuple(out)


def project(
    sh: Sh | None, factors: Sequence[tuple[int, ...]], sizes: Sequence[int]
) -> TP:
    """A tensor's factor shardings; no sharding means every dim open and empty."""
    fs: dict[int, FS] = {}
    for d, dim_factors in enumerate(factors):
        dim_sizes = tuple(sizes[f] for f in dim_factors)
        if sh is None:
            axes: Axes = ()
            closed = False
        else:
            axes = sh.dims[d]
            closed = sh.closed[d]
        for f, taken, overflow, fclosed, minor in _project_dim(
            axes, closed, dim_factors, dim_sizes
        ):
            fs[f] = FS(list(taken), overflow, fclosed, minor)
    tp = TP(fs, sh.replicated if sh else (), sh.unreduced if sh else ())
    size = 1
    for f in fs:
        size *= sizes[f]
    tp.size = size
    return tp


def unproject(
    tp: TP,
    factors: Sequence[tuple[int, ...]],
    sizes: Sequence[int],
    mesh: str,
) -> Sh:
    """The tensor sharding a projection stands for (createTensorShardingAttr)."""
    dims: list[Axes] = []
    closed_flags: list[bool] = []
    for dim_factors in factors:
        axes: list[Ax] = []
        closed = False
        for f in dim_factors:
            fsh = tp.fs.get(f)
            if fsh is None:
                break
            closed = closed or fsh.closed
            sharded = 1
            for i, a in enumerate(fsh.axes):
                sharded *= a[2]
                if i == 0:
                    append_or_merge(axes, a)
                else:
                    axes.append(a)
            if fsh.overflow:
                for i, a in enumerate(fsh.overflow):
                    if i == 0:
                        append_or_merge(axes, a)
                    else:
                        axes.append(a)
                break
            if sharded < sizes[f]:
                break  # later factors would need a strided view
        dims.append(tuple(axes))
        closed_flags.append(closed)
    return Sh(mesh, tuple(dims), tuple(closed_flags), tp.replicated, tp.unreduced)


# ---------------------------------------------------------------------------
# Factor propagation (Shardy's basic and aggressive strategies)


def _compatible(
    old: list[Ax], new: Sequence[Ax], can_expand: bool
) -> tuple[list[Ax], bool]:
    """Merges two factor shardings into their longest compatible major part."""
    result: list[Ax] = []
    i = 0
    n_old = len(old)
    n_new = len(new)
    while i < n_old and i < n_new:
        o = old[i]
        n = new[i]
        i += 1
        if o[0] != n[0]:
            return result, False
        if o == n:
            result.append(n)
            continue
        if prefix_of(n, o):
            if i < n_new:
                result.append(n)
                return result, False
            result.append(o)
        elif prefix_of(o, n):
            if not can_expand or i < n_old:
                result.append(o)
                return result, False
            result.append(n)
        else:
            return result, False
    result.extend(old[i:])
    if can_expand:
        result.extend(new[i:])
    return result, can_expand


def compatible_major_axes(
    operands: Sequence[TP], results: Sequence[TP], factor: int, direction: int
) -> list[Ax]:
    """The axes every tensor of the factor agrees on, ignoring other conflicts.

    Forward, only operands may add axes (results only cut at conflicts);
    backward the other way round.
    """
    if direction == NONE:
        return []
    first, second = (
        (results, operands) if direction == BACKWARD else (operands, results)
    )
    axes: list[Ax] = []
    can_expand = True
    for tp in first:
        fsh = tp.fs.get(factor)
        if fsh is not None:
            axes, can_expand = _compatible(axes, fsh.axes, can_expand)
    if direction != BOTH:
        can_expand = False
    for tp in second:
        fsh = tp.fs.get(factor)
        if fsh is not None:
            axes, can_expand = _compatible(axes, fsh.axes, can_expand)
    return axes


def _within_factor(a: Ax, tp: TP, fsh: FS, sharded: int, factor_size: int) -> Ax | None:
    r = prefix_without_overlaps(a, tp.replicated)
    r = prefix_without_overlaps(r, tp.unreduced)
    if r is None:
        return None
    for x in fsh.axes:
        if contains(x, r):
            return r
    if not fsh.closed and not fsh.overflow:
        if fsh.minor or factor_size % sharded == 0:
            return r
        # A major factor's shards must divide it: the axis's prefix that
        # fills what is left of the factor, if any (Shardy splits the axis).
        before = sharded // a[2]
        if factor_size % before == 0:
            g = gcd(factor_size // before, r[2])
            if g > 1:
                return (r[0], r[1], g)
    if fsh.axes and prefix_of(fsh.axes[-1], r):
        return fsh.axes[-1]
    return None


def _across_factors(
    a: Ax, tp: TP, factor: int, new_axes: Sequence[Sequence[Ax]] | None = None
) -> Ax | None:
    r: Ax | None = a
    for g, fsh in tp.fs.items():
        if g == factor:
            continue
        r = prefix_without_overlaps(r, fsh.overflow)
        r = prefix_without_overlaps(r, fsh.axes)
        if new_axes is not None and r is not None:
            r = prefix_without_overlaps(r, new_axes[g])
        if r is None:
            return None
    return r


def _truncate(
    axes: list[Ax], fix: Callable[[Ax, int], Ax | None], conservative: bool
) -> None:
    """Cuts `axes` at the first axis `fix` rejects or shortens."""
    sharded = 1
    for i, a in enumerate(axes):
        sharded *= a[2]
        new = fix(a, sharded)
        if new is None or (conservative and _is_sub(new, a)):
            del axes[i:]
            return
        if new != a:
            axes[i] = new
            del axes[i + 1 :]
            return


def _without_new_sub_axes(old: Sh | None, new: Sh, sizes: Mapping[str, int]) -> Sh:
    """Conservative propagation splits no axis: each dim of `new` stops at
    the first sub-axis its value did not already have."""
    dims = list(new.dims)
    changed = False
    for d, axes in enumerate(new.dims):
        had = old.dims[d] if old is not None and d < len(old.dims) else ()
        for i, a in enumerate(axes):
            whole = a[1] == 1 and a[2] == sizes.get(a[0], a[2])
            if not whole and a not in had:
                dims[d] = axes[:i]
                changed = True
                break
    if not changed:
        return new
    return Sh(new.mesh, tuple(dims), new.closed, new.replicated, new.unreduced)


def _is_sub(new: Ax, old: Ax) -> bool:
    # A sub-axis appears when `fix` shortened an axis; the axes of the input
    # are compared by identity, so a shortened one is a new sub-axis.
    return new[2] != old[2]


def _expand(tp: TP, factor: int, new: Sequence[Ax]) -> bool:
    fsh = tp.fs.get(factor)
    if fsh is None or not is_strict_prefix(fsh.axes, new):
        return False
    fsh.axes = list(new)
    return True


def propagate_factors(
    operands: list[TP],
    results: list[TP],
    rule: ShardingRule,
    directions: Sequence[int],
    strategy: Strategy,
    elementwise: bool,
    conservative: bool,
) -> tuple[list[bool], list[bool], list[list[Ax]], list[int]]:
    """Updates the projections in place.

    Returns (updated operands, updated results, axes per factor, source tensor
    per factor (index over operands then results, -1 if none)).
    """
    sizes = rule.sizes
    n_factors = len(sizes)
    tensors = [*operands, *results]
    per_factor = [
        compatible_major_axes(operands, results, f, directions[f])
        for f in range(n_factors)
    ]
    upd_ops = [False] * len(operands)
    upd_res = [False] * len(results)
    source = [-1] * n_factors
    if not any(per_factor):
        return upd_ops, upd_res, per_factor, source
    source_size = [-1] * n_factors
    for t, tp in enumerate(tensors):
        for f, fsh in tp.fs.items():
            axes = per_factor[f]
            if (
                axes
                and list_prefix_status(axes, fsh.axes) != 0
                and tp.size > source_size[f]
            ):
                source_size[f] = tp.size
                source[f] = t
    if strategy is Strategy.BASIC:
        for f in range(n_factors):
            axes = list(per_factor[f])
            if not axes:
                continue
            size = sizes[f]

            def fix(a: Ax, sharded: int, f: int = f, size: int = size) -> Ax | None:
                r: Ax | None = a
                for tp in tensors:
                    if r is None:
                        return None
                    r = _across_factors(r, tp, f)
                    fsh = tp.fs.get(f)
                    if r is None or fsh is None:
                        continue
                    r = _within_factor(r, tp, fsh, sharded, size)
                return r

            _truncate(axes, fix, conservative)
            for i, tp in enumerate(operands):
                upd_ops[i] |= _expand(tp, f, axes)
            for i, tp in enumerate(results):
                upd_res[i] |= _expand(tp, f, axes)
        return upd_ops, upd_res, per_factor, source

    def order_key(f: int) -> tuple[int, int, int, int]:
        sharded = total_size(per_factor[f]) if elementwise else 0
        return (-source_size[f], -sharded, source[f], f)

    order = sorted(range(n_factors), key=order_key)

    def propagated(f: int, tp: TP) -> list[Ax]:
        fsh = tp.fs.get(f)
        # Truncating only shortens the compatible axes: a tensor whose axes
        # are not a strict prefix of them now cannot gain anything.
        if fsh is None or list_prefix_status(fsh.axes, per_factor[f]) != 1:
            return []
        new = list(per_factor[f])
        size = sizes[f]
        _truncate(
            new,
            lambda a, sharded: _within_factor(a, tp, fsh, sharded, size),
            conservative,
        )
        if not is_strict_prefix(fsh.axes, new):
            return []
        _truncate(new, lambda a, _s: _across_factors(a, tp, f), conservative)
        return new

    for i, tp in enumerate(results):
        for f in order:
            new = propagated(f, tp)
            if new:
                upd_res[i] |= _expand(tp, f, new)
    for i, tp in enumerate(operands):
        for f in order:
            new = propagated(f, tp)
            if not new:
                continue
            if elementwise:
                # An elementwise op does not pass axes sideways between operands
                # beyond what its result has (Shardy: avoids resharding both).
                for res in results:
                    rf = res.fs.get(f)
                    if rf is not None and is_strict_prefix(rf.axes, new):
                        new = list(rf.axes)
            upd_ops[i] |= _expand(tp, f, new)
    return upd_ops, upd_res, per_factor, source


# ---------------------------------------------------------------------------
# Rules for identity relations (edges, barriers, func results)


@lru_cache(maxsize=4096)
def identity_rule(
    shape: tuple[int, ...], n_operands: int, n_results: int = 1
) -> ShardingRule:
    dims = tuple((d,) for d in range(len(shape)))
    return ShardingRule(
        sizes=tuple(shape),
        operands=(dims,) * n_operands,
        results=(dims,) * n_results,
    )


# Conservative propagation carries no sharding across these ops' factors of
# these kinds: the dims that move data (sliced, padded, concatenated, windowed
# dims), as Shardy's rules for them block such factors in conservative mode.
_CONSERVATIVE_BLOCKS: dict[str, frozenset[FactorKind]] = {
    "stablehlo.slice": frozenset({FactorKind.PERMUTATION}),
    "stablehlo.pad": frozenset({FactorKind.PERMUTATION}),
    "stablehlo.concatenate": frozenset({FactorKind.PERMUTATION}),
    "stablehlo.reduce_window": frozenset({FactorKind.PERMUTATION}),
    "stablehlo.convolution": frozenset({FactorKind.PERMUTATION}),
    "stablehlo.select_and_scatter": frozenset(
        {FactorKind.PERMUTATION, FactorKind.NEED_REPLICATION}
    ),
}


def _stage_direction(
    op: POp,
    factor: int,
    stage: int,
    op_priority: bool,
    conservative: bool = False,
    relocating: bool = False,
) -> int:
    """Shardy's op-priority schedule; stage k allows the union of stages 0..k."""
    if op.kind is OpKind.BARRIER:
        return op.barrier
    if conservative and op.rule.kind(factor) in _CONSERVATIVE_BLOCKS.get(
        op.name, frozenset()
    ):
        return NONE
    if (
        relocating
        and op.name in _RELOCATING
        and op.rule.kind(factor) is FactorKind.NEED_REPLICATION
    ):
        # the relocation decides where a transformed dim's axes go
        # (`Propagator._relocate`)
        return NONE
    if op.rule.kind(factor) is FactorKind.BLOCKED:
        # Shardy's blocked_propagation: a factor whose size differs between
        # operand and result (dynamic_slice, gather offsets, rfft) carries no
        # sharding either way; each side keeps what it has.
        return NONE
    if not op_priority or stage >= _LAST_STAGE:
        return BOTH
    direction = NONE if stage == 0 and op.multi_use else op.stage0
    if stage >= 2 and op.rule.kind(factor) is FactorKind.PASS_THROUGH:
        direction |= BACKWARD if op.broadcast else BOTH
    if stage >= 3:
        direction |= BACKWARD if op.broadcast else BOTH
    return direction


_STAGE_NAMES = (
    "single-use pass-through ops",
    "pass-through ops",
    "pass-through factors",
    "all ops but broadcast forward",
    "all ops",
)
_LAST_STAGE = len(_STAGE_NAMES) - 1

# Ops whose partitioner moves the axes of the dims they transform to a batch
# dim by an all-to-all (`Propagator._relocate`), and the factor kinds that
# cannot keep axes there. Under relocation their dims that need replication
# (a complex FFT's) carry nothing during the rounds (Shardy passes them on):
# the relocation step relocates or passes them on. (A sort's sorted dim
# needs replication too and passes its axes on as in Shardy.)
_RELOCATING = frozenset({"stablehlo.fft"})
_CANNOT_KEEP = frozenset({FactorKind.NEED_REPLICATION, FactorKind.BLOCKED})
_RELOCATION = "relocation (axes an FFT moves to a batch dim)"
# Ops whose result may not take, under relocation, axes that would split a
# dim they resize unevenly (a concatenation's dim 16 + 1 over 4 devices: the
# partitioner would pad it to 20 and mask the padding before every
# contraction, softmax and reduction that follows). The relocation step joins
# such axes onto a dim of the result already split, or its empty leading dim
# (the batch dim), that they divide, where the partitioner moves them by one
# all-to-all; where no dim can take them, the op passes them on unevenly as
# Shardy does.
_EVEN = frozenset({"stablehlo.concatenate"})
_EVEN_RELOCATION = "relocation (axes that would split a resized dim unevenly)"
# A manual computation's operand split over free axes major to its manual
# ones: the in_sharding takes them minor to the manual axes, a reorder the
# partitioner makes by one collective-permute (`Propagator._reorder_manual`).
_MANUAL_RELOCATION = "relocation (free axes a manual computation's operand reorders)"
# How many ops that pass a dim through `_computes_on_blocks` follows.
_REORDER_DEPTH = 8


def _alone(tensor: Sequence[tuple[int, ...]], f: int) -> list[int]:
    """The dims of a tensor (its dims' factors) that factor `f` makes alone."""
    return [d for d, fs in enumerate(tensor) if fs == (f,)]


def _resized(problem: Problem, op: POp) -> tuple[int, ...]:
    """The factors of `op` that make a dim alone whose size differs between
    its tensors (a concatenation's dim)."""
    found = []
    tensors = (*op.operands, *op.results)
    layouts = (*op.rule.operands, *op.rule.results)
    for f in range(op.rule.num_factors):
        sizes = {
            problem.shapes[v][d]
            for v, dims in zip(tensors, layouts, strict=True)
            for d in _alone(dims, f)
        }
        if len(sizes) > 1:
            found.append(f)
    return tuple(found)


def _transformed(rule: ShardingRule, factors: tuple[int, ...]) -> bool:
    """Whether a dim made of `factors` is one the op transforms (cannot keep
    axes on)."""
    return bool(factors) and all(rule.kind(f) in _CANNOT_KEEP for f in factors)


def _strip_axes(sh: Sh, manual: frozenset[str]) -> Sh:
    """The sharding seen inside a manual computation: without manual axes."""

    def keep(axes: Axes) -> Axes:
        return tuple(a for a in axes if a[0] not in manual)

    return Sh(
        sh.mesh,
        tuple(keep(d) for d in sh.dims),
        sh.closed,
        keep(sh.replicated),
        keep(sh.unreduced),
    )


def _with_manual(glob: Sh | None, free: Sh, manual: frozenset[str]) -> Sh:
    """A global sharding: the manual axes of `glob` (major), then `free`."""
    if glob is None:
        return free
    dims = tuple(
        tuple(a for a in old if a[0] in manual) + new
        for old, new in zip(glob.dims, free.dims, strict=True)
    )
    manual_of = tuple(a for a in glob.replicated if a[0] in manual)
    return Sh(
        glob.mesh,
        dims,
        glob.closed,
        manual_of + free.replicated,
        tuple(a for a in glob.unreduced if a[0] in manual) + free.unreduced,
    )


def _identity_fill(
    state: Sequence[Sh | None],
    operands: Sequence[int],
    results: Sequence[int],
    directions: Sequence[int],
) -> tuple[tuple[Axes, ...], list[int]] | None:
    """The outcome of an identity rule in its two common cases, or None.

    When every tensor with a sharding has the same dims, factor propagation
    finds no conflict: tensors without a sharding get those dims (open) if
    the direction lets some sharded tensor lead, and nothing else changes.
    Returns (dims, slots to fill); no slots when nothing changes.
    """
    dims: tuple[Axes, ...] | None = None
    empty: list[int] = []
    lead = False
    n_operands = len(operands)
    direction = directions[0] if directions else NONE
    for k, v in enumerate((*operands, *results)):
        sh = state[v]
        if sh is None:
            if v not in empty:
                empty.append(v)
            continue
        if dims is None:
            dims = sh.dims
        elif sh.dims != dims:
            return None
        if direction == BOTH or (direction == FORWARD) == (k < n_operands):
            lead = True
    if dims is None or any(d != direction for d in directions):
        return None
    if not empty or not lead or direction == NONE:
        return (dims, [])
    return (dims, empty)


# ---------------------------------------------------------------------------
# The driver


class Propagator:
    """Runs the whole propagation over a `Problem` and keeps provenance."""

    def __init__(self, problem: Problem, options: Options, record: bool = True):
        self.p = problem
        self.o = options
        self.record = record or options.origins or options.edges
        self.step = 0  # Shardy's propagation step count (Options.edges)
        self.state: list[Sh | None] = list(problem.values)
        self.prov = Provenance(origins=list(problem.origins))
        self.axis_origins: dict[int, dict[Ax, str]] | None = None
        applied: dict[int, str] = {}
        # user shardings (full, and dim priorities), with applied constraints
        self.user = problem.user
        self.priorities = problem.priorities
        if options.apply_constraints and problem.constraint_applies:
            self.user = dict(problem.user)
            self.priorities = dict(problem.priorities)
            for src, given, nid, axes in problem.constraint_applies:
                if self.state[src] is not None or self.state[given] is None:
                    continue
                self.state[src] = self.state[given]
                if given in self.user:
                    self.user[src] = self.user[given]
                if given in self.priorities:
                    self.priorities[src] = dict(self.priorities[given])
                applied[src] = problem.source_names.get(given, "")
                self.prov.origins.append(
                    Origin(
                        src,
                        f"{problem.names[given]} (applied to its input)",
                        UNKNOWN_LOC,
                    )
                )
                if options.edges and nid >= 0:
                    entries = [(a, "result-0", ["operand-0"]) for a in axes]
                    self.prov.edges.setdefault(("op", nid), []).append(
                        (self.step, entries)
                    )
                    self.step += 1
            # Sharding groups sync after the constraints are applied (Shardy
            # imports groups after applying constraints): a group with one
            # sharding among its members gives it to the rest.
            for members in problem.groups:
                if not any(v in applied for v in members):
                    continue
                found = {self.state[v] for v in members}
                found = {sh for sh in found if sh is not None and sh.has_axes()}
                if len(found) == 1:
                    (common,) = found
                    for v in members:
                        now = self.state[v]
                        if now is None or not now.has_axes():
                            self.state[v] = common
        if options.origins:
            self.axis_origins = self.prov.axis_origins
            for v, name in (
                *problem.source_names.items(),
                *problem.initial_origin.items(),
                *applied.items(),
            ):
                sh = self.user.get(v) or self.state[v]
                if sh is None:
                    continue
                mine = self.axis_origins.setdefault(v, {})
                for dim in sh.dims:
                    for a in dim:
                        mine[a] = name
        n = len(problem.values)
        users: list[list[int]] = [[] for _ in range(n)]
        for i, op in enumerate(problem.ops):
            for v in op.operands:
                if not users[v] or users[v][-1] != i:
                    users[v].append(i)
            # an op writing a slot another op defines (a manual computation's
            # returned value) must hear when that slot changes
            for v in op.results:
                if problem.defs[v] not in (i, -1) and i not in users[v]:
                    users[v].append(i)
        # MLIR iterates a value's uses newest first, i.e. in reverse program
        # order; Shardy pushes users in that order onto its LIFO worklist.
        for u in users:
            u.reverse()
        self.users = users
        self.group_of: dict[int, list[int]] = {}
        for g in problem.groups:
            for v in g:
                self.group_of[v] = g
        self.stage_name = ""
        self._all_factors: tuple[tuple[tuple[int, ...], ...], ...] = ()
        n_ops = len(problem.ops)
        self.in_stack = bytearray(n_ops)
        self.stack: list[int] = []
        # Per op, the directions of the current stage (None: propagates
        # nothing), and the directions under which it last changed nothing
        # since its tensors last changed: it cannot change anything now.
        self.dirs: list[tuple[int, ...] | None] = [None] * n_ops
        self.clean: list[tuple[int, ...] | None] = [None] * n_ops
        self._op_class: list[int] = []  # op -> its class for `_stage_dirs`
        self._class_rep: list[POp] = []  # class -> one op of it
        self._interned: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._identity_of: dict[int, tuple[ShardingRule, bool]] = {}
        self._blocked_seen: set[tuple[int, int, tuple[tuple[int, Axes], ...]]] = set()
        self._outcomes: dict[tuple[object, ...], tuple[Sh | None, ...]] = {}
        self._rules: dict[int, ShardingRule] = {}
        # Under relocation: ops that keep uneven axes off the dims they
        # resize (op -> those dims' factors), and those of them that pass
        # such axes on after all (no dim could take them).
        self._even: dict[int, tuple[int, ...]] = {}
        self._uneven_ok: set[int] = set()
        if options.relocate is not None:
            for i, op in enumerate(problem.ops):
                if op.kind is OpKind.RULE and op.name in _EVEN:
                    resized = _resized(problem, op)
                    if resized:
                        self._even[i] = resized

    # -- priorities ---------------------------------------------------------

    def run(self) -> list[Sh | None]:
        rounds = sorted(
            {p for dims in self.priorities.values() for p in dims.values() if p > 0}
        )
        if not self.o.user_priority:
            self._restore_all()
            self._op_priority_stages("")
        else:
            self._op_priority_stages("p0" if rounds else "")
            for prio in rounds:
                self._restore(prio)
                self._op_priority_stages(f"p{prio}")
        ffts = [
            i
            for i, op in enumerate(self.p.ops)
            if op.kind is OpKind.RULE and op.name in _RELOCATING
        ]
        manual = (
            [
                i
                for i, op in enumerate(self.p.ops)
                if op.kind is OpKind.MANUAL and op.port[0] == "operand"
            ]
            if self.o.relocate is not None
            else []
        )
        if self.o.relocate is not None and (ffts or self._even or manual):
            # a relocated or passed-on sharding may reach another such op
            for _ in range(_MAX_WALKS):
                moved = bool(ffts) and self._relocate(self.o.relocate, ffts)
                joined = self._join_uneven()
                reordered = bool(manual) and self._reorder_manual(manual)
                if not (moved or joined or reordered):
                    break
                self._op_priority_stages(
                    _RELOCATION
                    if moved
                    else _EVEN_RELOCATION
                    if joined
                    else _MANUAL_RELOCATION
                )
        return self.state

    def _reorder_manual(self, boundaries: Sequence[int]) -> bool:
        """A manual computation's operand split on a dim over the manual
        axes and free ones major to them (tokens laid out over ("data",
        "expert") for a body manual over "expert"): no prefix agrees, so
        Shardy's propagation carries no free axis in and the body runs
        replicated over them (its operand gathered there, its own
        collectives moving that many times the bytes). Here the
        in_sharding's dim, where it holds just the manual axes and is open,
        takes the free axes minor to them (("expert", "data")): the
        partitioner reorders the blocks by one collective-permute and the
        body runs split over them, as XLA's partitioner does. `boundaries`:
        the operand boundary ops. True if an in_sharding changed."""
        changed = False
        p = self.p
        for i in boundaries:
            op = p.ops[i]
            edge, inner = op.operands[0], op.results[0]
            if p.defs[edge] < 0:
                continue
            feed = p.ops[p.defs[edge]]
            if feed.kind is not OpKind.EDGE or len(feed.operands) != 1:
                continue
            src = feed.operands[0]
            glob, outer, local = self.state[edge], self.state[src], self.state[inner]
            if glob is None or outer is None or outer.mesh != glob.mesh:
                continue
            if outer.mesh in p.maximal:
                continue
            banned = p.forbidden.get(edge, frozenset())
            used = {a[0] for d in glob.dims for a in d}
            used |= {a[0] for a in (*glob.replicated, *glob.unreduced)}
            if local is not None:
                used |= {a[0] for d in local.dims for a in d}
            for d, have in enumerate(glob.dims):
                if glob.closed[d] or not have:
                    continue
                if any(a[0] not in op.manual for a in have):
                    continue
                axes = outer.dims[d]
                mine = tuple(a for a in axes if a[0] in op.manual)
                free = tuple(a for a in axes if a[0] not in op.manual)
                if mine != have or not free or axes == have + free:
                    continue
                names = {a[0] for a in free}
                if names & used or names & banned:
                    continue
                if not self._computes_on_blocks(inner, d, _REORDER_DEPTH):
                    continue
                now = self.state[edge]
                assert now is not None
                self._give(
                    edge,
                    (d, now),
                    have + free,
                    i,
                    op,
                    "reordered",
                    src,
                    d,
                    _MANUAL_RELOCATION,
                )
                used |= names
                changed = True
        return changed

    # -- relocation ---------------------------------------------------------

    def _computes_on_blocks(
        self, v: int, d: int, depth: int, seen: set[tuple[int, int]] | None = None
    ) -> bool:
        """Whether the body computes on blocks of slot `v`'s dim `d`: some
        use of it, through up to `depth` ops that pass the dim through
        (element-wise ops, batch dims), reduces it or leaves the body (or
        reaches an op this cannot see through). Where every use needs the
        dim whole (a body that all-gathers or scans it), a reorder would
        only add a permute before that gather. `seen`: the (slot, dim)
        pairs already followed (each once, however many paths reach it)."""
        seen = set() if seen is None else seen
        if (v, d) in seen:
            return False
        seen.add((v, d))
        for u in self.users[v]:
            op = self.p.ops[u]
            if op.kind is not OpKind.RULE:
                return True
            rule = op.rule
            for k, w in enumerate(op.operands):
                if w != v:
                    continue
                for f in rule.operands[k][d]:
                    kind = rule.kind(f)
                    if kind is FactorKind.REDUCTION:
                        return True
                    if kind is not FactorKind.PASS_THROUGH:
                        continue
                    onward = [
                        (r, e)
                        for r, tensor in zip(op.results, rule.results, strict=True)
                        for e, fs in enumerate(tensor)
                        if f in fs
                    ]
                    if depth <= 0 or not onward:
                        return True
                    if any(
                        self._computes_on_blocks(r, e, depth - 1, seen)
                        for r, e in onward
                    ):
                        return True
        return False

    def _even_dirs(self, i: int, dirs: tuple[int, ...]) -> tuple[int, ...] | None:
        """`dirs` without the resized factors of op `i` whose axes in one of
        its tensors do not divide that factor's dim in a result (they would
        split it unevenly; the pieces a roll concatenates may be uneven)."""
        op = self.p.ops[i]
        tensors = (*op.operands, *op.results)
        layouts = (*op.rule.operands, *op.rule.results)
        out = list(dirs)
        for f in self._even[i]:
            if not out[f]:
                continue
            sizes, counts = [], []
            for k, (v, dims) in enumerate(zip(tensors, layouts, strict=True)):
                sh = self.state[v]
                for d in _alone(dims, f):
                    if k >= len(op.operands):
                        sizes.append(self.p.shapes[v][d])
                    if sh is not None and sh.dims[d]:
                        counts.append(total_size(sh.dims[d]))
            if any(n % c for n in sizes for c in counts):
                out[f] = NONE
        found = tuple(out)
        if not any(found):
            return None
        return self._interned.setdefault(found, found)

    def _join_uneven(self) -> bool:
        """Each op that kept an operand's axes off a dim its results would
        split unevenly (`_even_dirs`): its results take them on a dim
        already split over the same mesh that they divide too (minor to the
        axes there), else on the leading dim if it is empty and they divide
        it (the batch dim by convention; an empty dim further in may be a
        feature dim that the next contraction sums over), where the
        partitioner moves them by an all-to-all; where a result has no such
        dim, the op passes them on unevenly from now on, as Shardy does.
        True if anything changed."""
        changed = False
        for i, resized in self._even.items():
            if i in self._uneven_ok:
                continue
            op = self.p.ops[i]
            for k, v in enumerate(op.operands):
                sh = self.state[v]
                if sh is None or sh.mesh in self.p.maximal:
                    continue
                for d, fs in enumerate(op.rule.operands[k]):
                    axes = sh.dims[d]
                    if not axes or len(fs) != 1 or fs[0] not in resized:
                        continue
                    targets = self._join_targets(i, op, fs[0], sh.mesh, axes)
                    if targets is None:
                        continue
                    if not targets:
                        self._uneven_ok.add(i)
                        self.clean[i] = None
                        changed = True
                        continue
                    for r, e, now in targets:
                        joined = (*now.dims[e], *axes)
                        self._give(
                            r, (e, now), joined, i, op, "joined", v, d, _EVEN_RELOCATION
                        )
                    changed = True
        return changed

    def _join_targets(
        self, i: int, op: POp, f: int, mesh: str, axes: Axes
    ) -> list[tuple[int, int, Sh]] | None:
        """Where op `i`'s results would split resized factor `f`'s dim
        unevenly by `axes`: per result, its slot, the dim to join them onto
        (`_join_uneven`) and its sharding (an empty list where some result
        has no such dim); None where nothing is uneven or the results
        already use `axes`."""
        found = []
        for j, r in enumerate(op.results):
            tensor = op.rule.results[j]
            now = self.state[r]
            if now is not None and any(
                overlaps(a, b)
                for a in axes
                for b in (*[b for dim in now.dims for b in dim], *now.replicated)
            ):
                return None  # joined already, or taken there some other way
            shape = self.p.shapes[r]
            if all(shape[d] % total_size(axes) == 0 for d in _alone(tensor, f)):
                return None
            target = None
            if now is None and self.p.defs[r] == i:
                now = Sh.open(mesh, len(shape))
            if (
                now is not None
                and now.mesh == mesh
                and self.p.defs[r] == i
                and r not in self.group_of
                and not any(a[0] in self.p.forbidden.get(r, frozenset()) for a in axes)
                and not now.unreduced
            ):
                fits = [
                    e
                    for e, fs in enumerate(tensor)
                    if len(fs) == 1
                    and fs[0] != f
                    and op.rule.kind(fs[0]) is FactorKind.PASS_THROUGH
                    and not now.closed[e]
                    and shape[e] % (total_size(now.dims[e]) * total_size(axes)) == 0
                ]
                split = [e for e in fits if now.dims[e]]
                if split or 0 in fits:
                    target = (r, split[0] if split else 0, now)
            if target is None:
                return []
            found.append(target)
        return found

    def _relocate(self, cost: CostModel, ffts: Sequence[int]) -> bool:
        """Where an FFT's operand has axes on a dim the op transforms (a
        factor that needs replication or is blocked), the partitioner moves
        them to a batch dim by an all-to-all and computes there; a result
        whose batch dim is open and free takes those axes, so that what
        follows stays split the way the op computes instead of gathering
        its result (an rfft-filter-irfft along a split dim keeps the
        spectrum split by rows), where `cost` estimates the two all-to-alls
        (there and, for the result, back) and 1/n of the transform cheaper
        than gathering the operand and transforming it whole on every
        device (small transforms gather: a launch costs more than their
        bytes). `ffts`: the FFT ops' indices. True if a result changed."""
        changed = False
        for i in ffts:
            op = self.p.ops[i]
            for k, v in enumerate(op.operands):
                sh = self.state[v]
                if sh is None or sh.mesh in self.p.maximal:
                    continue
                for d, axes in enumerate(sh.dims):
                    if (
                        axes
                        and _transformed(op.rule, op.rule.operands[k][d])
                        and self._relocation_pays(cost, op, k, axes)
                    ):
                        changed |= self._relocate_onto(i, op, k, sh, d, axes)
            # what stays: Shardy's pass-through of the dims that need
            # replication (the relocated axes are now used in the results)
            changed |= self._pass_through(i, op)
            changed |= self._pass_through(i, op, backward=True)
        return changed

    def _pass_through(self, i: int, op: POp, backward: bool = False) -> bool:
        """What Shardy's propagation does across a transformed dim that
        needs replication (a complex FFT's), where it is not relocated: the
        axes of an operand's dim go to the result's dim of the same factor
        (`backward`: a result's to the operand's), where that dim is open,
        empty and the axes unused there."""
        rule = op.rule
        pairs = [(op.operands, rule.operands, op.results, rule.results)]
        if backward:
            pairs = [(op.results, rule.results, op.operands, rule.operands)]
        changed = False
        for sources, src_rule, targets, dst_rule in pairs:
            for v, tensor in zip(sources, src_rule, strict=True):
                sh = self.state[v]
                if sh is None:
                    continue
                for d, axes in enumerate(sh.dims):
                    fs = tensor[d]
                    if not axes or len(fs) != 1:
                        continue
                    if rule.kind(fs[0]) is not FactorKind.NEED_REPLICATION:
                        continue
                    for j, t in enumerate(targets):
                        found = self._free(t, dst_rule[j], fs[0], sh.mesh, axes)
                        if found is None:
                            continue
                        if not backward and self.p.defs[t] != i:
                            continue
                        how = "backward" if backward else "forward"
                        self._give(t, found, axes, i, op, how, v, d)
                        changed = True
        return changed

    def _relocation_pays(self, cost: CostModel, op: POp, k: int, axes: Axes) -> bool:
        """`cost.relocation_pays` for operand `k` of FFT `op` split over
        `axes` on its transformed dims (their product is the transform's
        length; bytes from the slots' element types, 4 where unknown)."""
        p = self.p
        v = op.operands[k]
        operand = p.shapes[v]
        transformed = [
            n
            for n, fs in zip(operand, op.rule.operands[k], strict=True)
            if _transformed(op.rule, fs)
        ]
        length = math.prod(transformed)
        sizes = [math.prod(p.shapes[r]) for r in op.results]
        in_bytes = math.prod(operand) * p.itemsizes.get(v, 4)
        out_bytes = sum(
            n * p.itemsizes.get(r, 4) for n, r in zip(sizes, op.results, strict=True)
        )
        flops = fft_flops(max(math.prod(operand), *sizes), length)
        return relocation_pays(cost, in_bytes, out_bytes, flops, total_size(axes))

    def _relocate_onto(
        self, i: int, op: POp, k: int, sh: Sh, dim: int, axes: Axes
    ) -> bool:
        """Gives `axes` (on operand `k`'s `dim`) to the first pass-through
        factor that is alone on an empty dim of operand `k` and of every
        result, divisible by them, where every result's dim is open and no
        result uses them yet."""
        rule = op.rule
        size = total_size(axes)
        operand = rule.operands[k]
        for g in range(rule.num_factors):
            if rule.kind(g) is not FactorKind.PASS_THROUGH or rule.sizes[g] % size:
                continue
            if not any(fs == (g,) and not sh.dims[e] for e, fs in enumerate(operand)):
                continue
            targets = [
                self._free_dim(i, op, j, g, sh.mesh, axes)
                for j in range(len(op.results))
            ]
            if any(t is None for t in targets):
                continue
            for r, found in zip(op.results, targets, strict=True):
                assert found is not None
                self._give(r, found, axes, i, op, "relocated", op.operands[k], dim)
            return True
        return False

    def _give(
        self,
        v: int,
        found: tuple[int, Sh],
        axes: Axes,
        i: int,
        op: POp,
        how: str,
        source: int,
        source_dim: int,
        stage: str = _RELOCATION,
    ) -> None:
        """Puts `axes` on slot `v`'s dim `found[0]` (its sharding
        `found[1]`), by op `i` from `source`'s `source_dim`: a step of the
        relocation."""
        e, now = found
        dims = list(now.dims)
        dims[e] = axes
        self.state[v] = now._replace(dims=tuple(dims))
        self._notify(v, i)
        if self.record:
            step = Step(v, e, axes, i, op.name, op.loc, how, source, stage, source_dim)
            self.prov.steps.append(step)

    def _free_dim(
        self, i: int, op: POp, j: int, g: int, mesh: str, axes: Axes
    ) -> tuple[int, Sh] | None:
        """Result `j` of op `i`: the dim factor `g` alone makes and the
        result's sharding, where that dim is open and empty and no dim of
        the result uses `axes` (else None)."""
        r = op.results[j]
        if self.p.defs[r] != i:
            return None
        return self._free(r, op.rule.results[j], g, mesh, axes)

    def _free(
        self,
        v: int,
        tensor: Sequence[tuple[int, ...]],
        g: int,
        mesh: str,
        axes: Axes,
    ) -> tuple[int, Sh] | None:
        """Slot `v` (its dims' factors `tensor`): the dim factor `g` alone
        makes and the slot's sharding, where that dim is open and empty, no
        dim uses `axes`, the slot may take them (not a manual computation's
        manual axes) and no sharding group holds it (else None)."""
        if v in self.group_of:
            return None
        now = self.state[v]
        if now is None:
            now = Sh.open(mesh, len(self.p.shapes[v]))
        ban = self.p.forbidden.get(v, frozenset())
        if now.mesh != mesh or any(a[0] in ban for a in axes):
            return None
        dims = [e for e, fs in enumerate(tensor) if g in fs]
        if len(dims) != 1 or tensor[dims[0]] != (g,):
            return None
        e = dims[0]
        if now.closed[e] or now.dims[e]:
            return None
        used = [b for dim in now.dims for b in dim]
        used += [*now.replicated, *now.unreduced]
        if any(overlaps(a, b) for a in axes for b in used):
            return None
        return e, now

    def _restore(self, prio: int) -> None:
        """Puts back the dims of user shardings whose priority is `prio`."""
        self.clean = [None] * len(self.p.ops)
        for v, dims in self.priorities.items():
            chosen = [d for d, p in dims.items() if p == prio]
            if not chosen:
                continue
            user = self.user[v]
            cur = self.state[v]
            assert cur is not None
            new_dims = list(cur.dims)
            new_closed = list(cur.closed)
            seen: set[Ax] = set()
            for d in chosen:
                new_dims[d] = user.dims[d]
                new_closed[d] = user.closed[d]
                seen.update(user.dims[d])
            replicated = tuple(a for a in cur.replicated if a not in seen)
            self.state[v] = Sh(
                cur.mesh, tuple(new_dims), tuple(new_closed), replicated, cur.unreduced
            )

    def _restore_all(self) -> None:
        self.clean = [None] * len(self.p.ops)
        for v in self.priorities:
            self.state[v] = self.user[v]

    # -- op priorities ------------------------------------------------------

    def _op_priority_stages(self, user_round: str) -> None:
        stages = range(len(_STAGE_NAMES)) if self.o.op_priority else (_LAST_STAGE,)
        for stage in stages:
            parts = [user_round] if user_round else []
            if self.o.op_priority:
                parts.append(f"op-priority {stage} ({_STAGE_NAMES[stage]})")
            self.stage_name = ", ".join(parts) or "propagation"
            self._walk(stage)

    def _identity(self, rule: ShardingRule) -> bool:
        """Every tensor maps dim d to factor d (elementwise ops, edges...)."""
        found = self._identity_of.get(id(rule))
        if found is None:
            dims = tuple((d,) for d in range(len(rule.sizes)))
            flag = all(t == dims for t in (*rule.operands, *rule.results))
            found = (rule, flag)
            self._identity_of[id(rule)] = found
        return found[1]

    def _stage_dirs(self, stage: int) -> None:
        """Each op's directions per factor in `stage` (shared tuples, so that
        `clean` compares by identity). Ops fall into few classes (kind, rule
        kinds, schedule flags); each class is worked out once per stage."""
        if not self._op_class:
            classes: dict[tuple[object, ...], int] = {}
            for op in self.p.ops:
                rule = op.rule
                key = (
                    op.kind,
                    op.stage0,
                    op.multi_use,
                    op.broadcast,
                    op.barrier,
                    rule.kinds,
                    rule.num_factors,
                    op.name
                    if self.o.conservative and op.name in _CONSERVATIVE_BLOCKS
                    else "",
                    self.o.relocate is not None and op.name in _RELOCATING,
                )
                c = classes.get(key)
                if c is None:
                    c = classes[key] = len(self._class_rep)
                    self._class_rep.append(op)
                self._op_class.append(c)
        prio = self.o.op_priority
        per_class: list[tuple[int, ...] | None] = []
        for op in self._class_rep:
            found = tuple(
                _stage_direction(
                    op,
                    f,
                    stage,
                    prio,
                    self.o.conservative,
                    self.o.relocate is not None,
                )
                for f in range(op.rule.num_factors)
            )
            per_class.append(
                self._interned.setdefault(found, found) if any(found) else None
            )
        self.dirs = [per_class[c] for c in self._op_class]

    def _walk(self, stage: int) -> None:
        self._stage_dirs(stage)
        self._sync_func_results()
        ops = self.p.ops
        for _ in range(_MAX_WALKS):
            changed = False
            stack = (
                list(range(len(ops)))
                if _BOTTOM_UP
                else list(range(len(ops) - 1, -1, -1))
            )
            self.stack = stack
            in_stack = self.in_stack
            for i in range(len(ops)):
                in_stack[i] = 1
            visits = 0
            while stack:
                i = stack.pop()
                in_stack[i] = 0
                visits += 1
                if self._propagate_op(i, stage):
                    changed = True
            self.prov.visits += visits
            if not changed:
                break
        self._sync_func_results()

    def _push(self, i: int, current: int) -> None:
        if i < 0 or i == current or self.in_stack[i]:
            return
        self.in_stack[i] = 1
        self.stack.append(i)

    def _notify(self, v: int, current: int) -> None:
        clean = self.clean
        d = self.p.defs[v]
        if d >= 0:
            clean[d] = None
            self._push(d, current)
        for u in self.users[v]:
            clean[u] = None
            self._push(u, current)

    # -- one op -------------------------------------------------------------

    def _propagate_op(self, i: int, stage: int) -> bool:
        dirs = self.dirs[i]
        if dirs is not None and i in self._even and i not in self._uneven_ok:
            dirs = self._even_dirs(i, dirs)
        if dirs is None or self.clean[i] is dirs:
            return False
        op = self.p.ops[i]
        if op.kind is OpKind.MANUAL:
            changed = self._manual(i, op, dirs)
            if not changed:
                self.clean[i] = dirs
            return changed
        changed = self._apply_rule(
            op.operands, op.results, op.rule, dirs, op.elementwise, i, op
        )
        if not changed:
            self.clean[i] = dirs
        return changed

    def _apply_rule(
        self,
        operands: Sequence[int],
        results: Sequence[int],
        rule: ShardingRule,
        directions: Sequence[int],
        elementwise: bool,
        current: int,
        op: POp | None,
    ) -> bool:
        if not self.record:
            return self._apply_outcome(
                operands, results, rule, directions, elementwise, current, op
            )
        state = self.state
        mesh = self._common_mesh((*operands, *results))
        if mesh is None:
            return False
        if self._identity(rule):
            fill = _identity_fill(state, operands, results, directions)
            if fill is not None and not fill[1]:
                return False  # nothing to fill; with provenance, no shortcut
        sizes = rule.sizes
        ops_tp, res_tp = self._project_all(operands, results, rule)
        if op is not None:
            before = [
                [list(fsh.axes) for fsh in tp.fs.values()] for tp in (*ops_tp, *res_tp)
            ]
        if self.axis_origins is not None or self.o.edges:
            old_factors = [
                {f: tuple(fsh.axes) for f, fsh in tp.fs.items()}
                for tp in (*ops_tp, *res_tp)
            ]
        upd_ops, upd_res, per_factor, source = propagate_factors(
            ops_tp,
            res_tp,
            rule,
            directions,
            self.o.strategy,
            elementwise,
            self.o.conservative,
        )
        tensors = (*operands, *results)
        self._all_factors = (*rule.operands, *rule.results)
        if op is not None and rule.kinds:
            self._record_blocked(op, current, tensors, (*ops_tp, *res_tp))
        if op is not None and any(per_factor):
            self._record_conflicts(
                op, current, tensors, (*ops_tp, *res_tp), per_factor, before
            )
        changed = False
        for k, v in enumerate(operands):
            if upd_ops[k] and self._update(
                v,
                unproject(ops_tp[k], rule.operands[k], sizes, mesh),
                current,
                op,
                "backward",
                per_factor,
                source,
                tensors,
                rule.operands[k],
            ):
                changed = True
                if self.axis_origins is not None:
                    self._note_origins(k, ops_tp[k], tensors, old_factors)
        for k, v in enumerate(results):
            if upd_res[k] and self._update(
                v,
                unproject(res_tp[k], rule.results[k], sizes, mesh),
                current,
                op,
                "forward",
                per_factor,
                source,
                tensors,
                rule.results[k],
            ):
                changed = True
                if self.axis_origins is not None and op is not None:
                    self._note_origins(
                        len(operands) + k, res_tp[k], tensors, old_factors
                    )
        if changed and self.o.edges and (op is None or op.kind is not OpKind.BARRIER):
            self._note_edges(
                self._edge_owner(op, results),
                len(operands),
                (*ops_tp, *res_tp),
                old_factors,
            )
        if changed and op is None and self.axis_origins is not None:
            # A func result's origins are the returned value's, as a whole
            # (Shardy writes the result attribute from the returned value).
            ret, res = tensors
            self.axis_origins[res] = dict(self.axis_origins.get(ret, {}))
        return changed

    def _edge_owner(self, op: POp | None, results: Sequence[int]) -> tuple[object, ...]:
        """Where Shardy keeps a step's edges: the op; a manual computation's
        block argument or result (its data-flow edges); a function's result 0
        (every result's: Shardy's func results all land on index 0)."""
        if op is None:
            return ("result", self.p.first_result.get(results[0], results[0]))
        if op.kind is OpKind.EDGE:
            side, index = op.port
            if index >= 0:
                kind = "block_arg" if side == "operand" else "mc_result"
                return (kind, op.node, index)
            return ("edge", op.node)  # counted, not written
        return ("op", op.node)

    def _note_edges(
        self,
        owner: tuple[object, ...],
        n_operands: int,
        tps: Sequence[TP],
        old_factors: Sequence[Mapping[int, tuple[Ax, ...]]],
    ) -> None:
        """Shardy's propagation edges of one step: for each axis a tensor
        gained on a factor, the first tensor (operands, then results) whose
        axes for the factor began with the new ones is its source."""

        def label(j: int) -> str:
            return f"operand-{j}" if j < n_operands else f"result-{j - n_operands}"

        found: dict[tuple[Ax, int], list[int]] = {}
        for k, tp in enumerate(tps):
            dims = self._all_factors[k] if k < len(self._all_factors) else ()
            order = [f for dim in dims for f in dim] or list(tp.fs)
            starts = {dim[0] for dim in dims if dim}
            prev: tuple[Ax, int] | None = None  # last new axis and its source
            for f in order:
                if f in starts:
                    prev = None  # a new dim
                fsh = tp.fs.get(f)
                if fsh is None:
                    continue
                gain = _factor_gain(old_factors, k, f, tuple(fsh.axes))
                if gain is None:
                    continue
                src, intro = gain
                last = fsh.axes[-1]
                if prev is not None and _can_merge(prev[0], last):
                    # Sub-axes of one axis on consecutive factors of a dim
                    # are one axis of the value (Shardy merges the edge).
                    targets = found.get(prev, [])
                    if k in targets:
                        targets.remove(k)
                        if not targets:
                            del found[prev]
                    merged = (last[0], prev[0][1], prev[0][2] * last[2])
                    if intro and intro[-1] == last:
                        intro[-1] = merged
                prev = (last, src)
                if src < 0:
                    continue
                for a in intro:
                    targets = found.setdefault((a, src), [])
                    if k not in targets:
                        targets.append(k)
        if not found:
            return
        entries = [
            (a, label(src), [label(k) for k in sorted(targets)])
            for (a, src), targets in sorted(
                found.items(), key=lambda e: (e[0][0], e[0][1])
            )
        ]
        self.prov.edges.setdefault(owner, []).append((self.step, entries))
        self.step += 1

    def _note_origins(
        self,
        k: int,
        tp: TP,
        tensors: Sequence[int],
        old_factors: Sequence[Mapping[int, tuple[Ax, ...]]],
    ) -> None:
        """Shardy's sharding origins: each axis tensor `k` gained on a factor
        comes from the first tensor (operands, then results) whose axes for
        that factor began with the new ones, and takes that tensor's origin
        for the axis; an axis keeps the first origin it got."""
        assert self.axis_origins is not None
        mine = self.axis_origins.setdefault(tensors[k], {})
        added: list[Ax] = []
        for f, fsh in tp.fs.items():
            gain = _factor_gain(old_factors, k, f, tuple(fsh.axes))
            if gain is None or gain[0] < 0:
                continue
            src, intro = gain
            theirs = self.axis_origins.get(tensors[src], {})
            for a in intro:
                name = _origin_of(theirs, a)
                if name is not None and a not in mine:
                    mine[a] = name
                    added.append(a)
        # Sub-axes of one axis that factors next to each other gained merge
        # into the axis the value holds (Shardy merges them in its edges).
        sh = self.state[tensors[k]]
        for dim in sh.dims if sh is not None and added else ():
            for a in dim:
                if a in mine:
                    continue
                parts = [
                    b
                    for b in added
                    if b[0] == a[0] and a[1] <= b[1] and b[1] * b[2] <= a[1] * a[2]
                ]
                if parts:
                    mine[a] = mine[parts[0]]
                    for b in parts:
                        del mine[b]

    def _apply_outcome(
        self,
        operands: Sequence[int],
        results: Sequence[int],
        rule: ShardingRule,
        directions: Sequence[int],
        elementwise: bool,
        current: int,
        op: POp | None,
    ) -> bool:
        """`_apply_rule` without provenance. What a rule does depends only on
        the rule, the directions and the tensors' shardings, and in a real
        program the same combination recurs (every layer of a model): each
        distinct one is computed once (keyed also by which tensors are the
        same value)."""
        state = self.state
        # Rules are keyed by identity; holding each keeps its id unique.
        self._rules.setdefault(id(rule), rule)
        tensors = (*operands, *results)
        # Which positions name the same value matters too (`multiply %a, %a`).
        aliasing = (
            None
            if len(set(tensors)) == len(tensors)
            else tuple(tensors.index(v) for v in tensors)
        )
        key = (
            id(rule),
            directions,
            elementwise,
            aliasing,
            *[state[v] for v in tensors],
        )
        outcome = self._outcomes.get(key)
        if outcome is None:
            outcome = self._outcome(operands, results, rule, directions, elementwise)
            self._outcomes[key] = outcome
        if not outcome:
            return False
        changed = False
        for v, new in zip(tensors, outcome, strict=True):
            if new is not None and self._update(
                v, new, current, op, "", (), (), (), ()
            ):
                changed = True
        return changed

    def _outcome(
        self,
        operands: Sequence[int],
        results: Sequence[int],
        rule: ShardingRule,
        directions: Sequence[int],
        elementwise: bool,
    ) -> tuple[Sh | None, ...]:
        """The new sharding of each tensor (None: unchanged); () if none."""
        state = self.state
        tensors = (*operands, *results)
        mesh = self._common_mesh(tensors)
        if mesh is None:
            return ()
        out: list[Sh | None] = [None] * len(tensors)
        if self._identity(rule):
            fill = _identity_fill(state, operands, results, directions)
            if fill is not None:
                dims, slots = fill
                if not slots:
                    return ()
                new = Sh(mesh, dims, (False,) * len(dims))
                for v in slots:
                    out[tensors.index(v)] = new
                return tuple(out)
        sizes = rule.sizes
        ops_tp, res_tp = self._project_all(operands, results, rule)
        upd_ops, upd_res, _, _ = propagate_factors(
            ops_tp,
            res_tp,
            rule,
            directions,
            self.o.strategy,
            elementwise,
            self.o.conservative,
        )
        for k in range(len(operands)):
            if upd_ops[k]:
                out[k] = unproject(ops_tp[k], rule.operands[k], sizes, mesh)
        n = len(operands)
        for k in range(len(results)):
            if upd_res[k]:
                out[n + k] = unproject(res_tp[k], rule.results[k], sizes, mesh)
        return tuple(out) if any(x is not None for x in out) else ()

    def _common_mesh(self, tensors: Sequence[int]) -> str | None:
        """The one mesh of the tensors' shardings when some tensor has an
        axis to propagate; None when nothing can propagate."""
        mesh: str | None = None
        sharded = False
        for v in tensors:
            sh = self.state[v]
            if sh is not None and sh.mesh in self.p.maximal:
                return None
            if sh is None or not self.p.meshes.get(sh.mesh):
                # A sharding on a mesh with no axes (Shardy's empty mesh)
                # takes whichever mesh propagation brings.
                continue
            if mesh is None:
                mesh = sh.mesh
            elif sh.mesh != mesh and self.p.same_mesh.get(
                sh.mesh, sh.mesh
            ) != self.p.same_mesh.get(mesh, mesh):
                return None
            if not sharded and sh.has_axes():
                sharded = True
        return mesh if sharded else None

    def _project_all(
        self, operands: Sequence[int], results: Sequence[int], rule: ShardingRule
    ) -> tuple[list[TP], list[TP]]:
        state, sizes = self.state, rule.sizes
        return (
            [
                project(state[v], rule.operands[k], sizes)
                for k, v in enumerate(operands)
            ],
            [project(state[v], rule.results[k], sizes) for k, v in enumerate(results)],
        )

    def _manual(self, i: int, op: POp, dirs: Sequence[int]) -> bool:
        """Propagates the free axes between a global boundary sharding and
        the local value inside a manual computation."""
        outer, inner = op.operands[0], op.results[0]
        glob = self.state[outer]
        local = self.state[inner]
        mesh = glob.mesh if glob is not None else local.mesh if local else None
        if mesh is None or (local is not None and local.mesh != mesh):
            return False
        free = _strip_axes(glob, op.manual) if glob is not None else None
        rule = op.rule
        sizes = rule.sizes
        tps = [project(free, rule.operands[0], sizes)]
        res = [project(local, rule.results[0], sizes)]
        upd_ops, upd_res, _, _ = propagate_factors(
            tps, res, rule, dirs, self.o.strategy, False, self.o.conservative
        )
        changed = False
        if upd_res[0]:
            new_local = unproject(res[0], rule.results[0], sizes, mesh)
            old_local = local
            if self._update(inner, new_local, i, op, "", (), (), (), ()):
                changed = True
                self._copy_origins(outer, inner)
                if self.o.edges:
                    self._note_boundary_edges(op, old_local, new_local)
        if upd_ops[0]:
            new_free = unproject(tps[0], rule.operands[0], sizes, mesh)
            new_glob = _with_manual(glob, new_free, op.manual)
            if self._update(outer, new_glob, i, op, "", (), (), (), ()):
                changed = True
                self._copy_origins(inner, outer)
        return changed

    def _note_boundary_edges(self, op: POp, old: Sh | None, new: Sh) -> None:
        """A manual computation's result edge carrying axes from the result
        into the body (Shardy: from result-0 to the returned operand-0);
        the other boundaries are no step of Shardy's (its block arguments
        and results are the values its in/out shardings lay out)."""
        side, index = op.port
        if side != "result":
            return
        had = {a for dim in (old.dims if old is not None else ()) for a in dim}
        axes = sorted({a for dim in new.dims for a in dim} - had)
        if not axes:
            return
        entries = [(a, "result-0", ["operand-0"]) for a in axes]
        owner = ("mc_result", op.node, index)
        self.prov.edges.setdefault(owner, []).append((self.step, entries))
        self.step += 1

    def _copy_origins(self, src: int, dst: int) -> None:
        """`dst` gained axes `src` has (across a manual computation's
        boundary): each takes `src`'s origin."""
        if self.axis_origins is None:
            return
        theirs = self.axis_origins.get(src, {})
        mine = self.axis_origins.setdefault(dst, {})
        sh = self.state[dst]
        for dim in sh.dims if sh is not None else ():
            for a in dim:
                if a not in mine:
                    name = _origin_of(theirs, a)
                    if name is not None:
                        mine[a] = name

    def _update(
        self,
        v: int,
        new: Sh,
        current: int,
        op: POp | None,
        direction: str,
        per_factor: Sequence[Sequence[Ax]],
        source: Sequence[int],
        tensors: Sequence[int],
        factors: Sequence[tuple[int, ...]],
    ) -> bool:
        old = self.state[v]
        if self.o.conservative:
            new = _without_new_sub_axes(old, new, self.p.meshes.get(new.mesh, {}))
        ban = self.p.forbidden.get(v)
        if ban:
            new = _without_axes(new, ban)
        if new == old or (old is None and not new.has_axes()):
            return False
        self.state[v] = new
        self._notify(v, current)
        if self.record:
            self._record_step(
                v, old, new, op, current, direction, source, tensors, factors
            )
        group = self.group_of.get(v)
        if group is not None:
            for w in group:
                if w == v or self.state[w] == new:
                    continue
                prev = self.state[w]
                self.state[w] = new
                self._notify(w, current)
                if self.record:
                    self._record_group(w, prev, new, v)
        return True

    # -- func results -------------------------------------------------------

    def _sync_func_results(self) -> None:
        for ret, res in self.p.func_results:
            rule = identity_rule(self.p.shapes[ret], 1)
            self._apply_rule(
                (ret,), (res,), rule, (BOTH,) * rule.num_factors, False, -1, None
            )

    # -- provenance ---------------------------------------------------------

    def _record_step(
        self,
        v: int,
        old: Sh | None,
        new: Sh,
        op: POp | None,
        current: int,
        direction: str,
        source: Sequence[int],
        tensors: Sequence[int],
        factors: Sequence[tuple[int, ...]],
    ) -> None:
        for d, axes in enumerate(new.dims):
            if old is not None and old.dims[d] == axes:
                continue
            if not axes:
                continue
            src = -1
            src_dim = -1
            for f in factors[d] if d < len(factors) else ():
                t = source[f] if f < len(source) else -1
                if t >= 0 and tensors[t] != v:
                    src = tensors[t]
                    src_dim = next(
                        (k for k, fs in enumerate(self._all_factors[t]) if f in fs), -1
                    )
                    break
            how = direction
            if op is None:
                how = "func-result"
            elif src >= 0 and op is not None:
                src_is_result = (
                    src in self.p.ops[current].results if current >= 0 else False
                )
                v_is_result = v in op.results
                if v_is_result and not src_is_result:
                    how = "forward"
                elif not v_is_result and src_is_result:
                    how = "backward"
                elif not v_is_result:
                    how = "sideways"
            if op is not None and op.kind is OpKind.EDGE:
                how = f"{how} (data-flow edge)"
            elif op is not None and op.kind is OpKind.MANUAL:
                how = "across the manual computation boundary (free axes)"
                if src < 0:
                    # the boundary's other side: the in/out sharding or the
                    # value inside
                    inner = op.results[0]
                    src = op.operands[0] if v == inner else inner
                    src_dim = d
            self.prov.steps.append(
                Step(
                    v,
                    d,
                    axes,
                    current,
                    op.name if op is not None else "func result",
                    op.loc if op is not None else UNKNOWN_LOC,
                    how,
                    src,
                    self.stage_name,
                    src_dim,
                )
            )

    def _record_group(self, w: int, old: Sh | None, new: Sh, src: int) -> None:
        for d, axes in enumerate(new.dims):
            if (old is not None and old.dims[d] == axes) or not axes:
                continue
            self.prov.steps.append(
                Step(
                    w,
                    d,
                    axes,
                    -1,
                    "sdy.sharding_group",
                    UNKNOWN_LOC,
                    "group",
                    src,
                    self.stage_name,
                    d,
                )
            )

    def _record_conflicts(
        self,
        op: POp,
        current: int,
        tensors: Sequence[int],
        tps: Sequence[TP],
        per_factor: Sequence[Sequence[Ax]],
        before: Sequence[Sequence[list[Ax]]],
    ) -> None:
        del before
        for f, chosen in enumerate(per_factor):
            cands: list[tuple[int, Axes]] = []
            for t, tp in enumerate(tps):
                fsh = tp.fs.get(f)
                if fsh is None or not fsh.axes:
                    continue
                cands.append((tensors[t], tuple(fsh.axes)))
            distinct = {c for _, c in cands}
            incompatible = any(
                list_prefix_status(a, b) == 0 and list_prefix_status(b, a) == 0
                for a in distinct
                for b in distinct
            )
            # the same axis wanted by two factors: only one of them can get it
            across = any(
                g != f and any(a[0] == b[0] for a in chosen for b in other)
                for g, other in enumerate(per_factor)
            )
            if not incompatible and not across:
                continue
            if across:
                for g, other in enumerate(per_factor):
                    if g == f or not any(a[0] == b[0] for a in chosen for b in other):
                        continue
                    for t, tp in enumerate(tps):
                        gsh = tp.fs.get(g)
                        if gsh is not None and gsh.axes:
                            cands.append((tensors[t], tuple(gsh.axes)))
            final = tuple(
                (tensors[t], tuple(tp.fs[f].axes))
                for t, tp in enumerate(tps)
                if f in tp.fs
            )
            del final
            how = (
                "the larger source tensor's factor wins, others keep what does not "
                "conflict (aggressive); compatible axes"
                if self.o.strategy is Strategy.AGGRESSIVE
                else "only axes no tensor conflicts with are propagated (basic); "
                "compatible axes before that"
            )
            self.prov.conflicts.append(
                Conflict(
                    current,
                    op.name,
                    op.loc,
                    f,
                    tuple(cands),
                    tuple(chosen),
                    how,
                    self.stage_name,
                )
            )

    def _record_blocked(
        self, op: POp, current: int, tensors: Sequence[int], tps: Sequence[TP]
    ) -> None:
        """A blocked factor with axes on some tensors and not on others: say
        once that propagation stopped there, and why."""
        for f in op.rule.factors_of_kind(FactorKind.BLOCKED):
            having = [
                (tensors[t], tuple(tp.fs[f].axes))
                for t, tp in enumerate(tps)
                if f in tp.fs
            ]
            cands = tuple((v, a) for v, a in having if a)
            if not cands or len({a for _, a in having}) == 1:
                continue
            key = (current, f, cands)
            if key in self._blocked_seen:
                continue
            self._blocked_seen.add(key)
            self.prov.conflicts.append(
                Conflict(
                    current,
                    op.name,
                    op.loc,
                    f,
                    cands,
                    (),
                    "a blocked factor (its size differs between operand and "
                    "result): nothing propagates across it",
                    self.stage_name,
                )
            )


def _factor_gain(
    old_factors: Sequence[Mapping[int, tuple[Ax, ...]]],
    k: int,
    f: int,
    new: tuple[Ax, ...],
) -> tuple[int, list[Ax]] | None:
    """What tensor `k` gained on factor `f` in one step, as Shardy's debug
    handler reads it: (the first other tensor, operands then results, whose
    old axes for `f` began with `new` (-1 if none), the axes new to `k`: those
    past its old ones, and its last old axis where that grew into a longer
    sub-axis); None if nothing changed."""
    old = old_factors[k].get(f, ())
    if new == old or not new:
        return None
    src = next(
        (
            j
            for j, olds in enumerate(old_factors)
            if j != k and olds.get(f, ())[: len(new)] == new
        ),
        -1,
    )
    start = len(old)
    if old and old[-1] != new[len(old) - 1]:
        start -= 1
    return src, list(new[start:])


def _can_merge(a: Ax, b: Ax) -> bool:
    """`b` continues sub-axis `a` of the same axis (`"c":(1)4` then `"c":(4)2`)."""
    return a[0] == b[0] and a[1] * a[2] == b[1]


def _origin_of(origins: Mapping[Ax, str], a: Ax) -> str | None:
    """The origin of axis `a` in a tensor's origins: its own entry, else the
    entry of an axis of the same name whose range holds it."""
    found = origins.get(a)
    if found is not None:
        return found
    for b, name in origins.items():
        if b[0] == a[0] and b[1] <= a[1] and a[1] * a[2] <= b[1] * b[2]:
            return name
    for b, name in origins.items():
        if b[0] == a[0]:
            return name
    return None


def propagate(
    problem: Problem, options: Options = Options(), record: bool = True
) -> tuple[list[Sh | None], Provenance]:
    """Propagates to a fixed point; returns the final slot shardings and provenance."""
    prop = Propagator(problem, options, record)
    state = prop.run()
    return state, prop.prov


def mesh_sizes(problem: Problem, mesh: str) -> Mapping[str, int]:
    return problem.meshes.get(mesh, {})
