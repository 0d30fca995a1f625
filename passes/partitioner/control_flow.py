"""Calls (inlined), while and case (regions partitioned with the op's result
layouts), and shard_map bodies (sdy.manual_computation)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from meshjit.compiler.graph import Node, Opaque
from meshjit.compiler.op_info import scalar_constant
from meshjit.dialects.reshard import DimAxes, Layout
from meshjit.dialects.sdy_text import parse_sharding_per_value
from meshjit.dialects.sharding import TensorSharding
from meshjit.passes.partitioner.builder import Ty, Val, itemsize
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.cost import pieces_sum_seconds, reshard_seconds
from meshjit.passes.partitioner.layouts import layout_of, span, unreduced_of


def call(node: Node, ctx: PartitionCtx) -> None:
    """The callee's body is emitted here on the call's operands."""
    block = ctx.callee_block(node)
    for arg in block.args:  # from an earlier call of the same function
        ctx.deferred.pop(arg, None)
    # A partial sum passes into the inlined body as it is (its ops handle
    # partial operands), as do arguments declared unreduced.
    keep = [
        ctx.unreduced.get(arg, ()) or ctx.deferred.get(vid, ((), ()))[1]
        for vid, arg in zip(node.operands, block.args, strict=True)
    ]
    operands = [
        ctx.value_reshard(vid, ctx.layout(arg), node, f"argument {i}", keep=keep[i])
        for i, (vid, arg) in enumerate(zip(node.operands, block.args, strict=True))
    ]
    # Other copies of an argument's value (a loop's gathered carry) are
    # copies of the parameter too.
    copies = [
        []
        if keep[i] or vid in ctx.deferred or ctx.graph.value(vid).shape is None
        else [*ctx.scope.versions_of(vid), (ctx.layout(vid), ctx.val(vid))]
        for i, vid in enumerate(node.operands)
    ]
    inner = ctx.push_scope()
    for arg, value, partial, more in zip(
        block.args, operands, keep, copies, strict=True
    ):
        ctx.bind(arg, value)
        if partial:  # passed in as partial sums
            ctx.deferred[arg] = (ctx.layout(arg), partial)
        others = [(lay, v) for lay, v in more if lay != ctx.layout(arg)]
        if others:
            inner.versions[arg] = others
    ctx.inline_depth += 1
    returned = ctx.emit_block(block.nodes) or []
    ctx.inline_depth -= 1
    values = [ctx.val(v) for v in returned]
    layouts = [ctx.layout(v) for v in returned]
    partials = [ctx.deferred.get(v, ((), ()))[1] for v in returned]
    # Values made inside the callee stay valid: inlined code is one block.
    ctx.pop_scope()
    # Device coordinates stay valid after the inlined body; reshards of the
    # callee's values must not, or a second call of it would reuse them.
    ctx.scope.cache.update(
        (k, v)
        for k, v in inner.cache.items()
        if not (isinstance(k, tuple) and k[0] == "reshard")
    )
    for vid, value, lay, partial in zip(
        node.results, values, layouts, partials, strict=True
    ):
        ctx.bind_result(vid, value, lay, node, partial)


def _region(
    ctx: PartitionCtx,
    block_args: Sequence[int],
    nodes: Sequence[int],
    results: Sequence[int],
    arg_layouts: Sequence[Layout],
    node: Node,
    keep: Sequence[DimAxes],
    copies: Sequence[tuple[int, Layout, Ty]] = (),
) -> list[str]:
    """A partitioned region whose terminator returns values laid out like
    `results` (the op's results), partial sums over `keep[i]` where the
    results are declared unreduced (block arguments too: a loop carry).
    `copies` (block argument index, layout, local type): more block
    arguments after them, each another copy of that argument's value in that
    layout (a loop carry gathered before the loop), returned as they came."""
    saved = ctx.b.capture()
    types = [
        ctx.local_ty(a, lay) for a, lay in zip(block_args, arg_layouts, strict=True)
    ]
    args, header = ctx.b.block_args(types + [ty for _, _, ty in copies])
    ctx.push_scope()
    _bind_args(ctx, block_args, args, arg_layouts, keep)
    more = args[len(types) :]
    for (i, lay, _), copy in zip(copies, more, strict=True):
        ctx.scope.versions.setdefault(block_args[i], []).append((lay, copy))
    returned = ctx.emit_block(nodes) or []
    outs = [
        ctx.value_reshard(
            vid, ctx.layout(res), node, f"region result {i}", keep=keep[i]
        )
        for i, (vid, res) in enumerate(zip(returned, results, strict=True))
    ]
    ctx.b.ret("stablehlo.return", outs + more)
    ctx.pop_scope()
    return header + ctx.b.restore(saved)


def _bind_args(
    ctx: PartitionCtx,
    block_args: Sequence[int],
    values: Sequence[Val],
    layouts: Sequence[Layout],
    keep: Sequence[DimAxes],
) -> None:
    for a, value, lay, partial in zip(block_args, values, layouts, keep, strict=False):
        ctx.bind(a, value)
        ctx.layouts[a] = lay
        if partial:
            ctx.deferred[a] = (lay, partial)
        else:  # from an earlier emission of the same region
            ctx.deferred.pop(a, None)


def while_(node: Node, ctx: PartitionCtx) -> None:
    """The loop carry keeps its layout, and stays a partial sum where the
    results are declared unreduced (a gradient accumulated over
    microbatches is summed across devices once, after the loop). A carry
    the body only reads, in slices at a varying start along a split dim, is
    also gathered once before the loop where that is cheaper than fetching
    each slice (`_gathered_before`): the gathered copy is one more carry,
    which the body's ops find as another copy of the value."""
    lays = [ctx.layout(r) for r in node.results]
    keep = _carried_partial(ctx, node)
    operands = [
        ctx.value_reshard(v, lay, node, f"operand {i}", keep=keep[i])
        for i, (v, lay) in enumerate(zip(node.operands, lays, strict=True))
    ]
    hoisted = _gathered_before(ctx, node, lays, keep)
    extra = [
        ctx.value_reshard(node.operands[i], inside, node, f"operand {i} (gathered)")
        for i, inside in hoisted
    ]
    extra_types = [e.ty for e in extra]
    cond, body = node.regions
    cond_block, body_block = cond[0], body[0]
    # The condition returns a scalar predicate: emitted without resharding.
    saved = ctx.b.capture()
    types = [ctx.local_ty(a, lay) for a, lay in zip(cond_block.args, lays, strict=True)]
    args, header = ctx.b.block_args(types + extra_types)
    ctx.push_scope()
    _bind_args(ctx, cond_block.args, args, lays, keep)
    returned = ctx.emit_block(cond_block.nodes) or []
    pred = ctx.value_reshard(returned[0], (), node, "loop condition")
    ctx.b.ret("stablehlo.return", [pred])
    ctx.pop_scope()
    cond_region = header + ctx.b.restore(saved)
    copies = [(i, inside, e.ty) for (i, inside), e in zip(hoisted, extra, strict=True)]
    body_region = _region(
        ctx, body_block.args, body_block.nodes, node.results, lays, node, keep, copies
    )
    results = ctx.b.op(
        "stablehlo.while",
        operands + extra,
        [ctx.local_ty(r) for r in node.results] + extra_types,
        {},
        [cond_region, body_region],
    )
    # The gathered copies come back after the loop's own results: unused.
    mine = results[: len(node.results)]
    for vid, value, lay, partial in zip(node.results, mine, lays, keep, strict=True):
        ctx.bind_result(vid, value, lay, node, partial)


def _gathered_before(
    ctx: PartitionCtx, node: Node, lays: Sequence[Layout], keep: Sequence[DimAxes]
) -> list[tuple[int, Layout]]:
    """(carry, layout) pairs of the carries to gather before the loop: those
    the body returns as it got it (a scan's `xs`) and reads with
    dynamic_slice at a varying start along a split dim (in the body or a
    function it calls), where one gather of those dims costs less than the
    all-reduce that assembles each slice, times the trip count of a counted
    loop (jax's fori_loop and scan; other loops keep their carries as they
    are). XLA's partitioner gets the same from its collective being loop
    invariant; on a module already partitioned XLA hoists no collective, so
    meshjit does. Not under a memory limit: the copy lives through the
    loop; not for a carry that stays a partial sum (`keep`). Says so in a
    remark."""
    body = node.regions[1][0]
    trips = _trip_count(ctx, node)
    if not body.nodes or ctx.memory is not None or trips is None or trips < 2:
        return []
    returned = ctx.graph.node(body.nodes[-1]).operands
    chosen: list[tuple[int, Layout]] = []
    for i, arg in enumerate(body.args):
        lay = lays[i]
        shape = ctx.graph.value(arg).shape
        if (
            i >= len(returned)
            or returned[i] != arg
            or not any(lay)
            or shape is None
            or keep[i]
        ):
            continue
        dims: set[int] = set()
        slices: list[tuple[int, ...]] = []
        for use, operand in _reads(ctx, arg, set(body.nodes)):
            if use.op != "stablehlo.dynamic_slice" or use.operands[0] != operand:
                continue
            sizes = ctx.graph.value(use.results[0]).shape or ()
            moving = [
                d
                for d, start in enumerate(use.operands[1:])
                if lay[d] and sizes[d] < shape[d] and _constant_int(ctx, start) is None
            ]
            if moving:
                dims.update(moving)
                slices.append(tuple(sizes))
        if not dims:
            continue
        inside = tuple(() if d in dims else lay[d] for d in range(len(shape)))
        size = itemsize(ctx.graph.value(arg).dtype)
        once = reshard_seconds(lay, inside, tuple(shape), size, ctx.mesh, (), ctx.cost)
        axes = tuple(a for d in sorted(dims) for a in lay[d])
        each = sum(
            pieces_sum_seconds(ctx.cost, s, size, axes, ctx.mesh) for s in slices
        )
        if once >= each * trips:
            continue
        chosen.append((i, inside))
        ctx.remark(
            node.loc,
            f"loop carry {i}, read and never changed, gathered along dim "
            f"{', '.join(map(str, sorted(dims)))} once before the loop (estimated "
            f"{once * 1e6:.1f} us) rather than each slice assembled in each of "
            f"{trips} iterations ({each * trips * 1e6:.1f} us)",
        )
    return chosen


def _reads(ctx: PartitionCtx, vid: int, nodes: set[int]) -> list[tuple[Node, int]]:
    """The ops among `nodes` that use `vid`, and the ops of functions they
    call that use the parameter it is passed as: (op, the value it uses)."""
    found: list[tuple[Node, int]] = []
    todo = [(vid, nodes)]
    seen: set[int] = set()
    while todo:
        v, scope = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        for user in ctx.graph.users(v):
            if user not in scope:
                continue
            use = ctx.graph.node(user)
            found.append((use, v))
            name = getattr(use.attrs.get("callee"), "name", None)
            if use.op == "func.call" and name in ctx.graph.symbols:
                block = ctx.graph.node(ctx.graph.symbols[name]).regions[0][0]
                for operand, param in zip(use.operands, block.args, strict=False):
                    if operand == v:
                        todo.append((param, set(block.nodes)))
    return found


def _constant_int(ctx: PartitionCtx, vid: int) -> int | None:
    """The value of a scalar integer constant, else None."""
    value = scalar_constant(ctx.graph, vid)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _trip_count(ctx: PartitionCtx, node: Node) -> int | None:
    """Iterations of a counted loop (jax's fori_loop and scan): a carry that
    starts at a constant and grows by a positive constant each iteration,
    the condition `carry < constant`; None for other loops."""
    cond, body = node.regions[0][0], node.regions[1][0]
    if not cond.nodes or not body.nodes:
        return None
    pred = ctx.graph.value(ctx.graph.node(cond.nodes[-1]).operands[0])
    compare = ctx.graph.node(pred.owner) if pred.owner >= 0 else None
    if compare is None or compare.op != "stablehlo.compare":
        return None
    if "LT" not in compare.attr_text.get("comparison_direction", ""):
        return None
    counter, bound = compare.operands
    if counter not in cond.args:
        return None
    k = cond.args.index(counter)
    step = ctx.graph.value(ctx.graph.node(body.nodes[-1]).operands[k])
    add = ctx.graph.node(step.owner) if step.owner >= 0 else None
    if add is None or add.op != "stablehlo.add":
        return None
    a, b = add.operands
    arg = body.args[k]
    by = (
        _constant_int(ctx, b)
        if a == arg
        else _constant_int(ctx, a)
        if b == arg
        else None
    )
    limit, start = _constant_int(ctx, bound), _constant_int(ctx, node.operands[k])
    if by is None or by <= 0 or limit is None or start is None:
        return None
    return max(-(-(limit - start) // by), 0)


def optimization_barrier(node: Node, ctx: PartitionCtx) -> None:
    """Each result is its operand (the barrier only keeps XLA from moving
    work across it: `jax.checkpoint` puts one before the recomputed forward
    pass): every operand in its result's layout (propagation gives the two
    one sharding), one barrier on the local blocks. A partial sum is summed
    before it, as an unreduced result declares otherwise."""
    lays = [ctx.layout(r) for r in node.results]
    operands = [
        ctx.value_reshard(v, lay, node, f"operand {i}", keep=ctx.unreduced.get(r, ()))
        for i, (v, r, lay) in enumerate(
            zip(node.operands, node.results, lays, strict=True)
        )
    ]
    types = [ctx.local_ty(r, lay) for r, lay in zip(node.results, lays, strict=True)]
    outs = ctx.b.op(node.op, operands, types, {}, [])
    for vid, out, lay in zip(node.results, outs, lays, strict=True):
        ctx.bind_result(vid, out, lay, node, ctx.unreduced.get(vid, ()))


def _carried_partial(ctx: PartitionCtx, node: Node) -> list[DimAxes]:
    """Per loop carry, the axes it stays a partial sum over: those its
    result is declared unreduced over, or those its initial value is a
    partial sum over when the body returns a value declared unreduced over
    the same axes (an accumulator: jax's propagation leaves the loop's own
    results unannotated)."""
    body = node.regions[1][0]
    terminator = ctx.graph.node(body.nodes[-1]) if body.nodes else None
    returned = list(terminator.operands) if terminator is not None else []
    keep: list[DimAxes] = []
    for i, (vid, operand) in enumerate(zip(node.results, node.operands, strict=True)):
        declared = ctx.unreduced.get(vid, ())
        if not declared and i < len(returned):
            entering = ctx.deferred.get(operand, ((), ()))[1]
            if entering and set(ctx.unreduced.get(returned[i], ())) == set(entering):
                declared = entering
        keep.append(declared)
    return keep


def case(node: Node, ctx: PartitionCtx) -> None:
    index = ctx.value_reshard(node.operands[0], (), node, "branch index")
    keep = [ctx.unreduced.get(r, ()) for r in node.results]
    regions = [
        _region(ctx, (), region[0].nodes, node.results, (), node, keep)
        for region in node.regions
    ]
    types = [ctx.local_ty(r) for r in node.results]
    results = ctx.b.op("stablehlo.case", [index], types, {}, regions)
    for vid, value, partial in zip(node.results, results, keep, strict=True):
        if partial:
            ctx.bind_result(vid, value, ctx.layout(vid), node, partial)
        else:
            ctx.bind(vid, value)


def manual_computation(node: Node, ctx: PartitionCtx) -> None:
    """A shard_map body: per-device code over its manual axes. Manual over
    every mesh axis, it is emitted as it is, on operands brought to its
    in_shardings. Over a subset of the axes (`axis_names`), the body is a
    program over the other (free) axes: its values carry shardings over
    those, and it is partitioned like any other code (collectives over the
    free axes only; the body's own collectives keep their groups)."""
    names = manual_axis_names(node)
    ins = _per_value(node.attrs.get("in_shardings"))
    outs = _per_value(node.attrs.get("out_shardings"))
    in_lay = [
        _nested_blocks(layout_of(t, ctx.mesh), ctx.graph.value(v).shape, names, ctx)
        for t, v in zip(ins, node.operands, strict=True)
    ]
    out_lay = [
        _nested_blocks(layout_of(t, ctx.mesh), ctx.graph.value(v).shape, names, ctx)
        for t, v in zip(outs, node.results, strict=True)
    ]
    # Unreduced over manual axes: each device's buffer is its partial sum.
    in_keep = [unreduced_of(t, ctx.mesh) for t in ins]
    out_keep = [unreduced_of(t, ctx.mesh) for t in outs]
    block = node.regions[0][0]
    operands = [
        ctx.value_reshard(v, lay, node, f"operand {i}", keep=in_keep[i])
        for i, (v, lay) in enumerate(zip(node.operands, in_lay, strict=True))
    ]
    full = set(names) == set(ctx.mesh.axis_names)
    ctx.push_scope()
    for a, value, lay in zip(block.args, operands, in_lay, strict=True):
        ctx.bind(a, value)
        ctx.layouts[a] = _free(lay, names)
    if full:
        returned = ctx.emit_verbatim_body(block, "sdy.return")
        values = [ctx.val(v) for v in returned]
    else:
        returned = ctx.emit_block(block.nodes) or []
        values = [
            ctx.value_reshard(v, _free(lay, names), node, f"body result {i}")
            for i, (v, lay) in enumerate(zip(returned, out_lay, strict=True))
        ]
    # The body is one block inlined here: its names stay valid after it.
    ctx.pop_scope()
    for vid, value, lay, partial in zip(
        node.results, values, out_lay, out_keep, strict=True
    ):
        ctx.bind_result(vid, value, lay, node, partial)


def manual_axis_names(node: Node) -> list[str]:
    """The mesh axes an `sdy.manual_computation` is manual over."""
    manual = node.attrs.get("manual_axes")
    return re.findall(r'"([^"]*)"', manual.text if isinstance(manual, Opaque) else "")


def _nested_blocks(
    layout: Layout,
    shape: Sequence[int] | None,
    manual: Sequence[str],
    ctx: PartitionCtx,
) -> Layout:
    """`layout` less the free axes of a dim they do not divide within a
    manual block. Such a dim's free axes split each manual block on its own
    (each block padded at its end), which is not the layout the same axes
    give the whole dim (one padding at the end of the dim: 4 rows over
    ("i"=4 manual, "j"=2 free) are rows 0,1,2,3 on devices (0,0),(0,1),
    (1,0),(1,1) across the dim, but row i on device (i,0) block by block).
    The value crosses the boundary unsplit by them there; the body and the
    code around it reshard it to what they want."""
    if shape is None:
        return layout
    out: list[DimAxes] = []
    for n, axes in zip(shape, layout, strict=True):
        held = tuple(a for a in axes if a.name in manual)
        free = span([a for a in axes if a.name not in manual], ctx.mesh)
        local = n // span(held, ctx.mesh)
        out.append(held if free > 1 and local % free else axes)
    return tuple(out)


def _free(layout: Layout, manual: Sequence[str]) -> Layout:
    """A layout over the mesh less the manual axes (the body's view)."""
    return tuple(tuple(a for a in axes if a.name not in manual) for axes in layout)


def _per_value(value: object) -> tuple[TensorSharding, ...]:
    if not isinstance(value, Opaque):
        return ()
    return parse_sharding_per_value(value.text)
