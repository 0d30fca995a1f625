"""Function copies per call site, merged where their shardings agree.

Propagation reads a private function once per `func.call` site, as if inlined
there (`build.CallInstance`), so two calls of one function may find different
shardings for its values. Shardy's propagation pipeline gives each call site
its own copy of the callee (flatten-call-graph), propagates, and merges copies
whose argument and result shardings are equal (unflatten-call-graph). This
module writes the same answer from the instances:

- names: copies are made in post-order (the calls inside a callee before the
  call of it), the first of a name keeping it, later ones `name_N` with one
  counter for the module (MLIR's symbol-table uniquing, as Shardy's export of
  named computations names them);
- merging: walking the calls in module order, a call uses the first copy with
  its callee's original name and equal argument and result shardings;
- copies no call uses are dropped; the survivors follow the functions that
  are not private callees, in creation order.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from meshjit.compiler.graph import (
    AttrPlan,
    Node,
    invalidate_graphs,
    move_to_end,
    nested_op_handles,
    op_handles,
    write_attrs,
)
from meshjit.compiler.ir import ir
from meshjit.passes.propagation.axes import Ax
from meshjit.passes.propagation.build import Built, Edges, nested_ops, write_plan
from meshjit.passes.propagation.core import Sh


class Callees(enum.Enum):
    """How propagation writes private functions called with `func.call`."""

    AS_WRITTEN = "as-written"  # one body; signatures keep what was written
    SHARED = "shared"  # one body, signatures from the first call
    COPIES = "copies"  # a copy per call site, equal copies merged


@dataclass(frozen=True, slots=True)
class CopyPlan:
    """Which functions the module gets, and which one each call uses."""

    name_of: dict[int, str]  # instance -> its copy's name
    target: dict[int, int]  # instance -> the instance whose copy it calls
    live: list[int]  # instances whose copies are kept, in creation order


def _signature(
    built: Built, state: Sequence[Sh | None], inst: int
) -> tuple[tuple[Sh | None, ...], tuple[Sh | None, ...]]:
    instance = built.instances[inst]
    func = built.graph.node(instance.func)
    args = func.regions[0][0].args

    def first(slots: Sequence[int]) -> Sh | None:
        for s in slots:
            if state[s] is not None:
                return state[s]
        return None

    ins = tuple(first(instance.slots.get(a, ())) for a in args)
    outs = tuple(state[s] for s in instance.returns)
    return ins, outs


def plan_copies(built: Built, state: Sequence[Sh | None]) -> CopyPlan | None:
    """The copies Shardy's pipeline would leave; None where no function is
    called twice (each is then written with its one call's shardings, as
    Shardy's copies would be) or where the calls cannot be copied (a
    recursive or unknown callee, a call of a function that is not a private
    callee)."""
    g = built.graph
    instances = built.instances
    if not instances or built.opaque_calls:
        return None
    if any(inst.func not in built.callees for inst in instances):
        return None
    if len({inst.func for inst in instances}) == len(instances):
        return None  # each function called once: written as it is

    def base(inst: int) -> str:
        name = g.node(instances[inst].func).attr("sym_name")
        assert isinstance(name, str)
        return name

    # Names taken: every module-level symbol but the callees (which the
    # copies replace), as MLIR's symbol table sees them.
    used = {
        name
        for nid in g.body.nodes
        if nid not in built.callees
        and isinstance(name := g.node(nid).attr("sym_name"), str)
    }
    counter = 0
    name_of: dict[int, str] = {}
    created: list[int] = []

    def visit(inst: int) -> None:
        nonlocal counter
        for child in instances[inst].children:
            visit(child)
        name = base(inst)
        if name in used:
            while f"{name}_{counter}" in used:
                counter += 1
            name = f"{name}_{counter}"
            counter += 1
        used.add(name)
        name_of[inst] = name
        created.append(inst)

    roots = [f.id for f in g.funcs() if f.id not in built.callees]
    for root in roots:
        for inst in built.root_calls.get(root, []):
            visit(inst)

    first: dict[tuple[object, ...], int] = {}
    target: dict[int, int] = {}

    def merge(inst: int) -> None:
        key = (base(inst), *_signature(built, state, inst))
        target[inst] = first.setdefault(key, inst)

    for root in roots:
        for inst in built.root_calls.get(root, []):
            merge(inst)
    for inst in created:
        for child in instances[inst].children:
            merge(child)

    live: set[int] = set()
    stack = [target[i] for r in roots for i in built.root_calls.get(r, [])]
    while stack:
        inst = stack.pop()
        if inst in live:
            continue
        live.add(inst)
        stack.extend(target[c] for c in instances[inst].children)
    return CopyPlan(name_of, target, [i for i in created if i in live])


def write_copies(
    module: ir.Module,
    built: Built,
    state: Sequence[Sh | None],
    plan: CopyPlan,
    origins: Mapping[int, Mapping[Ax, str]] | None = None,
    edges: Edges | None = None,
) -> None:
    """Rewrites the module's functions as `plan` says, each written with its
    instance's shardings; the functions that are not private callees are
    written as usual."""
    g = built.graph
    roots = [f for f in g.funcs() if f.id not in built.callees]
    instances = built.instances
    if _in_place(built, plan):
        # The copies would be the callees as they stand, perhaps under other
        # names: each is written where it is, renamed with its calls (no
        # handles given: the graphs a session holds are updated too, so the
        # passes after read no new one).
        write_attrs(module, _renames(module, built, plan))
        write_attrs(
            module,
            write_plan(built, state, funcs=roots, origins=origins, edges=edges),
        )
        for inst in plan.live:
            write_attrs(
                module,
                write_plan(
                    built,
                    state,
                    funcs=[g.node(instances[inst].func)],
                    instance=instances[inst],
                    origins=origins,
                    edges=edges,
                ),
            )
        funcs = [instances[i].func for i in plan.live]
        top = list(g.body.nodes)
        if top[len(top) - len(funcs) :] != funcs:
            move_to_end(module, funcs)
        return
    handles = op_handles(module)
    write_attrs(
        module,
        write_plan(built, state, funcs=roots, origins=origins, edges=edges),
        handles,
    )
    with module.context, ir.Location.unknown():
        for root in roots:
            for inst in built.root_calls.get(root.id, []):
                _set_callee(handles[instances[inst].call], plan, inst)
        end = ir.InsertionPoint(module.body)
        for inst in plan.live:
            func: Node = g.node(instances[inst].func)
            copy = handles[func.id].clone(ip=end)
            copy.attributes["sym_name"] = ir.StringAttr.get(plan.name_of[inst])
            inner = [n.id for n in nested_ops(g, func)]
            ops = nested_op_handles(copy)
            if len(ops) != len(inner):  # a clone has the original's ops
                raise AssertionError("a function copy differs from its original")
            mapping = dict(zip(inner, ops, strict=True))
            mapping[func.id] = copy
            for child in instances[inst].children:
                _set_callee(mapping[instances[child].call], plan, child)
            write_attrs(
                module,
                write_plan(
                    built,
                    state,
                    funcs=[func],
                    instance=instances[inst],
                    origins=origins,
                    edges=edges,
                ),
                mapping,
            )
        for fid in sorted(built.callees, reverse=True):
            handles[fid].erase()
    invalidate_graphs(module)


def _in_place(built: Built, plan: CopyPlan) -> bool:
    """Whether the plan's copies are the callees themselves: one per
    function. Each call then calls its callee's one copy, under the copy's
    name (`_renames`), and the functions move to where the copies would be
    appended, in the copies' order."""
    funcs = [built.instances[i].func for i in plan.live]
    return len(funcs) == len(built.callees) and set(funcs) == built.callees


def _renames(module: ir.Module, built: Built, plan: CopyPlan) -> AttrPlan:
    """For `_in_place`'s copies: each function that its copy names otherwise
    renamed, and every call of it (one copy per function, so all of a
    function's calls call that copy)."""
    g = built.graph
    instances = built.instances
    renamed = {
        instances[i].func: plan.name_of[i]
        for i in plan.live
        if plan.name_of[i] != g.node(instances[i].func).attr("sym_name")
    }
    renames = AttrPlan()
    with module.context:
        for func, name in renamed.items():
            renames.set_op(func, "sym_name", str(ir.StringAttr.get(name)))
        for inst in instances:
            if inst.func in renamed:
                callee = str(ir.FlatSymbolRefAttr.get(renamed[inst.func]))
                renames.set_op(inst.call, "callee", callee)
    return renames


def _set_callee(op: ir.Operation, plan: CopyPlan, inst: int) -> None:
    name = plan.name_of[plan.target[inst]]
    op.attributes["callee"] = ir.FlatSymbolRefAttr.get(name)
