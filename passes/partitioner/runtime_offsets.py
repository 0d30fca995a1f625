"""Values XLA sees only at run time: offsets for cutting pieces out of an
array so that XLA compiles same-shape consumers into one kernel.

Used where one value is cut into pieces at several offsets: a combined
collective's result, cut back into its members' (`combine.py`), and an
all-to-all's operand, cut into the pieces XLA's tuple all-to-all sends
(`compiler/tuple_all_to_all.py`).

Each member's result is cut out of the combined one at its own offset. Cut
by `stablehlo.slice`, the offset is a constant inside every consumer XLA
fuses the cut into, so consumers that are otherwise the same (the optimizer
updates of same-shape parameters) compile to one kernel per member: XLA's
CPU backend compiles each distinct kernel with LLVM (10-20 ms each here;
the bench's Llama step had 42 Adam moment updates as 42 kernels, 12 with
the cuts below, and 115 kernels in all, jax.jit's 88, 88 with them).
Cut by `stablehlo.dynamic_slice` at an offset XLA sees only at run time, the
offset is a parameter of the fused kernel and same-shape consumers share
one. The offsets leave a one-trip `stablehlo.while` whose trip count reads
`partition_id` (unknown to XLA): a constant or an optimization barrier is
folded back into the kernels (XLA's CPU pipeline removes barriers before
fusion), a loop-carried value that changes per trip is not. Measured on a
16-parameter Adam update in jax (offsets from such a loop): 33 LLVM modules
and 0.41 s of compile with constant offsets, 4 and 0.13 s.
"""

from __future__ import annotations

from collections.abc import Sequence

from jaxlib.mlir import ir


def create_op(
    name: str,
    operands: Sequence[ir.Value[ir.Type]],
    result: ir.Type,
    attrs: dict[str, ir.Attribute],
    ip: ir.InsertionPoint,
    loc: ir.Location,
) -> ir.Value[ir.Type]:
    """One op with one result, written at `ip`; its result."""
    op = ir.Operation.create(
        name,
        results=[result],
        operands=list(operands),
        attributes=attrs,
        loc=loc,
        ip=ip,
    )
    value: ir.Value[ir.Type] = op.results[0]
    return value


def _scalar_u32(
    value: int, ip: ir.InsertionPoint, loc: ir.Location
) -> ir.Value[ir.Type]:
    u32 = ir.IntegerType.get_unsigned(32)
    scalar = ir.RankedTensorType.get([], u32)
    attr = ir.DenseElementsAttr.get_splat(scalar, ir.IntegerAttr.get(u32, value))
    return create_op("stablehlo.constant", [], scalar, {"value": attr}, ip, loc)


def _binary(
    name: str,
    a: ir.Value[ir.Type],
    b: ir.Value[ir.Type],
    ip: ir.InsertionPoint,
    loc: ir.Location,
) -> ir.Value[ir.Type]:
    return create_op(name, [a, b], a.type, {}, ip, loc)


class RuntimeOffsets:
    """The run-time cut offsets of one block: one loop at the block's start
    (a loop costs a few microseconds a step), rebuilt with more values as
    groups ask for them."""

    def __init__(self, block: ir.Block) -> None:
        self.block = block
        self.values: list[int] = []
        self.loop: ir.Operation | None = None
        self.setup: list[ir.Operation] = []  # the ops that feed the loop

    def get(self, starts: Sequence[int], loc: ir.Location) -> list[ir.Value[ir.Type]]:
        """`starts` as values equal to them at run time (one per distinct
        offset in the block)."""
        new = [s for s in dict.fromkeys(starts) if s not in self.values]
        if new:
            self._rebuild(new, loc)
        assert self.loop is not None
        return [self.loop.results[2 + self.values.index(s)] for s in starts]

    def _rebuild(self, new: Sequence[int], loc: ir.Location) -> None:
        self.values.extend(new)
        old = self.loop
        ip = (
            ir.InsertionPoint(old)
            if old is not None
            else ir.InsertionPoint.at_block_begin(self.block)
        )
        loop, setup = offsets_loop(self.values, ip, loc)
        if old is not None:
            for was, now in zip(old.results[2:], loop.results[2:], strict=False):
                was.replace_all_uses_with(now)
            old.erase()
            for op in reversed(self.setup):  # each one's users erased before it
                op.erase()
        self.loop, self.setup = loop, setup


def offsets_loop(
    offsets: Sequence[int], ip: ir.InsertionPoint, loc: ir.Location
) -> tuple[ir.Operation, list[ir.Operation]]:
    """A loop whose results past the first two are `offsets` as ui32 scalars,
    equal to them at run time and not computable by XLA (see above), and the
    ops written before it for its operands, in order. It carries the trip's
    index and the first one, both `partition_id` at the start, and runs while
    they are equal: once, adding their difference (0) to each offset. XLA's
    CPU backend compiles it to one small kernel."""
    pid = create_op(
        "stablehlo.partition_id",
        [],
        ir.RankedTensorType.get([], ir.IntegerType.get_unsigned(32)),
        {},
        ip,
        loc,
    )
    init = [pid, pid, *(_scalar_u32(o, ip, loc) for o in offsets)]
    setup = [pid, *init[2:]]
    types = [pid.type] * len(init)
    loop = ir.Operation.create(
        "stablehlo.while", results=types, operands=init, regions=2, loc=loc, ip=ip
    )
    cond = loop.regions[0].blocks.append(*types)
    inner = ir.InsertionPoint(cond)
    same = create_op(
        "stablehlo.compare",
        [cond.arguments[0], cond.arguments[1]],
        ir.RankedTensorType.get([], ir.IntegerType.get_signless(1)),
        {
            "comparison_direction": ir.Attribute.parse(
                "#stablehlo<comparison_direction EQ>"
            )
        },
        inner,
        loc,
    )
    ir.Operation.create("stablehlo.return", operands=[same], loc=loc, ip=inner)
    body = loop.regions[1].blocks.append(*types)
    inner = ir.InsertionPoint(body)
    i, first = body.arguments[0], body.arguments[1]
    step = _binary("stablehlo.subtract", i, first, inner, loc)  # 0 on the trip
    nxt = _binary("stablehlo.add", i, _scalar_u32(1, inner, loc), inner, loc)
    moved = [_binary("stablehlo.add", o, step, inner, loc) for o in body.arguments[2:]]
    ir.Operation.create(
        "stablehlo.return", operands=[nxt, first, *moved], loc=loc, ip=inner
    )
    return loop, [_op(v) for v in setup]


def _op(value: ir.Value[ir.Type]) -> ir.Operation:
    owner = value.owner
    assert isinstance(owner, ir.OpView)
    return owner.operation
