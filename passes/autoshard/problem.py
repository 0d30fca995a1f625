"""The auto-sharding problem as plain data: decision groups with a cost per
strategy, edges with a cost per pair of layout classes, and memory points.

One group is one decision: an op (with the ops that follow it and the
identical layers tied to it) picks one strategy. An edge is a value that one
group produces and another consumes: producer strategies fall into classes
by the layout they leave the value in, consumer strategies by the layout
they want it in, and `cost[a][b]` is the reshard from class a to class b. A
memory point is one moment of the program: the per-device bytes of the
values live then, per strategy of the group that decides each value's
layout. Nothing here knows MLIR or the solver.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Edge:
    src: int  # producing group
    dst: int  # consuming group (never src: such an edge is folded into costs)
    src_class: tuple[int, ...]  # per src strategy: its layout class
    dst_class: tuple[int, ...]  # per dst strategy
    cost: tuple[tuple[float, ...], ...]  # [src class][dst class], seconds


@dataclass(frozen=True, slots=True)
class MemoryPoint:
    terms: tuple[tuple[int, tuple[float, ...]], ...]  # (group, bytes per strategy)
    fixed: float  # bytes no decision changes
    where: str  # the op the point sits at, for messages


@dataclass(frozen=True, slots=True)
class Shared:
    """A cost paid once if any of its (group, strategy) members is chosen:
    the launch latency of independent collectives combined into one."""

    seconds: float
    members: tuple[tuple[int, int], ...]
    what: str = ""


@dataclass(frozen=True, slots=True)
class FanOut:
    """One value several groups read: each layout they want it in is made
    from the producer's once (the partitioner reuses a reshard for every
    later use), not once per reader. Producer strategies fall into classes a
    by the layout they leave the value in; each reader strategy wants layout
    b; `cost[a][b]` is the reshard from a to b."""

    src: int
    src_class: tuple[int, ...]
    readers: tuple[tuple[int, tuple[int, ...]], ...]  # (group, wanted b per strategy)
    cost: tuple[tuple[float, ...], ...]

    def seconds(self, choice: Sequence[int]) -> float:
        a = self.src_class[choice[self.src]]
        wanted = {want[choice[g]] for g, want in self.readers}
        return sum(self.cost[a][b] for b in wanted)


@dataclass(frozen=True, slots=True)
class Tie:
    """Two values that must be laid out alike (a donated argument and the
    result that reuses its buffer): per strategy of each group, the class
    of the layout it gives its value, classes counted over both."""

    a: int
    a_class: tuple[int, ...]
    b: int
    b_class: tuple[int, ...]

    def holds(self, choice: Sequence[int]) -> bool:
        return self.a_class[choice[self.a]] == self.b_class[choice[self.b]]


@dataclass(frozen=True, slots=True)
class Problem:
    costs: tuple[tuple[float, ...], ...]  # per group, per strategy: seconds
    edges: tuple[Edge, ...]
    memory: tuple[MemoryPoint, ...]
    shared: tuple[Shared, ...] = ()
    fanouts: tuple[FanOut, ...] = ()
    ties: tuple[Tie, ...] = ()

    def objective(self, choice: Sequence[int]) -> float:
        """Estimated seconds of a choice (one strategy per group)."""
        total = sum(c[i] for c, i in zip(self.costs, choice, strict=True))
        for e in self.edges:
            total += e.cost[e.src_class[choice[e.src]]][e.dst_class[choice[e.dst]]]
        for s in self.shared:
            if any(choice[g] == i for g, i in s.members):
                total += s.seconds
        for f in self.fanouts:
            total += f.seconds(choice)
        return total

    def peak(self, choice: Sequence[int]) -> tuple[float, str]:
        """The largest memory point under a choice, and where it is."""
        best, where = 0.0, ""
        for p in self.memory:
            total = p.fixed + sum(b[choice[g]] for g, b in p.terms)
            if total > best:
                best, where = total, p.where
        return best, where


def brute_force(
    problem: Problem, budget: float | None = None
) -> tuple[float, tuple[int, ...]]:
    """The optimum by trying every combination (tests, small problems)."""
    best: tuple[float, tuple[int, ...]] = (math.inf, ())
    for choice in itertools.product(*(range(len(c)) for c in problem.costs)):
        if budget is not None and problem.peak(choice)[0] > budget:
            continue
        if not all(t.holds(choice) for t in problem.ties):
            continue
        value = problem.objective(choice)
        if value < best[0] - 1e-15:
            best = (value, choice)
    return best
