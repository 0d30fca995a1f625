"""All-to-alls handed to XLA in its tuple form, cut at run-time offsets.

XLA's CPU compiler rewrites every array all-to-all (one operand, a split and
a concat dim) into its tuple form before fusion (`AllToAllDecomposer`): one
`slice` per group member, an all-to-all of the pieces, a concatenate. Each
slice has its own constant start, so each is a kernel of its own, and the CPU
backend compiles each kernel with LLVM: an all-to-all over 8 devices costs 8
kernels. Measured (6 all-to-alls of different shapes on 8 devices, each
followed by a multiply): 48 slice kernels and 0.85 s of compile; written as
below, 0.48 s. The bench's FNO train step on height8 has 14 all-to-alls.

`split_all_to_alls` writes each array all-to-all as that tuple form itself,
with the pieces cut by `stablehlo.dynamic_slice` at offsets XLA sees only at
run time (`passes/partitioner/runtime_offsets.py`): the pieces of one
all-to-all share one kernel. StableHLO has no tuple all-to-all of its own: a
`stablehlo.all_to_all` with several operands means, by the StableHLO spec,
each operand split and scattered, but XLA's translation makes it HLO's tuple
all-to-all (MHLO's convention): operand i goes to the group's i-th member,
result j comes from its j-th member (`bridge.tuple_all_to_all`). So the
rewrite is made only on the module handed to XLA, after the partitioned text
is printed: what `meshjit-opt` prints, `as_text("partitioned")` returns and
the persistent cache stores keep the array form.

The variadic op must still pass StableHLO's verifier, which infers each
result from its operand by the split and concat dims: both name one dim of
the piece that the group size divides (inferred: the piece's own shape), or
the piece is flattened to one such dim; a piece with no such shape (its
element count not a multiple of the group size) keeps the array form.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from jaxlib.mlir import ir

from meshjit.passes.partitioner.runtime_offsets import RuntimeOffsets, create_op

_ALL_TO_ALL = "stablehlo.all_to_all"


def split_all_to_alls(module: ir.Module) -> int:
    """Rewrites each array all-to-all of `module` into the tuple form above,
    in place; returns how many it rewrote."""
    count = 0
    with module.context, ir.Location.unknown():
        for block in list(_blocks(module.operation)):
            offsets: RuntimeOffsets | None = None
            for view in list(block.operations):
                op = view.operation
                if op.name != _ALL_TO_ALL or len(op.operands) != 1:
                    continue
                if offsets is None:
                    offsets = RuntimeOffsets(block)
                if _rewrite(op, offsets):
                    count += 1
    return count


def _blocks(op: ir.Operation) -> Iterator[ir.Block]:
    for region in op.regions:
        for block in region.blocks:
            yield block
            for inner in block.operations:
                if inner.operation.regions:
                    yield from _blocks(inner.operation)


def _int(op: ir.Operation, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def _i64(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


def _rewrite(op: ir.Operation, offsets: RuntimeOffsets) -> bool:
    operand = ir.RankedTensorType(op.operands[0].type)
    if not operand.has_static_shape:
        return False
    shape, element = list(operand.shape), operand.element_type
    split, concat, n = (
        _int(op, "split_dimension"),
        _int(op, "concat_dimension"),
        _int(op, "split_count"),
    )
    if n < 2:  # one operand: the array form as it is
        return False
    size = shape[split] // n
    piece_shape = [size if d == split else s for d, s in enumerate(shape)]
    # the dim the variadic op names (its inferred result = the piece's shape)
    sent_shape = piece_shape
    named = next((d for d, s in enumerate(piece_shape) if s % n == 0), None)
    if named is None:
        if math.prod(piece_shape) % n != 0:
            return False
        sent_shape, named = [math.prod(piece_shape)], 0
    ip, loc = ir.InsertionPoint(op), op.location
    piece = ir.RankedTensorType.get(piece_shape, element)
    sent = ir.RankedTensorType.get(sent_shape, element)
    at = offsets.get([0, *(i * size for i in range(n))], loc)
    pieces = []
    for i in range(n):
        starts = [at[1 + i] if d == split else at[0] for d in range(len(shape))]
        value = create_op(
            "stablehlo.dynamic_slice",
            [op.operands[0], *starts],
            piece,
            {"slice_sizes": ir.DenseI64ArrayAttr.get(piece_shape)},
            ip,
            loc,
        )
        if sent_shape != piece_shape:
            value = create_op("stablehlo.reshape", [value], sent, {}, ip, loc)
        pieces.append(value)
    attrs = {name: op.attributes[name] for name in op.attributes}
    attrs["split_dimension"] = attrs["concat_dimension"] = _i64(named)
    tuple_op = ir.Operation.create(
        _ALL_TO_ALL,
        results=[sent] * n,
        operands=pieces,
        attributes=attrs,
        loc=loc,
        ip=ip,
    )
    received = []
    for value in tuple_op.results:
        if sent_shape != piece_shape:
            value = create_op("stablehlo.reshape", [value], piece, {}, ip, loc)
        received.append(value)
    joined = create_op(
        "stablehlo.concatenate",
        received,
        op.results[0].type,
        {"dimension": _i64(concat)},
        ip,
        loc,
    )
    op.results[0].replace_all_uses_with(joined)
    op.erase()
    return True
