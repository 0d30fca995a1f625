"""The partitioned module: read the mesh and every value's layout, walk the
entry function with the handlers, and wrap the per-device body in one
`sdy.manual_computation` over every mesh axis."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

from meshjit.compiler.diagnostics import Diagnostics, SourceLoc
from meshjit.compiler.graph import Graph, Node, Opaque
from meshjit.compiler.op_info import rule_lookup
from meshjit.dialects.reshard import DimAxes, Layout
from meshjit.dialects.rules import pointwise_rule
from meshjit.dialects.sdy_text import (
    parse_mesh,
    parse_sharding,
    parse_sharding_per_value,
    print_mesh_op,
    print_string,
)
from meshjit.dialects.sharding import MeshModel, TensorSharding
from meshjit.dialects.stablehlo_rules import RULES
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.control_flow import manual_axis_names
from meshjit.passes.partitioner.cost import DEFAULT as DEFAULT_COST
from meshjit.passes.partitioner.cost import CostModel
from meshjit.passes.partitioner.edges import whole_edges
from meshjit.passes.partitioner.elementwise import LOCAL_BY_TYPE, PER_SHARD_CALLBACKS
from meshjit.passes.partitioner.layouts import (
    axis_text,
    is_elementwise,
    layout_of,
    layout_text,
    replicated,
    span,
    unreduced_of,
)
from meshjit.passes.partitioner.memory import MemoryWatch, fmt_bytes, value_bytes
from meshjit.passes.partitioner.report import PartitionFailure, PartitionReport
from meshjit.passes.partitioner.table import DEFAULT, HANDLERS


def refuse_unreduced(
    sharding: TensorSharding, manual: set[str], loc: SourceLoc, where: str
) -> None:
    """A shard_map boundary passes partial sums over its manual axes as
    they are (each device's buffer); over a free axis (partial manual) they
    are not modelled yet: partitioning them as if they were replicated would
    compute wrong values, so they are refused."""
    free = [a for a in sharding.unreduced if a.name not in manual]
    if free:
        axes = ", ".join(str(a) for a in free)
        raise PartitionFailure(
            loc,
            f"a sharding with unreduced={{{axes}}} on {where}, over axes the "
            "shard_map is not manual over: meshjit's partitioner does not "
            "support that yet (unreduced over its manual axes is supported)",
        )


def _read_layouts(
    graph: Graph, mesh_name: str, mesh: MeshModel, maximal: Mapping[str, int]
) -> tuple[dict[int, Layout], dict[int, DimAxes]]:
    """Value id -> layout from the shardings in the module, and value id ->
    the axes a sharding declares the value unreduced over (partial sums). A
    value on a maximal mesh (a placed op's result) gets none: it is made on
    one device and summed to every device where it is used."""
    layouts: dict[int, Layout] = {}
    unreduced: dict[int, DimAxes] = {}

    def put(vid: int, sharding: TensorSharding, loc: SourceLoc) -> None:
        if sharding.mesh_name in maximal:
            return
        if sharding.mesh_name != mesh_name:
            raise PartitionFailure(
                loc,
                f"partition handles one mesh; found @{sharding.mesh_name} beside "
                f"@{mesh_name}",
            )
        layouts[vid] = layout_of(sharding, mesh)
        partial = unreduced_of(sharding, mesh)
        if partial:
            unreduced[vid] = partial

    for node in graph.walk():
        if node.op == "func.func":
            block = node.regions[0][0]
            for i, entry in enumerate(_dicts(node.attrs.get("arg_attrs"))):
                s = entry.get("sdy.sharding")
                if isinstance(s, Opaque):
                    put(block.args[i], parse_sharding(s.text), node.loc)
            continue
        if node.op in ("sdy.sharding_constraint", "sdy.reshard", "sdy.all_reduce"):
            name = "out_sharding" if node.op == "sdy.all_reduce" else "sharding"
            s = node.attrs.get(name)
            if isinstance(s, Opaque):
                put(node.results[0], parse_sharding(s.text), node.loc)
            continue
        if node.op in ("sdy.data_flow_edge", "sdy.func_data_flow_edge"):
            # The edge holds its input's sharding (a while/case result, a
            # call result or an argument): both are laid out as it says.
            on_func = node.op == "sdy.func_data_flow_edge"  # per value
            s = node.attrs.get("sdy.sharding" if on_func else "sharding")
            if isinstance(s, Opaque):
                edge = (
                    _parse_per_value(s.text)[0] if on_func else parse_sharding(s.text)
                )
                put(node.operands[0], edge, node.loc)
                put(node.results[0], edge, node.loc)
            continue
        if node.op == "sdy.manual_computation":
            manual = set(manual_axis_names(node))
            ins = node.attrs.get("in_shardings")
            if isinstance(ins, Opaque):
                for s in _parse_per_value(ins.text):
                    refuse_unreduced(s, manual, node.loc, "a shard_map argument")
            # Its results are laid out as its out_shardings say.
            outs = node.attrs.get("out_shardings")
            if isinstance(outs, Opaque):
                for vid, s in zip(
                    node.results, _parse_per_value(outs.text), strict=False
                ):
                    refuse_unreduced(s, manual, node.loc, "a shard_map result")
                    put(vid, s, node.loc)
            continue
        per_value = node.attrs.get("sdy.sharding")
        if isinstance(per_value, Opaque):
            for vid, s in zip(
                node.results, _parse_per_value(per_value.text), strict=False
            ):
                put(vid, s, node.loc)
    return layouts, unreduced


@functools.lru_cache(maxsize=4096)
def _parse_per_value(text: str) -> tuple[TensorSharding, ...]:
    """Per-value shardings repeat across a module; each text is parsed once."""
    return parse_sharding_per_value(text)


def _dicts(value: object) -> list[Mapping[str, object]]:
    if not isinstance(value, tuple):
        return []
    return [v if isinstance(v, Mapping) else {} for v in value]


def _find_mesh(
    graph: Graph,
) -> tuple[str, MeshModel, SourceLoc, dict[str, int]] | None:
    """The module's mesh with axes, and its maximal meshes (no axes, one
    device: where jax places a host callback) by name -> device id."""
    meshes: dict[str, tuple[MeshModel, SourceLoc]] = {}
    maximal: dict[str, int] = {}
    for node in graph.walk():
        if node.op != "sdy.mesh":
            continue
        mesh_attr, sym = node.attrs.get("mesh"), node.attrs.get("sym_name")
        if isinstance(mesh_attr, Opaque) and isinstance(sym, str):
            mesh = parse_mesh(mesh_attr.text)
            if not mesh.axes and mesh.device_ids is not None:
                maximal[sym] = mesh.device_ids[0]
            else:
                meshes[sym] = (mesh, node.loc)
    if len(meshes) > 1:
        names = ", ".join("@" + m for m in sorted(meshes))
        raise PartitionFailure(
            list(meshes.values())[1][1],
            f"partition handles modules with one sdy.mesh; found {names}",
        )
    for name, (mesh, loc) in meshes.items():
        return name, mesh, loc, maximal
    if maximal:
        name = next(iter(maximal))
        raise PartitionFailure(
            SourceLoc(graph.source_name, 1, 1),
            f"partition needs a mesh with axes; the module has only maximal "
            f"meshes (@{name}: ops placed whole on one device)",
        )
    return None


def _placed_ops(
    graph: Graph, maximal: Mapping[str, int], mesh_name: str, mesh: MeshModel
) -> dict[int, int]:
    """Ops whose every result sharding (or device placement, for an op
    without results) names a maximal mesh: node id -> the partition (mesh
    position) of that mesh's device."""
    if not maximal:
        return {}
    order = list(mesh.logical_device_ids)
    placed: dict[int, int] = {}
    for node in graph.walk():
        found = node.attrs.get("sdy.sharding")
        if not isinstance(found, Opaque):
            continue
        if node.attrs.get("call_target_name") in PER_SHARD_CALLBACKS:
            continue  # called on every device, on its block
        shardings = _parse_per_value(found.text)
        names = {s.mesh_name for s in shardings}
        if not names or not names <= maximal.keys():
            continue
        devices = sorted({maximal[n] for n in names})
        device = devices[0]
        if len(devices) > 1 or device not in order:
            raise PartitionFailure(
                node.loc,
                f"{node.op} is placed on device {devices} (maximal "
                f"meshes {sorted(names)}), but the program's mesh @{mesh_name} "
                f"has device ids {order}; place the op on one of its devices",
            )
        placed[node.id] = order.index(device)
    return placed


def _entry_function(graph: Graph) -> Node:
    """@main, or else the module's only public function."""
    if "main" in graph.symbols:
        return graph.node(graph.symbols["main"])
    public = [
        f for f in graph.funcs() if f.attrs.get("sym_visibility") in (None, "public")
    ]
    if len(public) != 1:
        raise PartitionFailure(
            public[1].loc if len(public) > 1 else SourceLoc(graph.source_name, 1, 1),
            "partition needs a function @main or exactly one public function; found "
            + (", ".join(f"@{f.attrs.get('sym_name')}" for f in public) or "none"),
        )
    return public[0]


def _interface_attrs(entry: Mapping[str, object], sharding: str) -> str:
    """A function argument's or result's attributes: meshjit's sharding plus
    the plain ones JAX writes (`jax.result_info`, `tf.aliasing_output`)."""
    items = []
    for key, value in sorted(entry.items()):
        if key.startswith("sdy.") or key == "mhlo.sharding":
            continue
        if isinstance(value, str):
            items.append(f"{key} = {print_string(value)}")
        elif isinstance(value, int) and not isinstance(value, bool):
            items.append(f"{key} = {value} : i32")
    items.append(f"sdy.sharding = #sdy.sharding{sharding}")
    return "{" + ", ".join(items) + "}"


def partition_module_text(
    graph: Graph,
    diags: Diagnostics,
    cost: CostModel = DEFAULT_COST,
    memory_limit: float | None = None,
) -> tuple[str, PartitionReport] | None:
    """The per-device module as text, or None when the module has no mesh.
    `memory_limit`: bytes per device the live values may take (memory.py)."""
    found = _find_mesh(graph)
    if found is None:
        return None
    mesh_name, mesh, mesh_loc, maximal = found
    declared = graph.module_attrs.get("mhlo.num_partitions")
    if isinstance(declared, int) and declared != mesh.size:
        sizes = " x ".join(f"{a.name}={a.size}" for a in mesh.axes)
        raise PartitionFailure(
            mesh_loc,
            f"mesh @{mesh_name} has {mesh.size} devices ({sizes}) but the module "
            f"declares mhlo.num_partitions = {declared}; the axis sizes must "
            "multiply to the device count",
        )
    main = _entry_function(graph)
    report = PartitionReport()
    layouts, unreduced = _read_layouts(graph, mesh_name, mesh, maximal)
    ctx = PartitionCtx(
        graph, mesh_name, mesh, layouts, report, HANDLERS, DEFAULT, cost, unreduced
    )
    ctx.placed = _placed_ops(graph, maximal, mesh_name, mesh)
    body = main.regions[0][0]
    _check_divisible(graph, ctx, [(a, ctx.layouts.get(a)) for a in body.args])
    res_info = _dicts(main.attrs.get("res_attrs"))
    arg_info = _dicts(main.attrs.get("arg_attrs"))
    ret = next(
        (graph.node(n) for n in body.nodes if graph.node(n).op == "func.return"), None
    )
    returned_ids = list(ret.operands) if ret is not None else []
    out_layouts: list[Layout] = []
    out_unreduced: list[DimAxes] = []
    for i, vid in enumerate(returned_ids):
        s = res_info[i].get("sdy.sharding") if i < len(res_info) else None
        rank = len(graph.value(vid).shape or ())
        text = s.text if isinstance(s, Opaque) else None
        if text:
            sharding = parse_sharding(text)
            out_layouts.append(layout_of(sharding, mesh))
            out_unreduced.append(unreduced_of(sharding, mesh))
        else:
            out_layouts.append(replicated(rank))
            out_unreduced.append(())
    _check_divisible(
        graph,
        ctx,
        list(zip(returned_ids, out_layouts, strict=True)),
        str(main.attrs.get("sym_name", "main")),
        ret.loc if ret is not None else None,
    )
    for vid, lay in zip(returned_ids, out_layouts, strict=True):
        ctx.returned.setdefault(vid, []).append(lay)
    _aim_at_results(graph, ctx, set(body.args), returned_ids, out_layouts)
    args = body.args
    if memory_limit is not None:
        ctx.memory = _watch(
            graph, ctx, body.args, body.nodes, returned_ids, memory_limit
        )
        least, where = ctx.memory.peak()
        if least > memory_limit:
            raise PartitionFailure(
                where,
                f"partition: the values live at this op take an estimated "
                f"{fmt_bytes(least)} per device as laid out (each from the op "
                "that makes it to its last use), above memory-limit "
                f"{fmt_bytes(memory_limit)}; split more of them over the mesh or "
                "raise the limit",
            )
    whole_edges(ctx)
    ctx.b.indent = 3
    local_args = ctx.b.block_args([ctx.local_ty(a) for a in args])[0]
    for a, value in zip(args, local_args, strict=True):
        ctx.bind(a, value)
        if a in unreduced:  # an argument that arrives as partial sums
            ctx.deferred[a] = (ctx.layout(a), unreduced[a])
    returned = ctx.emit_block(body.nodes) or []
    ctx.site = ret.id if ret is not None else -1
    outs = [
        ctx.value_reshard(
            vid, lay, main, f"function result {i}", op_name="func.return", keep=keep
        )
        for i, (vid, lay, keep) in enumerate(
            zip(returned, out_layouts, out_unreduced, strict=True)
        )
    ]

    if ctx.memory is not None:
        peak, where = ctx.memory.peak()
        limit = fmt_bytes(ctx.memory.limit)
        ctx.remark(
            where,
            f"estimated peak of live values per device: {fmt_bytes(peak)} "
            + (
                f"(memory-limit {limit})"
                if peak <= ctx.memory.limit
                else f"above memory-limit {limit}: gathered copies that ops "
                "here need whole (a copy let go is made again where it is read)"
            ),
        )

    def body_sharding(lay: Layout, keep: DimAxes = ()) -> str:
        # Partial sums stay declared: the buffers are what the sharding says.
        sets = (
            f", unreduced={{{', '.join(axis_text(a) for a in keep)}}}" if keep else ""
        )
        return f"<@{mesh_name}, {layout_text(lay)}{sets}>"

    # An argument's partial sums are declared only over axes some result keeps
    # unreduced: Shardy's verifier (jaxlib 0.11 on) refuses an op that takes
    # unreduced operands to reduced results unless a reshard does it, and
    # here the sum is the body's own all-reduce. Elsewhere the argument is
    # declared replicated over those axes, which is how its buffers are laid
    # out (one whole block per device).
    kept = {a for keep in out_unreduced for a in keep}
    in_layouts = [ctx.layout(a) for a in args]
    in_shardings = [
        body_sharding(lay, tuple(x for x in unreduced.get(a, ()) if x in kept))
        for a, lay in zip(args, in_layouts, strict=True)
    ]
    out_shardings = [
        body_sharding(lay, keep)
        for lay, keep in zip(out_layouts, out_unreduced, strict=True)
    ]
    arg_decls = [
        f"%arg{i}: {graph.value(a).type} "
        + _interface_attrs(arg_info[i] if i < len(arg_info) else {}, in_shardings[i])
        for i, a in enumerate(args)
    ]
    global_out = [graph.value(v).type for v in returned]
    res_decls = [
        f"{t} "
        + _interface_attrs(res_info[i] if i < len(res_info) else {}, out_shardings[i])
        for i, t in enumerate(global_out)
    ]
    n_out = len(returned)
    lhs = "" if n_out == 0 else ("%out = " if n_out == 1 else f"%out:{n_out} = ")
    refs = ["%out"] if n_out == 1 else [f"%out#{i}" for i in range(n_out)]
    block_args = ", ".join(f"{v.name}: {v.ty.text}" for v in local_args)
    manual = (
        f"{lhs}sdy.manual_computation("
        + ", ".join(f"%arg{i}" for i in range(len(args)))
        + f") in_shardings=[{', '.join(in_shardings)}]"
        + f" out_shardings=[{', '.join(out_shardings)}]"
        + " manual_axes={"
        + ", ".join(print_string(a.name) for a in mesh.axes)
        + f"}} ({block_args}) {{"
    )
    sdy_return = "sdy.return" + (
        f" {', '.join(v.name for v in outs)} : {', '.join(v.ty.text for v in outs)}"
        if outs
        else ""
    )
    in_types = ", ".join(graph.value(a).type for a in args)
    lines = [
        f"module @partitioned attributes {{mhlo.num_partitions = {mesh.size} : i32, "
        "mhlo.num_replicas = 1 : i32} {",
        "  " + print_mesh_op(mesh_name, mesh),
        f"  func.func public @{main.attrs['sym_name']}({', '.join(arg_decls)}) -> "
        f"({', '.join(res_decls)}) {{",
        f"    {manual}",
        *ctx.b.lines,
        f"      {sdy_return}",
        f"    }} : ({in_types}) -> ({', '.join(global_out)})",
        "    return"
        + (f" {', '.join(refs)} : {', '.join(global_out)}" if refs else ""),
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n", report


# Values whose layout aiming must not change: the program's own constraints,
# and what control flow carries (a while's results are its loop carry: their
# layout is the loop body's, paid every iteration).
_USER_LAYOUT_OPS = frozenset(
    {
        "func.call",
        "sdy.manual_computation",
        "sdy.propagation_barrier",
        "sdy.all_reduce",
        "sdy.reshard",
        "sdy.sharding_constraint",
        "stablehlo.case",
        "stablehlo.while",
    }
)


def _watch(
    graph: Graph,
    ctx: PartitionCtx,
    args: tuple[int, ...],
    nodes: tuple[int, ...],
    returned: list[int],
    limit: float,
) -> MemoryWatch:
    """The live bytes of the entry function's values, as laid out."""
    sizes: dict[int, int] = {}
    for vid in args:
        sizes[vid] = _block_bytes(graph, ctx, vid)
    for nid in nodes:
        for vid in graph.node(nid).results:
            sizes[vid] = _block_bytes(graph, ctx, vid)
    return MemoryWatch.of_body(graph, args, nodes, returned, sizes, limit)


def _block_bytes(graph: Graph, ctx: PartitionCtx, vid: int) -> int:
    v = graph.value(vid)
    if v.shape is None:
        return 0
    return value_bytes(v.shape, v.dtype, ctx.local_shape(v.shape, ctx.layout(vid)))


def _aim_at_results(
    graph: Graph,
    ctx: PartitionCtx,
    args: set[int],
    returned: list[int],
    out_layouts: list[Layout],
) -> None:
    """A value whose only use is to be returned is produced in the result's
    layout, and so, back through elementwise ops and transposes, are the
    values it is computed from whose every use is such an op (or the return)
    aimed at the same layout: the op that starts the chain then chooses
    factors for where the value ends up (e.g. a weight gradient: gather the
    small activation rather than the large gradient). Where that layout
    splits a chain fewer ways than propagation did, the chain is aimed only
    if every op that starts it makes more bytes than it reads (a gradient
    from activations, an iota) and nothing enters it from outside;
    otherwise it keeps its own layouts, runs split, and only the returned
    value moves (a GELU returned replicated along a dim: aiming its
    single-use values made each of the four ops that read its input gather
    its own result; aiming the input too ran the GELU on the whole dim)."""
    parent: dict[int, int] = {}

    def find(a: int) -> int:
        while parent.setdefault(a, a) != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    pending: list[tuple[int, Layout, int]] = [
        (vid, lay, vid) for vid, lay in zip(returned, out_layouts, strict=True)
    ]
    results = set(returned)
    uses: dict[int, list[Layout]] = {}  # value -> the layouts its uses aim at
    aimed: dict[int, Layout] = {}
    starts: set[int] = set()  # aimed values made by an op that starts a chain
    while pending:
        vid, lay, user = pending.pop()
        parent[find(vid)] = find(user)
        v = graph.value(vid)
        wanted = uses.setdefault(vid, [])
        wanted.append(lay)
        if vid in args or v.shape is None or v.owner < 0:
            continue
        if len(wanted) != len(graph.users(vid)) or any(w != lay for w in wanted):
            continue
        if any(n % span(a, ctx.mesh) for n, a in zip(v.shape, lay, strict=True)):
            continue
        node = graph.node(v.owner)
        if node.op in _USER_LAYOUT_OPS:
            continue
        aimed[vid] = lay
        if node.op == "stablehlo.transpose" and len(node.operands) == 1:
            perm = node.attrs.get("permutation")
            if isinstance(perm, tuple):
                back: list[DimAxes] = [()] * len(lay)
                for out_dim, in_dim in enumerate(perm):
                    if isinstance(in_dim, int):
                        back[in_dim] = lay[out_dim]
                pending.append((node.operands[0], tuple(back), vid))
            continue
        found = rule_lookup(graph, node)
        rule = found.rule if found is not None else None
        if rule is None or node.regions or not is_elementwise(rule):
            starts.add(vid)
            continue
        pending += [
            (o, lay, vid) for o in node.operands if graph.value(o).shape == v.shape
        ]
    fewer = {
        find(vid)
        for vid, lay in aimed.items()
        if vid not in results
        and _ways(lay, ctx.mesh) < _ways(ctx.layouts.get(vid, ()), ctx.mesh)
    }
    kept = set(fewer)
    for vid in uses:
        if find(vid) in kept and (
            vid not in aimed or (vid in starts and not _expands(graph, vid))
        ):
            kept.discard(find(vid))
    for vid, lay in aimed.items():
        if vid in results or find(vid) not in fewer or find(vid) in kept:
            ctx.layouts[vid] = lay


def _expands(graph: Graph, vid: int) -> bool:
    """Whether the op that makes `vid` reads fewer bytes than it makes."""
    node = graph.node(graph.value(vid).owner)

    def size(ids: Sequence[int]) -> int:
        values = [graph.value(i) for i in ids]
        return sum(value_bytes(v.shape, v.dtype, v.shape or ()) for v in values)

    return size(node.operands) < size(node.results)


def _ways(layout: Layout, mesh: MeshModel) -> int:
    """Blocks a layout splits a value in."""
    return math.prod(span(axes, mesh) for axes in layout)


def _check_divisible(
    graph: Graph,
    ctx: PartitionCtx,
    values: Sequence[tuple[int, Layout | None]],
    results_of: str = "",
    loc: SourceLoc | None = None,
) -> None:
    """An argument or result of the entry function whose sharding does not
    divide its shape is an error (jax's rule for in/out shardings); inside,
    such a value is split in padded blocks. `values`: (value id, layout)
    pairs, the arguments, or the results of function `results_of`."""
    for i, (vid, layout) in enumerate(values):
        v = graph.value(vid)
        if layout is None or v.shape is None:
            continue
        for d, (size, axes) in enumerate(zip(v.shape, layout, strict=False)):
            ways = span(axes, ctx.mesh)
            if size % ways == 0:
                continue
            what = f"result {i} of @{results_of} ({v.type})"
            raise PartitionFailure(
                loc or v.loc,
                f"cannot partition: dim {d} of "
                f"{what if results_of else f'value {v.type}'} has "
                f"size {size}, not divisible by {ways} (axes "
                f"{', '.join(axis_text(a) for a in axes)})",
            )


_SPECIAL = {
    "chlo.scan": "yes (split scanned dim: block totals; body on local slices)",
    "chlo.top_k": "yes (split row: block candidates merged)",
    "func.call": "yes (inlined)",
    "sdy.mesh": "n/a",
    "sdy.named_computation": "no: an error names it",
    "sdy.sharding_group": "yes (dropped: propagation used it)",
    "stablehlo.bitcast_convert": "yes when the width is kept, else replicated",
    "sdy.constant": "yes",
    "stablehlo.all_gather": "yes (a shard_map body's own: on local blocks)",
    "stablehlo.all_reduce": "yes (a shard_map body's own: on local blocks)",
    "stablehlo.all_to_all": "yes (a shard_map body's own: on local blocks)",
    "stablehlo.collective_broadcast": "yes (a shard_map body's own: on local blocks)",
    "stablehlo.collective_permute": "yes (a shard_map body's own: on local blocks)",
    "stablehlo.reduce_scatter": "yes (a shard_map body's own: on local blocks)",
    "sdy.manual_computation": "yes (body as written; partial: free axes partitioned)",
    "sdy.propagation_barrier": "yes (reshard)",
    "sdy.data_flow_edge": "yes (identity)",
    "sdy.func_data_flow_edge": "yes (identity)",
    "sdy.reshard": "yes (reshard)",
    "sdy.all_reduce": "yes (the partial sum reduced over its axes)",
    "sdy.sharding_constraint": "yes (reshard)",
    "stablehlo.case": "yes (branches partitioned)",
    "stablehlo.constant": "yes (splat: local; else sliced)",
    "stablehlo.custom_call": (
        "with its own rule (LAPACK): batch dims; partitioned host callbacks: "
        "on each device's block; InspectSharding: removed; else replicated"
    ),
    "stablehlo.concatenate": "yes (split concatenated dim: a window of each operand)",
    "stablehlo.convolution": (
        "yes (spatial: windows by halo exchange, patches by output, filter "
        "gradients by partial sums; groups split)"
    ),
    "stablehlo.dot": "yes (as dot_general: split contraction, partial sums)",
    "stablehlo.dynamic_slice": "yes (split sliced dim: masked cut + all-reduce)",
    "stablehlo.dynamic_update_slice": (
        "yes (split updated dim: masked select of an update-sized window)"
    ),
    "stablehlo.gather": "yes (split table: masked lookup + sum)",
    "stablehlo.iota": "yes (block offset)",
    "stablehlo.pad": "yes (split padded dim: windows, local padding)",
    "stablehlo.reduce": (
        "yes (partial results: all-reduce, or gathered in one all-gather and reduced)"
    ),
    "stablehlo.reduce_window": "yes (windows by halo exchange; scans by block totals)",
    "stablehlo.sort": (
        "yes (split sorted dim: all-to-all to another dim; under a memory limit, "
        "sorted blocks merged by collective-permutes)"
    ),
    "stablehlo.reshape": "yes (a factor of one side only stays whole)",
    "stablehlo.reverse": "yes (split reversed dim: blocks mirrored)",
    "stablehlo.rng_bit_generator": (
        "yes (generated whole, the block cut: XLA fuses the cut into the "
        "generator, computing only the block)"
    ),
    "stablehlo.select_and_scatter": "yes (unpadded windows; else that dim whole)",
    "stablehlo.slice": "yes (split sliced dim: only the pieces moved)",
    "stablehlo.scatter": "yes (split operand: shifted, routed indices)",
    "stablehlo.while": "yes (regions partitioned)",
}


def partition_support(op_name: str) -> str:
    """How the partitioner handles an op kind, for the coverage ledger."""
    if op_name in _SPECIAL:
        return _SPECIAL[op_name]
    if op_name in LOCAL_BY_TYPE or op_name in HANDLERS:
        return "yes"
    entry = RULES.entry(op_name)
    if entry is pointwise_rule:
        return "yes (elementwise)"
    if op_name.startswith(("func.", "stablehlo.return", "sdy.return")):
        return "n/a"
    return "replicated (operands gathered)"
