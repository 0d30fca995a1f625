"""Edge padding written as concatenations the partitioner can read through.

`jnp.pad(x, ..., mode="reflect")` ("symmetric", "edge", "wrap" alike) lowers
to a call of a private function that, for each padded dim in turn,
concatenates slices (reversed, for reflect) of what the previous dim's
padding made around it. A convolution reading that along a split dim gets a
concatenation whose blocks do not line up with its own; the partitioner
reads through a concatenation of small edge pieces around a core
(`partitioner/edges.py`), so this rewrite gives the padding that shape,
before propagation:

- calls of private functions that only move data (slice, reverse,
  concatenate, broadcast, reshape, calls of such) whose result reaches a
  convolution's input through slices, reverses and concatenations are
  inlined;
- in that cone, a slice lying within one piece of a concatenation along the
  sliced dim slices the piece instead; empty pieces of a concatenation are
  dropped; a concatenation of a concatenation along the same dim is
  flattened; a slice or reverse of a concatenation of
  edges around a core, along other dims than the concatenated one, becomes
  the concatenation of the pieces sliced or reversed (and so a broadcast or
  a reshape that only adds or removes unit dims, as `mode="edge"` makes its
  edges).

A pad of two dims then reads `concatenate(columns)` along the second dim,
each column a concatenation of edges around a core along the first: the
grid the partitioner reads through along either dim. Every rewrite is an
identity of the values; ops left unused are erased. Run by `fold-pads`.
"""

from __future__ import annotations

from collections.abc import Sequence

from jaxlib.mlir import ir

from meshjit.compiler.inline import inline_call

__all__ = ["canonicalize_edges"]

_V = ir.Value[ir.Type]

_MOVES = (
    "stablehlo.slice",
    "stablehlo.reverse",
    "stablehlo.concatenate",
    "stablehlo.broadcast_in_dim",
    "stablehlo.reshape",
)
_MOVING_BODY = frozenset({*_MOVES, "func.call", "func.return"})
_SHARDING_ATTRS = ("sdy.sharding", "mhlo.sharding")
# Passes over the cones: each rewrite removes an op from a cone or moves a
# slice towards the cone's leaves, so a cone of n ops settles in O(n) rounds.
_MAX_ROUNDS = 4096


def _owner(value: _V) -> ir.Operation | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation


def _shape(value: _V) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _ints(op: ir.Operation, name: str) -> list[int]:
    return [int(v) for v in ir.DenseI64ArrayAttr(op.attributes[name])]


def _dim(op: ir.Operation) -> int:
    return int(ir.IntegerAttr(op.attributes["dimension"]).value)


def _sharded(op: ir.Operation) -> bool:
    return any(a in op.attributes for a in _SHARDING_ATTRS)


def _i64s(values: Sequence[int]) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get(list(values))


def _slice(
    x: _V, start: Sequence[int], limit: Sequence[int], strides: Sequence[int]
) -> _V:
    shape = [
        max(0, -(-(hi - lo) // st))
        for lo, hi, st in zip(start, limit, strides, strict=True)
    ]
    ty = ir.RankedTensorType.get(shape, ir.RankedTensorType(x.type).element_type)
    op = ir.Operation.create(
        "stablehlo.slice",
        results=[ty],
        operands=[x],
        attributes={
            "start_indices": _i64s(start),
            "limit_indices": _i64s(limit),
            "strides": _i64s(strides),
        },
    )
    return op.result


def _reverse(x: _V, dims: Sequence[int]) -> _V:
    op = ir.Operation.create(
        "stablehlo.reverse",
        results=[x.type],
        operands=[x],
        attributes={"dimensions": _i64s(dims)},
    )
    return op.result


def _concatenate(parts: Sequence[_V], dim: int) -> _V:
    shape = _shape(parts[0])
    shape[dim] = sum(_shape(p)[dim] for p in parts)
    ty = ir.RankedTensorType.get(shape, ir.RankedTensorType(parts[0].type).element_type)
    op = ir.Operation.create(
        "stablehlo.concatenate",
        results=[ty],
        operands=list(parts),
        attributes={
            "dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)
        },
    )
    return op.result


def _edge_concat(op: ir.Operation) -> bool:
    """A concatenation of small edge pieces around one core (longer than
    twice the pieces together) along its dim."""
    if op.name != "stablehlo.concatenate" or len(op.operands) < 2:
        return False
    dim = _dim(op)
    sizes = [_shape(v)[dim] for v in op.operands]
    return 2 * (sum(sizes) - max(sizes)) < max(sizes)


def _rewrite(op: ir.Operation) -> _V | None:
    """The value to use instead of `op`'s result (built before `op`), or
    None where no rule applies."""
    source = _owner(op.operands[0])
    if source is None or source.name != "stablehlo.concatenate" or _sharded(source):
        return None
    dim = _dim(source)
    sizes = [_shape(v)[dim] for v in source.operands]
    if op.name == "stablehlo.slice":
        start = _ints(op, "start_indices")
        limit = _ints(op, "limit_indices")
        strides = _ints(op, "strides")
        offset = 0
        for piece, size in zip(source.operands, sizes, strict=True):
            if offset <= start[dim] and limit[dim] <= offset + size:
                # within one piece: slice the piece
                start[dim] -= offset
                limit[dim] -= offset
                return _slice(piece, start, limit, strides)
            offset += size
        whole = start[dim] == 0 and limit[dim] == sum(sizes) and strides[dim] == 1
        if whole and _edge_concat(source):
            parts = []
            for piece, size in zip(source.operands, sizes, strict=True):
                limit[dim] = size
                parts.append(_slice(piece, start, limit, strides))
            return _concatenate(parts, dim)
        return None
    if op.name == "stablehlo.reverse":
        dims = _ints(op, "dimensions")
        if dim in dims or not _edge_concat(source):
            return None
        return _concatenate([_reverse(p, dims) for p in source.operands], dim)
    if not _edge_concat(source):
        return None
    out = _shape(op.result)
    if op.name == "stablehlo.broadcast_in_dim":
        # (`mode="edge"` broadcasts its edge slices through a unit dim)
        dims = _ints(op, "broadcast_dimensions")
        to = dims[dim]
        if out[to] != sum(sizes):
            return None
        parts = []
        for piece, size in zip(source.operands, sizes, strict=True):
            shape = list(out)
            shape[to] = size
            parts.append(_unary(op.name, piece, shape, {"broadcast_dimensions": dims}))
        return _concatenate(parts, to)
    if op.name == "stablehlo.reshape":
        # only unit dims added or removed: the concatenated dim stays one dim
        shape = _shape(op.operands[0])
        if [n for n in shape if n != 1] != [n for n in out if n != 1] or shape[
            dim
        ] == 1:
            return None
        k = sum(1 for n in shape[:dim] if n != 1)
        to = [d for d, n in enumerate(out) if n != 1][k]
        parts = []
        for piece, size in zip(source.operands, sizes, strict=True):
            want = list(out)
            want[to] = size
            parts.append(_unary(op.name, piece, want, {}))
        return _concatenate(parts, to)
    return None


def _unary(name: str, x: _V, shape: Sequence[int], ints: dict[str, list[int]]) -> _V:
    ty = ir.RankedTensorType.get(list(shape), ir.RankedTensorType(x.type).element_type)
    attributes = {key: _i64s(values) for key, values in ints.items()}
    return ir.Operation.create(
        name, results=[ty], operands=[x], attributes=attributes
    ).result


def _flatten(op: ir.Operation) -> _V | None:
    """A concatenation with empty pieces (`mode="edge"` pads every dim,
    most by nothing): without them. A concatenation of edges around a core
    with an operand that is a concatenation along the same dim: one
    concatenation of all the pieces (where that is one of edges around a
    core too)."""
    dim = _dim(op)
    kept = [v for v in op.operands if _shape(v)[dim] > 0]
    if len(kept) < len(op.operands) and kept:
        return kept[0] if len(kept) == 1 else _concatenate(kept, dim)
    if not _edge_concat(op):
        return None
    parts: list[_V] = []
    found = False
    for value in op.operands:
        inner = _owner(value)
        if (
            inner is not None
            and inner.name == "stablehlo.concatenate"
            and _dim(inner) == dim
            and not _sharded(inner)
        ):
            parts.extend(inner.operands)
            found = True
        else:
            parts.append(value)
    sizes = [_shape(v)[dim] for v in parts]
    if not found or 2 * (sum(sizes) - max(sizes)) >= max(sizes):
        return None
    return _concatenate(parts, dim)


def _cone(convolutions: Sequence[ir.Operation]) -> list[ir.Operation]:
    """The slices, reverses and concatenations the convolutions' inputs are
    made by (leaves first)."""
    seen: set[int] = set()
    out: list[ir.Operation] = []

    def visit(value: _V) -> None:
        stack = [(value, False)]
        while stack:
            v, done = stack.pop()
            op = _owner(v)
            if op is None or op.name not in _MOVES or _sharded(op):
                continue
            key = hash(op)
            if done:
                out.append(op)
                continue
            if key in seen:
                continue
            seen.add(key)
            stack.append((v, True))
            stack.extend((o, False) for o in op.operands)

    for conv in convolutions:
        visit(conv.operands[0])
    return out


def _erase_dead(op: ir.Operation) -> None:
    """Erases `op` and, in turn, the moves that only it used."""
    stack = [op]
    while stack:
        dead = stack.pop()
        if any(True for r in dead.results for _ in r.uses):
            continue
        sources = [_owner(v) for v in dead.operands]
        dead.erase()
        stack.extend(s for s in sources if s is not None and s.name in _MOVES)


def _moving_functions(module: ir.Module) -> dict[str, ir.Operation]:
    """Private functions whose body only moves data."""
    out = {}
    for top in module.body.operations:
        func = top.operation
        if func.name != "func.func" or "sym_visibility" not in func.attributes:
            continue
        if ir.StringAttr(func.attributes["sym_visibility"]).value != "private":
            continue
        signature = " ".join(
            str(func.attributes[a])
            for a in ("arg_attrs", "res_attrs")
            if a in func.attributes
        )
        if any(s in signature for s in _SHARDING_ATTRS):
            continue
        blocks = list(func.regions[0].blocks)
        if len(blocks) != 1:
            continue
        ops = [o.operation for o in blocks[0].operations]
        if all(o.name in _MOVING_BODY and not _sharded(o) for o in ops):
            out[ir.StringAttr(func.attributes["sym_name"]).value] = func
    return out


def _reaches_convolution(value: _V, depth: int = 32) -> bool:
    """Whether `value` is a convolution's input, or reaches one through
    slices, reverses and concatenations."""
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        for use in v.uses:
            user = use.owner.operation
            if user.name == "stablehlo.convolution" and use.operand_number == 0:
                return True
            if user.name in _MOVES and d < depth:
                stack.extend((r, d + 1) for r in user.results)
    return False


def _calls_to_inline(
    module: ir.Module, functions: dict[str, ir.Operation]
) -> list[ir.Operation]:
    calls: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.call" and not _sharded(op):
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            if callee in functions and any(_reaches_convolution(r) for r in op.results):
                calls.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return calls


def _called(module: ir.Module) -> set[str]:
    called: set[str] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.call":
            called.add(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return called


def _inline_moving_calls(module: ir.Module) -> bool:
    functions = _moving_functions(module)
    if not functions:
        return False
    inlined: set[str] = set()
    for _ in range(64):  # calls of calls: one level per round
        calls = _calls_to_inline(module, functions)
        if not calls:
            break
        for call in calls:
            callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
            inline_call(call, functions[callee])
            inlined.add(callee)
    changed = bool(inlined)
    # functions no call uses any more (one erased may have called another)
    while dead := inlined - _called(module):
        for name in dead:
            functions[name].erase()
        inlined -= dead
    return changed


def _rewrite_one(cone: Sequence[ir.Operation]) -> bool:
    """Applies the first rule that applies in `cone` (leaves first);
    whether one did (the cone changed: walk it again)."""
    for op in cone:
        rule = _flatten if op.name == "stablehlo.concatenate" else _rewrite
        with ir.InsertionPoint(op), op.location:
            new = rule(op)
        if new is not None:
            op.result.replace_all_uses_with(new)
            _erase_dead(op)
            return True
    return False


def canonicalize_edges(module: ir.Module) -> bool:
    """Rewrites the data movement before convolutions' inputs as above;
    whether anything changed."""
    with module.context, ir.Location.unknown():
        changed = _inline_moving_calls(module)
        convolutions: list[ir.Operation] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name == "stablehlo.convolution":
                convolutions.append(op)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
        if not convolutions:
            return changed
        for conv in convolutions:  # each cone until nothing applies
            for _ in range(_MAX_ROUNDS):
                if not _rewrite_one(_cone([conv])):
                    break
                changed = True
    return changed
