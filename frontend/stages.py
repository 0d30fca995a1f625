"""Ahead-of-time stages: `Traced`, `Lowered` and `Compiled`, as `jax.stages` has.

A `Lowered` holds one traced module and one `Placement`; its text exists at four
stages (`as_text(stage=...)`): "traced" (JAX's StableHLO, no shardings),
"sharded" (the default: meshjit's shardings attached as `sdy` attributes, what
meshjit's pipeline reads), "propagated" (after meshjit's propagation) and
"partitioned" (the per-device program). `Compiled` runs it on jax.Arrays.
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.tree_util import PyTreeDef

from meshjit.compiler import bridge, persistent_cache
from meshjit.compiler.diagnostics import DiagnosticError, Diagnostics
from meshjit.compiler.graph import Opaque, graph_session, read_graph, write_attrs
from meshjit.compiler.ir import ir, make_context, parse_module, print_module
from meshjit.compiler.pipeline import Instrumentation, parse_pipeline, run_pipeline
from meshjit.compiler.spmd import Compiled as SpmdCompiled
from meshjit.compiler.spmd import compile_parsed, load_compiled
from meshjit.dialects import gspmd_text, sdy_text
from meshjit.dialects.sharding import MeshModel, TensorSharding, view_axes
from meshjit.dialects.stablehlo_rules import INSPECT_SHARDING
from meshjit.errors import (
    DeletedArgumentError,
    InternalError,
    JitArgumentError,
    ShardingError,
)
from meshjit.frontend.args import CallForm, Entry, describe_aval, is_key_dtype
from meshjit.frontend.dispatch import Dispatcher
from meshjit.frontend.mesh import Mesh
from meshjit.frontend.resolve import Placement
from meshjit.frontend.sharding import GSPMDSharding, NamedSharding
from meshjit.frontend.sharding import PartitionSpec as MeshjitP
from meshjit.frontend.trace import (
    LeafInfo,
    TracedModule,
    alias_plan,
    attach_shardings,
    check_ref_arguments,
    has_views,
    interface_shardings,
    key_data_shape,
    leaf_dtype,
)
from meshjit.passes import jit_propagation
from meshjit.passes.autoshard.result import AutoShardResult
from meshjit.passes.partition import PartitionReport
from meshjit.passes.partitioner.memory import parse_bytes

STAGES = ("traced", "sharded", "propagated", "partitioned")
_DIALECTS = ("stablehlo", "mhlo", "hlo")


def _strip_locations(text: str) -> str:
    return print_module(parse_module(text, make_context()))


def _run(text: str, pipeline: str) -> tuple[str, Diagnostics]:
    ctx = make_context()
    module = parse_module(text, ctx)
    inst = Instrumentation()  # the texts only: explain() renders its own reports
    diags = run_pipeline(parse_pipeline(pipeline, ctx), module, "-", inst)
    return print_module(module, debug_info=True), diags


def pipeline_error(api: str, err: DiagnosticError) -> ShardingError:
    return ShardingError(f"{api}: meshjit's pipeline rejected the function:\n{err}")


@dataclass(frozen=True, slots=True)
class LoweringInputs:
    """What a `Lowered` is made of (also what the compile cache keys lead to)."""

    api: str
    fun_name: str
    traced: TracedModule
    form: CallForm
    dyn_tree: PyTreeDef
    leaves: tuple[LeafInfo, ...]
    donated: tuple[bool, ...]
    placement: Placement
    mesh_name: str
    compiler_options: Mapping[str, Any] | None
    # memory layouts asked for (`Format` leaves of in/out_shardings): per
    # argument leaf and per output, None, Layout.AUTO or a Layout; () none
    in_layouts: tuple[Any, ...] = ()
    out_layouts: tuple[Any, ...] = ()


class _Stage:
    """What jax's stages (`jax.stages.Traced`, `Lowered`, `Compiled`) say about
    the arguments: `args_info` (a pytree `(positional, keyword)` of
    `jax.stages.ArgInfo`, static arguments left out), `in_tree`, `in_avals`
    and `donate_argnums` (flat indices of donated leaves)."""

    _inputs: LoweringInputs

    @property
    def args_info(self) -> Any:
        inputs = self._inputs
        avals = [
            _typed_aval(aval, inputs.placement, k)
            for k, aval in enumerate(inputs.traced.jaxpr.in_avals)
        ]
        infos = [
            jax.stages.ArgInfo(aval, donated)
            for aval, donated in zip(avals, inputs.donated, strict=True)
        ]
        values = jax.tree_util.tree_unflatten(inputs.dyn_tree, infos)
        entries = inputs.form.entries
        positional = tuple(
            v for e, v in zip(entries, values, strict=True) if e.keyword is None
        )
        keyword = {
            e.keyword: v
            for e, v in zip(entries, values, strict=True)
            if e.keyword is not None
        }
        return positional, keyword

    @property
    def in_tree(self) -> PyTreeDef:
        """Tree structure of the pair (positional arguments, keyword arguments)."""
        return jax.tree_util.tree_structure(self.args_info)

    @property
    def in_avals(self) -> Any:
        """Tree of input avals, as `args_info` is laid out."""
        return jax.tree_util.tree_map(lambda a: a._aval, self.args_info)

    @property
    def donate_argnums(self) -> tuple[int, ...]:
        """Flat indices of the donated argument leaves."""
        return tuple(i for i, d in enumerate(self._inputs.donated) if d)


def _typed_aval(aval: Any, placement: Placement, k: int) -> Any:
    """The argument's aval as jax types it on the computation's mesh: the
    mesh's abstract mesh and the spec over its Explicit axes (Auto axes do not
    appear in types); traced without a sharding, the aval has none."""
    sharding = getattr(aval, "sharding", None)
    mesh = getattr(sharding, "mesh", None)
    if placement.single_device or mesh is None or not mesh.empty:
        return aval
    if k >= len(placement.inputs) or not hasattr(aval, "update"):
        return aval
    asked = placement.specified[k] if k < len(placement.specified) else None
    spec = (
        asked.spec
        if isinstance(asked, jax.sharding.NamedSharding)
        else placement.inputs[k].spec.to_jax()
    )
    jax_mesh = placement.mesh.to_jax()
    explicit = {
        n
        for n, t in zip(jax_mesh.axis_names, jax_mesh.axis_types, strict=True)
        if t == jax.sharding.AxisType.Explicit
    }
    entries: list[object] = []
    for entry in spec.partitions:
        names = (entry,) if isinstance(entry, str) else tuple(entry or ())
        kept = tuple(n for n in names if n in explicit)
        entries.append(None if not kept else kept[0] if len(kept) == 1 else kept)
    while entries and entries[-1] is None:
        entries.pop()
    typed = jax.sharding.NamedSharding(jax_mesh.abstract_mesh, jax.P(*entries))
    try:
        return aval.update(sharding=typed)
    except (TypeError, ValueError):
        return aval


class Traced(_Stage):
    """A function traced to StableHLO for one call form and abstract arguments."""

    def __init__(
        self, inputs: LoweringInputs, jax_lowering: Callable[..., Any] | None = None
    ) -> None:
        self._inputs = inputs
        self._jax_lowering = jax_lowering

    @property
    def fun_name(self) -> str:
        return self._inputs.fun_name

    @property
    def jaxpr(self) -> Any:
        return self._inputs.traced.jaxpr

    @property
    def out_info(self) -> Any:
        """The outputs' ShapeDtypeStructs: with the sharding in their type in
        explicit sharding mode, else none (propagation decides them)."""
        return self._inputs.traced.out_info

    def as_text(self, *, debug_info: bool = False) -> str:
        text = self._inputs.traced.text
        return text if debug_info else _strip_locations(text)

    def lower(
        self,
        *,
        lowering_platforms: Sequence[str] | None = None,
        _private_parameters: Any = None,
    ) -> Lowered | Any:
        """Attaches shardings. `lowering_platforms` is needed (as in jax) when
        the shardings are on an AbstractMesh only: the module is the same for
        every platform; compile it with `compile(device_assignment=...)`.
        `_private_parameters` (jax's, which `jax.export` passes): jax's own
        lowering of the function with the same options, a jax `Lowered`
        (an exported program is partitioned by whoever loads it)."""
        if _private_parameters is not None:
            if self._jax_lowering is None:
                raise ShardingError(
                    f"{self._inputs.api}({self._inputs.fun_name}): this stage "
                    "cannot be lowered by jax (jax.export takes a meshjit.jit "
                    "function: export(jitted)(*args))"
                )
            return self._jax_lowering(
                lowering_platforms=lowering_platforms,
                _private_parameters=_private_parameters,
            )
        if lowering_platforms is None:
            require_devices(self._inputs)
        return Lowered(self._inputs)


def _view_mesh(mesh: jax.sharding.Mesh, abstract: Any) -> jax.sharding.Mesh | None:
    """`mesh`'s devices, row-major, on `abstract`'s axes (a mesh a function
    switches to with `use_abstract_mesh(mesh.update(...))`), or None when
    `abstract` is `mesh`'s own or another size."""
    if not isinstance(abstract, jax.sharding.AbstractMesh):
        return None
    if abstract.axis_names == mesh.axis_names or abstract.size != mesh.size:
        return None
    devices = np.array(list(mesh.devices.flat), dtype=object)
    return jax.sharding.Mesh(
        devices.reshape(abstract.axis_sizes),
        abstract.axis_names,
        axis_types=abstract.axis_types,
    )


def _on_view(
    sharding: jax.sharding.NamedSharding, abstract: Any
) -> jax.sharding.NamedSharding | None:
    """`sharding` spelled on the view `abstract` of its mesh's devices (each
    dim's axes as the view axes that cover them), or None where no view axis
    covers them exactly."""
    if not isinstance(sharding.mesh, jax.sharding.Mesh):
        return None
    view = _view_mesh(sharding.mesh, abstract)
    if view is None:
        return None
    base = MeshModel.of(
        *zip(sharding.mesh.axis_names, sharding.mesh.axis_sizes, strict=True)
    )
    model = MeshModel.of(*zip(view.axis_names, view.axis_sizes, strict=True))
    covers = view_axes(model, base)
    if covers is None:
        return None
    spec: list[Any] = []
    for entry in sharding.spec:
        names = (
            [] if entry is None else [entry] if isinstance(entry, str) else list(entry)
        )
        picked: list[str] = []
        at = 0
        for axis, refs in covers.items():
            if not refs:
                continue
            run = [r.name for r in refs if r.size is None]
            if len(run) != len(refs):
                continue
            if names[at : at + len(run)] == run:
                picked.append(axis)
                at += len(run)
        if at != len(names):
            return None
        spec.append(
            None if not picked else picked[0] if len(picked) == 1 else tuple(picked)
        )
    while spec and spec[-1] is None:
        spec.pop()
    return jax.sharding.NamedSharding(
        view, jax.P(*spec), memory_kind=sharding.memory_kind
    )


def ref_sharding(inputs: LoweringInputs, ref: Any) -> NamedSharding:
    """Where a mutable array the function closes over is passed: as it is laid
    out, when that is on the program's mesh, else replicated on it."""
    mesh = inputs.placement.mesh
    value = bridge.ref_value(ref).sharding
    if (
        isinstance(value, jax.sharding.NamedSharding)
        and isinstance(value.mesh, jax.sharding.Mesh)
        and value.mesh.axis_names == mesh.axis_names
        and tuple(value.mesh.devices.flat) == tuple(mesh.flat_devices)
    ):
        return NamedSharding(mesh, MeshjitP.from_jax(value.spec))
    return NamedSharding(mesh, MeshjitP())


def _tokens(inputs: LoweringInputs) -> int:
    """How many ordered-effect tokens lead @main's arguments and results."""
    effects = inputs.traced.effects
    return len(effects.ordered) if effects is not None else 0


def require_devices(inputs: LoweringInputs) -> None:
    """Lowering with no lowering_platforms needs a mesh with devices."""
    mesh = inputs.placement.mesh
    if mesh.is_stand_in:
        raise ShardingError(
            "Passing lowering_platforms to lower() is required when only "
            f"AbstractMesh exists in {inputs.api}({inputs.fun_name}): its "
            f"shardings are on an AbstractMesh ({mesh}) and no mesh with devices; "
            "write f.trace(*args).lower(lowering_platforms=('cpu',)), then "
            "compile(device_assignment=devices)"
        )


def _on_devices(inputs: LoweringInputs, devices: Sequence[Any]) -> LoweringInputs:
    """`inputs` lowered on a stand-in mesh, moved to `devices` (row-major)."""
    placement = inputs.placement
    old = placement.mesh
    new = old.with_devices(devices)
    jax_new = new.to_jax()

    def move(s: Any) -> Any:
        if isinstance(s, NamedSharding) and s.mesh == old:
            return NamedSharding(new, s.spec, memory_kind=s.memory_kind)
        if isinstance(s, jax.sharding.NamedSharding) and not isinstance(
            s.mesh, jax.sharding.Mesh
        ):
            return jax.sharding.NamedSharding(jax_new, s.spec)
        return s

    moved = dataclasses.replace(
        placement,
        mesh=new,
        inputs=tuple(move(s) for s in placement.inputs),
        outputs=tuple(move(s) for s in placement.outputs),
        specified=tuple(move(s) for s in placement.specified),
    )
    return dataclasses.replace(inputs, placement=moved)


class Lowered(_Stage):
    """A traced function with meshjit's shardings attached; `compile()` it."""

    def __init__(self, inputs: LoweringInputs) -> None:
        self._inputs = inputs
        p = inputs.placement
        kept = inputs.traced.kept
        # On @main's ranks: a typed PRNG key's data dims are replicated.
        # AUTO arguments stay open: the auto-shard pass chooses them.
        args = [
            None
            if p.auto_inputs and p.auto_inputs[k]
            else p.inputs[k].tensor_sharding(
                inputs.leaves[k].physical_ndim, inputs.mesh_name
            )
            for k in kept
        ]
        results = [
            None if s is None else s.tensor_sharding(o.physical_ndim, inputs.mesh_name)
            for s, o in zip(p.outputs, inputs.traced.outputs, strict=True)
        ]
        # Mutable arguments' new values follow the outputs, laid out as the
        # arguments are.
        results += [args[kept.index(k)] for k in inputs.traced.ref_args]
        # Mutable arrays the function closes over follow the arguments, and
        # their new values the results, each laid out as the array is now.
        refs = [ref_sharding(inputs, r) for r in inputs.traced.refs]
        # what the program is compiled for: each call passes the arrays so
        self.ref_targets = tuple(refs)
        args += [
            s.tensor_sharding(_physical_ndim(r), inputs.mesh_name)
            for s, r in zip(refs, inputs.traced.refs, strict=True)
        ]
        results += [
            refs[i].tensor_sharding(
                _physical_ndim(inputs.traced.refs[i]), inputs.mesh_name
            )
            for i in inputs.traced.written
        ]
        # Ordered effects' tokens lead @main's arguments and results.
        tokens: list[TensorSharding | None] = [None] * _tokens(inputs)
        args, results = tokens + args, tokens + results
        # memory layouts asked for, as `mhlo.layout_mode` (XLA honours it)
        modes: tuple[list[str | None], list[str | None]] | None = None
        if inputs.in_layouts or inputs.out_layouts:
            modes = ([None] * len(args), [None] * len(results))
            n = len(tokens)
            for j, k in enumerate(kept):
                if inputs.in_layouts and not inputs.leaves[k].key_shape:
                    modes[0][n + j] = bridge.layout_mode(
                        inputs.in_layouts[k], inputs.leaves[k].dtype
                    )
            for i, o in enumerate(inputs.traced.outputs):
                if inputs.out_layouts and not o.key_shape:
                    modes[1][n + i] = bridge.layout_mode(inputs.out_layouts[i], o.dtype)
        model = p.mesh.to_model()
        # a copy of jax's module, unless views of the mesh need respelling
        # on the text
        views = has_views(inputs.traced.source.meshes, model)
        copy = None if views else inputs.traced.take_module()
        sharded, module = attach_shardings(
            copy if copy is not None else inputs.traced.text,
            inputs.mesh_name,
            model,
            args,
            results,
            lazy=True,
            layout_modes=modes,
        )
        self._texts: dict[str, str] = {}
        # Texts printed without locations (a compile's partitioned module):
        # `as_text` gives them where debug info is not asked for; with it,
        # the stage is made again (the locations are not in them).
        self._plain: dict[str, str] = {}
        # The module, for the first compile to take instead of parsing the
        # text again (a context and a parse: 2-10 ms); its text is printed
        # when asked for, from a copy the passes do not change (a copy is
        # 0.5-2 ms, a print with locations up to 10 ms).
        self._sharded_module = module
        self._sharded_copy: ir.Operation | None = None
        if sharded is not None:
            self._texts["sharded"] = sharded
        elif module is not None:
            self._sharded_copy = module.operation.clone()
        self._aliases: dict[int, int] | None = None
        self._unusable: list[str] = []
        self._auto_shard: object = None  # the auto-shard pass's result

    @property
    def inputs(self) -> LoweringInputs:
        return self._inputs

    @property
    def placement(self) -> Placement:
        return self._inputs.placement

    @property
    def propagation(self) -> str:
        """What runs before the partitioner: auto-shard (for AUTO leaves),
        then meshjit's propagation."""
        return propagation_pipeline(self._inputs)

    @property
    def partition_pipeline(self) -> str:
        """The partition pass these shardings compile with."""
        return partition_pipeline(
            self._inputs.placement.mesh.flat_devices, memory_limit(self._inputs)
        )

    @property
    def out_info(self) -> Any:
        return self._inputs.traced.out_info

    def _text(self, stage: str) -> str:
        if stage in self._texts:
            return self._texts[stage]
        if stage == "traced":
            return self._inputs.traced.text
        if stage == "sharded" and self._sharded_copy is not None:
            text = print_module(self._sharded_copy, debug_info=True)
            self._texts["sharded"] = text
            self._sharded_copy = None
            return text
        if stage == "propagated":
            try:
                text, diags = _run(self._text("sharded"), self.propagation)
                self._auto_shard = diags.payloads.get("auto-shard")
            except DiagnosticError as err:
                raise pipeline_error(self._inputs.api, err) from None
            self._texts["propagated"] = text
            return text
        if stage == "partitioned":
            pipeline = self.partition_pipeline
            try:
                with self._ready_to_partition() as (module, source):
                    run_pipeline(
                        parse_pipeline(pipeline, module.context),
                        module,
                        source,
                        Instrumentation(),
                    )
            except DiagnosticError as err:
                raise pipeline_error(self._inputs.api, err) from None
            text = print_module(module, debug_info=True)
            self._texts["partitioned"] = text
            return text
        raise ValueError(
            f"unknown stage {stage!r}; expected one of {', '.join(STAGES)}"
        )

    def as_text(
        self,
        stage: str = "sharded",
        *,
        dialect: str | None = None,
        debug_info: bool = False,
    ) -> str:
        """The module at `stage`: traced, sharded (default), propagated,
        partitioned; as StableHLO, or with `dialect="hlo"` as XLA's HLO text.
        jax's own spelling `as_text("stablehlo")` / `as_text("hlo")` (the
        dialect first) means the sharded stage in that dialect."""
        if stage in _DIALECTS and dialect is None:
            stage, dialect = "sharded", stage
        if dialect not in (None, *_DIALECTS):
            raise ValueError(
                f"unknown dialect: {dialect!r}; expected one of {', '.join(_DIALECTS)}"
            )
        if dialect == "hlo":
            if stage not in STAGES:
                raise ValueError(
                    f"unknown stage {stage!r}; expected one of {', '.join(STAGES)}"
                )
            plain = None if debug_info else self._plain.get(stage)
            source = plain if plain is not None else self._text(stage)
            return bridge.hlo_text(source, debug_info)
        if stage not in STAGES:
            raise ValueError(
                f"unknown stage {stage!r}; expected one of {', '.join(STAGES)}"
            )
        if not debug_info and stage in self._plain:
            return self._plain[stage]
        text = self._text(stage)
        return text if debug_info else _strip_locations(text)

    def compiler_ir(self, dialect: str | None = None) -> Any:
        """The sharded module as an MLIR module (`dialect` None or
        "stablehlo"), or as XLA's HLO computation ("hlo"), as jax's."""
        if dialect in (None, "stablehlo", "mhlo"):
            return parse_module(self._text("sharded"), make_context())
        if dialect == "hlo":
            return bridge.xla_computation(self._text("sharded"))
        raise ValueError(
            f"unknown dialect: {dialect!r}; expected one of {', '.join(_DIALECTS)}"
        )

    def cost_analysis(self) -> dict[str, float]:
        """XLA's cost estimate of the unpartitioned module, before optimization
        (as jax's; `compile().cost_analysis()` gives the compiled program's)."""
        return bridge.hlo_cost_analysis(bridge.xla_computation(self._text("sharded")))

    @contextmanager
    def _ready_to_partition(self) -> Iterator[tuple[ir.Module, str]]:
        """The module propagated (from the propagated text when `as_text` made
        it, else propagated here) with the donation aliases set, inside one
        `graph_session`: the passes run in the block share one graph read."""
        source = "<module>"
        propagated = self._texts.get("propagated")
        module, self._sharded_module = self._sharded_module, None
        if module is None or propagated is not None:
            text = self._text("sharded") if propagated is None else propagated
            module = parse_module(text, make_context(), source)
        with graph_session(module):
            if propagated is None:
                diags = run_pipeline(
                    parse_pipeline(self.propagation, module.context),
                    module,
                    source,
                    Instrumentation(verify_each=False, verify_last=True),
                )
                found = diags.payloads.get("auto-shard")
                if found is not None:
                    self._auto_shard = found
                # what the passes say the user should hear (a sharding
                # group's members that start with different shardings)
                for message in diags.user_warnings:
                    warnings.warn(
                        f"{self._inputs.api}: {message}", UserWarning, stacklevel=4
                    )
            if self._inputs.traced.inspections:
                self._call_inspections(module, source)
            n = _tokens(self._inputs)
            arg_sh, res_sh = interface_shardings(module)
            aliases = self._donation((arg_sh[n:], res_sh[n:]))
            if aliases:
                shifted = {a + n: r + n for a, r in aliases.items()}
                write_attrs(module, alias_plan(module, shifted, source))
            yield module, source

    def _call_inspections(self, module: ir.Module, source: str) -> None:
        """Calls each jax.debug.inspect_array_sharding callback with the
        sharding propagation chose for its value (jax's callback is called
        by XLA's partitioner, at compile time, with the sharding it chose):
        a jax NamedSharding on the placement's mesh, P() where the value is
        replicated (or inside a shard_map, manual over every axis), a
        GSPMDSharding where a sub-axis has no spec spelling."""
        callbacks = self._inputs.traced.inspections
        mesh = self._inputs.placement.mesh
        jax_mesh = mesh.to_jax()
        for node in read_graph(module, source).walk():
            if node.attrs.get("call_target_name") != INSPECT_SHARDING:
                continue
            config = node.attrs.get("backend_config")
            if not isinstance(config, str) or not config.startswith(
                bridge.INSPECT_PREFIX
            ):
                continue
            callback = callbacks.get(int(config[len(bridge.INSPECT_PREFIX) :]))
            if callback is None:
                raise InternalError(
                    f"an @InspectSharding names a callback ({config}) the "
                    "trace does not hold"
                )
            found = node.attrs.get("sdy.sharding")
            chosen = (
                sdy_text.parse_sharding_per_value(found.text)[0]
                if isinstance(found, Opaque)
                else None
            )
            callback(_inspected_sharding(chosen, mesh, jax_mesh))

    def _donation(
        self,
        shardings: tuple[list[TensorSharding | None], list[TensorSharding | None]],
    ) -> dict[int, int]:
        """@main argument -> result whose buffer it reuses (same shape and
        sharding); `shardings`: the propagated @main's argument and result
        shardings."""
        if self._aliases is not None:
            return self._aliases
        inputs = self._inputs
        arg_sh, res_sh = shardings
        outputs = inputs.traced.outputs
        kept = inputs.traced.kept

        model = inputs.placement.mesh.to_model()

        def same_layout(j: int, r: int) -> bool:
            leaf = inputs.leaves[kept[j]]
            return _layout(res_sh[r], outputs[r].physical_ndim) == _layout(
                arg_sh[j], leaf.physical_ndim
            )

        def block_bytes(s: TensorSharding | None, shape: tuple[int, ...]) -> int:
            local = s.local_shape(shape, model) if s is not None else shape
            return math.prod(local)

        def same_block_size(j: int, r: int) -> bool:
            # As jax: a buffer is reused by a result of the same dtype whose
            # per-device block has as many elements (shapes may differ).
            leaf = inputs.leaves[kept[j]]
            return block_bytes(arg_sh[j], leaf.shape + leaf.key_shape) == block_bytes(
                res_sh[r], outputs[r].shape + outputs[r].key_shape
            )

        aliases, unusable = match_donations(inputs, same_layout, same_block_size)
        # jax hands XLA every donation when propagation decides an output's
        # layout (no out_shardings) on several devices, and says nothing of
        # those XLA could not use: so does meshjit.
        decided = inputs.placement.mesh.size > 1 and any(
            s is None for s in inputs.placement.outputs
        )
        if (inputs.in_layouts or inputs.out_layouts) and not decided:
            _check_donated_layouts(inputs, aliases)  # (as jax checks its aliases)
        self._aliases = aliases
        self._unusable = [] if decided else unusable
        return aliases

    def compile(
        self,
        compiler_options: Mapping[str, Any] | None = None,
        *,
        device_assignment: Sequence[Any] | None = None,
    ) -> Compiled:
        """The per-device program for the mesh's devices; lowered on an
        AbstractMesh, for `device_assignment` (the mesh's devices row-major)."""
        inputs = self._inputs
        mesh = inputs.placement.mesh
        if device_assignment is not None:
            assigned = tuple(device_assignment)
            if mesh.is_stand_in:
                if len(assigned) != mesh.size:
                    raise ShardingError(
                        f"The size of abstract mesh {mesh.size} ({mesh}) must "
                        f"match the length of device assignment: {len(assigned)}"
                    )
                moved = Lowered(_on_devices(inputs, assigned))
                return moved.compile(compiler_options)
            if assigned != mesh.flat_devices:
                raise ShardingError(
                    "device_assignment passed to `.compile` must match the "
                    "device_assignment calculated from array shardings and "
                    f"out_shardings: {list(mesh.flat_devices)} (mesh {mesh}), "
                    f"got {list(assigned)}"
                )
        elif mesh.is_stand_in:
            raise RuntimeError(
                "device_assignment cannot be `None` during compilation: "
                f"{inputs.api}({inputs.fun_name}) was lowered on an AbstractMesh "
                f"({mesh}); pass compile(device_assignment=devices), the mesh's "
                "devices row-major"
            )
        options = dict(inputs.compiler_options or {})
        options.update(compiler_options or {})
        devices = list(inputs.placement.mesh.flat_devices)
        pipeline = self.partition_pipeline
        key = None
        # A program with host callbacks is not cached: its callbacks are
        # Python functions of this process.
        if persistent_cache.cache_dir() is not None and inputs.traced.effects is None:
            key = persistent_cache.make_key(
                self._text("sharded"),
                inputs.donated,
                inputs.traced.kept,
                self.propagation + "," + pipeline,
                devices,
                options,
            )
            cached = self._from_cache(key, devices, options)
            if cached is not None:
                return cached
        try:
            spmd = self._compile(devices, pipeline, options)
        except DiagnosticError as err:
            raise pipeline_error(inputs.api, err) from None
        self._warn_unusable(2)  # the caller of compile()
        self._plain.setdefault("partitioned", spmd.text)
        if key is not None:
            persistent_cache.store(
                key,
                persistent_cache.Entry(
                    spmd.text,
                    spmd.report,
                    dict(self._aliases or {}),
                    list(self._unusable),
                    bridge.serialize_executable(spmd.executable.executable),
                ),
            )
        return Compiled(self, spmd, frozenset(self._aliases or {}))

    def _compile(
        self, devices: list[Any], pipeline: str, options: Mapping[str, Any]
    ) -> SpmdCompiled:
        """Propagates, sets the donation aliases, partitions and compiles: the
        module is parsed once and its graph read once (no text in between)."""
        with self._ready_to_partition() as (module, source):
            return compile_parsed(
                module,
                devices,
                pipeline,
                source,
                reports=frozenset(),  # the partition report carries it all
                compiler_options=options or None,
                effects=self._inputs.traced.effects,
            )

    def _warn_unusable(self, stacklevel: int) -> None:
        if self._unusable:
            warnings.warn(
                f"{self._inputs.api}: Some donated buffers were not usable: "
                + ", ".join(self._unusable),
                UserWarning,
                stacklevel=stacklevel + 1,
            )

    def _from_cache(
        self, key: str, devices: list[Any], options: Mapping[str, Any]
    ) -> Compiled | None:
        """The compile from meshjit's persistent cache, when it holds a usable
        entry for `key` (propagation, partitioning and XLA are skipped)."""
        entry = persistent_cache.load(key)
        if entry is None:
            return None
        try:
            spmd = load_compiled(
                entry.partitioned,
                entry.report,
                devices,
                entry.executable,
                options or None,
            )
        except Exception as err:  # PJRT or the text refused it: compile afresh
            persistent_cache.reject(key, f"{type(err).__name__}: {err}")
            return None
        self._aliases = entry.aliases
        self._unusable = entry.unusable
        self._warn_unusable(3)
        self._plain.setdefault("partitioned", spmd.text)
        return Compiled(self, spmd, frozenset(self._aliases))


def cpp_leaf_order(entries: Sequence[Entry], dyn_tree: Any) -> list[int]:
    """The flat dynamic argument leaves in the order jax's C++ dispatch
    flattens a call (positional arguments, then keyword arguments sorted by
    name), as indices into meshjit's leaves (`entries` order: the
    signature's)."""
    starts = [0]
    for child in dyn_tree.children():
        starts.append(starts[-1] + child.num_leaves)
    ranked = sorted(
        range(len(entries)),
        key=lambda i: (entries[i].keyword is not None, entries[i].keyword or "", i),
    )
    return [k for i in ranked for k in range(starts[i], starts[i + 1])]


def cost_spec(devices: Sequence[Any]) -> str:
    """The cost model for these devices: the platform's defaults ("gpu" on
    GPUs, else "cpu"), or `MESHJIT_COST` (a platform name or a file from
    `python -m meshjit.calibrate`)."""
    spec = os.environ.get("MESHJIT_COST", "")
    if not spec:
        platform = getattr(devices[0], "platform", "cpu") if devices else "cpu"
        spec = "gpu" if platform in ("gpu", "cuda", "rocm") else "cpu"
    return spec


def partition_pipeline(devices: Sequence[Any], memory_limit: str = "") -> str:
    """The partition pass with the cost model for these devices, the
    per-device memory limit its choices keep to ("": none), and whether it
    combines independent collectives (`MESHJIT_COMBINE`)."""
    limit = f" memory-limit={memory_limit}" if memory_limit else ""
    combine = "" if combine_collectives() else " combine=false"
    return f"partition{{cost={cost_spec(devices)}{limit}{combine}}}"


_FALSE = ("0", "false", "no", "off")
_TRUE = ("", "1", "true", "yes", "on")


def combine_collectives() -> bool:
    """`MESHJIT_COMBINE=0` leaves every collective as the partitioner wrote
    it (`partition{combine=false}`): a step issues more collectives (on the
    bench's Llama FSDP step 7 ms longer) but XLA compiles fewer distinct
    kernels (0.27 s less there), each gradient update reading its own
    buffer rather than a cut of a combined one; for programs run a few times.
    Unset, or 1: combined (the default)."""
    text = os.environ.get("MESHJIT_COMBINE", "").strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ShardingError(
        f"MESHJIT_COMBINE={os.environ['MESHJIT_COMBINE']!r}: expected 1 or 0 "
        "(true/false, yes/no, on/off)"
    )


def memory_limit(inputs: LoweringInputs) -> str:
    """The partitioner's per-device memory limit: AUTO's memory budget (the
    layouts it chose fit it; the partitioner's gathers keep to it too), else
    `MESHJIT_MEMORY_LIMIT` (512MiB, 2GB, 1e9), else none."""
    auto = inputs.placement.auto
    if auto is not None and auto.memory_budget is not None:
        return str(auto.memory_budget).replace(" ", "")
    text = os.environ.get("MESHJIT_MEMORY_LIMIT", "").replace(" ", "")
    try:
        parse_bytes(text, "MESHJIT_MEMORY_LIMIT")
    except ValueError as err:
        raise ShardingError(f"{inputs.api}: {err}") from None
    return text


def auto_shard_pass(inputs: LoweringInputs) -> str | None:
    """The auto-shard pass AUTO leaves ask for (with the partitioner's cost
    model), or None without AUTO leaves. A donated argument is tied to the
    result that will reuse its buffer (the first of its shape and dtype not
    taken, as donation matches them), so the two get one layout: a train
    step's parameters come out laid out as they went in."""
    placement = inputs.placement
    if placement.auto is None:
        return None
    ties, _ = match_donations(inputs)
    devices = placement.mesh.flat_devices
    text = ",".join(f"{j}:{r}" for j, r in ties.items())
    return placement.auto.pass_text(cost_spec(devices), text)


def match_donations(
    inputs: LoweringInputs,
    same_layout: Callable[[int, int], bool] | None = None,
    same_block_size: Callable[[int, int], bool] | None = None,
) -> tuple[dict[int, int], list[str]]:
    """As donation matches buffers: @main argument -> the first result not
    yet taken with its shape and dtype (and, given `same_layout(argument,
    result)`, its layout), else, given `same_block_size`, the first with its
    dtype and per-device block size; and the donated leaves left without one."""
    kept = inputs.traced.kept
    outputs = inputs.traced.outputs
    taken: set[int] = set()
    matched: dict[int, int] = {}
    unusable: list[str] = []
    for k, donated in enumerate(inputs.donated):
        if not donated:
            continue
        leaf = inputs.leaves[k]
        if k not in kept:
            unusable.append(f"{leaf.describe()} `{leaf.path}` (unused)")
            continue
        if leaf.ref:  # its buffer stays the mutable array's
            unusable.append(f"{leaf.describe()} `{leaf.path}` (a mutable array)")
            continue
        j = kept.index(k)
        match = next(
            (
                r
                for r, o in enumerate(outputs)
                if r not in taken
                and o.shape == leaf.shape
                and o.dtype == leaf.dtype
                and (same_layout is None or same_layout(j, r))
            ),
            None,
        )
        if match is None and same_block_size is not None:
            match = next(
                (
                    r
                    for r, o in enumerate(outputs)
                    if r not in taken
                    and o.dtype == leaf.dtype
                    and same_block_size(j, r)
                ),
                None,
            )
        if match is None:
            unusable.append(
                f"{leaf.describe()} `{leaf.path}` (no output with the same shape, "
                "dtype and sharding)"
            )
            continue
        taken.add(match)
        matched[j] = match
    return matched, unusable


def propagation_pipeline(inputs: LoweringInputs) -> str:
    """meshjit's propagation, after the auto-shard pass where AUTO leaves ask
    for it."""
    auto = auto_shard_pass(inputs)
    propagation = jit_propagation(cost_spec(inputs.placement.mesh.flat_devices))
    return propagation if auto is None else auto + "," + propagation


def _layout(s: TensorSharding | None, ndim: int) -> tuple[tuple[str, ...], ...]:
    if s is None:
        return ((),) * ndim
    return tuple(tuple(str(a) for a in d.axes) for d in s.dims)


def _inspected_sharding(
    chosen: TensorSharding | None, mesh: Mesh, jax_mesh: jax.sharding.Mesh
) -> jax.sharding.Sharding:
    """What jax.debug.inspect_array_sharding's callback gets for a value
    propagation laid out as `chosen` (None: replicated) on `mesh`."""
    dims = [] if chosen is None else [d.axes for d in chosen.dims]
    if all(a.size is None and a.name in jax_mesh.axis_names for d in dims for a in d):
        spec = [
            None if not d else d[0].name if len(d) == 1 else tuple(a.name for a in d)
            for d in dims
        ]
        while spec and spec[-1] is None:
            spec.pop()
        return jax.sharding.NamedSharding(jax_mesh, jax.P(*spec))
    assert chosen is not None
    hlo = gspmd_text.hlo_from_tensor_sharding(mesh.to_model(), chosen)
    made: jax.sharding.Sharding = GSPMDSharding(mesh.flat_devices, hlo).to_jax()
    return made


def _short(s: Any) -> str:
    if isinstance(s, jax.sharding.NamedSharding):
        return f"NamedSharding(mesh={s.mesh}, spec={s.spec})"
    return repr(s)


class Compiled(_Stage):
    """A compiled function: call it with the dynamic arguments (static ones are
    fixed, as in `jax.stages.Compiled`)."""

    def __init__(
        self, lowered: Lowered, spmd: SpmdCompiled, donated_main: frozenset[int]
    ) -> None:
        self._lowered = lowered
        self._inputs = lowered.inputs
        self._spmd = spmd
        inputs = lowered.inputs
        self._targets = self._input_targets(spmd)
        # AUTO arguments committed elsewhere are moved (said once, below).
        self._auto_moved_warned = False
        self._donated_main = donated_main
        self._ref_targets = tuple(s.to_jax() for s in lowered.ref_targets)
        self._use_user_spelling(inputs.placement)
        # outputs out_shardings puts in another memory (pinned_host, ...):
        # moved there after the run
        self._out_kinds: tuple[str | None, ...] = tuple(
            None
            if o is None or getattr(o, "memory_kind", None) in (None, "device")
            else o.memory_kind
            for o in inputs.placement.outputs
        )
        self._single = (
            jax.sharding.SingleDeviceSharding(inputs.placement.mesh.flat_devices[0])
            if inputs.placement.single_device
            else None
        )
        self._dispatch: Dispatcher | None = None
        # Typed PRNG keys among the arguments or results (passed as key data).
        self._keys = any(
            leaf.key_shape for leaf in (*inputs.leaves, *inputs.traced.outputs)
        )
        # Results of dtype float0 (the tangents `jax.grad(allow_int=True)`
        # gives integer inputs): returned as jax.jit returns them, numpy
        # float0 arrays, not the bool buffers the program computes.
        self._float0 = [
            i
            for i, leaf in enumerate(inputs.traced.outputs)
            if leaf.dtype == jax.dtypes.float0
        ]
        # Weakly typed results (of Python scalars: `return 0.1`, a loop's
        # counter) come back weakly typed, as under jax.jit: `bf16 * lr`
        # stays bf16.
        self._weak = [
            i
            for i, leaf in enumerate(inputs.traced.outputs)
            if leaf.weak_type and not leaf.key_shape
        ]
        if spmd.executable.spans_processes:  # named if the processes differ
            spmd.executable.describe(
                inputs.fun_name,
                [
                    f"`{inputs.leaves[k].path}`: {inputs.leaves[k].describe()} "
                    f"{self._targets[k].spec}"
                    for k in inputs.traced.kept
                ],
            )

    def _input_targets(self, spmd: SpmdCompiled) -> tuple[Any, ...]:
        """Each argument leaf's sharding: as placed, or for AUTO leaves as
        the auto-shard pass chose (read from the partitioned @main)."""
        inputs = self._lowered.inputs
        placement = inputs.placement
        targets = [s.to_jax() for s in placement.inputs]
        if not any(placement.auto_inputs):
            return tuple(targets)
        mesh = placement.mesh.to_jax()
        for j, k in enumerate(inputs.traced.kept):
            layout = spmd.input_layouts[j] if j < len(spmd.input_layouts) else None
            if not placement.auto_inputs[k] or layout is None:
                continue
            spec = []
            for axes in layout:
                names = [a.name for a in axes]
                spec.append(
                    None if not names else names[0] if len(names) == 1 else tuple(names)
                )
            while spec and spec[-1] is None:
                spec.pop()
            targets[k] = jax.sharding.NamedSharding(mesh, jax.P(*spec))
        return tuple(targets)

    def moves_auto(self, flat: Sequence[Any]) -> bool:
        """Whether a committed argument of an AUTO leaf is laid out other
        than the search chose (it is moved; jax's C++ dispatch would not)."""
        placement = self._lowered.inputs.placement
        if not any(placement.auto_inputs):
            return False
        leaves = self._lowered.inputs.leaves
        moved = [
            leaves[k].path
            for k in self._lowered.inputs.traced.kept
            if placement.auto_inputs[k]
            and isinstance(flat[k], jax.Array)
            and flat[k].committed
            and not flat[k].sharding.is_equivalent_to(self._targets[k], leaves[k].ndim)
        ]
        if moved and not self._auto_moved_warned:
            self._auto_moved_warned = True
            names = ", ".join(f"`{p}`" for p in moved)
            warnings.warn(
                f"{self._lowered.inputs.api}: moving {names} to the layout "
                "auto-sharding chose (AUTO in_shardings); put arguments there "
                "first to save the copy: jax.device_put(x, "
                "f.lower(...).compile().input_shardings); a step's own outputs "
                "come back in the arguments' layouts when those arguments are "
                "donated (donate_argnums)",
                UserWarning,
                stacklevel=4,
            )
        return bool(moved)

    def _use_user_spelling(self, placement: Placement) -> None:
        """Outputs carry out_shardings as written (JAX does), and propagated
        shardings without trailing `None`s (as JAX prints them)."""
        executable = self._spmd.executable
        inputs = self._lowered.inputs
        traced = inputs.traced
        # The placement's mesh as the user made it: its axis types too (in
        # explicit sharding mode an output's type comes from its mesh).
        user_mesh = placement.mesh.to_jax()
        # jax's rule: an output laid out as the first argument with a given
        # sharding, of the same rank and mesh, carries that sharding itself.
        first = next(
            (
                (placement.specified[k], inputs.leaves[k].ndim)
                for k in traced.kept
                if k < len(placement.specified)
                and isinstance(placement.specified[k], jax.sharding.NamedSharding)
            ),
            None,
        )
        out_meshes = traced.out_meshes or (None,) * len(traced.outputs)
        spelled = []
        n = len(traced.outputs)  # then the new values of mutable arrays
        for built, asked, leaf, out_mesh in zip(
            executable.out_shardings[:n],
            placement.outputs,
            traced.outputs,
            out_meshes,
            strict=True,
        ):
            ndim = max(len(built.spec), leaf.ndim)
            # The propagated layout without trailing `None`s, on the user's
            # mesh (its axis types) where that is the same mesh.
            parts = list(built.spec)
            while parts and parts[-1] is None:
                parts.pop()
            mesh = built.mesh
            if (
                user_mesh.axis_names == mesh.axis_names
                and user_mesh.devices.shape == mesh.devices.shape
            ):
                mesh = user_mesh
            propagated = jax.sharding.NamedSharding(mesh, jax.P(*parts))
            if asked is not None:
                want = asked.to_jax()
            elif leaf.sharding is not None:  # the spec in the output's type
                view = _view_mesh(user_mesh, leaf.sharding.mesh)
                want = jax.sharding.NamedSharding(
                    view if view is not None else user_mesh, leaf.sharding.spec
                )
            elif (
                first is not None
                and first[1] == leaf.ndim == ndim
                and (
                    out_mesh == first[0].mesh.abstract_mesh
                    # One device: XLA's output sharding is no mesh's, and jax
                    # gives back the argument's own.
                    or (built.num_devices == 1 and first[0].num_devices == 1)
                )
                and first[0].is_equivalent_to(built, ndim)
            ):
                want = first[0]
            else:
                want = propagated
            # The per-device program's layout holds no unreduced/reduced sets
            # (its partial sums are the device buffers themselves): compare dims.
            dims = want
            if want.spec.unreduced or want.spec.reduced:
                dims = jax.sharding.NamedSharding(
                    want.mesh,
                    jax.P(*want.spec.partitions),
                    memory_kind=want.memory_kind,
                )
            if dims.is_equivalent_to(built, ndim):
                chosen = want
            else:  # e.g. the type names Explicit axes only, Auto ones split too
                chosen = (
                    propagated if propagated.is_equivalent_to(built, ndim) else built
                )
            if (
                isinstance(chosen, jax.sharding.NamedSharding)
                and isinstance(out_mesh, jax.sharding.AbstractMesh)
                and out_mesh.axis_names == chosen.mesh.axis_names
                and tuple(out_mesh.axis_sizes) == tuple(chosen.mesh.axis_sizes)
                and out_mesh.axis_types != chosen.mesh.axis_types
                and isinstance(chosen.mesh, jax.sharding.Mesh)
            ):
                # The output's type names its mesh's axis types (a function
                # may return a value from a `use_abstract_mesh` block).
                chosen = jax.sharding.NamedSharding(
                    jax.sharding.Mesh(
                        chosen.mesh.devices,
                        chosen.mesh.axis_names,
                        axis_types=out_mesh.axis_types,
                    ),
                    chosen.spec,
                    memory_kind=chosen.memory_kind,
                )
            if (
                isinstance(chosen, jax.sharding.NamedSharding)
                and isinstance(out_mesh, jax.sharding.AbstractMesh)
                and out_mesh.axis_names != chosen.mesh.axis_names
            ):
                # Returned from a `use_abstract_mesh` block that renames or
                # resizes the mesh's axes over the same devices: spelled on it.
                chosen = _on_view(chosen, out_mesh) or chosen
            if leaf.key_shape and isinstance(chosen, jax.sharding.NamedSharding):
                # A typed key's data: the key's spec and a None per key dim,
                # as jax spells `key_data(out).sharding`.
                parts = list(chosen.spec.partitions)
                if len(parts) < leaf.physical_ndim:
                    parts += [None] * len(leaf.key_shape)
                chosen = jax.sharding.NamedSharding(
                    chosen.mesh, jax.P(*parts), memory_kind=chosen.memory_kind
                )
            spelled.append(chosen)
        executable.out_shardings = (*spelled, *executable.out_shardings[n:])

    # -- inspection ------------------------------------------------------------

    @property
    def lowered(self) -> Lowered:
        return self._lowered

    @property
    def auto_shard(self) -> AutoShardResult | None:
        """With AUTO leaves: what the auto-shard pass chose (its `summary()`:
        status, estimated step time, solve time, peak memory; `text()`: every
        decision with its cost and the next-best layout). None without AUTO
        leaves, or when the compile came from the persistent cache."""
        found = self._lowered._auto_shard
        return found if isinstance(found, AutoShardResult) else None

    @property
    def partition_report(self) -> PartitionReport:
        """Collectives the partitioner inserted, and remarks, with their reasons."""
        return self._spmd.report

    def report(
        self,
        path: str | os.PathLike[str] = "report.html",
        *,
        bound_bytes: int | None = None,
    ) -> str:
        """Writes the compiled program as one self-contained HTML page (mesh,
        arguments and results drawn per device, the program graph with its
        collectives, a sortable table of them, per-device memory, search with
        each value's sharding origin) and returns its absolute path.

        Runs meshjit's propagation and partitioner once more, keeping what the
        page shows (the compiled executable is not rebuilt). `bound_bytes`:
        the analytic minimum of collective bytes per device, where known."""
        from meshjit import htmlreport  # the page is not needed to run programs

        lowered = self._lowered
        inputs = lowered.inputs
        devices = inputs.placement.mesh.flat_devices
        memory = self.memory_analysis()
        xla_memory = {
            name: int(getattr(memory, f"{name}_size_in_bytes"))
            for name in ("argument", "output", "temp", "alias", "generated_code")
            if memory is not None and hasattr(memory, f"{name}_size_in_bytes")
        }
        collected = htmlreport.collect(
            lowered.as_text("sharded", debug_info=True),
            lowered.propagation + "," + lowered.partition_pipeline,
            inputs.fun_name,
            arg_names=[f"`{inputs.leaves[k].path}`" for k in inputs.traced.kept],
            result_names=[f"`{o.path}`" for o in inputs.traced.outputs],
            processes=htmlreport.processes_of(devices),
            platform=str(getattr(devices[0], "platform", "")) if devices else "",
            xla_memory=xla_memory,
            bound_bytes=bound_bytes,
        )
        return htmlreport.write_html(collected, path)

    def collectives_text(self) -> str:
        return self._spmd.report.collectives_text()

    @property
    def input_shardings(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """(positional, keyword) argument shardings as pytrees of jax shardings."""
        inputs = self._lowered.inputs
        shardings = [self._jax_out(t) for t in self._targets]
        dynamic = jax.tree_util.tree_unflatten(inputs.dyn_tree, shardings)
        pos = tuple(
            v
            for e, v in zip(inputs.form.entries, dynamic, strict=True)
            if not e.keyword
        )
        kw = {
            e.keyword: v
            for e, v in zip(inputs.form.entries, dynamic, strict=True)
            if e.keyword
        }
        return pos, kw

    @property
    def input_formats(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """(positional, keyword) argument `Format`s (memory layout and
        sharding) as pytrees, as the executable takes them."""
        inputs = self._lowered.inputs
        taken = self._spmd.executable.argument_layouts
        layouts: list[Any] = [None] * len(inputs.leaves)
        for j, k in enumerate(inputs.traced.kept):
            if taken is not None and not inputs.leaves[k].key_shape:
                layouts[k] = bridge.jax_layout(taken[j])
        pos, kw = self.input_shardings
        shardings = jax.tree_util.tree_leaves((pos, kw))
        formats = [
            bridge.make_format(layout, s)
            for layout, s in zip(layouts, shardings, strict=True)
        ]
        return jax.tree_util.tree_unflatten(  # type: ignore[no-any-return]
            jax.tree_util.tree_structure((pos, kw)), formats
        )

    @property
    def output_formats(self) -> Any:
        """The outputs' `Format`s (memory layout and sharding) as a pytree."""
        traced = self._lowered.inputs.traced
        n = len(traced.outputs)
        made = self._spmd.executable.result_layouts
        formats = [
            bridge.make_format(
                None
                if made is None or traced.outputs[i].key_shape
                else bridge.jax_layout(made[i]),
                self._jax_out(s, i),
            )
            for i, s in enumerate(self._spmd.executable.out_shardings[:n])
        ]
        return jax.tree_util.tree_unflatten(traced.out_tree, formats)

    @property
    def output_shardings(self) -> Any:
        """The outputs' shardings as propagated (or as out_shardings asked)."""
        n = len(self._lowered.inputs.traced.outputs)
        shardings = [
            self._jax_out(s, i)
            for i, s in enumerate(self._spmd.executable.out_shardings[:n])
        ]
        return jax.tree_util.tree_unflatten(
            self._lowered.inputs.traced.out_tree, shardings
        )

    @property
    def out_info(self) -> Any:
        """The outputs' ShapeDtypeStructs with their shardings."""
        traced = self._lowered.inputs.traced
        n = len(self._lowered.inputs.traced.outputs)
        shardings = [
            self._jax_out(s, i)
            for i, s in enumerate(self._spmd.executable.out_shardings[:n])
        ]
        infos = [
            jax.ShapeDtypeStruct(o.shape, o.dtype, sharding=s, weak_type=o.weak_type)
            for o, s in zip(traced.outputs, shardings, strict=True)
        ]
        return jax.tree_util.tree_unflatten(traced.out_tree, infos)

    def runtime_executable(self) -> Any:
        """PJRT's loaded executable of the per-device program."""
        return self._spmd.executable.executable

    def _jax_out(self, s: Any, i: int | None = None) -> Any:
        """Output `i`'s jax sharding (in the memory out_shardings asked for)."""
        out = self._single if self._single is not None else s
        kind = self._out_kinds[i] if i is not None else None
        return out.with_memory_kind(kind) if kind else out

    def as_text(self, stage: str | None = None) -> str:
        """XLA's HLO of the executable (as JAX gives it), or a meshjit stage."""
        if stage is None:
            return self._spmd.executable.hlo_text()
        if stage == "partitioned":
            return _strip_locations(self._spmd.text)
        return self._lowered.as_text(stage)

    def cost_analysis(self) -> dict[str, float]:
        found = self._spmd.executable.executable.cost_analysis()
        return dict(found) if isinstance(found, Mapping) else dict(found[0])

    def memory_analysis(self) -> Any:
        return self._spmd.executable.executable.get_compiled_memory_stats()

    # -- running -----------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # pytest: show the user's frames
        dispatch = self._dispatch
        if dispatch is None:
            dispatch = self._dispatch = Dispatcher(
                self._lowered.inputs.fun_name,
                self._checked_call,
                donates=any(self._lowered.inputs.donated),
            )
        return dispatch(*args, **kwargs)

    def _checked_call(
        self, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> tuple[Any, Any]:
        return self.run_call(self._checked_leaves(args, kwargs))

    def run_call(self, flat: Sequence[Any]) -> tuple[Any, Any]:
        """Runs on the flat dynamic argument leaves (already checked by the
        caller): the outputs, and what lets jax's C++ dispatch repeat the
        call (None where it must not: an argument moved to an AUTO layout
        or copied into the executable's memory layout)."""
        moved = self.moves_auto(flat)
        outs, relaid = self._run(flat)
        return outs, None if moved or relaid else self.fastpath_data(outs)

    def _checked_leaves(
        self, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> list[Any]:
        inputs = self._lowered.inputs
        entries = inputs.form.entries
        positional = [e for e in entries if e.keyword is None]
        if len(args) != len(positional) or set(kwargs) != {
            e.keyword for e in entries if e.keyword
        }:
            expected = [e.name for e in entries]
            raise JitArgumentError(
                f"{inputs.api}: the compiled function takes the dynamic arguments "
                f"({', '.join(expected)}) as lowered ({len(positional)} positional); "
                f"it was called with {len(args)} positional and keywords "
                f"{sorted(kwargs)}. Static arguments are fixed at lower() and are "
                "not passed again"
            )
        it = iter(args)
        values = [next(it) if e.keyword is None else kwargs[e.keyword] for e in entries]
        flat, tree = jax.tree_util.tree_flatten(tuple(values))
        if tree != inputs.dyn_tree:
            raise JitArgumentError(
                f"{inputs.api}: Function compiled with input pytree does not match "
                "the input pytree it was called with: it was lowered for arguments "
                f"of structure {inputs.dyn_tree} but called with {tree}"
            )
        for k, (v, leaf, target) in enumerate(
            zip(flat, inputs.leaves, self._targets, strict=True)
        ):
            if isinstance(v, jax.core.Tracer):  # under vmap, grad, or a jit
                raise JitArgumentError(
                    f"{inputs.api}: Cannot apply JAX transformations to a function "
                    "lowered and compiled for a particular signature. Detected "
                    f"{type(v).__name__} as argument `{leaf.path}`; transform the "
                    "function, then jit it (or call the jitted function)"
                )
            if leaf.ref != isinstance(v, jax.Ref):
                raise JitArgumentError(
                    f"{inputs.api}: argument `{leaf.path}` was compiled for "
                    f"{'a mutable array (jax.new_ref)' if leaf.ref else 'an array'} "
                    f"but called with {'an array' if leaf.ref else 'a mutable array'}"
                )
            shape = tuple(np.shape(v))
            dtype = getattr(v, "dtype", None)
            if isinstance(dtype, np.dtype) and not isinstance(v, jax.Array):
                # numpy int64 is int32 without x64 (a jax array's is its own)
                dtype = jax.dtypes.canonicalize_dtype(dtype)
            if shape != leaf.shape or (
                dtype is not None and leaf_dtype(dtype) != leaf.dtype
            ):
                raise JitArgumentError(
                    f"{inputs.api}: argument `{leaf.path}` was compiled for "
                    f"{leaf.describe()} but called with {describe_aval(v)}"
                )
            auto = inputs.placement.auto_inputs
            moved = inputs.placement.pinned or (auto and auto[k])
            if isinstance(v, jax.Array) and v.committed and not moved:
                own = v.sharding
                if not own.is_equivalent_to(target, leaf.ndim):
                    raise ShardingError(
                        f"{inputs.api}: argument `{leaf.path}` ({leaf.describe()}) is "
                        f"committed to {_short(own)} but the function was compiled "
                        f"for {_short(target)}; jax.device_put it first"
                    )
        return flat

    def fastpath_data(self, outs: Any) -> Any:
        """What jax's C++ dispatch needs to repeat a call that returned `outs`
        without Python (see frontend/dispatch.py); None keeps such calls on the
        Python path (zero-size outputs, which `_assemble` rebuilds)."""
        inputs = self._lowered.inputs
        flat, tree = jax.tree_util.tree_flatten(outs)
        if any(0 in getattr(o, "shape", ()) for o in flat):
            return None  # zero-size outputs: rebuilt in Python
        if self._float0:
            return None  # float0 results: numpy arrays, made in Python
        traced = inputs.traced
        if (
            traced.effects is not None
            or traced.token_outputs
            or traced.refs
            or traced.ref_args
        ):
            return None  # tokens, callbacks and mutable arrays: in Python
        kept = set(traced.kept)
        # jax's C++ dispatch flattens the positional arguments, then the
        # keyword arguments sorted by name; meshjit's leaves follow the
        # signature. It hands the executable the kept leaves in its own order,
        # so where that is not the executable's, such calls stay in Python.
        order = cpp_leaf_order(inputs.form.entries, inputs.dyn_tree)
        if [i for i in order if i in kept] != list(traced.kept):
            return None
        return bridge.fastpath_data(
            self._spmd.executable.executable,
            tree,
            flat,
            [i in kept for i in order],
            [
                bridge.physical_sharding(
                    inputs.leaves[k].shape, inputs.leaves[k].dtype, self._targets[k]
                )
                if inputs.leaves[k].key_shape
                else self._targets[k]
                for k in traced.kept
            ],
        )

    def _run(self, flat: Sequence[Any]) -> tuple[Any, bool]:
        """The outputs, and whether an argument was copied into the
        executable's memory layout or a result moved to another memory
        (either keeps the call off the fast path)."""
        inputs = self._lowered.inputs
        if jax.config.jax_no_execution:  # type: ignore[attr-defined]
            raise RuntimeError(
                f"{inputs.api}: meshjit tried to execute function "
                f"{inputs.fun_name}, but the no_execution config option is set "
                "(jax.no_execution())"
            )
        kept = inputs.traced.kept
        ref_args = inputs.traced.ref_args
        if ref_args:
            check_ref_arguments(flat, inputs.leaves, inputs.api, inputs.traced.refs)
        placed = []
        donated_ids: dict[int, str] = {}
        for j, k in enumerate(kept):
            v, leaf, target = flat[k], inputs.leaves[k], self._targets[k]
            if leaf.ref:  # a mutable array: its value
                v = bridge.ref_value(v)
            here = self._place(v, leaf, target)
            placed.append(jax.random.key_data(here) if leaf.key_shape else here)
            if j in self._donated_main and isinstance(v, jax.Array):
                donated_ids[id(v)] = leaf.path
        for k in kept:
            v = flat[k]
            other = donated_ids.get(id(v))
            if other is not None and other != inputs.leaves[k].path:
                raise DeletedArgumentError(
                    f"{inputs.api}: the same array is passed as the donated argument "
                    f"`{other}` and as `{inputs.leaves[k].path}`; a donated buffer "
                    "can be used once per call: pass a copy"
                )
        refs = inputs.traced.refs
        for ref, target in zip(refs, self._ref_targets, strict=True):
            value = bridge.ref_value(ref)
            if value.sharding != target:
                value = jax.device_put(value, target)
            keys = is_key_dtype(value.dtype)
            placed.append(jax.random.key_data(value) if keys else value)
        relaid = self._relayout(placed, flat)
        outs = self._spmd.executable(*placed)
        if refs or ref_args:  # the mutable arrays' new values, written back
            n = len(inputs.traced.outputs)
            m = n + len(ref_args)
            for k, value in zip(ref_args, outs[n:m], strict=True):
                bridge.set_ref_value(flat[k], _as_held(value, flat[k]))
            for i, value in zip(inputs.traced.written, outs[m:], strict=True):
                bridge.set_ref_value(refs[i], _as_held(value, refs[i]))
            outs = outs[:n]
        if self._single is not None:
            committed = not inputs.placement.uncommitted
            outs = [
                bridge.single_device_array(
                    o.addressable_data(0), self._single, committed
                )
                for o in outs
            ]
        if self._keys:
            outs = [
                bridge.wrap_key_data(o, leaf.dtype) if leaf.key_shape else o
                for o, leaf in zip(outs, inputs.traced.outputs, strict=True)
            ]
        if any(self._out_kinds):  # into the memory out_shardings asks for
            outs = [
                jax.device_put(o, o.sharding.with_memory_kind(kind)) if kind else o
                for o, kind in zip(outs, self._out_kinds, strict=True)
            ]
            relaid = True  # (the executable's outputs are in device memory)
        for i in inputs.traced.token_outputs:
            outs[i] = bridge.token_of([outs[i]])
        for i in self._weak:
            outs[i] = bridge.weakly_typed(outs[i])
        if self._float0:
            results: list[Any] = list(outs)
            for i in self._float0:
                results[i] = np.zeros(results[i].shape, jax.dtypes.float0)
            return jax.tree_util.tree_unflatten(inputs.traced.out_tree, results), relaid
        return jax.tree_util.tree_unflatten(inputs.traced.out_tree, outs), relaid

    def _relayout(self, placed: list[Any], flat: Sequence[Any]) -> bool:
        """Copies into the executable's layout each argument whose buffers
        are in another (`jax.device_put(x, Format(Layout(...), s))`, or an
        output of a program compiled for one): the executable would read its
        bytes in the wrong order. (jax.jit compiles a program for such an
        argument's layout instead.) Such calls stay on the Python path. As
        jax: a committed array whose layout is not the one jit was given
        (in_shardings=Format(Layout(...), s)) is refused."""
        inputs = self._lowered.inputs
        want = self._spmd.executable.argument_layouts
        kept = inputs.traced.kept
        relaid = False
        for j, x in enumerate(placed):
            layout = bridge.default_layout(x) if want is None else want[j]
            if bridge.buffer_layout(x) == layout:
                continue
            if j < len(kept) and inputs.in_layouts:
                k = kept[j]
                given = inputs.in_layouts[k]
                v = flat[k]
                if (
                    given is not None
                    and not bridge.is_auto_layout(given)
                    and isinstance(v, jax.Array)
                    and v.committed
                ):
                    own = bridge.jax_layout(bridge.buffer_layout(v))
                    raise ShardingError(
                        f"{inputs.api}: Layout passed to jit does not match the "
                        f"layout on the respective arg `{inputs.leaves[k].path}` "
                        f"({inputs.leaves[k].describe()}). Got jit layout: "
                        f"{given}, arg layout: {own}; "
                        "jax.device_put(x, Format(layout, sharding)) it first"
                    )
            placed[j] = bridge.relayout(x, layout)
            relaid = True
        return relaid

    def _place(self, v: Any, leaf: LeafInfo, target: Any) -> jax.Array:
        api = self._lowered.inputs.api
        if isinstance(v, jax.Array):
            if v.is_deleted():
                raise DeletedArgumentError(
                    f"{api}: argument `{leaf.path}` ({leaf.describe()}) was donated "
                    "to an earlier call or deleted: Array has been deleted; pass a "
                    "live array (keep a copy if you need the value after donating it)"
                )
            if v.sharding == target:
                return v
            moved: jax.Array = jax.device_put(v, target)
            return moved
        if jax.process_count() > 1 and not target.is_fully_replicated:
            raise ShardingError(
                f"{api}: argument `{leaf.path}` is a host value; with several "
                "processes, non-replicated arguments must be jax.Arrays with global "
                "shapes (jax.make_array_from_process_local_data)"
            )
        placed: jax.Array = jax.device_put(np.asarray(v, dtype=leaf.dtype), target)
        return placed


def _check_donated_layouts(inputs: LoweringInputs, aliases: Mapping[int, int]) -> None:
    """As jax: a donated argument's buffer is reused for a result only where
    both layouts are chosen by XLA (Layout.AUTO) or neither is."""
    for j, r in aliases.items():
        k = inputs.traced.kept[j]
        given = inputs.in_layouts[k] if inputs.in_layouts else None
        made = inputs.out_layouts[r] if inputs.out_layouts else None
        if bridge.is_auto_layout(given) == bridge.is_auto_layout(made):
            continue
        other = "output" if bridge.is_auto_layout(given) else "input"
        raise ShardingError(
            f"{inputs.api}: the donated argument `{inputs.leaves[k].path}` has "
            f"layout {given or 'default'} and the result it would be reused for "
            f"(`{inputs.traced.outputs[r].path}`) has layout {made or 'default'}. "
            "Did you mean "
            f"to set the **{other} layout** to **Layout.AUTO**? Then XLA chooses "
            "both layouts (a buffer is reused only where they are the same)"
        )


def _physical_ndim(ref: Any) -> int:
    """The rank of a mutable array's value in the module (a typed PRNG key
    array's with its key data dims)."""
    return len(ref.shape) + len(key_data_shape(ref.dtype))


def _as_held(value: Any, ref: Any) -> Any:
    """A mutable array's new value as the array holds it: typed PRNG keys
    over the key data the executable returns."""
    dtype = bridge.ref_value(ref).dtype
    return bridge.wrap_key_data(value, dtype) if is_key_dtype(dtype) else value


def placement_summary(placement: Placement, leaves: Sequence[LeafInfo]) -> str:
    lines = []
    for s, leaf in zip(placement.inputs, leaves, strict=True):
        lines.append(f"  {leaf.path}: {leaf.describe()} {s.spec!r}")
    return "\n".join(lines)


def named_spec(s: NamedSharding | None) -> str:
    return "propagated" if s is None else repr(s.spec)
