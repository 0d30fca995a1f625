"""Reading a `Graph` into a propagation `Problem`, and writing the answer back.

What becomes what:
- each tensor value gets a slot; a private function called with `func.call` is
  instantiated once per call site (its arguments share the caller's operand
  slots, its results the slots of its returned values), as if inlined;
- `stablehlo.while`/`case`/`optimization_barrier` results, and the region
  arguments tied to them, share one slot fed by an identity "edge" op whose
  sources are the operands and the values the regions return;
- `sdy.sharding_constraint` is an identity op whose result starts with the
  constraint's sharding (and so does its input, when the constraint is its only
  use: Shardy's apply-sharding-constraints);
- `sdy.propagation_barrier` is an identity op with a fixed direction;
- `sdy.sharding_group` members are kept equal;
- each use of a constant (or an op computed only from constants) with several
  uses gets its own slot, as Shardy's constant splitter gives it its own copy;
- func result attributes are slots synchronised with the returned values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

from meshjit.compiler.diagnostics import Diagnostics, Severity, SourceLoc
from meshjit.compiler.graph import AttrPlan, Graph, Node, Opaque, SymbolRef
from meshjit.compiler.op_info import rule_lookup
from meshjit.dialects.rules import ShardingRule
from meshjit.dialects.sdy_text import (
    parse_mesh,
    parse_sharding,
    parse_sharding_per_value,
    print_sharding_body,
    print_string,
    print_symbol,
)
from meshjit.dialects.sharding import AxisRef, TensorSharding
from meshjit.dialects.stablehlo_rules import HOST_OFFLOAD_TARGETS, RULES
from meshjit.errors import ShardingError
from meshjit.passes.partitioner.builder import itemsize
from meshjit.passes.propagation.axes import Ax, Axes
from meshjit.passes.propagation.core import (
    BACKWARD,
    BOTH,
    FORWARD,
    NONE,
    OpKind,
    Origin,
    POp,
    Problem,
    Sh,
    identity_rule,
)

SHARDING = "sdy.sharding"
_PASS_THROUGH_STAGE0 = frozenset({"stablehlo.reshape", "stablehlo.transpose"})
_FORWARD_STAGE0 = frozenset(
    {"stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice"}
)
_TERMINATORS = frozenset({"func.return", "stablehlo.return", "sdy.return"})
_CONSTRAINING = frozenset({"sdy.sharding_constraint", "sdy.manual_computation"})
_CONSTANT_LEAVES = frozenset({"sdy.constant", "stablehlo.constant", "stablehlo.iota"})
_CONSTANT_PRESERVING = frozenset(
    {"stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.slice"}
)
_IMPURE = frozenset(
    {"stablehlo.rng", "stablehlo.rng_bit_generator", "stablehlo.custom_call"}
)
_MAX_CALL_DEPTH = 64
# Shardy's debug-sharding-origins attributes
ORIGINS = "sdy.sharding_origins"
ORIGIN_NAME = "sdy.sharding_origin_name"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
PROPAGATION_EDGES = "sdy.propagation_edges"
# Provenance.edges: owner -> [(step, [(axis, source, targets)])]
Edges = Mapping[
    tuple[object, ...], Sequence[tuple[int, Sequence[tuple[Ax, str, Sequence[str]]]]]
]
_DATA_FLOW_OPS = frozenset(
    {"stablehlo.while", "stablehlo.case", "stablehlo.optimization_barrier"}
)
# Priority of a dim sharding written without `pN` (Shardy's kDefaultPriority).
DEFAULT_PRIORITY = 0


@dataclass(slots=True)
class CallInstance:
    """One `func.call` site's instance of its callee (as if inlined there)."""

    call: int  # the func.call node
    func: int  # the callee's func.func node
    # callee value id -> its slots in this instance (block args share the
    # call's operand slots; split constants have several)
    slots: dict[int, list[int]] = field(default_factory=dict)
    returns: list[int] = field(default_factory=list)  # slots the callee returns
    # manual_computation node inside the callee -> (in slots, out slots)
    manual: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict)
    children: list[int] = field(default_factory=list)  # calls made in it


@dataclass(slots=True)
class Built:
    """A problem plus what is needed to write its answer back to the graph."""

    problem: Problem
    graph: Graph
    # graph value id -> slot (the first instance for functions called twice)
    slot_of: dict[int, int] = field(default_factory=dict)
    # graph value id -> every slot standing for it (call instances, split uses)
    all_slots: dict[int, list[int]] = field(default_factory=dict)
    # (func node, result index) -> func-result slot
    func_result_slot: dict[tuple[int, int], int] = field(default_factory=dict)
    constant_like: set[int] = field(default_factory=set)  # graph value ids
    mesh_order: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # manual_computation node -> (in_shardings slots, out_shardings slots)
    manual: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict)
    # values that an sdy.data_flow_edge op takes: their sharding is written
    # on the edge op, not on the op that defines them
    edge_owned: set[int] = field(default_factory=set)
    # every call site's instance of its callee, and per function read as a
    # root (not a private callee) the instances of the calls it makes
    instances: list[CallInstance] = field(default_factory=list)
    root_calls: dict[int, list[int]] = field(default_factory=dict)
    callees: set[int] = field(default_factory=set)  # private funcs called
    opaque_calls: bool = False  # a call not read through (recursive, unknown)
    # a constant's value id -> (user node, operand index, slot) per use that
    # got its own copy (Shardy's constant splitter), in use order
    use_copies: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)
    # Shardy's origin names of sdy.sharding_constraint and manual computation
    # nodes ("constraint_0", "mc_0"), in walk order
    origin_names: dict[int, str] = field(default_factory=dict)


def _axis(a: AxisRef, sizes: Mapping[str, int]) -> Ax:
    if a.size is None:
        return (a.name, 1, sizes[a.name])
    return (a.name, a.pre_size, a.size)


def to_sh(ts: TensorSharding, sizes: Mapping[str, int]) -> Sh:
    """A parsed sharding as a slot sharding. Size-1 axes are kept and
    propagate, as in Shardy's propagation (the partitioner and auto-shard
    read them as absent: `partitioner.layouts.layout_of`)."""
    return Sh(
        ts.mesh_name,
        tuple(tuple(_axis(a, sizes) for a in d.axes) for d in ts.dims),
        tuple(d.closed for d in ts.dims),
        tuple(_axis(a, sizes) for a in ts.replicated),
        tuple(_axis(a, sizes) for a in ts.unreduced),
    )


def sh_text(sh: Sh, sizes: Mapping[str, int], *, closed: bool = False) -> str:
    """`<@mesh, [{"x"}, {?}]>`, exactly as Shardy prints a sharding body."""

    def axis(a: Ax) -> str:
        name = print_string(a[0])
        if a[1] == 1 and a[2] == sizes.get(a[0], a[2]):
            return name
        return f"{name}:({a[1]}){a[2]}"

    dims = []
    for axes, is_closed in zip(sh.dims, sh.closed, strict=True):
        items = [axis(a) for a in axes]
        if not (is_closed or closed):
            items.append("?")
        dims.append("{" + ", ".join(items) + "}")
    parts = [print_symbol(sh.mesh), "[" + ", ".join(dims) + "]"]
    if sh.replicated and not closed:
        parts.append("replicated={" + ", ".join(axis(a) for a in sh.replicated) + "}")
    if sh.unreduced:
        parts.append("unreduced={" + ", ".join(axis(a) for a in sh.unreduced) + "}")
    return "<" + ", ".join(parts) + ">"


def _opaque_text(value: object) -> str | None:
    return value.text if isinstance(value, Opaque) else None


class _Builder:
    def __init__(self, graph: Graph, diags: Diagnostics) -> None:
        self.g = graph
        self.diags = diags
        self.meshes: dict[str, dict[str, int]] = {}
        self.mesh_order: dict[str, tuple[str, ...]] = {}
        self.problem = Problem({}, [], [], [])
        self.out = Built(self.problem, graph)
        self.groups: dict[int, list[int]] = {}
        self.own_rules: dict[str, ShardingRule] = {}
        self.call_stack: list[int] = []
        self.instance_stack: list[int] = []  # call instances being read
        self.root: int = -1  # the root function being read
        self.constant_like: set[int] = set()
        # Constant expressions proper: what a constant-preserving op of them
        # yields is one too; a broadcast of a scalar is split per use but is
        # not a constant, so ops of it are not split (as in Shardy).
        self.constant_exprs: set[int] = set()
        # (user node, value) -> value it reads instead (constraint chains)
        self.rewired: dict[tuple[int, int], int] = {}
        self.use_count: dict[int, int] = {}
        self.edge_targets: set[int] = set()  # slots written by data-flow edges
        # block arguments of callees (graph value ids): a call passes its
        # operands through a data-flow edge in Shardy (a named computation's
        # arguments), so a constraint inside the callee is not applied back
        self.callee_args: set[int] = set()
        self.origin_counts: dict[str, int] = {}
        self.use_seen: dict[tuple[int, int], int] = {}
        self.copies: dict[int, list[int]] = {}  # slot -> its per-use copies
        self.split_counts: dict[int, int] = {}  # value -> split_uses(value)

    # -- meshes and shardings ---------------------------------------------

    def read_meshes(self) -> None:
        first: dict[object, str] = {}  # a mesh's definition -> its first name
        for nid in self.g.body.nodes:
            node = self.g.node(nid)
            if node.op != "sdy.mesh":
                continue
            name = node.attr("sym_name")
            text = _opaque_text(node.attr("mesh"))
            if not isinstance(name, str) or text is None:
                continue
            try:
                mesh = parse_mesh(text)
            except ShardingError as err:
                self.diags.error(node.loc, f"mesh @{name}: {err}")
                continue
            self.meshes[name] = {a.name: a.size for a in mesh.axes}
            self.mesh_order[name] = mesh.axis_names
            if mesh.axes:
                self.problem.same_mesh[name] = first.setdefault(mesh, name)
            if not mesh.axes and mesh.device_ids is not None:
                self.problem.maximal.add(name)
        self.problem.meshes = self.meshes
        self.out.mesh_order = self.mesh_order

    def sharding(
        self,
        ts: TensorSharding,
        shape: tuple[int, ...] | None,
        what: str,
        loc: SourceLoc,
        uneven: bool = False,
    ) -> Sh | None:
        """Validates a user sharding; reports an error and returns None if bad.
        `uneven`: a dim its axes do not divide is allowed, as Shardy allows it
        (the partitioner pads such a dim inside a function; `meshjit.jit`
        refuses it on its arguments and results before tracing, jax's rule)."""
        sizes = self.meshes.get(ts.mesh_name)
        if sizes is None:
            known = ", ".join("@" + m for m in self.meshes) or "none"
            self.diags.error(
                loc,
                f"sharding of {what} names unknown mesh @{ts.mesh_name} "
                f"(meshes in this module: {known}); define it with "
                f"`sdy.mesh @{ts.mesh_name} = <[...]>`",
            )
            return None
        if ts.mesh_name in self.problem.maximal and ts.rank == 0 and shape:
            # `<@maximal_mesh, []>`: the whole value on one device, whatever
            # its rank; held as closed empty dims, printed back as written.
            rank = len(shape)
            return Sh(ts.mesh_name, ((),) * rank, (True,) * rank, (), ())
        from meshjit.dialects.sharding import MeshModel

        mesh = MeshModel.of(*((n, s) for n, s in sizes.items()))
        try:
            ts.validate(mesh, shape, what=what, allow_uneven=uneven)
        except ShardingError as err:
            self.diags.error(loc, str(err))
            return None
        return to_sh(ts, sizes)

    def user_sharding(
        self,
        text: str,
        shape: tuple[int, ...],
        what: str,
        loc: SourceLoc,
        slot: int,
        uneven: bool = False,
    ) -> None:
        try:
            ts = parse_sharding(text)
        except ShardingError as err:
            self.diags.error(loc, f"bad sharding on {what}: {err}")
            return
        self.set_initial(ts, shape, what, loc, slot, uneven)

    def set_initial(
        self,
        ts: TensorSharding,
        shape: tuple[int, ...],
        what: str,
        loc: SourceLoc,
        slot: int,
        uneven: bool = False,
    ) -> None:
        sh = self.sharding(ts, shape, what, loc, uneven)
        if sh is None:
            return
        p = self.problem
        prios = {
            d: (dim.priority if dim.priority is not None else DEFAULT_PRIORITY)
            for d, dim in enumerate(ts.dims)
        }
        top = [pr for pr in prios.values() if pr > 0]
        p.origins.append(Origin(slot, what, loc, min(prios.values(), default=None)))
        if not top:
            p.values[slot] = sh
            return
        # Dims of a later priority start empty and closed, their axes replicated,
        # so earlier rounds cannot use them (Shardy's user-priority propagation).
        order = self.mesh_order.get(sh.mesh, ())
        dims = list(sh.dims)
        closed = list(sh.closed)
        replicated = list(sh.replicated)
        for d, pr in prios.items():
            if pr > 0:
                replicated.extend(dims[d])
                dims[d] = ()
                closed[d] = True
        replicated.sort(
            key=lambda a: (order.index(a[0]) if a[0] in order else 99, a[1])
        )
        p.values[slot] = Sh(
            sh.mesh, tuple(dims), tuple(closed), tuple(replicated), sh.unreduced
        )
        p.user[slot] = sh
        p.priorities[slot] = {d: pr for d, pr in prios.items() if pr > 0}

    # -- slots --------------------------------------------------------------

    def new_slot(self, vid: int, name: str) -> int:
        v = self.g.value(vid)
        shape = v.shape if v.shape is not None else ()
        slot = self.problem.add_value(tuple(shape), name)
        if v.dtype:
            self.problem.itemsizes[slot] = itemsize(v.dtype)
        self.bind(vid, slot)
        return slot

    def bind(self, vid: int, slot: int) -> None:
        self.out.slot_of.setdefault(vid, slot)
        self.out.all_slots.setdefault(vid, []).append(slot)
        if self.instance_stack:
            inst = self.out.instances[self.instance_stack[-1]]
            inst.slots.setdefault(vid, []).append(slot)

    def add_op(self, op: POp, defines: Sequence[int]) -> int:
        self.problem.ops.append(op)
        index = len(self.problem.ops) - 1
        for s in defines:
            if self.problem.defs[s] < 0:
                self.problem.defs[s] = index
        return index

    # -- functions ----------------------------------------------------------

    def build(self) -> Built:
        self.read_meshes()
        self.rewire_constraint_chains()
        called: set[str] = set()
        for node in self.g.walk():
            if node.op == "func.call":
                callee = node.attr("callee")
                if isinstance(callee, SymbolRef):
                    called.add(callee.name)
        for func in self.g.funcs():
            name = func.attr("sym_name")
            if (
                isinstance(name, str)
                and name in called
                and func.attr("sym_visibility") == "private"
            ):
                self.out.callees.add(func.id)
                continue
            self.root = func.id
            self.out.root_calls[func.id] = []
            self.root_func(func)
        for gid, named in self.groups.items():
            members = [c for m in named for c in (m, *self.copies.get(m, ()))]
            self.groups[gid] = members
            if len(members) > 1:
                self.problem.groups.append(members)
                self.sync_group(members)
        self.out.constant_like = self.constant_like
        return self.out

    def sync_group(self, members: list[int]) -> None:
        """Shardy's initial sync of a sharding group: the first member
        sharding that is not fully open and replicated becomes every member's
        when no other such member sharding differs from it. Groups whose
        members differ were already rewritten before the graph was read
        (`groups.split_conflicting_groups`: open constraints join the group
        in the members' places, so they agree here)."""
        p = self.problem
        common: Sh | None = None
        for v in members:
            s = p.values[v]
            if s is None or (not s.has_axes() and not any(s.closed)):
                continue
            if common is None:
                common = s
            elif s != common:
                return
        if common is None:
            return
        for v in members:
            p.values[v] = common
            if v in p.user:
                p.user[v] = common

    def root_func(self, func: Node) -> None:
        name = func.attr("sym_name")
        block = func.regions[0][0] if func.regions and func.regions[0] else None
        if block is None:
            return
        env: dict[int, int] = {}
        arg_attrs = func.attr("arg_attrs")
        for i, vid in enumerate(block.args):
            slot = self.new_slot(vid, f"argument {i} of @{name}")
            env[vid] = slot
            self.problem.source_names[slot] = f"input: {i}"
            text = dict_sharding(arg_attrs, i)
            shape = self.g.value(vid).shape
            if text is not None and shape is not None:
                self.user_sharding(
                    text,
                    shape,
                    f"argument {i} of @{name} at {func.loc}",
                    func.loc,
                    slot,
                    uneven=True,
                )
        returns = self.block(block, env, f"@{name}")
        res_attrs = func.attr("res_attrs")
        for i, ret in enumerate(returns):
            shape = self.problem.shapes[ret]
            res = self.problem.add_value(shape, f"result {i} of @{name}")
            self.out.func_result_slot[(func.id, i)] = res
            self.problem.source_names[res] = f"output: {i}"
            self.problem.first_result[res] = self.out.func_result_slot[(func.id, 0)]
            text = dict_sharding(res_attrs, i)
            if text is not None:
                self.user_sharding(
                    text,
                    shape,
                    f"result {i} of @{name} at {func.loc}",
                    func.loc,
                    res,
                    uneven=True,
                )
            self.problem.func_results.append((ret, res))

    def block(self, block: object, env: dict[int, int], where: str) -> list[int]:
        """Adds the block's ops; returns the slots its terminator returns."""
        from meshjit.compiler.graph import Block

        assert isinstance(block, Block)
        returns: list[int] = []
        for nid in block.nodes:
            node = self.g.node(nid)
            if node.op in ("func.return", "stablehlo.return", "sdy.return"):
                returns = [self.use(v, env, node) for v in node.operands]
                continue
            self.node(node, env, where)
        return returns

    def rewire_constraint_chains(self) -> None:
        """Shardy's apply-sharding-constraints: when an unsharded value (not
        itself a constraint's result) feeds a chain of two or more sharding
        constraints (each but the last used only by the next), its uses after
        the chain read the chain's last value."""
        g = self.g
        block_of: dict[int, int] = {}
        for node in g.walk():
            for region in node.regions:
                for b in region:
                    for nid in b.nodes:
                        block_of[nid] = id(b)
        for node in g.walk():
            if node.op != "sdy.sharding_constraint" or not node.operands:
                continue
            v = node.operands[0]
            owner = g.value(v).owner
            if owner >= 0 and g.node(owner).op == "sdy.sharding_constraint":
                continue  # not the head of its chain
            users = g.users(v)
            constraining = [u for u in users if g.node(u).op in _CONSTRAINING]
            if constraining != [node.id] or self._has_sharding(v):
                continue
            chain = [node]
            while True:
                nxt = g.users(chain[-1].results[0])
                cons = [u for u in nxt if g.node(u).op == "sdy.sharding_constraint"]
                if not cons:
                    break
                if len(nxt) != 1:
                    chain = []
                    break
                chain.append(g.node(cons[0]))
            if len(chain) < 2:
                continue
            last = chain[-1]
            if any(
                g.node(u).op == "sdy.manual_computation"
                for u in g.users(last.results[0])
            ):
                continue
            for u in users:
                user = g.node(u)
                if (
                    u > last.id
                    and block_of.get(u) == block_of.get(last.id)
                    and user.op not in _TERMINATORS
                ):
                    self.rewired[(u, v)] = last.results[0]
        for (_u, v), w in self.rewired.items():
            n = sum(1 for x in g.node(_u).operands if x == v)
            self.use_count[v] = self.uses(v) - n
            self.use_count[w] = self.uses(w) + n

    def _has_sharding(self, vid: int) -> bool:
        value = self.g.value(vid)
        if value.owner >= 0:
            return self.g.node(value.owner).attr(SHARDING) is not None
        for func in self.g.funcs():
            block = func.regions[0][0] if func.regions and func.regions[0] else None
            if block is not None and vid in block.args:
                return dict_sharding(func.attr("arg_attrs"), value.index) is not None
        return False

    def split_uses(self, vid: int) -> int:
        """Uses of a constant-like value that get their own copy: all but
        `sdy.sharding_group` ops (which name the value, not read it)."""
        found = self.split_counts.get(vid)
        if found is None:
            g = self.g
            found = self.split_counts[vid] = sum(
                1 for u in g.users(vid) if g.node(u).op != "sdy.sharding_group"
            )
        return found

    def uses(self, vid: int) -> int:
        return self.use_count.get(vid, len(self.g.users(vid)))

    def use(self, vid: int, env: dict[int, int], user: Node) -> int:
        """The slot `user` reads for value `vid` (a private copy for constants)."""
        vid = self.rewired.get((user.id, vid), vid)
        slot = env[vid]
        if vid in self.constant_like and self.split_uses(vid) > 1:
            copy = self.problem.add_value(
                self.problem.shapes[slot], self.problem.names[slot]
            )
            # a copy stays in its original's sharding groups (Shardy's
            # splitter clones the group ops with each copy)
            self.copies.setdefault(slot, []).append(copy)
            self.out.all_slots.setdefault(vid, []).append(copy)
            if self.instance_stack:
                inst = self.out.instances[self.instance_stack[-1]]
                inst.slots.setdefault(vid, []).append(copy)
            else:
                # which operand of `user` this copy is (the k-th use of vid)
                k = self.use_seen.get((user.id, vid), 0)
                self.use_seen[(user.id, vid)] = k + 1
                places = [i for i, o in enumerate(user.operands) if o == vid]
                if k < len(places):
                    self.out.use_copies.setdefault(vid, []).append(
                        (user.id, places[k], copy)
                    )
            return copy
        return slot

    def results(self, node: Node, env: dict[int, int], where: str) -> list[int]:
        slots = []
        for k, vid in enumerate(node.results):
            label = f"result of {node.op} at {node.loc}"
            if len(node.results) > 1:
                label = f"result {k} of {label}"
            slot = self.new_slot(vid, label)
            env[vid] = slot
            slots.append(slot)
        return slots

    def node(self, node: Node, env: dict[int, int], where: str) -> None:
        op = node.op
        if op == "func.call":
            self.call(node, env, where)
            return
        if op in (
            "stablehlo.while",
            "stablehlo.case",
            "stablehlo.optimization_barrier",
        ):
            self.data_flow(node, env, where)
            return
        if op in ("sdy.data_flow_edge", "sdy.func_data_flow_edge"):
            self.explicit_edge(node, env)
            return
        if op == "sdy.sharding_group":
            gid = node.attr("group_id")
            if isinstance(gid, int) and node.operands:
                self.groups.setdefault(gid, []).append(env[node.operands[0]])
            return
        if op == "sdy.manual_computation":
            self.manual(node, env, where)
            return
        operands = [self.use(v, env, node) for v in node.operands]
        results = self.results(node, env, where)
        self.mark_constant(node)
        if op == "sdy.sharding_constraint":
            self.constraint(node, operands, results)
            return
        if op == "sdy.propagation_barrier":
            self.barrier(node, operands, results)
            return
        if op in ("sdy.reshard", "sdy.all_reduce"):
            self.reshard(node, operands, results)
            if op == "sdy.all_reduce":
                return  # its out_sharding is fixed; nothing flows through it
        self.op_sharding_attr(node, results)
        rule = None if op == "sdy.reshard" else self.rule(node)
        if rule is not None:
            # A broadcast_in_dim that only adds size-1 dims copies nothing: it
            # is scheduled as the reshape it is (jax writes x[..., None] so;
            # XLA's simplifier makes it a reshape before its Shardy runs).
            scheduled_as = op
            if op == "stablehlo.broadcast_in_dim" and _adds_unit_dims(self.g, node):
                scheduled_as = "stablehlo.reshape"
            stage0 = _stage0(scheduled_as)
            if (
                op == "stablehlo.custom_call"
                and node.attrs.get("call_target_name") in HOST_OFFLOAD_TARGETS
            ):
                stage0 = BOTH  # scheduled as the element-wise op it is
            self.add_op(
                POp(
                    op,
                    tuple(operands),
                    tuple(results),
                    rule,
                    OpKind.RULE,
                    elementwise=_is_elementwise(op),
                    stage0=stage0,
                    multi_use=self.multi_use(node),
                    broadcast=scheduled_as == "stablehlo.broadcast_in_dim",
                    loc=node.loc,
                    node=node.id,
                ),
                results,
            )
        # Region bodies (reduce, sort, ...) follow their op, as in a pre-order walk.
        for region in node.regions:
            for b in region:
                inner = dict(env)
                for a in b.args:
                    inner[a] = self.new_slot(
                        a, f"region argument of {op} at {node.loc}"
                    )
                self.block(b, inner, where)

    def mark_constant(self, node: Node) -> None:
        """Values Shardy's constant-or-scalar splitter copies for each use:
        constant expressions (constants and iotas, and broadcasts, reshapes,
        slices and elementwise ops of them) and broadcasts of scalars."""
        if node.regions or node.op in _IMPURE:
            return
        if node.op in _CONSTANT_LEAVES:
            self.constant_exprs.update(node.results)
            self.constant_like.update(node.results)
            return
        preserving = node.op in _CONSTANT_PRESERVING or _is_elementwise(node.op)
        if (
            preserving
            and node.operands
            and all(v in self.constant_exprs for v in node.operands)
        ):
            self.constant_exprs.update(node.results)
            self.constant_like.update(node.results)
            return
        if (
            node.op == "stablehlo.broadcast_in_dim"
            and self.g.value(node.operands[0]).shape == ()
        ):
            self.constant_like.update(node.results)

    def multi_use(self, node: Node) -> bool:
        """Some non-scalar operand has another use (Shardy's op-priority stage 0
        skips such ops); split constants have one use each."""
        for v in node.operands:
            if (
                self.g.value(v).shape
                and self.uses(v) > 1
                and v not in self.constant_like
            ):
                return True
        return False

    def rule(self, node: Node) -> ShardingRule | None:
        own = node.attrs.get("sdy.sharding_rule")
        if isinstance(own, Opaque):
            # The op's own rule (JAX writes one on its LAPACK custom calls),
            # as Shardy uses it.
            rule = self.own_rules.get(own.text)
            if rule is None:
                try:
                    rule = ShardingRule.parse(own.text)
                except ValueError as err:
                    self.diags.error(node.loc, f"bad sdy.sharding_rule: {err}")
                    return None
                self.own_rules[own.text] = rule
            return rule
        found = rule_lookup(self.g, node)
        if found is None:
            return None
        if found.warning:
            self.diags.warning_once(found.warning_key, node.loc, found.warning)
        return found.rule

    def op_sharding_attr(self, node: Node, results: Sequence[int]) -> None:
        """An op already carrying `sdy.sharding` starts from it."""
        text = _opaque_text(node.attr(SHARDING))
        if text is None:
            return
        try:
            shardings = parse_sharding_per_value(text)
        except ShardingError as err:
            self.diags.error(node.loc, f"bad sdy.sharding on {node.op}: {err}")
            return
        if not results and len(shardings) == 1 and shardings[0].rank == 0:
            return  # a device placement (maximal sharding) of a result-less op
        if len(shardings) != len(results):
            self.diags.error(
                node.loc,
                f"{node.op} has {len(results)} results but its sdy.sharding lists "
                f"{len(shardings)} shardings; give one per result",
            )
            return
        for k, (ts, slot) in enumerate(zip(shardings, results, strict=True)):
            what = f"result {k} of {node.op}"
            self.set_initial(
                ts, self.problem.shapes[slot], what, node.loc, slot, uneven=True
            )

    # -- special ops ----------------------------------------------------------

    def constraint(self, node: Node, operands: list[int], results: list[int]) -> None:
        text = _opaque_text(node.attr("sharding"))
        if text is None:
            return
        what = f"sdy.sharding_constraint at {node.loc}"
        self.user_sharding(
            text, self.problem.shapes[results[0]], what, node.loc, results[0], True
        )
        name = self.origin_name(node, "constraint")
        self.problem.source_names[results[0]] = name
        src = operands[0]
        vid = node.operands[0]
        p = self.problem
        # apply-sharding-constraints: an input without a sharding takes a
        # closed constraint's sharding as its own, unless another constraint
        # or a manual computation asks for a different one, or the input is
        # written by a data-flow edge (while/case results, loop arguments).
        constrained = p.values[results[0]]
        if (
            constrained is not None
            and p.values[src] is None
            and all(constrained.closed)
            and src not in self.problem.user
            and src not in self.edge_targets
            and vid not in self.callee_args
            and not any(
                u != node.id and self._other_constraint(u, vid, text)
                for u in self.g.users(vid)
            )
        ):
            # Applied by propagation where asked (Options.apply_constraints:
            # Shardy's import pass, which its pipeline runs and its
            # propagation passes alone do not), so the problem stays one.
            axes = tuple(a for dim in constrained.dims for a in dim)
            p.constraint_applies.append((src, results[0], node.id, axes))
            p.initial_origin[src] = name
        self.add_op(
            POp(
                node.op,
                (src,),
                (results[0],),
                identity_rule(p.shapes[src], 1),
                OpKind.RULE,
                elementwise=True,
                stage0=BOTH,
                multi_use=self.multi_use(node),
                loc=node.loc,
                node=node.id,
            ),
            results,
        )

    def _other_constraint(self, user: int, vid: int, text: str) -> bool:
        """`user` constrains `vid` to a sharding other than `text`."""
        other = self.g.node(user)
        if other.op == "sdy.sharding_constraint":
            return _opaque_text(other.attr("sharding")) != text
        return other.op == "sdy.manual_computation"

    def reshard(self, node: Node, operands: list[int], results: list[int]) -> None:
        """sdy.reshard / sdy.all_reduce: the result starts with (and keeps)
        the sharding the op names."""
        attr = "out_sharding" if node.op == "sdy.all_reduce" else "sharding"
        text = _opaque_text(node.attr(attr))
        if text is not None:
            what = f"{node.op} at {node.loc}"
            self.user_sharding(
                text, self.problem.shapes[results[0]], what, node.loc, results[0], True
            )

    def barrier(self, node: Node, operands: list[int], results: list[int]) -> None:
        allowed = node.attr("allowed_direction")
        direction = {0: NONE, 1: FORWARD, 2: BACKWARD, 3: BOTH}.get(
            allowed if isinstance(allowed, int) else 3, BOTH
        )
        if isinstance(allowed, str):
            direction = {"NONE": NONE, "FORWARD": FORWARD, "BACKWARD": BACKWARD}.get(
                allowed, BOTH
            )
        self.add_op(
            POp(
                node.op,
                (operands[0],),
                (results[0],),
                identity_rule(self.problem.shapes[operands[0]], 1),
                OpKind.BARRIER,
                barrier=direction,
                loc=node.loc,
                node=node.id,
            ),
            results,
        )

    def data_flow(self, node: Node, env: dict[int, int], where: str) -> None:
        """while/case/optimization_barrier: results and region args share a slot."""
        operands = [self.use(v, env, node) for v in node.operands]
        targets = self.results(node, env, where)
        self.edge_targets.update(targets)
        self.op_sharding_attr(node, targets)
        sources: list[list[int]] = [[] for _ in targets]
        if node.op in ("stablehlo.while", "stablehlo.optimization_barrier"):
            for i, s in enumerate(operands[: len(targets)]):
                sources[i].append(s)
        for region in node.regions:
            for b in region:
                inner = dict(env)
                for i, a in enumerate(b.args):
                    if node.op == "stablehlo.while" and i < len(targets):
                        inner[a] = targets[i]
                        self.bind(a, targets[i])
                    else:
                        inner[a] = self.new_slot(a, f"region argument of {node.op}")
                returns = self.block(b, inner, where)
                if node.op == "stablehlo.while" and region is node.regions[0]:
                    continue  # the condition returns the loop predicate
                for i, r in enumerate(returns[: len(targets)]):
                    sources[i].append(r)
        for i, t in enumerate(targets):
            shape = self.problem.shapes[t]
            if not shape and not sources[i]:
                continue
            self.add_op(
                POp(
                    f"{node.op} (data-flow edge {i})",
                    tuple(sources[i]),
                    (t,),
                    identity_rule(shape, len(sources[i])),
                    OpKind.EDGE,
                    stage0=BOTH,
                    loc=node.loc,
                    node=node.id,
                ),
                [t],
            )

    def explicit_edge(self, node: Node, env: dict[int, int]) -> None:
        """`sdy.data_flow_edge %t` / `sdy.func_data_flow_edge %t` (what Shardy's
        add-data-flow-edges inserts): the edge's sharding, shared by its input
        (a data-flow target: a while/case/barrier result, a block or func
        argument, a call result) and its result. Its own attribute is where
        the sharding starts and where it is written back; the target's owner
        then carries none for that value, as in Shardy."""
        if not node.operands or not node.results:
            return
        slot = env[node.operands[0]]
        env[node.results[0]] = slot
        self.bind(node.results[0], slot)
        self.out.edge_owned.add(node.operands[0])
        # A constraint on the edge's value constrains that use only (Shardy's
        # apply-sharding-constraints leaves edge targets alone).
        self.edge_targets.add(slot)
        if node.op == "sdy.data_flow_edge":
            text = _opaque_text(node.attr("sharding"))
            if text is not None:
                what = f"{node.op} at {node.loc}"
                self.user_sharding(
                    text, self.problem.shapes[slot], what, node.loc, slot, True
                )
        else:
            self.op_sharding_attr(node, [slot])

    def call(self, node: Node, env: dict[int, int], where: str) -> None:
        callee = node.attr("callee")
        operands = [self.use(v, env, node) for v in node.operands]
        func_id = (
            self.g.symbols.get(callee.name) if isinstance(callee, SymbolRef) else None
        )
        if (
            func_id is None
            or func_id in self.call_stack
            or len(self.call_stack) > _MAX_CALL_DEPTH
        ):
            self.out.opaque_calls = True
            self.diags.warning_once(
                f"call:{node.id}",
                node.loc,
                "cannot propagate through this func.call (unknown or recursive "
                "callee); its results start unsharded",
            )
            self.results(node, env, where)
            return
        func = self.g.node(func_id)
        block = func.regions[0][0]
        index = len(self.out.instances)
        self.out.instances.append(CallInstance(node.id, func_id))
        if self.instance_stack:
            self.out.instances[self.instance_stack[-1]].children.append(index)
        else:
            self.out.root_calls.setdefault(self.root, []).append(index)
        self.call_stack.append(func_id)
        self.instance_stack.append(index)
        inner: dict[int, int] = {}
        arg_attrs = func.attr("arg_attrs")
        self.callee_args.update(block.args)
        for i, (a, s) in enumerate(zip(block.args, operands, strict=True)):
            inner[a] = s
            self.bind(a, s)
            text = dict_sharding(arg_attrs, i)
            if text is not None and self.problem.values[s] is None:
                self.user_sharding(
                    text,
                    self.problem.shapes[s],
                    f"argument {i} of {callee}",
                    func.loc,
                    s,
                )
        returns = self.block(block, inner, where)
        self.instance_stack.pop()
        self.call_stack.pop()
        self.out.instances[index].returns = list(returns)
        for i, slot in enumerate(returns):
            self.out.func_result_slot.setdefault((func_id, i), slot)
        for vid, slot in zip(node.results, returns, strict=True):
            env[vid] = slot
            self.bind(vid, slot)

    def manual(self, node: Node, env: dict[int, int], where: str) -> None:
        """sdy.manual_computation: operand -> in_sharding -> block argument,
        and returned value -> out_sharding -> result. The in/out shardings are
        slots of their own (global shape) starting from the attribute; the
        manual axes stay fixed, the free axes propagate into and out of the
        body (Shardy's data-flow edges of a manual computation)."""
        operands = [self.use(v, env, node) for v in node.operands]
        results = self.results(node, env, where)
        p = self.problem
        manual = _manual_axes(node.attr("manual_axes"))
        in_sh = self.per_value(node, "in_shardings")
        out_sh = self.per_value(node, "out_shardings")
        block = node.regions[0][0] if node.regions and node.regions[0] else None
        if block is None or in_sh is None or out_sh is None:
            return
        if len(in_sh) != len(operands) or len(out_sh) != len(results):
            self.diags.error(
                node.loc,
                f"sdy.manual_computation has {len(operands)} operands and "
                f"{len(results)} results but {len(in_sh)} in_shardings and "
                f"{len(out_sh)} out_shardings",
            )
            return
        ins: list[int] = []
        inner = dict(env)
        mc = self.origin_name(node, "mc")
        for i, (src, ts, arg) in enumerate(
            zip(operands, in_sh, block.args, strict=True)
        ):
            what = f"in_shardings[{i}] of sdy.manual_computation at {node.loc}"
            edge = p.add_value(p.shapes[src], what)
            p.source_names[edge] = f"{mc}_input: {i}"
            self.set_initial(ts, p.shapes[src], what, node.loc, edge)
            self.forbid_manual(edge, ts, manual)
            self.apply_in_sharding(node, i, src, edge)
            ins.append(edge)
            self.add_op(
                self.edge_op(node, f"operand {i}", (src,), edge, ("operand", i)),
                [edge],
            )
            local = self.new_slot(arg, f"argument {i} of sdy.manual_computation")
            inner[arg] = local
            self.add_op(
                self.boundary_op(node, edge, local, manual, ("operand", i)), [local]
            )
        returns = self.block(block, inner, where)
        outs: list[int] = []
        for i, (ret, ts, res) in enumerate(zip(returns, out_sh, results, strict=True)):
            what = f"out_shardings[{i}] of sdy.manual_computation at {node.loc}"
            edge = p.add_value(p.shapes[res], what)
            p.source_names[edge] = f"{mc}_output: {i}"
            self.set_initial(ts, p.shapes[res], what, node.loc, edge)
            self.forbid_manual(edge, ts, manual)
            if p.values[res] is None and p.values[edge] is not None:
                # In Shardy the result is the value out_shardings lays out:
                # it starts with that sharding (the edge keeps them equal).
                p.values[res] = p.values[edge]
                p.initial_origin[res] = p.source_names[edge]
            outs.append(edge)
            self.add_op(self.boundary_op(node, edge, ret, manual, ("result", i)), [])
            self.add_op(
                self.edge_op(node, f"result {i}", (edge,), res, ("result", i)), [res]
            )
        self.out.manual[node.id] = (ins, outs)
        if self.instance_stack:
            self.out.instances[self.instance_stack[-1]].manual[node.id] = (ins, outs)

    def apply_in_sharding(self, node: Node, i: int, src: int, edge: int) -> None:
        """apply-sharding-constraints for a manual computation's operand: an
        operand without a sharding may take a closed in_sharding as its own,
        unless another constraint or manual computation uses it too (as for
        a sharding constraint); noted here, done by propagation with
        `Options.apply_constraints` (Shardy's import pass, which its
        propagation pipeline runs and its propagation passes do not)."""
        p = self.problem
        given = p.values[edge]
        vid = node.operands[i]
        if (
            given is None
            or not all(given.closed)
            or p.values[src] is not None
            or src in p.user
            or src in self.edge_targets
            or vid in self.callee_args
            or any(
                u != node.id and self.g.node(u).op in _CONSTRAINING
                for u in self.g.users(vid)
            )
            or sum(1 for x in node.operands if x == vid) > 1
        ):
            return
        # Applied only where the propagation pipeline asks (Options.
        # apply_constraints), so that the problem stays one for every pass.
        p.constraint_applies.append((src, edge, -1, ()))

    def origin_name(self, node: Node, kind: str) -> str:
        """Shardy's name of a constraint or manual computation ("constraint_0",
        "mc_0"): numbered per kind in the order they are first read."""
        name = self.out.origin_names.get(node.id)
        if name is None:
            count = self.origin_counts.get(kind, 0)
            self.origin_counts[kind] = count + 1
            name = self.out.origin_names[node.id] = f"{kind}_{count}"
        return name

    def forbid_manual(
        self, edge: int, ts: TensorSharding, manual: frozenset[str]
    ) -> None:
        """A manual computation's in/out sharding keeps the manual axes its
        attribute gives and takes no other from propagation (manual axes
        must come before free ones; Shardy does not propagate them in)."""
        given = {a.name for a in ts.all_axes()}
        ban = frozenset(manual - given)
        if ban:
            self.problem.forbidden[edge] = ban

    def per_value(self, node: Node, name: str) -> tuple[TensorSharding, ...] | None:
        text = _opaque_text(node.attr(name))
        if text is None:
            return ()
        try:
            return parse_sharding_per_value(text)
        except ShardingError as err:
            self.diags.error(node.loc, f"bad {name} on {node.op}: {err}")
            return None

    def edge_op(
        self,
        node: Node,
        what: str,
        sources: tuple[int, ...],
        target: int,
        port: tuple[str, int] = ("", -1),
    ) -> POp:
        shape = self.problem.shapes[target]
        return POp(
            f"{node.op} ({what})",
            sources,
            (target,),
            identity_rule(shape, len(sources)),
            OpKind.EDGE,
            stage0=BOTH,
            loc=node.loc,
            node=node.id,
            port=port,
        )

    def boundary_op(
        self,
        node: Node,
        outer: int,
        inner: int,
        manual: frozenset[str],
        port: tuple[str, int],
    ) -> POp:
        return POp(
            f"{node.op} (boundary of {port[0]} {port[1]})",
            (outer,),
            (inner,),
            identity_rule(self.problem.shapes[inner], 1),
            OpKind.MANUAL,
            stage0=BOTH,
            manual=manual,
            loc=node.loc,
            node=node.id,
            port=port,
        )


def _manual_axes(value: object) -> frozenset[str]:
    """`#sdy<manual_axes{"a", "b"}>` -> {"a", "b"}."""
    text = _opaque_text(value) or ""
    return frozenset(re.findall(r'"((?:[^"\\]|\\.)*)"', text))


def dict_sharding(attrs: object, index: int) -> str | None:
    """The `sdy.sharding` text of entry `index` of a func's arg_attrs or
    res_attrs, if any."""
    if not isinstance(attrs, tuple) or index >= len(attrs):
        return None
    entry = attrs[index]
    if not isinstance(entry, Mapping):
        return None
    return _opaque_text(entry.get(SHARDING))


@cache
def _is_elementwise(op: str) -> bool:
    from meshjit.dialects.rules import pointwise_rule

    return RULES.entry(op) is pointwise_rule and op not in (
        "stablehlo.all_reduce",
        "stablehlo.collective_broadcast",
        "stablehlo.collective_permute",
    )


def _adds_unit_dims(graph: Graph, node: Node) -> bool:
    """A broadcast_in_dim whose result has as many elements as its operand."""
    operand = graph.values[node.operands[0]].shape
    result = graph.values[node.results[0]].shape
    if operand is None or result is None:
        return False
    return math.prod(operand) == math.prod(result) and math.prod(result) > 0


@cache
def _stage0(op: str) -> int:
    if _is_elementwise(op) or op in _PASS_THROUGH_STAGE0:
        return BOTH
    if op in _FORWARD_STAGE0:
        return FORWARD
    return NONE


def build_problem(graph: Graph, diags: Diagnostics) -> Built:
    """The propagation problem of `graph`; built once per unchanged graph (the
    passes of a pipeline share it), its warnings reported again on reuse."""
    memo = graph.memo.get("propagation-problem")
    if isinstance(memo, tuple):
        built, emitted, keys = memo
        diags.replay(emitted, keys)
        return built  # type: ignore[no-any-return]
    before = len(diags.items)
    keys_before = diags.warned_keys
    built = _Builder(graph, diags).build()
    emitted = tuple(diags.items[before:])
    if not any(d.severity is Severity.ERROR for d in emitted):
        keys = diags.warned_keys - keys_before
        graph.memo["propagation-problem"] = (built, emitted, keys)
    return built


# ---------------------------------------------------------------------------
# Writing back


def final_sharding(built: Built, state: Sequence[Sh | None], vid: int) -> Sh | None:
    """The sharding of a graph value: its slot's, or for split constants the
    first copy's (all copies agree unless uses need different shardings)."""
    slots = built.all_slots.get(vid, [])
    for s in slots:
        if state[s] is not None:
            return state[s]
    return None


def _has_explicit_edge(g: Graph, vid: int) -> bool:
    return any(g.node(u).op == "sdy.data_flow_edge" for u in g.users(vid))


def nested_ops(g: Graph, node: Node) -> Iterator[Node]:
    """The ops nested in `node`'s regions, in walk order."""
    for region in node.regions:
        for b in region:
            for nid in b.nodes:
                inner = g.node(nid)
                yield inner
                yield from nested_ops(g, inner)


def write_plan(
    built: Built,
    state: Sequence[Sh | None],
    *,
    close: bool = False,
    funcs: Sequence[Node] | None = None,
    instance: CallInstance | None = None,
    signatures: bool = True,
    origins: Mapping[int, Mapping[Ax, str]] | None = None,
    edges: Edges | None = None,
) -> AttrPlan:
    """Shardy's form: `sdy.sharding` per value on ops, on func args and results.

    `funcs`: only these functions (default: the module); `instance`: written
    as that call instance of its callee found them (default: each value's
    first slots); `signatures=False`: private callees' arguments and results
    keep what was written (Shardy's propagation passes leave them, only its
    pipeline gives callees signatures)."""
    g = built.graph
    p = built.problem
    plan = AttrPlan()

    printed: dict[Sh, str] = {}  # values repeat their shardings

    def text(sh: Sh) -> str:
        found = printed.get(sh)
        if found is None:
            if sh.mesh in p.maximal:
                found = printed[sh] = f"<{print_symbol(sh.mesh)}, []>"
            else:
                found = printed[sh] = sh_text(
                    sh, p.meshes.get(sh.mesh, {}), closed=close
                )
        return found

    def sharding_of(vid: int) -> Sh | None:
        slot = slot_of(vid)
        return state[slot] if slot >= 0 else None

    def slot_of(vid: int) -> int:
        slots = (
            built.all_slots.get(vid, [])
            if instance is None
            else (instance.slots.get(vid, []))
        )
        for s in slots:
            if state[s] is not None:
                return s
        return -1

    names = p.source_names

    def edges_text(owner: tuple[object, ...], mesh: str) -> str | None:
        """Shardy's `#sdy.propagation_edges<[{step-N = [{"a" = operand-0 ->
        [result-0]}]}]>` for what `owner` propagated."""
        assert edges is not None
        steps = edges.get(owner)
        if not steps:
            return None
        sizes = p.meshes.get(mesh, {})
        # Each (axis, source, target) at the first step that carried it,
        # regrouped by step (as Shardy writes them).
        first: dict[tuple[Ax, str, str], int] = {}
        for step, entries in steps:
            for a, src, targets in entries:
                for t in targets:
                    key = (a, src, t)
                    if key not in first or step < first[key]:
                        first[key] = step
        regrouped: dict[int, dict[tuple[Ax, str], list[str]]] = {}
        for (a, src, t), step in first.items():
            regrouped.setdefault(step, {}).setdefault((a, src), []).append(t)
        out = []
        for step in sorted(regrouped):
            items = []
            for (a, src), targets in sorted(regrouped[step].items()):
                whole = a[1] == 1 and a[2] == sizes.get(a[0])
                name = print_string(a[0]) + ("" if whole else f":({a[1]}){a[2]}")
                order = sorted(
                    targets, key=lambda t: (t[0] != "o", int(t.split("-")[1]))
                )
                items.append(f"{{{name} = {src} -> [{', '.join(order)}]}}")
            out.append(f"{{step-{step} = [{', '.join(items)}]}}")
        return "#sdy.propagation_edges<[" + ", ".join(out) + "]>"

    def origin_text(slot: int) -> str:
        """Shardy's `{a = "self", c = "input: 1"}` for a value's axes."""
        assert origins is not None
        own = names.get(slot)
        sh = state[slot]
        sizes = p.meshes.get(sh.mesh, {}) if sh is not None else {}
        items = []
        for a, name in origins.get(slot, {}).items():
            whole = a[1] == 1 and a[2] == sizes.get(a[0])
            key = (
                a[0]
                if whole and _IDENT.fullmatch(a[0])
                else (print_string(a[0] if whole else f"{a[0]}:({a[1]}){a[2]}"))
            )
            items.append(f"{key} = {print_string('self' if name == own else name)}")
        return "{" + ", ".join(items) + "}"

    manual = built.manual if instance is None else instance.manual
    written = list(g.funcs()) if funcs is None else list(funcs)
    for func in written:
        block = func.regions[0][0] if func.regions and func.regions[0] else None
        if block is None or (not signatures and func.id in built.callees):
            continue
        for i, vid in enumerate(block.args):
            sh = sharding_of(vid)
            if sh is not None:
                plan.set_arg(func.id, i, SHARDING, "#sdy.sharding" + text(sh))
                if origins is not None and origins.get(slot_of(vid)):
                    plan.set_arg(func.id, i, ORIGINS, origin_text(slot_of(vid)))
        if instance is not None and instance.func == func.id:
            result_slots = list(instance.returns)
        else:
            n_results = sum(1 for (fid, _i) in built.func_result_slot if fid == func.id)
            result_slots = [
                built.func_result_slot[(func.id, i)] for i in range(n_results)
            ]
        for i, slot in enumerate(result_slots):
            sh = state[slot]
            if sh is not None:
                plan.set_result(func.id, i, SHARDING, "#sdy.sharding" + text(sh))
                if origins is not None and origins.get(slot):
                    plan.set_result(func.id, i, ORIGINS, origin_text(slot))
                found = edges_text(("result", slot), sh.mesh) if edges else None
                if found is not None:
                    plan.set_result(func.id, i, PROPAGATION_EDGES, found)
    nodes = (
        list(g.walk())
        if funcs is None
        else [n for f in written for n in nested_ops(g, f)]
    )
    for node in nodes:
        if node.op != "sdy.manual_computation" or node.id not in manual:
            continue
        ins, outs = manual[node.id]
        block = node.regions[0][0]
        for name, slots, values in (
            ("in_shardings", ins, block.args),
            ("out_shardings", outs, node.results),
        ):
            given = _opaque_text(node.attr(name))
            as_written = parse_sharding_per_value(given) if given else ()
            bodies = []
            for k, slot in enumerate(slots):
                sh = state[slot]
                if sh is None:
                    continue  # the attribute did not parse; reported already
                if k < len(as_written) and _has_explicit_edge(g, values[k]):
                    # An explicit `sdy.data_flow_edge` on the block argument
                    # (or result) holds what propagation found, as in
                    # Shardy: the attribute stays as written.
                    bodies.append(print_sharding_body(as_written[k]))
                    continue
                bodies.append(text(sh))
            if len(bodies) != len(slots):
                continue
            plan.set_op(
                node.id, name, "#sdy.sharding_per_value<[" + ", ".join(bodies) + "]>"
            )
            attr = "block_arg" if name == "in_shardings" else "result"
            if origins is not None:
                dicts = ", ".join(origin_text(slot) for slot in slots)
                plan.set_op(node.id, f"sdy.{attr}_sharding_origins", f"[{dicts}]")
            if edges:
                kind = "block_arg" if name == "in_shardings" else "mc_result"
                first_sh = state[slots[0]] if slots else None
                mesh_of = first_sh.mesh if first_sh is not None else ""
                texts = [
                    edges_text((kind, node.id, k), mesh_of) for k in range(len(slots))
                ]
                # Shardy prints a value without edges as an empty
                # #sdy.propagation_edges, which its parser refuses: the array
                # is written where every value has some (--explain has all).
                if texts and all(texts):
                    plan.set_op(
                        node.id,
                        f"sdy.{attr}_propagation_edges",
                        "[" + ", ".join(t for t in texts if t) + "]",
                    )
        if origins is not None and node.id in built.origin_names:
            plan.set_op(node.id, ORIGIN_NAME, print_string(built.origin_names[node.id]))
    for node in nodes:
        if not node.results or node.op in ("sdy.manual_computation", "sdy.all_reduce"):
            continue
        shs = [sharding_of(v) for v in node.results]
        if node.op in ("sdy.sharding_constraint", "sdy.reshard", "sdy.data_flow_edge"):
            sh = shs[0]
            if sh is not None:
                plan.set_op(node.id, "sharding", "#sdy.sharding" + text(sh))
            found_edges = edges_text(("op", node.id), sh.mesh) if edges and sh else None
            if found_edges is not None:
                plan.set_op(node.id, PROPAGATION_EDGES, found_edges)
            if origins is not None and node.id in built.origin_names:
                plan.set_op(
                    node.id, ORIGIN_NAME, print_string(built.origin_names[node.id])
                )
                own = slot_of(node.results[0])
                if own >= 0 and origins.get(own):
                    plan.set_op(node.id, ORIGINS, origin_text(own))
            continue
        present = [s for s in shs if s is not None]
        if not present or any(v in built.edge_owned for v in node.results):
            continue
        mesh = present[0].mesh
        bodies = []
        for vid, sh in zip(node.results, shs, strict=True):
            if sh is None:
                shape = g.value(vid).shape or ()
                sh = Sh.open(mesh, len(shape))
            bodies.append(text(sh))
        new = "#sdy.sharding_per_value<[" + ", ".join(bodies) + "]>"
        if _opaque_text(node.attr(SHARDING)) != new:
            plan.set_op(node.id, SHARDING, new)
        if edges:
            found_edges = edges_text(("op", node.id), mesh)
            if found_edges is not None:
                plan.set_op(node.id, PROPAGATION_EDGES, found_edges)
        if origins is not None:
            per_result = [
                origin_text(slot_of(v)) if slot_of(v) >= 0 else "{}"
                for v in node.results
            ]
            while per_result and per_result[-1] == "{}":
                per_result.pop()
            if per_result:
                attr = (
                    "sdy.result_sharding_origins"
                    if node.op in _DATA_FLOW_OPS
                    else ORIGINS
                )
                plan.set_op(node.id, attr, "[" + ", ".join(per_result) + "]")
    return plan


def describe_axes(axes: Axes, sizes: Mapping[str, int]) -> str:
    out = []
    for a in axes:
        name = print_string(a[0])
        if a[1] == 1 and a[2] == sizes.get(a[0], a[2]):
            out.append(name)
        else:
            out.append(f"{name}:({a[1]}){a[2]}")
    return "{" + ", ".join(out) + "}"


def shard_count(sh: Sh) -> int:
    return math.prod(a[2] for d in sh.dims for a in d)
