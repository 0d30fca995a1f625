"""Elementwise and shape ops: they run on local blocks as they are, with
local types (broadcast, reshape, transpose, sort, ...); constants and iota
get their local form; sharding annotations only reshard; a shard_map body's
own collectives run on its blocks over the free axes."""

from __future__ import annotations

from meshjit.compiler.graph import DenseElements, Node, Opaque
from meshjit.dialects.reshard import Layout
from meshjit.dialects.rules import ShardingRule
from meshjit.dialects.stablehlo_rules import INSPECT_SHARDING
from meshjit.passes.partitioner.context import PartitionCtx, joins_blocks, listed_ids
from meshjit.passes.partitioner.factors import FactorLimits
from meshjit.passes.partitioner.layouts import (
    axis_text,
    is_elementwise,
    replicated,
    uneven_dims,
)
from meshjit.passes.partitioner.local import emit, prepare, rule_of, run_replicated
from meshjit.passes.partitioner.report import PartitionFailure

# Ops whose local form differs from the global one only in its result types
# (once the factor choice keeps their special dims unsplit).
LOCAL_BY_TYPE = frozenset(
    {
        "stablehlo.broadcast_in_dim",
        "stablehlo.cholesky",
        "stablehlo.fft",
        "stablehlo.reshape",
        "stablehlo.sort",
        "stablehlo.transpose",
        "stablehlo.triangular_solve",
    }
)


def by_rule(node: Node, ctx: PartitionCtx) -> None:
    """The default: an op whose rule is elementwise (or listed as local by
    type) runs on local blocks; anything else runs replicated, with a remark."""
    if node.op.startswith("sdy."):
        raise PartitionFailure(node.loc, f"partition does not handle '{node.op}' yet")
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    if node.op not in LOCAL_BY_TYPE and (node.regions or not is_elementwise(rule)):
        run_replicated(ctx, node, "not partitioned yet")
        return
    limits = FactorLimits(uneven=True)
    if node.op == "stablehlo.reshape":
        limits = FactorLimits(uneven=True, forbidden=_one_sided(rule))
    emit(ctx, node, prepare(ctx, node, rule, limits))


def _one_sided(rule: ShardingRule) -> frozenset[int]:
    """A reshape's factors (longer than 1) of its operand only or its result
    only: dims that share no divisor ((64, 65) -> (65, 64)). A block along
    one is no block of the other side: they stay whole (the operand is
    gathered there, the result cut from the whole)."""
    ins = {f for t in rule.operands for d in t for f in d}
    outs = {f for t in rule.results for d in t for f in d}
    return frozenset(f for f in ins ^ outs if rule.sizes[f] > 1)


# jax's host callbacks with `partitioned=True` (`jax.debug.print`,
# `jax.debug.callback`): called on every device with its own block.
PER_SHARD_CALLBACKS = frozenset(
    {
        "xla_ffi_partitioned_python_cpu_callback",
        "xla_ffi_partitioned_python_gpu_callback",
    }
)


def custom_call(node: Node, ctx: PartitionCtx) -> None:
    """A custom call with a sharding rule (its own `sdy.sharding_rule`, as
    JAX writes on LAPACK calls, or the rule table's for its target) runs on
    local blocks of the dims that rule lets split (batch dims); a target with
    no rule runs replicated. Two of jax's targets are the exceptions: a
    partitioned host callback (`per_shard_callback`) and InspectSharding,
    which is dropped."""
    target = node.attrs.get("call_target_name")
    if target in PER_SHARD_CALLBACKS:
        per_shard_callback(node, ctx)
        return
    if target == INSPECT_SHARDING:
        # jax.debug.inspect_array_sharding's: meshjit.jit calls its callback
        # with the propagated sharding before partitioning; the per-device
        # program needs none (XLA's partitioner would call a callback it
        # names by address). Its result is its operand, in its layout.
        src, held = node.operands[0], ctx.layout(node.operands[0])
        value = ctx.value_reshard(src, held, node, "operand 0")
        ctx.bind_result(node.results[0], value, held, node)
        return
    own = node.attrs.get("sdy.sharding_rule")
    rule = (
        ShardingRule.parse(own.text) if isinstance(own, Opaque) else rule_of(ctx, node)
    )
    if rule is None:
        run_replicated(ctx, node, "no sharding rule for its target")
        return
    # A factor of results only (jax's `custom` rules give LAPACK results
    # their own factors) is not something the call can compute a block of:
    # such a result is made whole and then sliced.
    in_operands = {f for t in rule.operands for d in t for f in d}
    results_only = frozenset(range(rule.num_factors)) - in_operands
    emit(ctx, node, prepare(ctx, node, rule, FactorLimits(forbidden=results_only)))


def per_shard_callback(node: Node, ctx: PartitionCtx) -> None:
    """A host callback jax lowers with `partitioned=True`: every device calls
    it with its own block of each operand, in the layout the operand has
    here (as XLA's partitioner does; jax writes a one-device sharding on the
    op, which such a call does not follow). A partial sum is summed first,
    and a dim its axes do not divide is gathered (a padded block's padding
    is not the user's data). Such a call returns only its token (jax
    refuses results)."""
    operands = []
    for i, vid in enumerate(node.operands):
        shape = ctx.graph.value(vid).shape
        held = ctx.layout(vid)
        if shape is not None:
            uneven = set(uneven_dims(shape, held, ctx.mesh))
            held = tuple(() if d in uneven else axes for d, axes in enumerate(held))
        operands.append(ctx.value_reshard(vid, held, node, f"operand {i}"))
    results = [ctx.global_ty(v) for v in node.results]
    if any(t.shape is not None for t in results):
        raise PartitionFailure(
            node.loc,
            f"a partitioned host callback ({node.attrs.get('call_target_name')}) "
            "with tensor results: jax allows only a token result",
        )
    outs = ctx.b.op(node.op, operands, results, ctx.op_attrs(node))
    for vid, out in zip(node.results, outs, strict=True):
        ctx.bind(vid, out)


def user_collective(node: Node, ctx: PartitionCtx) -> None:
    """A collective the program itself holds (inside a shard_map body, over
    its manual axes: all_reduce, all_gather, all_to_all, reduce_scatter,
    collective_broadcast, collective_permute) reduces or moves data between
    the devices its replica groups or pairs join, along its own dims: on
    blocks split over axes along which those devices agree it runs as it is
    (jax writes one group or pair per position of the free axes), the dims
    it gathers, scatters or exchanges whole (its rule's special factors).
    Where the devices differ along an axis a block is split over, the op
    runs replicated, with a remark."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    held = [ctx.layout(v) for v in (*node.operands, *node.results)]
    crossed = _crossed_axis(ctx, node, held)
    if crossed:
        what = "pairs" if node.op == "stablehlo.collective_permute" else "groups"
        run_replicated(
            ctx, node, f"its {what} join devices of different {crossed} blocks"
        )
        ctx.record_own(node, [ctx.global_ty(v) for v in node.operands])
        return
    lop = prepare(ctx, node, rule, FactorLimits())
    crossed = _crossed_axis(ctx, node, lop.wants)
    if crossed:  # prepare chose a split the layouts above did not hold
        raise PartitionFailure(
            node.loc,
            f"'{node.op}' would run on blocks split over {crossed}, "
            "which its devices do not share",
        )
    emit(ctx, node, lop)
    ctx.record_own(node, [v.ty for v in lop.operands])


def _crossed_axis(ctx: PartitionCtx, node: Node, layouts: list[Layout]) -> str:
    """The first axis of `layouts` along which two devices that one replica
    group or source-target pair of `node` joins sit at different coordinates
    ('' for none, or where the groups are not listed as device ids: jax 0.11
    names them by mesh axes, the body's manual ones; or too many to keep)."""
    axes = [a for lay in layouts for dim in lay for a in dim]
    rows = listed_ids(node)
    for axis in dict.fromkeys(axes):
        if joins_blocks(ctx.mesh, axis, rows):
            return axis_text(axis)
    return ""


def identity(node: Node, ctx: PartitionCtx) -> None:
    """sharding_constraint, reshard, propagation_barrier: the operand in the
    result's layout."""
    vid, src = node.results[0], node.operands[0]
    if vid in ctx.unreduced:  # stays a partial sum (over the declared axes)
        partial = ctx.deferred.get(src, ((), ()))[1]
        ctx.bind_result(vid, ctx.val(src), ctx.layout(src), node, partial)
        return
    ctx.bind(vid, ctx.value_reshard(src, ctx.layout(vid), node, "operand 0"))


def all_reduce(node: Node, ctx: PartitionCtx) -> None:
    """sdy.all_reduce {axes}: the operand, a partial sum, summed over `axes`
    into the result's layout; what the result is declared unreduced over
    (its out_sharding's unreduced axes) stays a partial sum."""
    vid, src = node.results[0], node.operands[0]
    # Shardy's form puts one before each use: the same sum is made once.
    key = ("sdy.all_reduce", src, ctx.layout(vid), ctx.unreduced.get(vid, ()))
    found = ctx.scope.cached(key)
    first = ctx.all_reduced.get(key)
    if found is not None and first is not None:
        ctx.bind(vid, found)
        if first in ctx.deferred:
            ctx.deferred[vid] = ctx.deferred[first]
        return
    partial = ctx.deferred.get(src, ((), ()))[1]
    ctx.bind_result(vid, ctx.val(src), ctx.layout(src), node, partial)
    ctx.scope.cache[key] = ctx.val(vid)
    ctx.all_reduced[key] = vid


def constant(node: Node, ctx: PartitionCtx) -> None:
    """A splat is built at its local shape; any other constant whole, then
    sliced to its layout."""
    vid = node.results[0]
    v = ctx.graph.value(vid)
    lay = ctx.layout(vid)
    value = node.attrs.get("value")
    text = node.attr_text.get("value", "")
    if v.shape is None or not any(lay):
        ctx.bind(vid, ctx.b.constant(ctx.global_ty(vid), text))
        return
    if isinstance(value, DenseElements) and value.splat is not None:
        local = ctx.local_ty(vid)
        splat_text = text.rsplit(":", 1)[0].strip()
        ctx.bind(vid, ctx.b.constant(local, f"{splat_text} : {local.text}"))
        return
    full = ctx.b.constant(ctx.global_ty(vid), text)
    ctx.bind_result(vid, full, replicated(len(v.shape)), node)


def iota(node: Node, ctx: PartitionCtx) -> None:
    """A local iota plus this device's block offset along a split dim."""
    vid = node.results[0]
    dim = node.attrs.get("iota_dimension")
    assert isinstance(dim, int)
    ctx.bind(vid, ctx.iota(ctx.local_ty(vid), dim, ctx.layout(vid)[dim]))


def sharding_group(node: Node, ctx: PartitionCtx) -> None:
    """A propagation hint with no result: nothing to emit."""
