"""Propagate shardings through op sharding rules until nothing changes.

The module is read once into a compact problem (`propagation.build`), propagated
there in pure Python (`propagation.core`), and the shardings written back in
Shardy's form: `sdy.sharding` on func arguments and results and
`#sdy.sharding_per_value<[...]>` on ops, open dims kept as `?`.
`meshjit-opt -p propagate --explain` prints why each value got its sharding;
`explain_module` returns the same records to Python callers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from meshjit.compiler.diagnostics import Diagnostics, SourceLoc
from meshjit.compiler.graph import invalidate_graphs, read_graph, write_attrs
from meshjit.compiler.ir import ir
from meshjit.compiler.pass_base import ModulePass
from meshjit.passes.partitioner.cost import load_cost
from meshjit.passes.propagation.build import Built, build_problem, write_plan
from meshjit.passes.propagation.calls import Callees, plan_copies, write_copies
from meshjit.passes.propagation.constants import split_constants
from meshjit.passes.propagation.core import Options, Provenance, Sh, Strategy, propagate
from meshjit.passes.propagation.explain import (
    ExplainRecord,
    explain_records,
    explain_text,
)
from meshjit.passes.propagation.groups import split_conflicting_groups

_DEFAULT = Options()  # what JAX runs: user priorities, op priorities, aggressive


@dataclass(frozen=True, slots=True)
class PropagationResult:
    """What `propagate_module` decided, with the provenance of every axis."""

    built: Built
    state: list[Sh | None]
    provenance: Provenance

    def records(self) -> list[ExplainRecord]:
        return explain_records(self.built, self.state, self.provenance)


def propagate_module(
    module: ir.Module,
    diags: Diagnostics,
    options: Options = _DEFAULT,
    source_name: str = "-",
    *,
    record: bool = True,
) -> PropagationResult:
    """Propagates and returns the decision; does not change the module.

    `record=False` skips the provenance (faster; `records()` is then empty)."""
    graph = read_graph(module, source_name)
    built = build_problem(graph, diags)
    state, prov = propagate(built.problem, options, record)
    return PropagationResult(built, state, prov)


def explain_module(
    module: ir.Module, options: Options = _DEFAULT, source_name: str = "-"
) -> list[ExplainRecord]:
    """Per value: its sharding and how it was derived (for `meshjit.explain`)."""
    return propagate_module(module, Diagnostics(), options, source_name).records()


@dataclass(frozen=True)
class PropagatePass(ModulePass):
    """Propagate shardings through op sharding rules (user, then op priorities)."""

    name: ClassVar[str] = "propagate"
    strategy: Strategy = Strategy.AGGRESSIVE  # basic: only axes every tensor agrees on
    op_priority: bool = True  # pass-through ops first, broadcast last
    user_priority: bool = True  # p0 before p1 before ...
    conservative: bool = False  # never split an axis into sub-axes
    # private callees: as-written (one body; arguments and results keep what
    # was written, as Shardy's propagation passes leave them), shared (one
    # body with the first call's shardings, signatures too: Shardy's pipeline
    # with dedup-functions-fully), copies (a copy per call site, copies with
    # equal argument and result shardings merged: Shardy's pipeline)
    callees: Callees = Callees.AS_WRITTEN
    # write Shardy's `sdy.sharding_origins` (per value and axis, the user
    # sharding the axis came from: "self", "input: 0", "constraint_1", ...)
    debug_sharding_origins: bool = False
    # write Shardy's `sdy.propagation_edges` (per op: the steps that changed
    # it, and which axes went from which operand/result to which)
    debug_propagation_edge_sharding: bool = False
    # an unsharded input of a closed sharding constraint, or operand of a
    # manual computation with a closed in_sharding, takes it as its own
    # (Shardy's apply-sharding-constraints, which its propagation pipeline
    # runs before propagating and its propagation passes alone do not)
    apply_sharding_constraints: bool = False
    # a constant with several uses becomes a copy per use, each with its
    # use's sharding (Shardy's constant splitter, as its pipeline leaves it)
    split_constants: bool = False
    # after propagating, axes an FFT cannot keep on a dim it transforms go
    # to an open, free batch dim of its results, where the partitioner's
    # all-to-all puts them, where this cost model ("cpu", "gpu" or a file
    # from `python -m meshjit.calibrate`; empty: never) estimates that
    # cheaper than gathering; then propagation runs again: what follows
    # stays split instead of gathering the result. With it on, too, a
    # concatenation's result does not take axes that would split its
    # concatenated dim unevenly (16 + 1 tokens over 4): they join the axes
    # of a dim already split that they divide, else take an empty leading
    # dim they divide (the batch), where the partitioner moves them by an
    # all-to-all; where no dim can, they go on unevenly. Not Shardy's (off
    # in `propagation-pipeline`; on in what `meshjit.jit` and
    # `spmd-pipeline` run)
    relocate: str = ""

    def run(self, module: ir.Module, diags: Diagnostics) -> None:
        relocate = None
        if self.relocate:
            try:
                relocate = load_cost(self.relocate)
            except ValueError as err:
                diags.error(
                    SourceLoc(diags.source_name, 1, 1), f"propagate: relocate: {err}"
                )
                return
        options = Options(
            self.strategy,
            self.op_priority,
            self.user_priority,
            self.conservative,
            origins=self.debug_sharding_origins,
            apply_constraints=self.apply_sharding_constraints,
            edges=self.debug_propagation_edge_sharding,
            relocate=relocate,
        )
        explain = diags.wants("explain")
        html = diags.wants("html")  # meshjit.report: provenance for the page
        graph = read_graph(module, diags.source_name)  # shared with what follows
        grouped = any(n.op == "sdy.sharding_group" for n in graph.nodes)
        if grouped and split_conflicting_groups(module, diags):
            invalidate_graphs(module)
        result = propagate_module(
            module, diags, options, diags.source_name, record=explain or html
        )
        if diags.has_errors:
            return
        if html:
            diags.payloads["propagation"] = result
        copies = None
        origins = (
            result.provenance.axis_origins if self.debug_sharding_origins else None
        )
        edges = (
            result.provenance.edges if self.debug_propagation_edge_sharding else None
        )
        if self.callees is Callees.COPIES:
            copies = plan_copies(result.built, result.state)
        if copies is not None:
            write_copies(module, result.built, result.state, copies, origins, edges)
        else:
            signatures = self.callees is not Callees.AS_WRITTEN
            write_attrs(
                module,
                write_plan(
                    result.built,
                    result.state,
                    signatures=signatures,
                    origins=origins,
                    edges=edges,
                ),
            )
        if self.split_constants and result.built.use_copies and copies is None:
            # (after function copies the graph's ids no longer name the ops)
            split_constants(module, result.built, result.state)
        if explain:
            diags.report(
                "explain", explain_text(result.built, result.state, result.provenance)
            )
