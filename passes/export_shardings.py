"""Write propagated shardings in the exact form Shardy's pipeline leaves them.

Func inputs and outputs are made evenly divisible (a dim keeps only the major
axes that divide it) and lose sub-axes, as Shardy's export does for the
boundary of the program (private functions too, unless `even-callees=false`,
which meshjit.jit's pipeline sets). With `close-shardings` (what `propagation-pipeline`
runs, like Shardy's propagation pipeline) every dim is closed and explicitly
replicated axes are dropped; without it open dims keep their `?`. The work
is done in `passes/propagation/export.py` (compiled; this pass class cannot be).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from meshjit.compiler.diagnostics import Diagnostics
from meshjit.compiler.graph import (
    Graph,
    Node,
    Opaque,
    invalidate_graphs,
    op_handles,
    read_graph,
    write_attrs,
)
from meshjit.compiler.ir import ir, print_module, renamed, replace_module
from meshjit.compiler.pass_base import ModulePass
from meshjit.dialects.sdy_text import (
    parse_sharding,
    parse_sharding_per_value,
    print_axis_ref,
    print_sharding,
)
from meshjit.dialects.sharding import AxisRef, TensorSharding
from meshjit.passes.propagation.build import SHARDING, dict_sharding
from meshjit.passes.propagation.export import Exporter

_CONSTRAINT = re.compile(r"^(\s*%[^=]*= )sdy\.sharding_constraint ", re.MULTILINE)
_GROUP = re.compile(r"^[ \t]*sdy\.sharding_group .*\n", re.MULTILINE)


@dataclass(frozen=True)
class ExportShardingsPass(ModulePass):
    """Write shardings in Shardy's exported form (even func boundaries, closed)."""

    name: ClassVar[str] = "export-shardings"
    close_shardings: bool = False  # close every dim and drop replicated axes
    # Shardy's export form: every sdy.sharding_constraint becomes the
    # sdy.reshard it stands for, sharding groups go, constants are
    # sdy.constant (what `propagation-pipeline` writes)
    constraints_to_reshards: bool = False
    # Private functions' arguments and results made evenly divisible too, as
    # Shardy's export writes them. meshjit.jit's pipeline turns this off: a
    # call is inlined where it is partitioned, and an even signature there
    # would move a value that the callee's ops keep split (an uneven slice
    # passed to `jnp.flip`'s function all-gathered at the call and split again).
    even_callees: bool = True

    def run(self, module: ir.Module, diags: Diagnostics) -> None:
        graph = read_graph(module, diags.source_name)
        write_attrs(
            module, Exporter(self.close_shardings, self.even_callees).plan(graph, diags)
        )
        if not self.constraints_to_reshards:
            return
        ops = {n.op for n in graph.walk()}
        rename = bool(ops & {"sdy.sharding_constraint", "sdy.sharding_group"})
        unreduced = any(_mentions_unreduced(n) for n in graph.walk())
        if not (rename or unreduced or "stablehlo.constant" in ops):
            return
        handles = op_handles(module)
        if unreduced:
            _insert_all_reduces(module, read_graph(module, diags.source_name), handles)
        # Shardy's pipeline leaves its constants as sdy.constant (same
        # operands, attributes and result): replaced in place.
        with module.context:
            for node in graph.nodes:
                if node.op == "stablehlo.constant":
                    old = handles[node.id]
                    made = renamed(old, "sdy.constant")
                    old.result.replace_all_uses_with(made.result)
                    old.erase()
        # A constraint nothing uses has done its work (propagation read it):
        # it goes, as in Shardy's export, rather than become a reshard of
        # nothing.
        for node in reversed(graph.nodes):
            if node.op == "sdy.sharding_constraint" and not any(
                graph.users(v) for v in node.results
            ):
                handles[node.id].erase()
        if rename:
            # A constraint and the reshard it stands for print alike (`%r = OP
            # %x <@mesh, [...]> : type`), so the rename is one word per line
            # of the printed module. Sharding groups have done their work
            # (their members agree): Shardy's export removes them, and so
            # does this form.
            text = _CONSTRAINT.sub(
                r"\1sdy.reshard ", print_module(module, debug_info=True)
            )
            replace_module(module, _GROUP.sub("", text), diags.source_name)
        else:
            invalidate_graphs(module)


def _mentions_unreduced(node: Node) -> bool:
    """Whether a sharding on `node` (its results', or its function's
    arguments' and results') is unreduced over some axes."""
    texts: list[object] = [node.attrs.get(SHARDING)]
    for name in ("arg_attrs", "res_attrs"):
        entries = node.attrs.get(name)
        if isinstance(entries, tuple):
            texts.extend(e.get(SHARDING) for e in entries if isinstance(e, Mapping))
    return any(isinstance(t, Opaque) and "unreduced=" in t.text for t in texts)


def _value_sharding(
    graph: Graph, vid: int, args: Mapping[int, tuple[Node, int]]
) -> TensorSharding | None:
    """The sharding the module gives a value (its op's, its constraint's or
    its function argument's), if any."""
    value = graph.value(vid)
    if value.owner < 0:
        found = args.get(vid)
        if found is None:
            return None
        func, index = found
        arg = dict_sharding(func.attrs.get("arg_attrs"), index)
        return parse_sharding(arg) if arg is not None else None
    node = graph.node(value.owner)
    if node.op in ("sdy.sharding_constraint", "sdy.reshard"):
        text = node.attrs.get("sharding")
        return parse_sharding(text.text) if isinstance(text, Opaque) else None
    if node.op == "sdy.all_reduce":
        text = node.attrs.get("out_sharding")
        return parse_sharding(text.text) if isinstance(text, Opaque) else None
    text = node.attrs.get(SHARDING)
    if not isinstance(text, Opaque):
        return None
    per_value = parse_sharding_per_value(text.text)
    return per_value[value.index] if value.index < len(per_value) else None


def _expected_unreduced(
    graph: Graph, user: Node, index: int, func_of_return: Mapping[int, Node]
) -> tuple[AxisRef, ...]:
    """The axes `user` takes operand `index` unreduced over: those its result
    (or the function result it returns) is unreduced over."""
    if user.op == "func.return":
        func = func_of_return.get(user.id)
        res = dict_sharding(func.attrs.get("res_attrs"), index) if func else None
        return parse_sharding(res).unreduced if res is not None else ()
    if user.op in ("sdy.sharding_constraint", "sdy.reshard"):
        text = user.attrs.get("sharding")
        return parse_sharding(text.text).unreduced if isinstance(text, Opaque) else ()
    text = user.attrs.get(SHARDING)
    if isinstance(text, Opaque):
        per_value = parse_sharding_per_value(text.text)
        if per_value:
            return per_value[0].unreduced
    return ()


def _insert_all_reduces(
    module: ir.Module, graph: Graph, handles: Sequence[ir.Operation]
) -> None:
    """Shardy's export form of unreduced values: where a value unreduced over
    some axes is used by an op (or returned as a function result) that is not
    unreduced over them, an `sdy.all_reduce` over those axes is put before
    that use (one per use), its out_sharding the value's less those axes."""
    args: dict[int, tuple[Node, int]] = {}
    func_of_return: dict[int, Node] = {}
    for func in graph.funcs():
        if not func.regions or not func.regions[0]:
            continue
        block = func.regions[0][0]
        for i, vid in enumerate(block.args):
            args[vid] = (func, i)
        for nid in block.nodes:
            if graph.node(nid).op == "func.return":
                func_of_return[nid] = func
    inserts: list[tuple[int, int, TensorSharding, tuple[AxisRef, ...]]] = []
    for user in graph.walk():
        if user.op == "sdy.all_reduce":
            continue
        for k, vid in enumerate(user.operands):
            src = _value_sharding(graph, vid, args)
            if src is None or not src.unreduced:
                continue
            expected = set(_expected_unreduced(graph, user, k, func_of_return))
            reduce = tuple(a for a in src.unreduced if a not in expected)
            if not reduce:
                continue
            keep = tuple(a for a in src.unreduced if a in expected)
            out = TensorSharding(src.mesh_name, src.dims, src.replicated, keep)
            inserts.append((user.id, k, out, reduce))
    if not inserts:
        return
    with module.context:
        for nid, k, out, reduce in inserts:
            op = handles[nid]
            value = op.operands[k]
            axes = "{" + ", ".join(print_axis_ref(a) for a in reduce) + "}"
            made = ir.Operation.create(
                "sdy.all_reduce",
                results=[value.type],
                operands=[value],
                attributes={
                    "reduction_axes": ir.Attribute.parse(f"#sdy<axis_ref_list{axes}>"),
                    "out_sharding": ir.Attribute.parse(print_sharding(out)),
                },
                loc=op.location,
                ip=ir.InsertionPoint(op),
            )
            op.operands[k] = made.result
