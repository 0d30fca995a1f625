"""Write propagated shardings in the exact form Shardy's pipeline leaves them.

Func inputs and outputs are made evenly divisible (a dim keeps only the major
axes that divide it) and lose sub-axes, as Shardy's export does for the
boundary of the program. With `close-shardings` (what `propagation-pipeline`
runs, like Shardy's propagation pipeline) every dim is closed and explicitly
replicated axes are dropped; without it open dims keep their `?`. The work
is done in `passes/propagation/export.py` (compiled; this pass class cannot be).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from meshjit.compiler.diagnostics import Diagnostics
from meshjit.compiler.graph import op_handles, read_graph, write_attrs
from meshjit.compiler.ir import ir, print_module, replace_module
from meshjit.compiler.pass_base import ModulePass
from meshjit.passes.propagation.export import Exporter

_CONSTRAINT = re.compile(r"^(\s*%[^=]*= )sdy\.sharding_constraint ", re.MULTILINE)
_GROUP = re.compile(r"^[ \t]*sdy\.sharding_group .*\n", re.MULTILINE)


@dataclass(frozen=True)
class ExportShardingsPass(ModulePass):
    """Write shardings in Shardy's exported form (even func boundaries, closed)."""

    name: ClassVar[str] = "export-shardings"
    close_shardings: bool = False  # close every dim and drop replicated axes
    # Shardy's export form: every sdy.sharding_constraint becomes the
    # sdy.reshard it stands for and sharding groups go (what
    # `propagation-pipeline` writes)
    constraints_to_reshards: bool = False

    def run(self, module: ir.Module, diags: Diagnostics) -> None:
        graph = read_graph(module, diags.source_name)
        write_attrs(module, Exporter(self.close_shardings).plan(graph, diags))
        if self.constraints_to_reshards and any(
            n.op in ("sdy.sharding_constraint", "sdy.sharding_group")
            for n in graph.walk()
        ):
            # The two ops print alike (`%r = OP %x <@mesh, [...]> : type`), so
            # the rename is one word per line of the printed module. Sharding
            # groups have done their work (their members agree): Shardy's
            # export removes them, and so does this form. A constraint nothing
            # uses has done its work too (propagation read it): it goes, as
            # in Shardy's export, rather than become a reshard of nothing.
            handles = op_handles(module)
            for node in reversed(graph.nodes):
                if node.op == "sdy.sharding_constraint" and not any(
                    graph.users(v) for v in node.results
                ):
                    handles[node.id].erase()
            text = _CONSTRAINT.sub(
                r"\1sdy.reshard ", print_module(module, debug_info=True)
            )
            text = _GROUP.sub("", text)
            replace_module(module, text, diags.source_name)
