"""What auto-sharding chose: per decided value its layout, the estimated
cost of its op, and the next-best layout; the attributes to write back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from meshjit.compiler.diagnostics import SourceLoc
from meshjit.compiler.graph import AttrPlan
from meshjit.dialects.reshard import Layout
from meshjit.dialects.sdy_text import print_sharding, print_sharding_per_value
from meshjit.passes.autoshard.build import Built, Member, layout_sharding
from meshjit.passes.autoshard.ilp import Solution
from meshjit.passes.partitioner.layouts import layout_text
from meshjit.passes.partitioner.memory import fmt_bytes


@dataclass(frozen=True, slots=True)
class Choice:
    """One decided member: what it is, the strategy chosen and its estimated
    seconds (the op's own work and collectives), and the best strategy that
    lays its results out differently, with how much more the whole program
    would cost with it (every other decision kept)."""

    what: str
    loc: SourceLoc
    results: tuple[Layout | None, ...]
    strategy: str
    seconds: float
    next_best: str  # "" when no other layout exists
    next_delta: float  # seconds more than the chosen one


def _fmt_seconds(s: float) -> str:
    return f"{s * 1e6:.1f} us"


@dataclass
class AutoShardResult:
    built: Built
    solution: Solution
    budget: float | None
    build_seconds: float

    @property
    def choice(self) -> tuple[int, ...]:
        return self.solution.choice

    def peak(self) -> tuple[float, str]:
        return self.built.problem.peak(self.choice)

    def layout(self, vid: int) -> Layout | None:
        return self.built.layout(vid, self.choice)

    def arg_layouts(self) -> list[Layout | None]:
        return [self.layout(v) for v in self.built.args]

    def result_layouts(self) -> list[Layout | None]:
        out = []
        for vid in self.built.returned:
            lay = self.layout(vid)
            if lay is None:
                shape = self.built.graph.value(vid).shape
                lay = None if shape is None else tuple(() for _ in shape)
            out.append(lay)
        return out

    # -- the attributes -----------------------------------------------------------

    def plan(self) -> AttrPlan:
        """Closed shardings on @main's undecided arguments and results and on
        every op of @main whose results the search laid out."""
        b, plan = self.built, AttrPlan()
        name = b.mesh_name
        per_node: dict[int, dict[int, Layout | None]] = {}
        for member in b.members:
            if member.node < 0 or not member.auto:
                continue
            per_node.setdefault(member.node, {})
            for vid in member.results:
                per_node[member.node][vid] = self.layout(vid)
        for nid, lays in per_node.items():
            results = b.graph.node(nid).results
            chosen = [lays.get(v) for v in results]
            if any(lay is None for lay in chosen):
                continue
            text = print_sharding_per_value(
                [layout_sharding(name, lay) for lay in chosen if lay is not None]
            )
            plan.set_op(nid, "sdy.sharding", text)
        for i, (auto, lay) in enumerate(
            zip(b.auto_args, self.arg_layouts(), strict=True)
        ):
            if auto and lay is not None:
                text = print_sharding(layout_sharding(name, lay))
                plan.set_arg(b.main.id, i, "sdy.sharding", text)
        for i, (auto, lay) in enumerate(
            zip(b.auto_results, self.result_layouts(), strict=True)
        ):
            if auto and lay is not None:
                text = print_sharding(layout_sharding(name, lay))
                plan.set_result(b.main.id, i, "sdy.sharding", text)
        return plan

    # -- explanations -------------------------------------------------------------

    def choices(self) -> list[Choice]:
        """Every member the search decided, in program order."""
        b = self.built
        incident: dict[int, list[int]] = {}
        for k, e in enumerate(b.problem.edges):
            incident.setdefault(e.src, []).append(k)
            incident.setdefault(e.dst, []).append(k)
        out = []
        for member in b.members:
            if not member.auto:
                continue
            out.append(self._choice(member, incident.get(member.group, [])))
        return out

    def _local(self, group: int, strategy: int, edges: Sequence[int]) -> float:
        """The group's cost and its edges' with `strategy`, all else kept."""
        p, choice = self.built.problem, list(self.choice)
        choice[group] = strategy
        total = p.costs[group][strategy]
        for k in edges:
            e = p.edges[k]
            total += e.cost[e.src_class[choice[e.src]]][e.dst_class[choice[e.dst]]]
        return total

    def _choice(self, member: Member, edges: Sequence[int]) -> Choice:
        g = member.group
        chosen = self.choice[g]
        strategy = member.strategies[member.pick[chosen]]
        base = self._local(g, chosen, edges)
        others = sorted(
            (self._local(g, i, edges) - base, i)
            for i, own in enumerate(member.pick)
            if member.strategies[own].results != strategy.results
        )
        best: tuple[float, int] | None = None
        for delta, i in others:  # the cheapest that fits the memory budget
            if self.budget is not None:
                choice = list(self.choice)
                choice[g] = i
                if self.built.problem.peak(choice)[0] > self.budget:
                    continue
            best = (delta, i)
            break
        next_text, delta = "", 0.0
        if best is not None:
            delta, i = best
            other = member.strategies[member.pick[i]]
            next_text = ", ".join(
                "-" if lay is None else layout_text(lay) for lay in other.results
            )
        return Choice(
            member.what,
            member.loc,
            strategy.results,
            strategy.text(),
            strategy.cost,
            next_text,
            delta,
        )

    def summary(self) -> str:
        s, b = self.solution, self.built
        peak, where = self.peak()
        groups = len(b.problem.costs)
        decided = sum(1 for m in b.members if m.auto)
        text = (
            f"auto-shard: {s.status}, estimated {_fmt_seconds(s.objective)} per step; "
            f"{decided} decisions in {groups} groups ({b.followers} follow their "
            f"producer, {b.tied} tied to an identical layer); {s.variables} "
            f"variables, {s.rows} rows; solved in {s.seconds:.2f} s (built in "
            f"{self.build_seconds:.2f} s); peak per device {fmt_bytes(peak)}"
        )
        if where:
            text += f" at {where}"
        if self.budget is not None:
            text += f" (budget {fmt_bytes(self.budget)})"
        if s.status == "time-limit":
            text += f"; stopped at the time limit, gap {s.gap:.2%}"
        return text

    def text(self) -> str:
        """The summary, then one line per decided member."""
        lines = [self.summary()]
        for c in self.choices():
            line = (
                f"  {c.what}: chosen by auto-sharding: {c.strategy}, estimated "
                f"{_fmt_seconds(c.seconds)}"
            )
            if c.next_best:
                line += (
                    f"; next best {c.next_best} (+{_fmt_seconds(c.next_delta)} "
                    "for the program)"
                )
            lines.append(line)
        return "\n".join(lines) + "\n"
