"""Mesh axes as `(name, pre_size, size)` triples, and how they compare.

A whole axis `"x"` of size 4 is `("x", 1, 4)`; the sub-axis `"x":(2)2` is
`("x", 2, 2)`. Carrying the size in the triple keeps every function here free of
the mesh, so the hot loops of propagation need no lookups.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypeAlias

from meshjit.dialects.sdy_text import print_string

Ax: TypeAlias = tuple[str, int, int]
Axes: TypeAlias = tuple[Ax, ...]


def prefix_of(a: Ax, b: Ax) -> bool:
    """`a` is `b` or its major part (same start, a size dividing b's)."""
    return a[0] == b[0] and a[1] == b[1] and b[2] % a[2] == 0


def strict_prefix_of(a: Ax, b: Ax) -> bool:
    return prefix_of(a, b) and a[2] < b[2]


def contains(a: Ax, b: Ax) -> bool:
    """`b` lies inside `a`."""
    return a[0] == b[0] and a[1] <= b[1] and b[1] * b[2] <= a[1] * a[2]


def overlaps(a: Ax, b: Ax) -> bool:
    """`a` and `b` cannot both shard one tensor: they share devices, or they
    are sub-axes of one axis that no single split of it holds both of (`"a":(1)2`
    and `"a":(3)2` of a 6: the first wants 6 = 2 x 3, the second 3 x 2)."""
    # A size-1 axis spans no range of devices, yet is used once per tensor.
    if a[0] != b[0]:
        return False
    if a == b or (a[1] < b[1] * b[2] and b[1] < a[1] * a[2]):
        return True
    lo, hi = (a, b) if a[1] < b[1] else (b, a)
    return hi[1] % (lo[1] * lo[2]) != 0


def prefix_without_overlap(a: Ax, b: Ax) -> Ax | None:
    """The longest major part of `a` that does not overlap `b` (None if empty)."""
    if not overlaps(a, b):
        return a
    if b[1] > a[1] and b[1] % a[1] == 0:
        # the largest major part of `a` that ends where a split can put `b`
        size = math.gcd(a[2], b[1] // a[1])
        if size > 1:
            return (a[0], a[1], size)
    return None


def prefix_without_overlaps(a: Ax | None, others: Sequence[Ax]) -> Ax | None:
    for b in others:
        if a is None:
            return None
        a = prefix_without_overlap(a, b)
    return a


def append_or_merge(axes: list[Ax], a: Ax) -> None:
    """Appends `a`, merging it into the last axis when they are consecutive."""
    if axes:
        last = axes[-1]
        if last[0] == a[0] and last[1] * last[2] == a[1]:
            axes[-1] = (a[0], last[1], last[2] * a[2])
            return
    axes.append(a)


def total_size(axes: Sequence[Ax]) -> int:
    n = 1
    for a in axes:
        n *= a[2]
    return n


def list_prefix_status(first: Sequence[Ax], second: Sequence[Ax]) -> int:
    """0: not a prefix, 1: strict prefix, 2: equal (Shardy's `isAxisListPrefixOf`)."""
    if not first and not second:
        return 2
    if not first:
        return 1
    if len(first) > len(second):
        return 0
    n = len(first)
    for i in range(n - 1):
        if first[i] != second[i]:
            return 0
    if len(first) == len(second) and first[-1] == second[-1]:
        return 2
    if prefix_of(first[n - 1], second[n - 1]):
        return 1
    return 0


def is_strict_prefix(first: Sequence[Ax], second: Sequence[Ax]) -> bool:
    return list_prefix_status(first, second) == 1


def axis_text(a: Ax, mesh: Mapping[str, int]) -> str:
    """`"x"` or `"x":(2)2`, as Shardy prints it."""
    name = print_string(a[0])
    if a[1] == 1 and a[2] == mesh.get(a[0], a[2]):
        return name
    return f"{name}:({a[1]}){a[2]}"
