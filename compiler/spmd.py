"""From a sharded StableHLO module to a running per-device executable.

`compile_module` runs a meshjit pipeline that ends in `partition`, reads the
partitioned module's interface (mesh, global result shapes and shardings) and
compiles it with PJRT. The frontend and the tests both go through here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from meshjit.compiler import bridge
from meshjit.compiler.bridge import Effects
from meshjit.compiler.diagnostics import Diagnostics
from meshjit.compiler.graph import Opaque, invalidate_graphs, read_interface
from meshjit.compiler.ir import ir, make_context, parse_module, print_module
from meshjit.compiler.pipeline import Instrumentation, parse_pipeline, run_pipeline
from meshjit.compiler.pjrt import (
    OutputSpec,
    PartitionedExecutable,
    devices_by_position,
)
from meshjit.compiler.replicas import replica_count, to_replicas
from meshjit.compiler.tuple_all_to_all import split_all_to_alls
from meshjit.dialects.sdy_text import parse_mesh, parse_sharding
from meshjit.dialects.sharding import MeshModel
from meshjit.errors import ShardingError
from meshjit.passes.partition import PartitionReport

Layout = tuple[tuple[Any, ...], ...]  # per dim, the mesh axes that split it


@dataclass(frozen=True, slots=True)
class Compiled:
    executable: PartitionedExecutable
    text: str  # the per-device module
    diagnostics: Diagnostics
    # @main's argument layouts as the partitioned module gives them (global
    # shardings: what the auto-shard pass chose for open arguments).
    input_layouts: tuple[Layout | None, ...] = ()

    @property
    def report(self) -> PartitionReport:
        found = self.diagnostics.payloads.get("partition")
        if not isinstance(found, PartitionReport):
            raise ShardingError("the pipeline did not run the partition pass")
        return found


def compile_module(
    text: str,
    devices: Sequence[Any],
    pipeline: str = "partition",
    source_name: str = "<module>",
    reports: frozenset[str] = frozenset({"collectives", "explain"}),
    compiler_options: Mapping[str, Any] | None = None,
) -> Compiled:
    """Runs `pipeline` (which must end with partition) and compiles the result.

    Mesh device id i runs on `devices[i]`; `compiler_options` go to XLA.
    """
    module = parse_module(text, make_context(), source_name)
    return compile_parsed(
        module, devices, pipeline, source_name, reports, compiler_options
    )


def compile_parsed(
    module: ir.Module,
    devices: Sequence[Any],
    pipeline: str = "partition",
    source_name: str = "<module>",
    reports: frozenset[str] = frozenset({"collectives", "explain"}),
    compiler_options: Mapping[str, Any] | None = None,
    effects: Effects | None = None,
) -> Compiled:
    """`compile_module` on a module already parsed (and perhaps propagated
    inside the caller's `graph_session`, whose graph the passes then reuse).
    `effects`: the program's host callbacks and ordered effects (from jax's
    lowering)."""
    stages = parse_pipeline(pipeline, module.context)
    inst = Instrumentation(verify_each=False, verify_last=True, reports=reports)
    diags = run_pipeline(stages, module, source_name, inst)
    partitioned = print_module(module)
    tokens = len(effects.ordered) if effects is not None else 0
    mesh, outputs, inputs = _interface(module, source_name, tokens)
    # What XLA compiles, the same program: all-to-alls in the tuple form where
    # its backend would cut array ones with constant slices, and the replica
    # form when the module has one. The partitioned text keeps neither.
    program = None
    if (
        bridge.tuple_all_to_all(devices)
        and "stablehlo.all_to_all" in partitioned  # else no walk (1-3 ms)
        and split_all_to_alls(module)
    ):
        invalidate_graphs(module)
        program = module
    replicas = to_replicas(module) is not None
    if replicas:
        invalidate_graphs(module)
        program = module
    executable = PartitionedExecutable(
        partitioned,
        mesh,
        outputs,
        devices,
        compiler_options=compiler_options,
        effects=effects,
        program=program,
        replicas=replicas,
    )
    return Compiled(executable, partitioned, diags, inputs)


def load_compiled(
    partitioned: str,
    report: PartitionReport,
    devices: Sequence[Any],
    serialized: bytes,
    compiler_options: Mapping[str, Any] | None = None,
) -> Compiled:
    """A `Compiled` from what an earlier compile produced: the partitioned text,
    its report and PJRT's executable (serialized in the persistent cache, for
    these devices and options). The text says whether XLA compiled its
    replica form, so the executable is loaded with the same options."""
    module = parse_module(partitioned, make_context(), "<cache>")
    mesh, outputs, inputs = _interface(module, "<cache>")
    loaded = bridge.deserialize_spmd(
        serialized,
        tuple(devices_by_position(mesh, devices)),
        compiler_options,
        replicas=replica_count(module) is not None,
    )
    executable = PartitionedExecutable(
        partitioned, mesh, outputs, devices, loaded=loaded
    )
    diags = Diagnostics()
    diags.payloads["partition"] = report
    return Compiled(executable, partitioned, diags, inputs)


def _interface(
    module: ir.Module, source_name: str, tokens: int = 0
) -> tuple[MeshModel, list[OutputSpec], tuple[Layout | None, ...]]:
    """The partitioned module's mesh, each result's global shape and layout,
    and each argument's layout (read from @main's signature, not its body),
    less the first `tokens` arguments and results (ordered-effect tokens)."""
    interface = read_interface(module, source_name)
    if len(interface.meshes) != 1:
        raise ShardingError("the partitioned module must define exactly one sdy.mesh")
    mesh = parse_mesh(interface.meshes[0][1].text)
    main = interface.funcs["main"]
    outputs = []
    for entry, result in list(zip(main.res_attrs, main.result_types, strict=True))[
        tokens:
    ]:
        sharding = entry.get("sdy.sharding")
        assert isinstance(sharding, Opaque)
        layout = tuple(tuple(d.axes) for d in parse_sharding(sharding.text).dims)
        outputs.append(OutputSpec(result.shape, layout))
    inputs: list[Layout | None] = []
    for entry in main.arg_attrs[tokens:]:
        sharding = entry.get("sdy.sharding")
        inputs.append(
            tuple(tuple(d.axes) for d in parse_sharding(sharding.text).dims)
            if isinstance(sharding, Opaque)
            else None
        )
    return mesh, outputs, tuple(inputs)
