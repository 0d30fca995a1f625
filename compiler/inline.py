"""Inlining `func.call`s through the MLIR bindings.

MLIR's own `inline` pass does nothing in jaxlib's bindings (the func
dialect's inliner interface is not registered there), so calls are inlined
here: the callee is cloned, its block arguments replaced by the call's
operands, its ops moved before the call, the call's results replaced by what
the clone returns, and callees no call uses any more are erased. Calls inside
inlined bodies are inlined in turn.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from meshjit.compiler.graph import invalidate_graphs
from meshjit.errors import InternalError


def _calls(op: ir.Operation, out: list[ir.Operation]) -> list[ir.Operation]:
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                if inner.operation.name == "func.call":
                    out.append(inner.operation)
                _calls(inner.operation, out)
    return out


def _symbol(op: ir.Operation, name: str) -> str:
    return ir.FlatSymbolRefAttr(op.attributes[name]).value


def inline_calls(module: ir.Module, max_rounds: int = 64) -> int:
    """Inlines every `func.call` of the module; returns how many it inlined.
    Private functions no longer called are erased."""
    invalidate_graphs(module)
    funcs = {
        ir.StringAttr(op.attributes["sym_name"]).value: op.operation
        for op in module.body.operations
        if op.operation.name == "func.func"
    }
    inlined = 0
    called: set[str] = set()
    with module.context, ir.Location.unknown():
        for _ in range(max_rounds):
            calls = _calls(module.operation, [])
            if not calls:
                break
            for call in calls:
                callee_name = _symbol(call, "callee")
                callee = funcs.get(callee_name)
                if callee is None:
                    raise InternalError(
                        f"func.call of an unknown function @{callee_name}"
                    )
                called.add(callee_name)
                _inline_one(call, callee)
                inlined += 1
        else:
            raise InternalError(f"calls nested deeper than {max_rounds} levels")
        for name in called:
            op = funcs[name]

            visibility = op.attributes.get("sym_visibility", None)
            if visibility is not None and ir.StringAttr(visibility).value == "private":
                op.erase()
    return inlined


def inline_call(call: ir.Operation, callee: ir.Operation) -> None:
    """Inlines one `func.call` of `callee` (its body cloned before the call,
    the call erased); the callee stays."""
    _inline_one(call, callee)


def _inline_one(call: ir.Operation, callee: ir.Operation) -> None:
    clone = callee.clone(ir.InsertionPoint(call))
    body = clone.regions[0].blocks[0]
    for arg, operand in zip(body.arguments, call.operands, strict=True):
        arg.replace_all_uses_with(operand)
    ops = list(body.operations)
    ret = ops[-1]
    for op in ops[:-1]:
        op.operation.move_before(call)
    for result, value in zip(call.results, ret.operands, strict=True):
        result.replace_all_uses_with(value)
    call.erase()
    clone.erase()
