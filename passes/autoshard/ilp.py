"""The one module that knows the solver: a `Problem` as a mixed integer
program for HiGHS (through scipy, which jax already installs).

Variables: s[g, i] in {0, 1}, one strategy per group (sum_i s[g, i] = 1);
for each edge whose classes are not trivial, e[a, b] in [0, 1] with
sum_b e[a, b] = sum of s over the producer's strategies in class a and
sum_a e[a, b] likewise for the consumer: with one-hot s these force
e[a, b] = s_a * s_b, so e can stay continuous. An edge with one class on a
side is a cost on the other side's strategies. Memory points are rows
sum bytes * s <= budget. Costs are in microseconds for the solver.
HiGHS runs single-threaded and is deterministic: the same problem gives the
same choice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from meshjit.passes.autoshard.problem import FanOut, Problem

_SCALE = 1e6  # seconds -> microseconds


@dataclass(frozen=True, slots=True)
class Solution:
    choice: tuple[int, ...]
    objective: float  # seconds, recomputed from the problem
    status: str  # "optimal", "time-limit" (best found), "infeasible"
    gap: float  # relative gap to the solver's bound (0 when optimal)
    seconds: float  # solve time
    variables: int
    rows: int


@dataclass(frozen=True, slots=True)
class _LpResult:
    """An integral LP optimum, shaped as milp's result."""

    x: np.ndarray
    status: int = 0
    mip_gap: float = 0.0
    message: str = "the LP relaxation is integral"


class _Model:
    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.offset: list[int] = []
        n = 0
        for c in problem.costs:
            self.offset.append(n)
            n += len(c)
        self.c = [cost * _SCALE for c in problem.costs for cost in c]
        self.integer = [1] * n
        self.rows: list[tuple[list[int], list[float], float, float]] = []
        self.peak: int | None = None  # the peak variable when minimising it
        self.lp_first = True  # try the LP relaxation before the integer search
        for g, c in enumerate(problem.costs):
            cols = [self.offset[g] + i for i in range(len(c))]
            self.rows.append((cols, [1.0] * len(c), 1.0, 1.0))
        for e in problem.edges:
            self._edge(e.src, e.dst, e.src_class, e.dst_class, e.cost)
        for fan in problem.fanouts:
            self._fanout(fan)
        for tie in problem.ties:
            # per layout class: a's strategies giving it == b's giving it
            for k in sorted({*tie.a_class, *tie.b_class}):
                cols = [
                    self.var(tie.a, i) for i, cls in enumerate(tie.a_class) if cls == k
                ]
                vals = [1.0] * len(cols)
                for j, cls in enumerate(tie.b_class):
                    if cls == k:
                        cols.append(self.var(tie.b, j))
                        vals.append(-1.0)
                self.rows.append((cols, vals, 0.0, 0.0))
        for shared in problem.shared:
            # z >= (sum of a group's member strategies) for every group: with
            # z in [0, 1] minimised, z = 1 exactly when a member is chosen
            z = self.new(shared.seconds * _SCALE)
            by_group: dict[int, list[int]] = {}
            for g, i in shared.members:
                by_group.setdefault(g, []).append(self.var(g, i))
            for cols in by_group.values():
                vals = [1.0] + [-1.0] * len(cols)
                self.rows.append(([z, *cols], vals, 0.0, np.inf))

    def var(self, group: int, strategy: int) -> int:
        return self.offset[group] + strategy

    def new(self, cost: float, integer: bool = False) -> int:
        self.c.append(cost)
        self.integer.append(1 if integer else 0)
        return len(self.c) - 1

    def _edge(
        self,
        src: int,
        dst: int,
        src_class: tuple[int, ...],
        dst_class: tuple[int, ...],
        cost: tuple[tuple[float, ...], ...],
    ) -> None:
        n_a, n_b = len(cost), len(cost[0]) if cost else 0
        if n_a == 0 or n_b == 0:
            return
        if n_b == 1 or all(len(set(row)) == 1 for row in cost):
            for i, a in enumerate(src_class):  # cost depends on the producer only
                self.c[self.var(src, i)] += cost[a][0] * _SCALE
            return
        if n_a == 1 or all(
            len({cost[a][b] for a in range(n_a)}) == 1 for b in range(n_b)
        ):
            for j, b in enumerate(dst_class):
                self.c[self.var(dst, j)] += cost[0][b] * _SCALE
            return
        self._marginals(src, src_class, dst, dst_class, cost)

    def _marginals(
        self,
        src: int,
        src_class: tuple[int, ...],
        dst: int,
        dst_class: tuple[int, ...],
        cost: tuple[tuple[float, ...], ...] | None = None,
    ) -> dict[tuple[int, int], int]:
        """Edge variables e[a, b] for the classes b `dst_class` uses, with
        Alpa's marginal rows: sum_b e[a, b] = the producer's strategies in
        class a, sum_a e[a, b] = the consumer's in class b (`cost` prices
        them; None: no cost)."""
        n_a = max(src_class) + 1
        used_b = sorted(set(dst_class))
        e = {
            (a, b): self.new(0.0 if cost is None else cost[a][b] * _SCALE)
            for a in range(n_a)
            for b in used_b
        }
        for a in range(n_a):
            cols = [e[a, b] for b in used_b]
            vals = [1.0] * len(cols)
            for i, k in enumerate(src_class):
                if k == a:
                    cols.append(self.var(src, i))
                    vals.append(-1.0)
            self.rows.append((cols, vals, 0.0, 0.0))
        for b in used_b:
            cols = [e[a, b] for a in range(n_a)]
            vals = [1.0] * n_a
            for j, k in enumerate(dst_class):
                if k == b:
                    cols.append(self.var(dst, j))
                    vals.append(-1.0)
            self.rows.append((cols, vals, 0.0, 0.0))
        return e

    def _fanout(self, fan: FanOut) -> None:
        """Per reader g, edge variables e[g, a, b] under the marginal rows
        (as `_edge`, no cost); u[a, b] >= e[g, a, b] for every reader, priced
        once: b is made from class a when any reader wants it (with one-hot
        strategies u = S[a] * OR_g t[g, b]; the relaxation stays as tight as
        the edges')."""
        u: dict[tuple[int, int], int] = {}
        for g, want in fan.readers:
            e = self._marginals(fan.src, fan.src_class, g, want)
            for (a, b), var in e.items():
                cost = fan.cost[a][b]
                if cost <= 0.0:
                    continue
                if (a, b) not in u:
                    u[a, b] = self.new(cost * _SCALE)
                self.rows.append(([u[a, b], var], [1.0, -1.0], 0.0, np.inf))

    def memory_rows(self, budget: float | None, peak_var: int | None) -> None:
        """Rows bounding each memory point by `budget`, or by the variable
        `peak_var` (minimising the peak)."""
        for p in self.problem.memory:
            most = p.fixed + sum(max(b) for _, b in p.terms)
            if budget is not None and most <= budget:
                continue  # cannot bind
            cols: list[int] = []
            vals: list[float] = []
            for g, b in p.terms:
                for i, nbytes in enumerate(b):
                    if nbytes:
                        cols.append(self.var(g, i))
                        vals.append(nbytes)
            if peak_var is not None:
                cols.append(peak_var)
                vals.append(-1.0)
                self.rows.append((cols, vals, -np.inf, -p.fixed))
            else:
                assert budget is not None
                self.rows.append((cols, vals, -np.inf, budget - p.fixed))

    def solve(self, time_limit: float) -> tuple[object, float]:
        # scipy is imported here, not with meshjit: only auto-sharding needs it
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import coo_array

        n = len(self.c)
        data: list[float] = []
        rows: list[int] = []
        cols: list[int] = []
        lb: list[float] = []
        ub: list[float] = []
        for r, (cs, vs, lo, hi) in enumerate(self.rows):
            rows.extend([r] * len(cs))
            cols.extend(cs)
            data.extend(vs)
            lb.append(lo)
            ub.append(hi)
        a = coo_array((data, (rows, cols)), shape=(len(self.rows), n)).tocsr()
        start = time.perf_counter()
        if self.lp_first:
            found = self._relaxation(a, np.array(lb), np.array(ub), time_limit)
            if found is not None:
                return found, time.perf_counter() - start
        res = milp(
            np.array(self.c),
            integrality=np.array(self.integer),
            bounds=Bounds(np.zeros(n), self._upper(n)),
            constraints=[LinearConstraint(a, np.array(lb), np.array(ub))],
            options={"time_limit": time_limit, "disp": False, "mip_rel_gap": 1e-6},
        )
        return res, time.perf_counter() - start

    def _relaxation(
        self, a: Any, lb: np.ndarray, ub: np.ndarray, time_limit: float
    ) -> Any:
        """The LP relaxation (HiGHS's dual simplex), when its optimum is
        integral: it is then the integer program's optimum too. With Alpa's
        marginal rows the relaxation is often integral (every bench model
        without a memory budget), and skipping the integer search saves its
        presolve and heuristics (7 s -> 4 s on GPT-2 over 2 x 4). None when
        it is fractional or not solved."""
        from scipy.optimize import linprog
        from scipy.sparse import vstack

        eq = lb == ub
        upper_rows = ~eq & np.isfinite(ub)
        lower_rows = ~eq & np.isfinite(lb)
        parts = [a[upper_rows], -a[lower_rows]]
        bounds = np.concatenate([ub[upper_rows], -lb[lower_rows]])
        res = linprog(
            np.array(self.c),
            A_ub=vstack(parts) if bounds.size else None,
            b_ub=bounds if bounds.size else None,
            A_eq=a[eq],
            b_eq=lb[eq],
            bounds=list(
                zip(np.zeros(len(self.c)), self._upper(len(self.c)), strict=True)
            ),
            method="highs-ds",
            options={"time_limit": time_limit},
        )
        if res.status != 0 or res.x is None:
            return None
        binary = np.array(self.integer, dtype=bool)
        values = res.x[binary]
        if np.any(np.minimum(values, 1.0 - values) > 1e-7):
            return None
        return _LpResult(np.where(binary, np.round(res.x), res.x))

    def _upper(self, n: int) -> np.ndarray:
        upper = np.ones(n)
        if self.peak is not None:
            upper[self.peak] = np.inf
        return upper

    def choice(self, x: np.ndarray) -> tuple[int, ...]:
        out = []
        for g, c in enumerate(self.problem.costs):
            values = [x[self.var(g, i)] for i in range(len(c))]
            out.append(int(np.argmax(values)))
        return tuple(out)


def solve(
    problem: Problem, time_limit: float = 30.0, budget: float | None = None
) -> Solution:
    """The cheapest choice whose memory points stay within `budget` bytes
    per device (None: no limit). A solve stopped by `time_limit` returns the
    best choice found (status "time-limit"); an infeasible budget returns
    status "infeasible" and no choice."""
    model = _Model(problem)
    if budget is not None:
        model.memory_rows(budget, None)
        model.lp_first = False  # budget rows make the relaxation fractional
    res, seconds = model.solve(time_limit)
    status = int(getattr(res, "status", 4))
    x = getattr(res, "x", None)
    nvars, nrows = len(model.c), len(model.rows)
    if status == 2 or (x is None and status in (0, 1)):
        kind = "infeasible" if status == 2 else "time-limit"
        return Solution((), float("inf"), kind, float("inf"), seconds, nvars, nrows)
    if x is None:
        raise RuntimeError(
            f"auto-sharding: the solver failed ({getattr(res, 'message', '')})"
        )
    choice = model.choice(x)
    gap = float(getattr(res, "mip_gap", 0.0) or 0.0)
    kind = "optimal" if status == 0 else "time-limit"
    return Solution(choice, problem.objective(choice), kind, gap, seconds, nvars, nrows)


def min_peak(problem: Problem, time_limit: float = 30.0) -> float:
    """The smallest peak of per-device memory any choice reaches (bytes)."""
    model = _Model(problem)
    model.c = [0.0] * len(model.c)
    model.peak = model.new(1.0)
    model.memory_rows(None, model.peak)
    model.lp_first = False
    res, _ = model.solve(time_limit)
    x = getattr(res, "x", None)
    if x is None:
        return float("nan")
    return problem.peak(model.choice(x))[0]
