"""Sharding groups whose members start with different shardings, as Shardy
treats them before propagation: a warning on the first member's op, and an
open `sdy.sharding_constraint` after every member, which takes the member's
place in the group (and for the member's other users). Each member keeps its
own sharding; the group's constraints meet in propagation.

Groups whose members agree (a fully open and replicated sharding, or none,
agrees with anything) are synchronised in `build.py` instead: every member
gets the common sharding. A member is a value a `sdy.sharding_group` op
names; its starting sharding is a func argument's `sdy.sharding`, a
manual_computation body argument's in_sharding, a constraint's own, or its
op's `sdy.sharding` for that result.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from meshjit.compiler.diagnostics import Diagnostics, parse_loc_text
from meshjit.dialects.sdy_text import (
    parse_sharding,
    parse_sharding_per_value,
    print_symbol,
)
from meshjit.dialects.sharding import TensorSharding
from meshjit.errors import ShardingError

_GROUP = "sdy.sharding_group"


def split_conflicting_groups(module: ir.Module, diags: Diagnostics) -> int:
    """Rewrites every group whose members start with different shardings;
    returns how many."""
    groups: dict[int, list[ir.Operation]] = {}
    for op in _walk(module.operation):
        if op.name == _GROUP:
            gid = ir.IntegerAttr(op.attributes["group_id"]).value
            groups.setdefault(gid, []).append(op)
    done = 0
    with module.context:
        for gid in sorted(groups):
            members = [g.operands[0] for g in groups[gid]]
            first = _common(members)
            if first is None:
                continue
            owner = _owning_op(members[0])
            diags.user_warning(
                parse_loc_text(str(owner.location), diags.source_name),
                f"The initial operand shardings on the sharding groups of groupID: "
                f"{gid} do not match. Inserting an open sharding constraint to all "
                "constrained values. This can be caused when shardings from "
                "different values are grouped (e.g. from jax.shard_alike) but "
                "have separate inconsistent sharding constraints on them.",
            )
            dims = ", ".join(["{?}"] * first.rank)
            open_like = ir.Attribute.parse(
                f"#sdy.sharding<{print_symbol(first.mesh_name)}, [{dims}]>"
            )
            for member in dict.fromkeys(members):
                _constrain(member, open_like)
            done += 1
    return done


def _walk(op: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []
    stack = [op]
    while stack:
        cur = stack.pop()
        found.append(cur)
        inner = [
            o.operation
            for region in cur.regions
            for block in region.blocks
            for o in block.operations
        ]
        stack.extend(reversed(inner))
    return found


def _common(members: list[ir.Value[ir.Type]]) -> TensorSharding | None:
    """The first member sharding that is not fully open and replicated, when
    another such member sharding differs from it (Shardy's conflict); None
    when they agree."""
    first: TensorSharding | None = None
    for v in members:
        s = _initial(v)
        if s is None or _open_replicated(s):
            continue
        if first is None:
            first = s
        elif s != first:
            return first
    return None


def _open_replicated(s: TensorSharding) -> bool:
    return not s.replicated and all(not d.axes and not d.closed for d in s.dims)


def _initial(v: ir.Value[ir.Type]) -> TensorSharding | None:
    try:
        if isinstance(v.owner, ir.Block):
            arg: ir.BlockArgument[ir.Type] = ir.BlockArgument(v)
            parent = v.owner.owner.operation
            if parent.name == "func.func" and "arg_attrs" in parent.attributes:
                attrs = ir.DictAttr(
                    ir.ArrayAttr(parent.attributes["arg_attrs"])[arg.arg_number]
                )
                if "sdy.sharding" in attrs:
                    return parse_sharding(str(attrs["sdy.sharding"]))
            elif parent.name == "sdy.manual_computation":
                per_value = parse_sharding_per_value(
                    str(parent.attributes["in_shardings"])
                )
                return per_value[arg.arg_number]
            return None
        op = v.owner.operation
        result = ir.OpResult(v).result_number
        if op.name == "sdy.sharding_constraint":
            return parse_sharding(str(op.attributes["sharding"]))
        if "sdy.sharding" in op.attributes:
            return parse_sharding_per_value(str(op.attributes["sdy.sharding"]))[result]
    except (ShardingError, ValueError, IndexError):
        return None  # the importer reports a malformed sharding
    return None


def _owning_op(v: ir.Value[ir.Type]) -> ir.Operation:
    if isinstance(v.owner, ir.Block):
        return v.owner.owner.operation
    return v.owner.operation


def _constrain(member: ir.Value[ir.Type], sharding: ir.Attribute) -> None:
    """An open constraint right after `member` (at its block's start for a
    block argument), in its place for every other user."""
    if isinstance(member.owner, ir.Block):
        block = member.owner
        ops = list(block.operations)
        ip = ir.InsertionPoint(ops[0]) if ops else ir.InsertionPoint(block)
        loc = block.owner.operation.location
    else:
        ip = ir.InsertionPoint.after(member.owner.operation)
        loc = member.owner.operation.location
    op = ir.Operation.create(
        "sdy.sharding_constraint",
        results=[member.type],
        operands=[member],
        attributes={"sharding": sharding},
        loc=loc,
        ip=ip,
    )
    member.replace_all_uses_except(op.results[0], op)
