"""`meshjit.explain(f, *args)`: why each value is sharded so, and what it costs.

Lowers `f` for the arguments, runs meshjit's propagation with provenance
(`passes.propagate.propagate_module`) and compiles, then returns per-value
records (the final sharding, the user sharding it came from, the chain of ops
that carried each dim's axes) and the partitioner's per-collective report.
`@main`'s arguments and results are named by the user's key paths.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from meshjit.compiler.diagnostics import Diagnostics
from meshjit.compiler.ir import make_context, parse_module
from meshjit.compiler.pipeline import Instrumentation, parse_pipeline, run_pipeline
from meshjit.frontend.jit import JitFunction, jit
from meshjit.frontend.stages import Compiled, auto_shard_pass
from meshjit.passes.partition import Collective, Decision, Remark
from meshjit.passes.propagate import propagate_module
from meshjit.passes.propagation.explain import ExplainRecord, explain_text


@dataclass(frozen=True, slots=True)
class Explanation:
    """Provenance of every value's sharding and the collectives that were inserted."""

    records: tuple[ExplainRecord, ...]
    collectives: tuple[Collective, ...]
    remarks: tuple[Remark, ...]
    propagation_text: str  # `meshjit-opt --explain` text, with the user's names
    collectives_text: str
    input_shardings: Any
    output_shardings: Any
    compiled: Compiled
    # How each op was split, with the cost model's estimate and the best
    # other plan it beat.
    decisions: tuple[Decision, ...] = ()
    # With AUTO leaves: what auto-sharding chose for each value, its
    # estimated cost and the next-best layout ("" without AUTO).
    auto_shard_text: str = ""

    def record(self, name: str) -> ExplainRecord:
        """The record whose value name contains `name` (e.g. "`x`", "result 0")."""
        for r in self.records:
            if name in r.value:
                return r
        raise KeyError(
            f"no value named {name!r}; have {[r.value for r in self.records]}"
        )

    def summary(self) -> str:
        """One line per value: its final sharding (details in propagation_text)."""
        width = max((len(r.value) for r in self.records), default=0)
        return "".join(f"  {r.value:<{width}}  {r.sharding}\n" for r in self.records)

    def __str__(self) -> str:
        decisions = "".join(d.text() for d in self.decisions)
        return (
            self.auto_shard_text
            + self.propagation_text
            + self.collectives_text
            + decisions
        )


def explain(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Explanation:
    """Lower and compile `f` (a meshjit.jit function, or a plain one) for the
    arguments and say why every value got its sharding and what it costs."""
    jitted = f if isinstance(f, JitFunction) else jit(f)
    lowered = jitted.lower(*args, **kwargs)
    inputs = lowered.inputs
    names: dict[str, str] = {}
    for j, k in enumerate(inputs.traced.kept):
        names[f"argument {j} of @main"] = (
            f"argument {j} of @main (`{inputs.leaves[k].path}`)"
        )
    for r, out in enumerate(inputs.traced.outputs):
        names[f"result {r} of @main"] = f"result {r} of @main (`{out.path}`)"

    def rename(text: str) -> str:
        if not names:
            return text
        pattern = re.compile("|".join(re.escape(n) + r"\b" for n in names))
        return pattern.sub(lambda m: names[m.group(0)], text)

    module = parse_module(lowered.as_text("sharded", debug_info=True), make_context())
    auto_text = ""
    auto_pass = auto_shard_pass(inputs)
    if auto_pass is not None:
        diags = run_pipeline(
            parse_pipeline(auto_pass, module.context),
            module,
            "<module>",
            Instrumentation(reports=frozenset({"explain"})),
        )
        auto_text = rename("".join(t for kind, t in diags.reports if kind == "explain"))
    result = propagate_module(module, Diagnostics())
    records = tuple(
        ExplainRecord(rename(r.value), r.sharding, r.origins, r.chains, r.conflicts)
        for r in result.records()
    )
    text = rename(explain_text(result.built, result.state, result.provenance))
    compiled = lowered.compile()
    report = compiled.partition_report
    return Explanation(
        records,
        tuple(report.collectives),
        tuple(report.remarks),
        text,
        report.collectives_text(),
        compiled.input_shardings,
        compiled.output_shardings,
        compiled,
        tuple(report.decisions),
        auto_text,
    )


def report(
    f: Callable[..., Any],
    *args: Any,
    path: str | os.PathLike[str] = "report.html",
    bound_bytes: int | None = None,
    **kwargs: Any,
) -> str:
    """Compile `f` (a meshjit.jit function, or a plain one) for the arguments
    and write the compiled program as one self-contained HTML page at `path`
    (see `Compiled.report`); returns the page's absolute path."""
    jitted = f if isinstance(f, JitFunction) else jit(f)
    compiled = jitted.lower(*args, **kwargs).compile()
    return compiled.report(path, bound_bytes=bound_bytes)
