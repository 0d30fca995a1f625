"""A partitioned module in XLA's replica form: what PJRT compiles.

The partitioner's module is SPMD-shaped: @main takes and returns global
values and its body is one `sdy.manual_computation` over every mesh axis,
whose collectives name devices by partition id (`use_global_device_ids`,
or a channel for cross-partition ops). Compiled that way, XLA still runs
Shardy's import/export and its SPMD partitioner over the module (which add
nothing: the body is manual), 5-10% of a compile (measured: 60-90 ms of
the Llama step's 1.3 s XLA compile, ~9 ms of a small MLP's 80 ms).

The same program with N replicas and one partition needs neither: @main is
the body itself (local types), device i is replica i, and each collective
keeps its groups:
- all_reduce/all_gather/reduce_scatter with a channel name devices by
  `replica * partitions + partition` (use_global_device_ids) or by replica
  across all partitions; with one partition both are the replica id;
- collective_permute/all_to_all/collective_broadcast are cross-partition with
  a channel and cross-replica without one: the channel is dropped;
- `partition_id` becomes `replica_id`, `sdy.constant` a `stablehlo.constant`
  (what Shardy's export makes of it);
- groups named by mesh axes (`#stablehlo.replica_group_mesh_axes`, which jax
  0.11 emits for some shard_map collectives) become the device groups they
  name, since the mesh they refer to goes: devices grouped by equal
  coordinates off the axes, row-major over the axes as listed.

`to_replicas` rewrites a module in place when it has that shape and nothing
whose meaning would change (a collective without a channel, a `replica_id`,
a sharding left inside the body, groups over a mesh with explicit device ids
or in a form this module does not read); otherwise it leaves the module as it is and
the module is compiled as SPMD (the same program, a slower compile).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from meshjit.compiler.ir import ir, is_dense_ints
from meshjit.dialects.reshard import replica_groups
from meshjit.dialects.sdy_text import parse_mesh_op
from meshjit.dialects.sharding import AxisRef, MeshModel
from meshjit.passes.partitioner.builder import groups_attr

# Collectives whose device numbering XLA reads from channel presence alone.
_CHANNEL_ONLY = frozenset(
    {
        "stablehlo.all_to_all",
        "stablehlo.collective_broadcast",
        "stablehlo.collective_permute",
    }
)
# Collectives that keep their channel (and flattened ids) as they are.
_KEEP_CHANNEL = frozenset(
    {"stablehlo.all_gather", "stablehlo.all_reduce", "stablehlo.reduce_scatter"}
)
# Ops and attributes that mean something only to XLA's SPMD partitioner.
_SPMD_ONLY_CALLS = frozenset(
    {"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "ShardBarrierFrom"}
)
_SHARDING_ATTRS = ("mhlo.sharding", "sdy.sharding", "sdy.sharding_rule")
_SDY_SHARDING = frozenset({"sdy.sharding"})
_MESH_AXES = re.compile(
    r"#stablehlo\.replica_group_mesh_axes<mesh = @([\w.$-]+), axes = \[(.*)\]>"
)
_AXIS_REF = re.compile(
    r'#stablehlo\.axis_ref<name = "([\w.$-]+)"(?:, sub_axis_info = \((\d+)\)(\d+))?>'
)


def _int_attr(attrs: ir.OpAttributeMap, name: str) -> int | None:
    if name not in attrs:
        return None
    return int(ir.IntegerAttr(attrs[name]).value)


@dataclass(slots=True)
class _Plan:
    """A module's replica form, before it is written."""

    main: ir.Operation
    manual: ir.Operation  # the sdy.manual_computation that becomes @main
    replicas: int
    channels: list[ir.Operation]  # collectives whose channel goes
    ids: list[ir.Operation]  # partition_ids, to become replica_ids
    constants: list[ir.Operation]  # sdy.constants, to become stablehlo's
    groups: list[tuple[ir.Operation, ir.Attribute]]  # mesh-axes groups, resolved


def _manual_body(
    module: ir.Module,
) -> tuple[ir.Operation, ir.Operation, int, ir.Operation] | None:
    """(@main, its manual computation, the number of devices, the sdy.mesh)
    when the module has the partitioner's shape, else None."""
    attrs = module.operation.attributes
    partitions = _int_attr(attrs, "mhlo.num_partitions")
    replicas = _int_attr(attrs, "mhlo.num_replicas")
    if partitions is None or partitions < 1 or replicas not in (None, 1):
        return None
    meshes = [op for op in module.body.operations if op.operation.name == "sdy.mesh"]
    mains = [
        op
        for op in module.body.operations
        if op.operation.name == "func.func"
        and ir.StringAttr(op.operation.attributes["sym_name"]).value == "main"
    ]
    if len(meshes) != 1 or len(mains) != 1:
        return None
    main = mains[0].operation
    blocks = list(main.regions[0].blocks)
    if len(blocks) != 1:
        return None
    ops = [op.operation for op in blocks[0].operations]
    if len(ops) != 2 or ops[0].name != "sdy.manual_computation":
        return None
    manual, ret = ops
    if ret.name != "func.return":
        return None
    if list(manual.operands) != list(blocks[0].arguments) or list(ret.operands) != list(
        manual.results
    ):
        return None
    return main, manual, partitions, meshes[0].operation


def _mesh_axes_groups(
    attr: ir.Attribute, mesh_op: tuple[str, MeshModel]
) -> ir.Attribute | None:
    """The dense device groups that mesh-axes replica groups on the module's
    mesh (`mesh_op`: its name and model) name; None for another mesh, a mesh
    with explicit device ids (whose numbering XLA's reading would have to
    match) or a form not read here."""
    found = _MESH_AXES.fullmatch(str(attr))
    if found is None:
        return None
    name, mesh = mesh_op
    if found.group(1) != name or mesh.device_ids is not None:
        return None
    refs = _axis_refs(found.group(2), mesh)
    if refs is None:
        return None
    return ir.Attribute.parse(groups_attr(replica_groups(mesh, refs)))


def _axis_refs(text: str, mesh: MeshModel) -> list[AxisRef] | None:
    """`#stablehlo.axis_ref<...>, ...` as AxisRefs on `mesh`; None when the
    text holds anything else or names no axis of `mesh`."""
    found = list(_AXIS_REF.finditer(text))
    if ", ".join(m.group(0) for m in found) != text:
        return None
    sizes = {a.name: a.size for a in mesh.axes}
    refs: list[AxisRef] = []
    for ref in found:
        name = ref.group(1)
        if name not in sizes:
            return None
        if ref.group(2) is None:
            refs.append(AxisRef(name))
            continue
        pre, size = int(ref.group(2)), int(ref.group(3))
        if pre < 1 or size < 1 or sizes[name] % (pre * size):
            return None
        refs.append(AxisRef(name, pre, size))
    if any(a.overlaps(b, mesh) for i, a in enumerate(refs) for b in refs[:i]):
        return None
    return refs


def _plan(module: ir.Module) -> _Plan | None:
    """What changes in the replica form; None when the module does not have
    the partitioner's shape or something in it would change meaning."""
    found = _manual_body(module)
    if found is None:
        return None
    main, manual, replicas, mesh_op = found
    plan = _Plan(main, manual, replicas, [], [], [], [])
    mesh: list[tuple[str, MeshModel]] = []
    ok = True

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal ok
        name = op.name
        attrs = op.attributes
        if name in _CHANNEL_ONLY or name in _KEEP_CHANNEL:
            ok = "channel_handle" in attrs
            if name in _CHANNEL_ONLY:
                plan.channels.append(op)
            named = ok and "replica_groups" in attrs
            if named and not is_dense_ints(attrs["replica_groups"]):
                if not mesh:  # the module's mesh, read once
                    mesh.append(parse_mesh_op(str(mesh_op)))
                dense = _mesh_axes_groups(attrs["replica_groups"], mesh[0])
                ok = dense is not None
                if dense is not None:
                    plan.groups.append((op, dense))
        elif name == "stablehlo.partition_id":
            plan.ids.append(op)
        elif name == "sdy.constant":
            plan.constants.append(op)
        elif name.startswith("sdy."):
            ok = (
                op == manual
                or name == "sdy.mesh"
                or (name == "sdy.return" and op.parent == manual)
            )
        elif name == "stablehlo.replica_id":
            ok = False
        elif name == "stablehlo.custom_call":
            target = ir.StringAttr(attrs["call_target_name"]).value
            ok = target not in _SPMD_ONLY_CALLS
        if ok and name != "func.func":
            ok = not any(a in attrs for a in _SHARDING_ATTRS)
        return ir.WalkResult.ADVANCE if ok else ir.WalkResult.INTERRUPT

    module.operation.walk(visit)
    return plan if ok else None


def _without(attrs: ir.Attribute, names: frozenset[str]) -> ir.DictAttr:
    d = ir.DictAttr(attrs)
    kept = (d[i] for i in range(len(d)))
    return ir.DictAttr.get({a.name: a.attr for a in kept if a.name not in names})


def _replace(op: ir.Operation, name: str, attributes: dict[str, ir.Attribute]) -> None:
    new = ir.Operation.create(
        name,
        results=[op.results[0].type],
        attributes=attributes,
        loc=op.location,
        ip=ir.InsertionPoint(op),
    )
    op.results[0].replace_all_uses_with(new.results[0])
    op.erase()


def replica_count(module: ir.Module) -> int | None:
    """The number of replicas `to_replicas` would make of `module` (None: it
    stays SPMD), without rewriting it."""
    with module.context:
        plan = _plan(module)
    return None if plan is None else plan.replicas


def to_replicas(module: ir.Module) -> int | None:
    """Rewrites a partitioned module into replica form in place and returns
    its number of replicas; None (the module untouched) when it does not
    have the partitioner's shape or something in it would change meaning."""
    with module.context, ir.Location.unknown(module.context):
        plan = _plan(module)
        if plan is None:
            return None
        main, manual = plan.main, plan.manual
        body = manual.regions[0].blocks[0]
        entry = main.regions[0].blocks[0]
        for outer, inner in zip(entry.arguments, body.arguments, strict=True):
            outer.set_type(inner.type)
            inner.replace_all_uses_with(outer)
        inner_ops = [op.operation for op in body.operations]
        sdy_return = inner_ops.pop()
        for op in inner_ops:
            op.move_before(manual)
        for result, value in zip(manual.results, sdy_return.operands, strict=True):
            result.replace_all_uses_with(value)
        local_out = [v.type for v in sdy_return.operands]
        manual.erase()

        attrs = main.attributes
        attrs["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get([a.type for a in entry.arguments], local_out)
        )
        for name in ("arg_attrs", "res_attrs"):
            if name in attrs:
                attrs[name] = ir.ArrayAttr.get(
                    [_without(a, _SDY_SHARDING) for a in ir.ArrayAttr(attrs[name])]
                )
        for op in list(module.body.operations):
            if op.operation.name == "sdy.mesh":
                op.operation.erase()
        i32 = ir.IntegerType.get_signless(32)
        n = plan.replicas
        module.operation.attributes["mhlo.num_partitions"] = ir.IntegerAttr.get(i32, 1)
        module.operation.attributes["mhlo.num_replicas"] = ir.IntegerAttr.get(i32, n)
        for op in plan.channels:
            del op.attributes["channel_handle"]
        for op, dense in plan.groups:
            op.attributes["replica_groups"] = dense
        for op in plan.ids:
            _replace(op, "stablehlo.replica_id", {})
        for op in plan.constants:
            _replace(op, "stablehlo.constant", {"value": op.attributes["value"]})
    return n
