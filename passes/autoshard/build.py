"""From a module's graph to the auto-sharding `Problem`, and the solution
back to layouts.

Every op of @main (calls inlined) is a member: its strategies come from its
rule (`strategies.py`), its costs from the partitioner's cost model. Members
share a decision group where Alpa's graph reductions apply:
- an elementwise op follows the op that makes its first operand (its
  strategy is the one that takes that operand as it is laid out);
- with `share_layers`, ops traced from the same source location with the
  same shapes and names (the layers of a Python loop) share one decision.
@main's arguments without a sharding are members with one strategy per
layout; arguments with one, `sdy.sharding_constraint`s and shard_map
boundaries are fixed. A `while` or `optimization_barrier` is one member per
carried value (its layout, kept through the loop); a `case` one per result.
What the search does not see: ops inside regions (propagation lays them
out from their boundary), halo exchanges of windowed dims, constants and
iotas (free: the partitioner makes them where they are used).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from meshjit.compiler.diagnostics import SourceLoc
from meshjit.compiler.graph import Graph, Node, Opaque
from meshjit.compiler.op_info import combiner, rule_lookup
from meshjit.dialects.reshard import Layout
from meshjit.dialects.rules import ShardingRule, pointwise_rule
from meshjit.dialects.sdy_text import (
    parse_mesh,
    parse_sharding,
    parse_sharding_per_value,
)
from meshjit.dialects.sharding import DimSharding, MeshModel, TensorSharding
from meshjit.dialects.stablehlo_rules import REDUCIBLE_COMBINERS, RULES
from meshjit.errors import ShardingError
from meshjit.passes.autoshard.problem import (
    Edge,
    FanOut,
    MemoryPoint,
    Problem,
    Shared,
    Tie,
)
from meshjit.passes.autoshard.strategies import (
    REDUCING_OPS,
    Strategy,
    TensorInfo,
    local_bytes,
    op_strategies,
    out_of_order,
    splittable_factors,
    tensor_layouts,
)
from meshjit.passes.partitioner.builder import itemsize
from meshjit.passes.partitioner.context import efficiency, op_work
from meshjit.passes.partitioner.cost import CostModel, reshard_seconds
from meshjit.passes.partitioner.layouts import is_elementwise, layout_of
from meshjit.passes.partitioner.memory import uses

FREE_OPS = frozenset({"sdy.constant", "stablehlo.constant", "stablehlo.iota"})
CARRIED_OPS = frozenset({"stablehlo.optimization_barrier", "stablehlo.while"})
CONSTRAINTS = frozenset({"sdy.reshard", "sdy.sharding_constraint"})
SHARDING = "sdy.sharding"


class AutoShardError(ShardingError):
    """The module cannot be auto-sharded as it is (a clear message says why)."""


@dataclass(slots=True)
class Member:
    """An op, an argument or a carried value whose strategy a group decides.
    `operands`/`results` are the value ids its strategies' layouts are for."""

    what: str  # "dot_general at m.py:3:4", "argument 0 of @main"
    loc: SourceLoc
    node: int  # node id; -1 for an argument
    operands: tuple[int, ...]
    results: tuple[int, ...]
    strategies: list[Strategy]
    auto: bool  # the search chose it (False: fixed by the user or the program)
    group: int = -1
    pick: list[int] = field(default_factory=list)  # group strategy -> own


@dataclass
class Built:
    graph: Graph
    problem: Problem
    members: list[Member]
    group_sizes: list[int]
    producer: dict[int, tuple[int, int]]  # value id -> (member, result index)
    main: Node
    mesh_name: str
    mesh: MeshModel
    args: tuple[int, ...]  # @main's argument value ids
    auto_args: tuple[bool, ...]
    returned: tuple[int, ...]  # the values @main returns
    auto_results: tuple[bool, ...]
    followers: int = 0  # members that follow another's decision
    tied: int = 0  # members tied to an identical layer's decision

    def layout(self, vid: int, choice: Sequence[int]) -> Layout | None:
        """The layout value `vid` is left in under `choice`; None for a value
        no member decides (constants)."""
        found = self.producer.get(vid)
        if found is None:
            return None
        m, r = found
        member = self.members[m]
        return member.strategies[member.pick[choice[member.group]]].results[r]


def size_estimate(problem: Problem) -> int:
    """About how many solver variables the problem makes (`ilp.py`): one per
    strategy, one per class pair of each edge with classes on both sides and
    of each fan-out's readers."""
    n = sum(len(c) for c in problem.costs)
    for e in problem.edges:
        a, b = len(e.cost), len(e.cost[0]) if e.cost else 0
        if a > 1 and b > 1:
            n += a * b
    for f in problem.fanouts:
        a = len(f.cost)
        n += sum(a * len(set(want)) for _, want in f.readers) + a * len(f.cost[0])
    return n


def find_main(graph: Graph) -> Node:
    funcs = list(graph.funcs())
    for f in funcs:
        if f.attr("sym_name") == "main":
            return f
    public = [f for f in funcs if f.attr("sym_visibility") != "private"]
    if len(public) == 1:
        return public[0]
    raise AutoShardError(
        "auto-shard needs a function @main (or exactly one public function) to "
        f"shard; the module has {len(funcs)} functions and none is @main"
    )


def find_mesh(graph: Graph) -> tuple[str, MeshModel]:
    meshes: dict[str, MeshModel] = {}
    for node in graph.walk():
        text, sym = node.attrs.get("mesh"), node.attrs.get("sym_name")
        if node.op == "sdy.mesh" and isinstance(text, Opaque) and isinstance(sym, str):
            meshes[sym] = parse_mesh(text.text)
    real = {k: m for k, m in meshes.items() if m.axes}
    if len(real) != 1:
        names = ", ".join("@" + k for k in sorted(real)) or "none"
        raise AutoShardError(
            "auto-shard needs exactly one sdy.mesh with axes to shard over; the "
            f'module has {names} (add e.g. sdy.mesh @mesh = <["x"=8]>)'
        )
    return next(iter(real.items()))


def _opaque(v: object) -> str | None:
    return v.text if isinstance(v, Opaque) else None


def _entry_sharding(attrs: object, index: int) -> str | None:
    if not isinstance(attrs, tuple) or index >= len(attrs):
        return None
    entry = attrs[index]
    return _opaque(entry.get(SHARDING)) if isinstance(entry, Mapping) else None


@dataclass
class Caches:
    """What one build computes that another of the same module reuses."""

    layout_ids: dict[Layout | None, int] = field(default_factory=dict)
    reshard: dict[tuple[object, ...], float] = field(default_factory=dict)
    strategies: dict[tuple[object, ...], list[Strategy]] = field(default_factory=dict)


class _Builder:
    def __init__(
        self,
        graph: Graph,
        mesh_name: str,
        mesh: MeshModel,
        cost: CostModel,
        caches: Caches,
    ) -> None:
        self.g = graph
        self.mesh_name = mesh_name
        self.mesh = mesh
        self.cost = cost
        self.members: list[Member] = []
        self.group_sizes: list[int] = []
        self.producer: dict[int, tuple[int, int]] = {}
        self.tie_keys: dict[tuple[object, ...], list[int]] = {}
        self.followers = 0
        self.tied = 0
        self.caches = caches

    # -- members ----------------------------------------------------------------

    def tensor(self, vid: int) -> TensorInfo:
        v = self.g.value(vid)
        shape = (
            v.shape if v.shape is not None and all(n >= 0 for n in v.shape) else None
        )
        return TensorInfo(shape, itemsize(v.dtype))

    def layout_of_text(self, text: str, what: str, loc: SourceLoc) -> Layout:
        ts = parse_sharding(text)
        if ts.mesh_name != self.mesh_name and ts.dims and any(d.axes for d in ts.dims):
            raise AutoShardError(
                f"{loc}: {what} is sharded on @{ts.mesh_name}, but auto-shard "
                f"shards over @{self.mesh_name}; use one mesh"
            )
        return layout_of(ts, self.mesh)

    def add(self, member: Member, tie: tuple[object, ...] | None = None) -> int:
        index = len(self.members)
        self.members.append(member)
        n = len(member.strategies)
        if tie is not None:
            # Not with a group that makes one of its operands: consecutive
            # copies of an op (a loop of single matmuls) may want to
            # alternate (Megatron's column / row split); they share a
            # decision with every other copy instead.
            near = {
                self.members[self.producer[v][0]].group
                for v in member.operands
                if v in self.producer
            }
            for g in self.tie_keys.get(tie, []):
                if g not in near and self.group_sizes[g] == n:
                    member.group, member.pick = g, list(range(n))
                    self.tied += 1
                    self._register(index)
                    return index
        member.group, member.pick = len(self.group_sizes), list(range(n))
        self.group_sizes.append(n)
        if tie is not None:
            self.tie_keys.setdefault(tie, []).append(member.group)
        self._register(index)
        return index

    def _register(self, index: int) -> None:
        for r, vid in enumerate(self.members[index].results):
            self.producer[vid] = (index, r)

    def fixed(
        self,
        what: str,
        loc: SourceLoc,
        node: int,
        operands: Sequence[int],
        results: Sequence[int],
        operand_layouts: Sequence[Layout | None],
        result_layouts: Sequence[Layout | None],
        compute: float = 0.0,
    ) -> None:
        s = Strategy((), tuple(operand_layouts), tuple(result_layouts), compute, 0.0)
        self.add(Member(what, loc, node, tuple(operands), tuple(results), [s], False))

    def replicated(self, node: Node, what: str) -> None:
        """An op the partitioner runs whole: operands gathered, results whole."""
        flops, nbytes = op_work(self.g, node)
        self.fixed(
            what,
            node.loc,
            node.id,
            node.operands,
            node.results,
            [_whole(self.tensor(v).shape) for v in node.operands],
            [_whole(self.tensor(v).shape) for v in node.results],
            self.cost.compute_seconds(flops, nbytes),
        )

    def value_member(
        self, what: str, loc: SourceLoc, node: int, operand: int | None, result: int
    ) -> None:
        """A member whose strategies are the layouts of one value (an
        argument, a carried value): the operand, if any, is wanted as the
        result is left."""
        t = self.tensor(result)
        if t.shape is None:
            lays: list[Layout | None] = [None]
        else:
            lays = list(tensor_layouts(t.shape, self.mesh))
        ops = () if operand is None else (operand,)
        strategies = [
            Strategy(
                (),
                (lay,) * len(ops),
                (lay,),
                self._held(t, lay) + out_of_order((lay,), self.mesh),
                0.0,
            )
            for lay in lays
        ]
        self.add(Member(what, loc, node, ops, (result,), strategies, True))

    def _held(self, t: TensorInfo, lay: Layout | None) -> float:
        """A tie-breaker of 1e-15 s per byte held per device (1 us per GiB):
        among layouts that cost the same, the one holding fewer bytes."""
        if t.shape is None or lay is None:
            return 0.0
        return 1e-15 * local_bytes(t.shape, lay, t.itemsize, self.mesh)

    def op(self, node: Node, share_layers: bool) -> None:
        what = f"{node.op.split('.')[-1]} at {node.loc}"
        found = rule_lookup(self.g, node)
        rule = found.rule if found is not None else None
        if rule is None:
            self.replicated(node, what)
            return
        reducible = node.op in REDUCING_OPS and (
            node.op != "stablehlo.reduce"
            or (
                len(node.results) == 1 and combiner(self.g, node) in REDUCIBLE_COMBINERS
            )
        )
        operands = [self.tensor(v) for v in node.operands]
        results = [self.tensor(v) for v in node.results]
        work = op_work(self.g, node)
        if _fusible(node.op, rule):
            work = (work[0], self._fused_bytes(node, operands, results))
        slow = efficiency(node)
        key = (node.op, rule, reducible, tuple(operands), tuple(results), work, slow)
        strategies = self.caches.strategies.get(key)
        if strategies is None:
            strategies = op_strategies(
                rule,
                splittable_factors(rule, node.op, reducible),
                operands,
                results,
                work,
                self.mesh,
                self.cost,
                slow,
            )
            self.caches.strategies[key] = strategies
        given = _opaque(node.attr(SHARDING))
        if given is not None:
            strategies = self._matching(strategies, given, node, what)
        member = Member(
            what, node.loc, node.id, node.operands, node.results, strategies, True
        )
        if given is None and self._follow(member, rule):
            return
        tie = None
        if share_layers:
            tie = (
                node.op,
                node.loc,
                str(rule),
                tuple(t.shape for t in (*operands, *results)),
                tuple(self.g.value(v).dtype for v in (*node.operands, *node.results)),
            )
        self.add(member, tie)

    def _fused_bytes(
        self, node: Node, operands: Sequence[TensorInfo], results: Sequence[TensorInfo]
    ) -> float:
        """Bytes a fusible op moves once XLA fused it with its fusible
        neighbours: the operands a non-fusible op (or an argument) made,
        read into the fusion, and the results something other than a
        fusible op reads (or @main returns), written out of it."""
        total = 0.0
        for vid, t in zip(node.operands, operands, strict=True):
            owner = self.g.value(vid).owner
            if t.shape is not None and (
                owner < 0 or not _fusible_op(self.g.node(owner).op)
            ):
                total += math.prod(t.shape) * t.itemsize
        for vid, t in zip(node.results, results, strict=True):
            if t.shape is None:
                continue
            users = [self.g.node(u) for u in self.g.users(vid)]
            if not users or any(not _fusible_op(u.op) for u in users):
                total += math.prod(t.shape) * t.itemsize
        return total

    def _matching(
        self, strategies: list[Strategy], text: str, node: Node, what: str
    ) -> list[Strategy]:
        """An op the program already shards: only strategies that leave its
        results as written."""
        try:
            wanted = [layout_of(ts, self.mesh) for ts in parse_sharding_per_value(text)]
        except ShardingError as err:
            raise AutoShardError(
                f"{node.loc}: bad sdy.sharding on {what}: {err}"
            ) from None
        kept = [s for s in strategies if list(s.results) == wanted]
        if kept:
            return kept
        # Written with axes no strategy has (sub-axes, uneven splits): kept as
        # written, operands taken whole.
        operands = tuple(_whole(self.tensor(v).shape) for v in node.operands)
        return [Strategy((), operands, tuple(wanted), 0.0, 0.0)]

    def _follow(self, member: Member, rule: ShardingRule) -> bool:
        """Joins the group of the op making the first operand when the op is
        elementwise and every layout that operand can have is one of its
        strategies."""
        if not member.operands or len(member.results) != 1 or not is_elementwise(rule):
            return False
        shape = self.tensor(member.results[0]).shape
        if shape is None or self.tensor(member.operands[0]).shape != shape:
            return False  # e.g. a broadcast of a scalar: not decided by it
        src = self.producer.get(member.operands[0])
        if src is None:
            return False
        leader = self.members[src[0]]
        if leader.node < 0:
            # An argument: slicing it is free, so an op reading it may well
            # want another layout (an optimizer update split over devices
            # while the weight stays whole for the forward pass).
            return False
        by_layout: dict[Layout | None, int] = {}
        for j, s in enumerate(member.strategies):
            by_layout.setdefault(s.operands[0], j)
        pick = []
        for own in leader.pick:
            lay = leader.strategies[own].results[src[1]]
            if lay is None or lay not in by_layout:
                return False
            pick.append(by_layout[lay])
        member.group, member.pick = leader.group, pick
        index = len(self.members)
        self.members.append(member)
        self._register(index)
        self.followers += 1
        return True

    # -- edges and memory -------------------------------------------------------

    def reshard(self, vid: int, src: Layout, dst: Layout) -> float:
        t = self.tensor(vid)
        if t.shape is None or src == dst:
            return 0.0
        ids = self.caches.layout_ids
        a = ids.setdefault(src, len(ids))
        b = ids.setdefault(dst, len(ids))
        return self._reshard_ids(t, a, b, src, dst)

    def _reshard_ids(
        self, t: TensorInfo, a: int, b: int, src: Layout, dst: Layout
    ) -> float:
        if a == b or t.shape is None:
            return 0.0
        key = (a, b, t.shape, t.itemsize)
        found = self.caches.reshard.get(key)
        if found is None:
            found = reshard_seconds(
                src, dst, t.shape, t.itemsize, self.mesh, (), self.cost
            )
            self.caches.reshard[key] = found
        return found

    def produced(self, vid: int) -> list[Layout | None] | None:
        """Per strategy of the producing member's group: the value's layout."""
        found = self.producer.get(vid)
        if found is None:
            return None
        m, r = found
        member = self.members[m]
        return [member.strategies[own].results[r] for own in member.pick]

    def edges(self, costs: list[list[float]]) -> tuple[list[Edge], list[FanOut]]:
        """An edge per (value, reader group); an argument read by several
        groups is one fan-out instead: each layout it is wanted in is made
        once (an FSDP parameter is gathered once for the forward and the
        backward pass). Only arguments: fan-outs price with a weaker
        relaxation than edges, and one per value made GPT-2's search hit
        its 30 s limit."""
        readers: dict[int, list[tuple[int, list[Layout | None]]]] = {}
        for member in self.members:
            for k, vid in enumerate(member.operands):
                made = self.produced(vid)
                if made is None:
                    continue
                src_group = self.members[self.producer[vid][0]].group
                wants = [member.strategies[own].operands[k] for own in member.pick]
                if src_group == member.group:
                    for i, (a, b) in enumerate(zip(made, wants, strict=True)):
                        if a is not None and b is not None:
                            costs[member.group][i] += self.reshard(vid, a, b)
                    continue
                readers.setdefault(vid, []).append((member.group, wants))
        edges: list[Edge] = []
        fans: list[FanOut] = []
        for vid, found in readers.items():
            made = self.produced(vid)
            assert made is not None
            src_group = self.members[self.producer[vid][0]].group
            producer = self.members[self.producer[vid][0]]
            if producer.node < 0 and len({g for g, _ in found}) > 1:
                fans.append(self._fan(vid, src_group, made, found))
                continue
            for group, wants in found:
                edges.append(self._edge(vid, src_group, made, group, wants))
        return edges, fans

    def _fan(
        self,
        vid: int,
        src: int,
        made: list[Layout | None],
        found: list[tuple[int, list[Layout | None]]],
    ) -> FanOut:
        a_index: dict[Layout | None, int] = {}
        b_index: dict[Layout | None, int] = {}
        src_class = tuple(a_index.setdefault(lay, len(a_index)) for lay in made)
        readers = tuple(
            (g, tuple(b_index.setdefault(lay, len(b_index)) for lay in wants))
            for g, wants in found
        )
        return FanOut(src, src_class, readers, self._costs(vid, a_index, b_index))

    def _costs(
        self,
        vid: int,
        a_index: Mapping[Layout | None, int],
        b_index: Mapping[Layout | None, int],
    ) -> tuple[tuple[float, ...], ...]:
        """[a][b]: seconds to reshard value `vid` from layout class a to b."""
        t = self.tensor(vid)
        ids = self.caches.layout_ids
        a_ids = [ids.setdefault(lay, len(ids)) for lay in a_index]
        b_ids = [ids.setdefault(lay, len(ids)) for lay in b_index]
        return tuple(
            tuple(
                0.0 if a is None or b is None else self._reshard_ids(t, ia, ib, a, b)
                for b, ib in zip(b_index, b_ids, strict=True)
            )
            for a, ia in zip(a_index, a_ids, strict=True)
        )

    def _edge(
        self,
        vid: int,
        src: int,
        made: list[Layout | None],
        dst: int,
        wants: list[Layout | None],
    ) -> Edge:
        a_index: dict[Layout | None, int] = {}
        b_index: dict[Layout | None, int] = {}
        src_class = tuple(a_index.setdefault(lay, len(a_index)) for lay in made)
        dst_class = tuple(b_index.setdefault(lay, len(b_index)) for lay in wants)
        cost = self._costs(vid, a_index, b_index)
        return Edge(src, dst, src_class, dst_class, cost)

    def ties(
        self,
        pairs: Sequence[tuple[int, int]],
        args: Sequence[int],
        returned: Sequence[int],
    ) -> tuple[Tie, ...]:
        """A tie per (argument, result) pair whose two values have a layout
        in common (a pair with none, or out of range, is left alone: it
        could only make the problem infeasible)."""
        out = []
        for a, r in dict.fromkeys(pairs):
            if not (0 <= a < len(args) and 0 <= r < len(returned)):
                continue
            left, right = self.produced(args[a]), self.produced(returned[r])
            if left is None or right is None or not set(left) & set(right):
                continue
            index: dict[Layout | None, int] = {}
            a_class = tuple(index.setdefault(lay, len(index)) for lay in left)
            b_class = tuple(index.setdefault(lay, len(index)) for lay in right)
            ga = self.members[self.producer[args[a]][0]].group
            gb = self.members[self.producer[returned[r]][0]].group
            if ga != gb:
                out.append(Tie(ga, a_class, gb, b_class))
        return tuple(out)

    def memory(
        self, order: Sequence[Node], returned: Sequence[int]
    ) -> list[MemoryPoint]:
        """Per program point: the per-device bytes of the values live there
        (arguments all along; results to the end), leaving out points whose
        values a neighbouring point holds as well."""
        pos = {n.id: t for t, n in enumerate(order)}
        end = len(order)
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for vid in self.producer:
            owner = self.g.value(vid).owner
            first[vid] = pos.get(owner, 0) if owner >= 0 else 0
            last[vid] = end if owner < 0 else first[vid]
        for t, node in enumerate(order):
            for used in uses(self.g, node):
                if used in last:
                    last[used] = max(last[used], t)
        for vid in returned:
            if vid in last:
                last[vid] = end
        born: dict[int, list[tuple[int, list[int]]]] = {}
        dies: dict[int, list[tuple[int, list[int]]]] = {}
        for vid in self.producer:
            made = self.produced(vid)
            info = self.tensor(vid)
            if made is None or info.shape is None:
                continue
            shape = info.shape
            b = [
                0 if lay is None else local_bytes(shape, lay, info.itemsize, self.mesh)
                for lay in made
            ]
            born.setdefault(first[vid], []).append((vid, b))
            dies.setdefault(last[vid], []).append((vid, b))
        acc: dict[int, list[int]] = {}
        frozen: dict[int, tuple[float, ...]] = {}  # acc as of the last point
        changed: set[int] = set()
        fixed = 0
        points: list[MemoryPoint] = []
        for t in range(end + 1):
            for vid, b in born.get(t, ()):
                fixed += self._count(acc, changed, vid, b, 1)
            # Not a point whose values the one before holds too (nothing is
            # made here), nor one the next strictly contains (nothing dies
            # here and something is made next).
            grows = t < end and t not in dies and (t + 1) in born
            if (t == 0 or t in born) and not grows:
                for g in changed:
                    vec = acc[g]
                    if any(vec):
                        frozen[g] = tuple(float(x) for x in vec)
                    else:
                        frozen.pop(g, None)
                changed.clear()
                terms = tuple(sorted(frozen.items()))
                where = str(order[t].loc) if t < end else "the end of @main"
                points.append(MemoryPoint(terms, float(fixed), where))
            for vid, b in dies.get(t, ()):
                fixed += self._count(acc, changed, vid, b, -1)
        return points

    def _count(
        self,
        acc: dict[int, list[int]],
        changed: set[int],
        vid: int,
        b: list[int],
        sign: int,
    ) -> int:
        """Adds (sign 1) or removes (-1) a value's bytes per strategy of its
        group; returns the change of the fixed part (bytes no choice moves)."""
        if min(b) == max(b):
            return sign * b[0]
        group = self.members[self.producer[vid][0]].group
        changed.add(group)
        vec = acc.setdefault(group, [0] * len(b))
        for i, x in enumerate(b):
            vec[i] += sign * x
        return 0


def merge_edges(edges: Sequence[Edge]) -> list[Edge]:
    """One edge per pair of groups: parallel edges (a value used twice, the
    same value of every tied layer) summed over the pair of their classes."""
    by_pair: dict[tuple[int, int], list[Edge]] = {}
    for e in edges:
        if e.src > e.dst:
            e = Edge(
                e.dst, e.src, e.dst_class, e.src_class, tuple(zip(*e.cost, strict=True))
            )
        by_pair.setdefault((e.src, e.dst), []).append(e)
    out = []
    for (src, dst), group in by_pair.items():
        if len(group) == 1:
            out.append(group[0])
            continue
        a_keys = list(zip(*(e.src_class for e in group), strict=True))
        b_keys = list(zip(*(e.dst_class for e in group), strict=True))
        a_index = {k: n for n, k in enumerate(dict.fromkeys(a_keys))}
        b_index = {k: n for n, k in enumerate(dict.fromkeys(b_keys))}
        cost = tuple(
            tuple(
                sum(e.cost[ka[k]][kb[k]] for k, e in enumerate(group)) for kb in b_index
            )
            for ka in a_index
        )
        out.append(
            Edge(
                src,
                dst,
                tuple(a_index[k] for k in a_keys),
                tuple(b_index[k] for k in b_keys),
                cost,
            )
        )
    return out


def _reduction_rounds(graph: Graph, order: Sequence[Node]) -> dict[int, int]:
    """Per reducing top-level op, the round its partial results are reduced
    in: ops in one round are independent of one another, so the collectives
    that reduce them are combined into one (XLA combines all-reduces;
    meshjit's partitioner combines reduce-scatters and small all-reduces)
    and pay one launch latency between them. An op from whose results no
    contraction or reduction can be reached (the gradients of a train step)
    is in the last round (-1), with all such; any other is in round 1 +
    the highest round among the reducing ops it can be reached from."""
    top = {n.id: n.id for n in order}

    def ancestor(nid: int) -> int | None:
        while nid not in top:
            parent = graph.node(nid).parent
            if parent < 0:
                return None
            nid = parent
        return nid

    reaches: dict[int, bool] = {}
    for node in reversed(order):
        found = False
        for vid in node.results:
            for user in graph.users(vid):
                up = ancestor(user)
                if up is None or up == node.id:
                    continue
                if graph.node(up).op in REDUCING_OPS or reaches.get(up, True):
                    found = True
                    break
            if found:
                break
        reaches[node.id] = found
    # Rounds: how many reducing ops a node's inputs passed through at most.
    depth: dict[int, int] = {}
    rounds: dict[int, int] = {}
    for node in order:
        below = 0
        for vid in node.operands:
            owner = graph.value(vid).owner
            up = ancestor(owner) if owner >= 0 else None
            if up is not None:
                below = max(below, depth.get(up, 0))
        if node.op in REDUCING_OPS:
            rounds[node.id] = -1 if not reaches[node.id] else below
            depth[node.id] = below + 1
        else:
            depth[node.id] = below
    return rounds


# Ops XLA fuses into loops with their elementwise neighbours (besides the
# pointwise ones): their memory traffic is the fusion's, not their own.
_FUSIBLE = frozenset(
    {
        "stablehlo.broadcast_in_dim",
        "stablehlo.convert",
        "stablehlo.reshape",
        "stablehlo.transpose",
    }
)


@functools.cache
def _fusible_op(op: str) -> bool:
    return op in _FUSIBLE or RULES.entry(op) is pointwise_rule


def _fusible(op: str, rule: ShardingRule) -> bool:
    return op in _FUSIBLE or (_fusible_op(op) and is_elementwise(rule))


def _whole(shape: tuple[int, ...] | None) -> Layout | None:
    return None if shape is None else tuple(() for _ in shape)


def build(
    graph: Graph,
    cost: CostModel,
    share_layers: bool = False,
    caches: Caches | None = None,
    ties: Sequence[tuple[int, int]] = (),
) -> Built:
    """`ties`: (argument, result) index pairs of @main laid out alike (a
    donated argument and the result reusing its buffer; arguments marked
    `tf.aliasing_output`, as JAX marks donated ones, are tied too)."""
    main = find_main(graph)
    mesh_name, mesh = find_mesh(graph)
    b = _Builder(graph, mesh_name, mesh, cost, caches or Caches())
    block = main.regions[0][0]
    arg_attrs = main.attr("arg_attrs")
    auto_args = []
    name = main.attr("sym_name")
    for i, vid in enumerate(block.args):
        what = f"argument {i} of @{name}"
        text = _entry_sharding(arg_attrs, i)
        auto_args.append(text is None)
        if text is None:
            b.value_member(what, main.loc, -1, None, vid)
        else:
            lay = b.layout_of_text(text, what, main.loc)
            b.fixed(what, main.loc, -1, (), (vid,), (), (lay,))
    order: list[Node] = []
    returned: tuple[int, ...] = ()
    for nid in block.nodes:
        node = graph.node(nid)
        if node.op == "func.return":
            returned = node.operands
            continue
        order.append(node)
        _add_node(b, node, share_layers)
    res_attrs = main.attr("res_attrs")
    costs = [[0.0] * n for n in b.group_sizes]
    rounds = _reduction_rounds(graph, order)
    sharing: dict[tuple[str, int], list[tuple[int, int, float]]] = {}
    for member in b.members:
        in_round = rounds.get(member.node)
        for i, own in enumerate(member.pick):
            s = member.strategies[own]
            costs[member.group][i] += s.cost
            if in_round is None or not s.kind or not s.latency:
                continue
            costs[member.group][i] -= s.latency
            sharing.setdefault((s.kind, in_round), []).append(
                (member.group, i, s.latency)
            )
    shared = []
    for (kind, _), entries in sorted(sharing.items()):
        if len({g for g, _, _ in entries}) == 1:
            # One group (a round of one op, or of ops that share a decision):
            # nothing to share, each strategy pays its own launch, charged
            # directly (no variable or row for it).
            for g, i, latency in entries:
                costs[g][i] += latency
            continue
        members = tuple(dict.fromkeys((g, i) for g, i, _ in entries))
        seconds = max(latency for _, _, latency in entries)
        shared.append(Shared(seconds, members, f"independent {kind}s"))
    auto_results = []
    for i, vid in enumerate(returned):
        text = _entry_sharding(res_attrs, i)
        auto_results.append(text is None)
        made = b.produced(vid)
        if text is None or made is None:
            continue
        want = b.layout_of_text(text, f"result {i} of @{name}", main.loc)
        group = b.members[b.producer[vid][0]].group
        for k, made_lay in enumerate(made):
            if made_lay is not None:
                costs[group][k] += b.reshard(vid, made_lay, want)
    found, fans = b.edges(costs)
    edges = merge_edges(found)
    memory = b.memory(order, returned)
    pairs = [*ties, *_aliased(arg_attrs, len(block.args))]
    problem = Problem(
        tuple(tuple(c) for c in costs),
        tuple(edges),
        tuple(memory),
        tuple(shared),
        tuple(fans),
        b.ties(pairs, block.args, returned),
    )
    return Built(
        graph,
        problem,
        b.members,
        b.group_sizes,
        b.producer,
        main,
        mesh_name,
        mesh,
        tuple(block.args),
        tuple(auto_args),
        returned,
        tuple(auto_results),
        b.followers,
        b.tied,
    )


def _aliased(attrs: object, count: int) -> list[tuple[int, int]]:
    """(argument, result) pairs of `tf.aliasing_output` on @main's arguments."""
    out = []
    for i in range(count):
        if isinstance(attrs, tuple) and i < len(attrs):
            entry = attrs[i]
            found = (
                entry.get("tf.aliasing_output") if isinstance(entry, Mapping) else None
            )
            if isinstance(found, int) and not isinstance(found, bool):
                out.append((i, found))
    return out


def _add_node(b: _Builder, node: Node, share_layers: bool) -> None:
    what = f"{node.op.split('.')[-1]} at {node.loc}"
    if node.op in FREE_OPS:
        return
    if node.op in CONSTRAINTS:
        text = _opaque(node.attr("sharding"))
        if text is None:
            raise AutoShardError(f"{node.loc}: {node.op} has no sharding attribute")
        lay = b.layout_of_text(text, what, node.loc)
        b.fixed(what, node.loc, node.id, node.operands, node.results, (lay,), (lay,))
        return
    if node.op == "sdy.manual_computation":
        ins = _opaque(node.attr("in_shardings"))
        outs = _opaque(node.attr("out_shardings"))
        if ins is None or outs is None:
            raise AutoShardError(f"{node.loc}: {what} lacks in/out shardings")
        b.fixed(
            what,
            node.loc,
            node.id,
            node.operands,
            node.results,
            [layout_of(ts, b.mesh) for ts in parse_sharding_per_value(ins)],
            [layout_of(ts, b.mesh) for ts in parse_sharding_per_value(outs)],
        )
        return
    if node.op in CARRIED_OPS:
        for i, (src, out) in enumerate(zip(node.operands, node.results, strict=True)):
            b.value_member(f"{what}, carried value {i}", node.loc, node.id, src, out)
        return
    if node.op == "stablehlo.case":
        for i, out in enumerate(node.results):
            b.value_member(f"{what}, result {i}", node.loc, node.id, None, out)
        return
    b.op(node, share_layers)


def layout_sharding(mesh_name: str, layout: Layout) -> TensorSharding:
    """A closed sharding: each dim split over exactly the layout's axes."""
    return TensorSharding(mesh_name, tuple(DimSharding(axes) for axes in layout))
