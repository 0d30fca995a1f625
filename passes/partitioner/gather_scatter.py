"""gather and scatter: local index arithmetic when the table or the operand
is split along the dims the indices address."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from meshjit.compiler.graph import Graph, Node
from meshjit.compiler.op_info import combiner as _combiner
from meshjit.dialects.reshard import Layout
from meshjit.dialects.rules import ShardingRule
from meshjit.passes.partitioner.builder import (
    Ty,
    Val,
    combiner_identity,
    i64_array,
    itemsize,
    zero_text,
)
from meshjit.passes.partitioner.context import PartitionCtx
from meshjit.passes.partitioner.factors import FactorLimits
from meshjit.passes.partitioner.layouts import project, span
from meshjit.passes.partitioner.local import (
    LocalOp,
    emit,
    finish,
    prepare,
    rule_of,
    run_replicated,
)
from meshjit.passes.partitioner.windows import ints


def gather(node: Node, ctx: PartitionCtx) -> None:
    """Slice sizes follow the local table; a table split along an indexed
    (collapsed) dim is looked up with shifted, masked indices and the partial
    results summed."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    lop = prepare(ctx, node, rule, FactorLimits(reductions=True))
    table = ctx.graph.value(node.operands[0])
    assert table.shape is not None
    table_layout = project(rule.operands[0], lop.factors, ctx.mesh)
    local = ctx.local_shape(table.shape, table_layout)
    sizes = list(ints(node.attrs.get("slice_sizes")))
    for d, axes in enumerate(table_layout):
        if axes and sizes[d] == table.shape[d]:
            sizes[d] = local[d]
    lop.attrs["slice_sizes"] = i64_array(sizes)
    if not lop.partial:
        emit(ctx, node, lop)
        return
    lop.combiner = "stablehlo.add"
    finish(ctx, node, lop, [_masked_gather(ctx, node, lop, table_layout)])


# Combiners under which a scatter's split index batch dims give partial
# results: each device scatters its own updates, and the results are
# combined. Under `add` the operand must count once (the other devices start
# from zeros); the others are idempotent (x max x == x).
_PARTIAL_COMBINERS = frozenset(
    {
        "stablehlo.add",
        "stablehlo.maximum",
        "stablehlo.minimum",
        "stablehlo.and",
        "stablehlo.or",
    }
)


def scatter(node: Node, ctx: PartitionCtx) -> None:
    """An operand split only along dims it scatters into with window 1
    (inserted) runs locally with shifted, routed indices; other split dims
    stay whole. Split index batch dims (the updates' own rows) give partial
    results under an associative, commutative combiner, as XLA's
    partitioner makes them: each device scatters its rows, then they are
    combined (or kept unreduced where the result is declared so)."""
    rule = rule_of(ctx, node)
    if rule is None:
        run_replicated(ctx, node, "no sharding rule")
        return
    combiner = _combiner(ctx.graph, node)
    limits = FactorLimits(
        forbidden=frozenset(_scatter_unsplittable(ctx.graph, node, rule)),
        reductions=len(node.operands) == 3 and combiner in _PARTIAL_COMBINERS,
    )
    lop = prepare(ctx, node, rule, limits)
    if lop.partial and combiner == "stablehlo.add":
        lop.operands[0] = ctx.only_at_zero(lop.operands[0], lop.partial)
    if len(node.operands) == 3:
        operand_layout = project(rule.operands[0], lop.factors, ctx.mesh)
        if any(operand_layout[d] for d in _scattered_dims(node)):
            out = _local_scatter(ctx, node, lop, operand_layout, combiner)
            finish(ctx, node, lop, [out])
            return
    # Split only along window dims: each device scatters every update's
    # window piece into its block, indices as they are (out-of-bounds ones
    # dropped as XLA drops them, as under jax.jit).
    emit(ctx, node, lop)


def _scattered_dims(node: Node) -> list[int]:
    """The operand dims a scatter's index vectors address."""
    dims = node.attrs.get("scatter_dimension_numbers")
    if not isinstance(dims, Mapping):
        return []
    return list(ints(dims.get("scattered_dims_to_operand_dims")))


def _scatter_unsplittable(graph: Graph, node: Node, rule: ShardingRule) -> set[int]:
    """A scatter runs on a block of its operand with shifted indices when every
    split dim it scatters into has window size 1 (inserted): then each update
    lands in exactly one block; dims it does not scatter into (whole windows)
    may be split too. Scattered dims with wider windows (which may straddle
    blocks) and variadic scatters stay whole."""
    if len(node.operands) != 3:
        return {f for t in (*rule.operands, *rule.results) for d in t for f in d}
    dims = node.attrs.get("scatter_dimension_numbers")
    if not isinstance(dims, Mapping):
        return set()
    scattered = set(_scattered_dims(node))
    inserted = set(ints(dims.get("inserted_window_dims")))
    out: set[int] = set()
    for d, factors in enumerate(rule.operands[0]):
        if d in scattered and d not in inserted:
            out.update(factors)
    return out


def _index_blocks(
    ctx: PartitionCtx,
    index_map: Sequence[int],
    layout: Layout,
    shape: Sequence[int],
    idx_dtype: str,
) -> tuple[list[Val], list[Val]]:
    """Per index component: this device's block offset along the operand
    dim it indexes, and the block's size, as scalars of the index type."""
    scalar = Ty((), idx_dtype)
    offsets, limits = [], []
    for d in index_map:
        axes = layout[d]
        local = shape[d] // span(axes, ctx.mesh)
        off = ctx.dim_offset(axes, local) if axes else ctx.const_i32(0)
        offsets.append(ctx.b.convert(off, idx_dtype))
        limits.append(ctx.b.splat(scalar, str(local if axes else shape[d])))
    return offsets, limits


def _spread(
    ctx: PartitionCtx, parts: Sequence[Val], idx_ty: Ty, vector_dim: int
) -> Val:
    """Per-component scalars broadcast to an index tensor's local shape."""
    b = ctx.b
    if vector_dim >= idx_ty.rank:
        return b.broadcast(parts[0], idx_ty)
    vec = b.concatenate([b.reshape(p, (1,)) for p in parts], 0)
    return b.broadcast(vec, idx_ty, [vector_dim])


def _index_mask(ctx: PartitionCtx, shifted: Val, limits: Val, vector_dim: int) -> Val:
    """Whether each index (a row along `vector_dim`) lies in [0, limits)."""
    b = ctx.b
    zero = b.splat(shifted.ty, "0")
    inside = b.binary(
        "stablehlo.and",
        b.compare(shifted, zero, "GE"),
        b.compare(shifted, limits, "LT"),
    )
    if vector_dim >= shifted.ty.rank:
        return inside
    return b.reduce(
        inside, b.splat(Ty((), "i1"), "true"), [vector_dim], "stablehlo.and"
    )


def _masked_gather(
    ctx: PartitionCtx, node: Node, lop: LocalOp, table_layout: Layout
) -> Val:
    """A gather whose indexed (collapsed) operand dims are split: each device
    looks up the indices that fall in its block (shifted to local offsets)
    and zeros the rest; the partial results are summed by the caller."""
    b = ctx.b
    dims = node.attrs.get("dimension_numbers")
    assert isinstance(dims, Mapping)
    index_map = ints(dims.get("start_index_map"))
    vector_dim = dims.get("index_vector_dim")
    assert isinstance(vector_dim, int)
    table = ctx.graph.value(node.operands[0])
    assert table.shape is not None
    table_val, indices = lop.operands[0], lop.operands[1]
    # XLA clamps each start index into [0, dim - slice size] of the whole
    # table (`x[i]` past the end reads the last row under jax.jit): clamped
    # here first, or no block would hold it and the lookup would read zeros.
    sizes = ints(node.attrs.get("slice_sizes"))
    scalar = Ty((), indices.ty.dtype)
    highest = [b.splat(scalar, str(table.shape[d] - sizes[d])) for d in index_map]
    indices = b.binary(
        "stablehlo.minimum",
        b.binary("stablehlo.maximum", indices, b.splat(indices.ty, "0")),
        _spread(ctx, highest, indices.ty, vector_dim),
    )
    offsets, limits = _index_blocks(
        ctx, index_map, table_layout, table.shape, indices.ty.dtype
    )
    shifted = b.binary(
        "stablehlo.subtract", indices, _spread(ctx, offsets, indices.ty, vector_dim)
    )
    inside = _index_mask(
        ctx, shifted, _spread(ctx, limits, indices.ty, vector_dim), vector_dim
    )
    out_ty = lop.results[0]
    gathered = b.op1("stablehlo.gather", [table_val, shifted], out_ty, lop.attrs)
    offset_dims = set(ints(dims.get("offset_dims")))
    out_shape = out_ty.shape or ()
    batch_out = [d for d in range(len(out_shape)) if d not in offset_dims]
    mask = b.broadcast(inside, out_ty.with_dtype("i1"), batch_out)
    zeros = b.splat(out_ty, zero_text(table.dtype))
    return b.select(mask, gathered, zeros)


def _bytes(ty: Ty) -> int:
    return math.prod(ty.shape or ()) * itemsize(ty.dtype)


def _local_scatter(
    ctx: PartitionCtx,
    node: Node,
    lop: LocalOp,
    operand_layout: Layout,
    combiner: str | None,
) -> Val:
    """A scatter into this device's block of an operand split along the
    dims it scatters into: indices are shifted into the block. The
    behaviour of out-of-bounds scatter indices is implementation-defined,
    so none is relied on: under a combiner with an identity (add, multiply,
    max, min, and, or) an update for another block may become the identity
    combined at the block's first position (no copy of the block, a select
    over the updates); otherwise (a replace: no update changes nothing; a
    float type without infinities under max; updates much larger than the
    block) it goes to a scratch row appended to the block, sliced off
    afterwards. Either way, with more than one index, indices repeat and
    lose their order: the scatter no longer promises unique or sorted
    indices."""
    b = ctx.b
    dims = node.attrs.get("scatter_dimension_numbers")
    assert isinstance(dims, Mapping)
    index_map = _scattered_dims(node)
    vector_dim = dims.get("index_vector_dim")
    assert isinstance(vector_dim, int)
    operand = ctx.graph.value(node.operands[0])
    assert operand.shape is not None
    block, indices, updates = lop.operands
    idx_ty = indices.ty
    offsets, limits = _index_blocks(
        ctx, index_map, operand_layout, operand.shape, idx_ty.dtype
    )
    shifted = b.binary(
        "stablehlo.subtract", indices, _spread(ctx, offsets, idx_ty, vector_dim)
    )
    mask = _index_mask(
        ctx, shifted, _spread(ctx, limits, idx_ty, vector_dim), vector_dim
    )
    per_update = mask  # one per index vector
    keep = [d for d in range(idx_ty.rank) if d != vector_dim]
    if mask.ty != idx_ty.with_dtype("i1"):
        mask = b.broadcast(mask, idx_ty.with_dtype("i1"), keep)
    region = ctx.verbatim_region(node.regions[0][0])
    attrs = dict(lop.attrs)
    vectors = math.prod(n for d, n in enumerate(idx_ty.shape or ()) if d != vector_dim)
    if vectors > 1:  # routed indices repeat and lose their order
        for key in ("unique_indices", "indices_are_sorted"):
            if key in attrs:
                attrs[key] = "false"
    identity = combiner_identity(combiner, operand.dtype)
    # The identity costs a select over the updates (read and written), the
    # scratch row a copy of the block in and out: the one touching fewer
    # bytes (a big table's block and a few updates, or few rows of a
    # segment max over many).
    if identity is not None and _bytes(updates.ty) <= 2 * _bytes(block.ty):
        # the gradient of a gather from a split table, a segment max: the
        # identity combined in place of each update for another block (an
        # embedding table's block is not copied twice through a scratch row)
        window = set(ints(dims.get("update_window_dims")))
        up_ty = updates.ty
        batch = [d for d in range(up_ty.rank) if d not in window]
        kept = b.select(
            b.broadcast(per_update, up_ty.with_dtype("i1"), batch),
            updates,
            b.splat(up_ty, identity),
        )
        inside = b.select(mask, shifted, b.splat(idx_ty, "0"))
        return b.op1(
            "stablehlo.scatter", [block, inside, kept], block.ty, attrs, [region]
        )
    scalar = Ty((), idx_ty.dtype)
    scratch_parts = [
        limit if operand_layout[d] else b.splat(scalar, "0")
        for d, limit in zip(index_map, limits, strict=True)
    ]
    routed = b.select(mask, shifted, _spread(ctx, scratch_parts, idx_ty, vector_dim))
    local = block.ty.shape or ()
    high = [
        1 if (d in index_map and operand_layout[d]) else 0 for d in range(len(local))
    ]
    fill = b.zeros(Ty((), operand.dtype))
    padded = b.pad(block, fill, [0] * len(local), high)
    scattered = b.op1(
        "stablehlo.scatter", [padded, routed, updates], padded.ty, attrs, [region]
    )
    return b.slice(scattered, [0] * len(local), list(local))
