"""The compiled program as one HTML page: `meshjit.report`, `Compiled.report`
and `meshjit-opt --report`.

`collect` runs meshjit's pipeline on a sharded module with the "html" report
asked for, so propagation keeps its provenance and the partitioner its input
graph; `model.build_model` turns that into plain data and `page.render_html`
into the page. The page draws the program with the vendored dagre layout
(`assets/`), offline.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from meshjit.compiler.diagnostics import Diagnostics
from meshjit.compiler.graph import Graph
from meshjit.compiler.ir import ir, make_context, parse_module, print_module
from meshjit.compiler.pipeline import Instrumentation, parse_pipeline, run_pipeline
from meshjit.errors import ReportError
from meshjit.htmlreport.model import ReportInputs, build_model
from meshjit.htmlreport.page import render_html
from meshjit.passes.partitioner.report import PartitionReport
from meshjit.passes.propagate import PropagationResult

__all__ = [
    "ReportInputs",
    "build_model",
    "collect",
    "inputs_from",
    "render_html",
    "write_html",
]

REPORTS = frozenset({"html", "collectives", "explain"})


def inputs_from(
    module: ir.Module, diags: Diagnostics, title: str, **extra: Any
) -> ReportInputs:
    """Report inputs from a pipeline run with `REPORTS` asked for (`module`
    is then the partitioned module)."""
    graph = diags.payloads.get("partition-graph")
    report = diags.payloads.get("partition")
    if not isinstance(graph, Graph) or not isinstance(report, PartitionReport):
        raise ReportError(
            "the report needs a pipeline that ends in the partition pass (e.g. "
            "spmd-pipeline, or propagation-pipeline,partition)"
        )
    propagation = diags.payloads.get("propagation")
    return ReportInputs(
        title=title,
        graph=graph,
        report=report,
        partitioned_text=print_module(module),
        propagation=propagation if isinstance(propagation, PropagationResult) else None,
        **extra,
    )


def collect(sharded_text: str, pipeline: str, title: str, **extra: Any) -> ReportInputs:
    """Runs `pipeline` (ending in partition) on the sharded module text."""
    module = parse_module(sharded_text, make_context(), title)
    stages = parse_pipeline(pipeline, module.context)
    diags = run_pipeline(stages, module, title, Instrumentation(reports=REPORTS))
    return inputs_from(module, diags, title, **extra)


def processes_of(devices: Sequence[Any]) -> Mapping[int, int]:
    """Mesh device id (position in `devices`) -> process index."""
    return {i: int(getattr(d, "process_index", 0)) for i, d in enumerate(devices)}


def write_html(inputs: ReportInputs, path: str | os.PathLike[str]) -> str:
    """Writes the page; returns its absolute path."""
    text = render_html(build_model(inputs))
    out = os.path.abspath(os.fspath(path))
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    return out
