"""The partition pass: a sharded module becomes the per-device program.

The partitioner itself is the package `passes/partitioner/` (compiled by
`meshjit-native build`; a pass class cannot be, see meshjit/native.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from meshjit.compiler.diagnostics import Diagnostics, SourceLoc
from meshjit.compiler.graph import read_graph
from meshjit.compiler.ir import ir, replace_module
from meshjit.compiler.pass_base import ModulePass
from meshjit.errors import ShardingError
from meshjit.passes.partitioner import (
    Collective,
    Decision,
    PartitionFailure,
    PartitionReport,
    Remark,
    partition_module_text,
    partition_support,
)
from meshjit.passes.partitioner.combine import combine_collectives
from meshjit.passes.partitioner.cost import SMALL_REDUCE_BYTES, load_cost
from meshjit.passes.partitioner.memory import parse_bytes

__all__ = [
    "Collective",
    "Decision",
    "PartitionPass",
    "PartitionReport",
    "Remark",
    "partition_support",
]


@dataclass(frozen=True)
class PartitionPass(ModulePass):
    """Rewrite a sharded module into per-device code with explicit collectives."""

    name: ClassVar[str] = "partition"
    # The cost model choices are weighed with: "cpu", "gpu", or a JSON file
    # from `python -m meshjit.calibrate` (CLI: partition{cost=gpu}).
    cost: str = "cpu"
    # Independent reduce-scatters, small all-gathers and (where the cost
    # model's variadic_launches says XLA's variadic all-reduce launches once
    # per operand: cpu) small all-reduces of the same groups written as one
    # (partitioner/combine.py; other all-reduces are left to XLA's own
    # combiner); partition{combine=false} keeps one per reshard.
    combine: bool = True
    # Per-device bytes the live values may take (512MiB, 2GB, 1e9; empty: no
    # limit): choices that gather a whole dim where pieces would do (a
    # window's all-gather, data movement run whole) are taken only while the
    # estimate stays under it (partitioner/memory.py); values that exceed it
    # as laid out are an error naming where.
    memory_limit: str = ""

    def run(self, module: ir.Module, diags: Diagnostics) -> None:
        graph = read_graph(module, diags.source_name, keep_attr_text=True)
        try:
            model = load_cost(self.cost)
            limit = parse_bytes(self.memory_limit)
        except ValueError as err:
            diags.error(SourceLoc(graph.source_name, 1, 1), f"partition: {err}")
            return
        try:
            built = partition_module_text(graph, diags, model, limit)
        except PartitionFailure as err:
            diags.error(err.loc, err.message)
            return
        except ShardingError as err:
            diags.error(SourceLoc(graph.source_name, 1, 1), str(err))
            return
        if built is None:
            diags.remark(
                SourceLoc(graph.source_name, 1, 1),
                "partition: the module has no sdy.mesh; nothing to partition",
            )
            return
        text, report = built
        if diags.wants("html"):  # meshjit.report draws the program it partitioned
            diags.payloads["partition-graph"] = graph
        replace_module(module, text, diags.source_name)
        if self.combine:
            small = SMALL_REDUCE_BYTES if model.variadic_launches else 0
            report.combined.extend(
                combine_collectives(
                    module,
                    small_reduce=small,
                    gathers=limit is None,
                    runtime_offsets=model.runtime_cut_offsets,
                )
            )
        diags.payloads["partition"] = report
        if diags.wants("collectives"):
            diags.report("collectives", report.collectives_text())
        if diags.wants("explain") and (report.remarks or report.decisions):
            diags.report("explain", report.remarks_text() + report.decisions_text())
        for remark in report.remarks:
            diags.remark(remark.loc, remark.message)
