"""meshjit's passes, one module each; `ALL_PASSES` is the registry's one source.

Importing a pass module registers nothing: `meshjit.compiler.registry` builds
name -> class from this tuple (kept alphabetical by pass name) and rejects
duplicates. `ALL_PIPELINES` names pipelines that expand to pass lists.
"""

from __future__ import annotations

from meshjit.compiler.pass_base import ModulePass
from meshjit.compiler.registry import PipelineAlias
from meshjit.passes.annotate_sharding_rules import AnnotateShardingRulesPass
from meshjit.passes.auto_shard import AutoShardPass
from meshjit.passes.batch_gathers import BatchGathersPass
from meshjit.passes.export_shardings import ExportShardingsPass
from meshjit.passes.fold_pads import FoldPadsPass
from meshjit.passes.import_shardings import ImportShardingsPass
from meshjit.passes.partition import PartitionPass
from meshjit.passes.propagate import PropagatePass

ALL_PASSES: tuple[type[ModulePass], ...] = (
    AnnotateShardingRulesPass,
    AutoShardPass,
    BatchGathersPass,
    ExportShardingsPass,
    FoldPadsPass,
    ImportShardingsPass,
    PartitionPass,
    PropagatePass,
)


# What meshjit.jit runs before partitioning: propagation-pipeline less the
# renaming of constraints to reshards (the partitioner reads both alike, and
# the rename costs a print and a parse of the module), with private functions'
# signatures left as propagation found them (the partitioner inlines calls:
# an evenly divisible signature would move values at each call), and
# relocating by the partitioner's cost model (`PropagatePass.relocate`: an
# FFT's result takes the batch dim its all-to-all moves the transformed dim's
# axes to, where that is cheaper than a gather; a concatenation's result
# takes axes that would split it unevenly on its batch dim); before it, gathers
# and scatters indexed by arange(n) along a batch dim are written as batched
# ones (`batch-gathers`) and pads that only widen a convolution's or
# reduce_window's window become its padding (`fold-pads`).
def jit_propagation(cost: str) -> str:
    return (
        "batch-gathers,fold-pads,import-shardings,"
        "propagate{callees=copies apply-sharding-constraints=true "
        f"relocate={cost}}},"
        "export-shardings{close-shardings=true even-callees=false}"
    )


_PROPAGATION_PIPELINE = (
    "import-shardings,propagate{{callees={callees} "
    "apply-sharding-constraints=true split-constants=true{relocate}}},"
    "export-shardings{{close-shardings=true constraints-to-reshards=true{even}}}"
)

ALL_PIPELINES: tuple[PipelineAlias, ...] = (
    PipelineAlias(
        "propagation-pipeline",
        _PROPAGATION_PIPELINE.format(callees="copies", even="", relocate=""),
        "import, propagate (user + op priorities, aggressive; a copy of a called "
        "function per call site, merged where their shardings agree) and export "
        "shardings in the form Shardy's propagation pipeline leaves them "
        "(constraints become sdy.reshard, sharding groups are removed)",
        (
            (
                "dedup-functions-fully",
                "one body per called function, shared by every call (Shardy's "
                "option of that name)",
                (
                    (
                        "false",
                        _PROPAGATION_PIPELINE.format(
                            callees="copies", even="", relocate=""
                        ),
                    ),
                    (
                        "true",
                        _PROPAGATION_PIPELINE.format(
                            callees="shared", even="", relocate=""
                        ),
                    ),
                ),
            ),
        ),
    ),
    PipelineAlias(
        "spmd-pipeline",
        "batch-gathers,fold-pads,"
        + _PROPAGATION_PIPELINE.format(
            callees="copies", even=" even-callees=false", relocate=" relocate=cpu"
        )
        + ",partition",
        "propagate shardings, then partition into the per-device program that "
        "meshjit.jit compiles",
    ),
)
