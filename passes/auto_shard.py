"""Choose every sharding the program leaves open with an integer program over
the partitioner's cost model (what `jax.sharding.AUTO` asked XLA for).

Calls are inlined first (`compiler/inline.py`). Each op of @main gets one
strategy per way to put the mesh axes on its rule's factors; an argument or
result without a sharding gets one per layout; the integer program (`autoshard/ilp.py`,
HiGHS) picks the strategies that minimise the estimated time (compute plus
collectives, reshards between ops included) with the per-device peak of
live values under `memory-budget`. The choice is written as closed
shardings on @main's open arguments and results and on its ops; the usual
propagation and partitioner then run on it. `--explain` prints each
decision, its estimated cost and the next-best layout.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import ClassVar

from meshjit.compiler.diagnostics import Diagnostics
from meshjit.compiler.graph import read_graph, write_attrs
from meshjit.compiler.inline import inline_calls
from meshjit.compiler.ir import ir
from meshjit.compiler.pass_base import ModulePass
from meshjit.passes.autoshard.build import (
    AutoShardError,
    Caches,
    build,
    size_estimate,
)
from meshjit.passes.autoshard.ilp import min_peak, solve
from meshjit.passes.autoshard.result import AutoShardResult
from meshjit.passes.partitioner.cost import load_cost
from meshjit.passes.partitioner.memory import fmt_bytes
from meshjit.passes.partitioner.memory import parse_bytes as _parse_bytes


def parse_bytes(text: str) -> float | None:
    """`"512MiB"`, `"2GB"`, `"1e9"` -> bytes; `""` -> None (no limit)."""
    return _parse_bytes(text, "memory-budget")


def parse_ties(text: str) -> list[tuple[int, int]]:
    """`"0:1,2:0"` -> [(0, 1), (2, 0)]: (argument, result) indices."""
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        a, sep, r = item.partition(":")
        if not sep or not a.isdigit() or not r.isdigit():
            raise ValueError(
                f"tie {item!r} is not ARG:RESULT (indices of @main's arguments "
                "and results, e.g. tie=0:0,1:1)"
            )
        out.append((int(a), int(r)))
    return out


class ShareLayers(enum.Enum):
    AUTO = "auto"
    TRUE = "true"
    FALSE = "false"


# Sharing a decision among identical layers makes the problem several times
# smaller but may cost time: the first and last layers, or copies that want to
# alternate, lose their own choice (estimated +0-8% on the bench's models).
# Below this many variables the search runs without. 200k was about 5 s of
# HiGHS here until independent reductions shared their launches by rounds
# (each round a variable and a row per member group): the Llama step over
# (2, 4) then took 7.6 s at 194k variables; shared, 89k and 2.7 s with the
# same estimate (GPT-2: 167k, 4.7 s -> 73k, 2.0 s, the same estimate;
# ResNet: 194k, 3.9 s -> 130k, 2.4 s, +1.5% estimated, measured 0.87x data
# parallelism's step either way).
SHARE_ABOVE = 150_000


@dataclass(frozen=True)
class AutoShardPass(ModulePass):
    """Choose open shardings with an integer program over the cost model."""

    name: ClassVar[str] = "auto-shard"
    cost: str = "cpu"  # the cost model: "cpu", "gpu" or a calibration file
    memory_budget: str = ""  # per device, e.g. 512MiB; empty: no limit
    time_limit: float = 30.0  # seconds for the solver; then the best found
    # Identical layers (ops from the same source line with the same shapes)
    # share one decision: "true", "false", or "auto": only when the problem
    # without sharing would exceed SHARE_ABOVE solver variables.
    share_layers: ShareLayers = ShareLayers.AUTO
    # Arguments laid out as results: "ARG:RESULT,..." indices of @main (a
    # donated argument and the result reusing its buffer; arguments with
    # `tf.aliasing_output`, as JAX marks donated ones, are tied anyway).
    tie: str = ""

    def run(self, module: ir.Module, diags: Diagnostics) -> None:
        from meshjit.compiler.diagnostics import SourceLoc

        where = SourceLoc(diags.source_name, 1, 1)
        try:
            model = load_cost(self.cost)
            budget = parse_bytes(self.memory_budget)
            ties = parse_ties(self.tie)
        except ValueError as err:
            diags.error(where, f"auto-shard: {err}")
            return
        if self.time_limit <= 0:
            diags.error(where, "auto-shard: time-limit must be positive (seconds)")
            return
        start = time.perf_counter()
        inline_calls(module)
        graph = read_graph(module, diags.source_name)
        try:
            caches = Caches()
            shared = self.share_layers is ShareLayers.TRUE
            built = build(graph, model, shared, caches, ties)
            if (
                self.share_layers is ShareLayers.AUTO
                and size_estimate(built.problem) > SHARE_ABOVE
            ):
                built = build(graph, model, True, caches, ties)
        except AutoShardError as err:
            diags.error(where, str(err))
            return
        build_seconds = time.perf_counter() - start
        solution = solve(built.problem, self.time_limit, budget)
        if solution.status == "infeasible":
            least = min_peak(built.problem, self.time_limit)
            diags.error(
                built.main.loc,
                "auto-shard: no layout fits the memory budget of "
                f"{fmt_bytes(budget or 0)} per device; the smallest peak of live "
                "values the solver found is "
                f"{fmt_bytes(least)} per device; raise memory-budget to at least that "
                "(or use a larger mesh)",
            )
            return
        if not solution.choice:
            diags.error(
                built.main.loc,
                f"auto-shard: the solver found no layout within the time limit of "
                f"{self.time_limit:g} s; raise time-limit",
            )
            return
        result = AutoShardResult(built, solution, budget, build_seconds)
        write_attrs(module, result.plan())
        diags.payloads["auto-shard"] = result
        if solution.status == "time-limit":
            diags.warning(
                built.main.loc,
                f"auto-shard: stopped at the time limit of {self.time_limit:g} s; "
                f"the layout is the best found (within {solution.gap:.1%} of the "
                "solver's bound)",
            )
        if diags.wants("explain"):
            diags.report("explain", result.text())
