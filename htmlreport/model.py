"""What the HTML report shows, as plain data (JSON for the page's script).

Built from what one run of meshjit's pipeline leaves behind when the "html"
report is asked for (`Diagnostics.requested`): the partitioner's input graph
(the propagated program, with every value's sharding), its `PartitionReport`
(collectives, remarks and decisions, each with the op of @main's body it
belongs to: `site`), the partitioned text (for per-device memory) and
propagation's provenance (for each value's origin path). No MLIR here beyond
reading the partitioned text; everything is testable without a browser.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from meshjit.compiler.diagnostics import SourceLoc
from meshjit.compiler.graph import Block, Graph, Node, Opaque, read_graph
from meshjit.compiler.ir import make_context, parse_module
from meshjit.dialects.sdy_text import (
    parse_mesh,
    parse_sharding,
    parse_sharding_per_value,
    print_dim_sharding,
)
from meshjit.dialects.sharding import MeshModel, TensorSharding
from meshjit.errors import ReportError
from meshjit.frontend.jit import INTERNAL_DIRS
from meshjit.passes.partitioner.builder import itemsize
from meshjit.passes.partitioner.report import PartitionReport
from meshjit.passes.propagate import PropagationResult
from meshjit.passes.propagation.build import describe_axes
from meshjit.passes.propagation.explain import state_mesh

# A scope or source line with more ops than this is cut into runs of ops.
_CHUNK = 40
# A source line's ops are grouped when a scope has more ops than this.
_GROUP_LINES_ABOVE = 12
# The memory curve keeps at most this many points (the maximum of each run).
_CURVE_POINTS = 400

_OPERAND = re.compile(r"^operand (\d+)\b")
_RESULT = re.compile(r"^function result (\d+)\b")


@dataclass(slots=True)
class ReportInputs:
    """Everything one report is made from."""

    title: str
    graph: Graph  # the partitioner's input (propagated program)
    report: PartitionReport
    partitioned_text: str
    propagation: PropagationResult | None = None
    # The user's names of @main's arguments and results (key paths), if known.
    arg_names: Sequence[str] | None = None
    result_names: Sequence[str] | None = None
    # Process index of each mesh device id, when the devices are known.
    processes: Mapping[int, int] | None = None
    platform: str = ""
    # XLA's memory analysis of the compiled executable (bytes), if compiled.
    xla_memory: Mapping[str, int] | None = None
    # The analytic minimum of collective bytes per device, where known.
    bound_bytes: int | None = None
    notes: list[str] = field(default_factory=list)


def build_model(inputs: ReportInputs) -> dict[str, Any]:
    """The page's data: mesh, arguments and results, the program graph,
    collectives, memory and per-value provenance."""
    return _Builder(inputs).build()


def sharding_body(s: TensorSharding) -> str:
    """`[{"x"}, {}]` (and `replicated=`/`unreduced=`), without the mesh."""
    text = "[" + ", ".join(print_dim_sharding(d) for d in s.dims) + "]"
    if s.unreduced:
        text += " unreduced={" + ", ".join(str(a) for a in s.unreduced) + "}"
    return text


def scope_of(loc: SourceLoc) -> list[str]:
    """The `jax.named_scope` path of an op, from JAX's location name
    (`jit(f)/layer1/attn/dot_general` -> [layer1, attn])."""
    parts = [p for p in loc.name.split("/") if p] if loc.name else []
    if parts and re.match(r"^p?jit\(", parts[0]):
        parts = parts[1:]
    return parts[:-1]


# meshjit's tracing machinery (not the package root, where the demo lives)
_TRACER_DIRS = tuple(
    d for d in INTERNAL_DIRS if os.path.basename(d.rstrip(os.sep)) != "meshjit"
)


def _user(loc: SourceLoc) -> bool:
    """A position in the user's code (not unknown, not meshjit's tracer:
    JAX gives constants it makes the position of meshjit's tracing call)."""
    return loc.known and not loc.file.startswith(_TRACER_DIRS)


def _line(loc: SourceLoc) -> str:
    return f"{loc.file.rsplit('/', 1)[-1]}:{loc.line}" if _user(loc) else ""


def _short_op(op: str) -> str:
    return op.split(".", 1)[1] if op.startswith("stablehlo.") else op


def device_blocks(
    sharding: TensorSharding | None, mesh: MeshModel, shape: Sequence[int]
) -> list[list[int | None]]:
    """For each device position of the mesh (row-major over its axes), the
    block it holds of each dim (None: the whole dim)."""
    coords: list[dict[str, int]] = []
    sizes = [a.size for a in mesh.axes]
    for pos in range(mesh.size):
        digits: list[int] = []
        rest = pos
        for size in reversed(sizes):
            digits.append(rest % size)
            rest //= size
        coords.append(dict(zip(mesh.axis_names, reversed(digits), strict=True)))
    out: list[list[int | None]] = []
    for c in coords:
        blocks: list[int | None] = []
        for d in range(len(shape)):
            axes = sharding.dims[d].axes if sharding and d < len(sharding.dims) else ()
            if not axes:
                blocks.append(None)
                continue
            index = 0
            for a in axes:
                size = a.size if a.size is not None else mesh.axis_size(a.name)
                index = index * size + (c[a.name] // a.pre_size) % size
            blocks.append(index)
        out.append(blocks)
    return out


def local_bytes(
    sharding: TensorSharding | None, mesh: MeshModel, shape: Sequence[int], dtype: str
) -> int:
    """Bytes of one device's block (padded up where an axis does not divide)."""
    n = 1
    for d, size in enumerate(shape):
        span = sharding.dim_size(d, mesh) if sharding and d < sharding.rank else 1
        n *= -(-size // span)
    return n * _itemsize(dtype)


def _itemsize(dtype: str) -> int:
    try:
        return itemsize(dtype)
    except (KeyError, ValueError):
        return 0


class _Builder:
    def __init__(self, inputs: ReportInputs) -> None:
        self.inputs = inputs
        self.graph = inputs.graph
        self.shardings: dict[str, int] = {}  # sharding text -> colour index
        mesh = _mesh_of(inputs.graph)
        self.mesh_name, self.mesh = mesh if mesh else ("", MeshModel(()))

    def colour(self, text: str) -> int:
        return self.shardings.setdefault(text, len(self.shardings))

    # -- the program ---------------------------------------------------------------

    def build(self) -> dict[str, Any]:
        """The page's data. Compact, as a 10k-op program has 10k of each:
        values are rows of `values` referred to by index, shardings and
        repeated strings are indices into `shardings` and `strings`."""
        g = self.graph
        main = _entry(g)
        body = main.regions[0][0]
        self.value_sharding: dict[int, TensorSharding] = {}
        self._read_shardings(main)
        ret = next(
            (g.node(n) for n in body.nodes if g.node(n).op == "func.return"), None
        )
        arg_names = list(self.inputs.arg_names or [])
        res_names = list(self.inputs.result_names or [])
        self.values: list[dict[str, Any]] = []
        self.index: dict[int, int] = {}  # graph value id -> row of `values`
        nodes: list[dict[str, Any]] = []
        producer: dict[int, str] = {}  # value id -> display node id
        arguments = []
        for i, a in enumerate(body.args):
            name = arg_names[i] if i < len(arg_names) else f"argument {i}"
            nid = f"a{i}"
            producer[a] = nid
            row = self._value(a, name, nid)
            nodes.append({"id": nid, "kind": "arg", "label": name, "res": [row]})
            arguments.append(self._full_row(a, name, row))
        ops = [g.node(n) for n in body.nodes if g.node(n).op != "func.return"]
        for node in ops:
            nid = f"n{node.id}"
            op = _short_op(node.op)
            line = _line(node.loc)
            where = f" at {line}" if line else ""
            res = []
            for k, r in enumerate(node.results):
                producer[r] = nid
                res.append(self._value(r, f"{op} result {k}{where}", nid))
            entry: dict[str, Any] = {"id": nid, "kind": "op", "op": op, "res": res}
            if _user(node.loc):
                entry["loc"] = str(node.loc)
                entry["line"] = line
            scope = "/".join(scope_of(node.loc))
            if scope:
                entry["scope"] = scope
            nested = _count_nested(g, node)
            if nested:
                entry["nested"] = nested
            nodes.append(entry)
        results: list[dict[str, Any]] = []
        if ret is not None:
            labels = [
                res_names[i] if i < len(res_names) else f"result {i}"
                for i in range(len(ret.operands))
            ]
            nodes.append(
                {"id": "r", "kind": "result", "label": "results: " + ", ".join(labels)}
            )
            # a result is laid out as @main's result attribute says (the
            # partitioner reshards the returned value to it)
            declared = _dicts(main.attrs.get("res_attrs"))
            for i, v in enumerate(ret.operands):
                attr = declared[i].get("sdy.sharding") if i < len(declared) else None
                layout = parse_sharding(attr.text) if isinstance(attr, Opaque) else None
                results.append(
                    self._full_row(v, labels[i], self.index.get(v, -1), layout)
                )
        edges: list[dict[str, Any]] = []
        edge_of: dict[tuple[int, int], int] = {}  # (node id, operand #) -> edge
        for node in ops:
            for k, v in enumerate(node.operands):
                if v in producer:
                    edge_of[(node.id, k)] = len(edges)
                    edges.append(
                        {"src": producer[v], "dst": f"n{node.id}", "v": self.index[v]}
                    )
        if ret is not None:
            for k, v in enumerate(ret.operands):
                if v in producer:
                    edge_of[(ret.id, k)] = len(edges)
                    edges.append({"src": producer[v], "dst": "r", "v": self.index[v]})
        groups = self._groups(nodes)
        collectives = self._collectives(edge_of, edges, ret)
        self.strings: dict[str, int] = {}
        self._provenance()
        return {
            "title": self.inputs.title,
            "platform": self.inputs.platform,
            "mesh": self._mesh(),
            "shardings": list(self.shardings),
            "strings": list(self.strings),
            "nodes": nodes,
            "edges": edges,
            "groups": groups,
            "values": self.values,
            "arguments": arguments,
            "results": results,
            "collectives": collectives,
            "totals": self._totals(),
            "remarks": [
                {"loc": str(r.loc), "message": r.message, "node": _site(r.site, ret)}
                for r in self.inputs.report.remarks
            ],
            "memory": self._memory(),
            "notes": list(self.inputs.notes),
            "op_count": sum(1 + _count_nested(g, n) for n in ops),
        }

    def _value(self, vid: int, name: str, node: str) -> int:
        """A row of `values` (name, producing node, type, sharding index)."""
        v = self.graph.value(vid)
        self.index[vid] = len(self.values)
        self.values.append(
            {
                "n": name,
                "node": node,
                "t": _type_text(v.type),
                "s": self.colour(self._sharding_text(vid)),
            }
        )
        return self.index[vid]

    def _full_row(
        self, vid: int, name: str, row: int, layout: TensorSharding | None = None
    ) -> dict[str, Any]:
        """An argument or result (laid out as `layout`, or as its value):
        shape, bytes, and its blocks on the mesh."""
        v = self.graph.value(vid)
        s = layout or self.value_sharding.get(vid)
        shape = list(v.shape or ())
        ranked = v.shape is not None
        return {
            "row": row,
            "name": name,
            "shape": shape,
            "dtype": v.dtype,
            "sharding": self._text(s, v.shape is not None),
            "bytes": math.prod(shape) * _itemsize(v.dtype) if ranked else 0,
            "local_bytes": local_bytes(s, self.mesh, shape, v.dtype) if ranked else 0,
            "grid": self._grid(s, shape),
        }

    def _read_shardings(self, main: Node) -> None:
        g = self.graph
        block = main.regions[0][0]
        for i, entry in enumerate(_dicts(main.attrs.get("arg_attrs"))):
            s = entry.get("sdy.sharding")
            if isinstance(s, Opaque) and i < len(block.args):
                self.value_sharding[block.args[i]] = parse_sharding(s.text)
        for node in g.walk(block):
            if node.op in ("sdy.sharding_constraint", "sdy.reshard"):
                s = node.attrs.get("sharding")
                if isinstance(s, Opaque):
                    self.value_sharding[node.results[0]] = parse_sharding(s.text)
                continue
            key = "out_shardings" if node.op == "sdy.manual_computation" else ""
            per_value = node.attrs.get(key or "sdy.sharding")
            if isinstance(per_value, Opaque):
                for vid, s in zip(
                    node.results, parse_sharding_per_value(per_value.text), strict=False
                ):
                    self.value_sharding[vid] = s

    def _sharding_text(self, vid: int) -> str:
        v = self.graph.value(vid)
        return self._text(self.value_sharding.get(vid), v.shape is not None)

    def _text(self, s: TensorSharding | None, ranked: bool) -> str:
        if s is None:
            return "replicated" if ranked else ""
        if s.is_fully_replicated(self.mesh) and not s.unreduced:
            return "replicated"
        return sharding_body(s)

    def _groups(self, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The collapsible tree: named scopes, then source lines, then runs
        of ops; every op node's "group" names its innermost group."""
        groups: list[dict[str, Any]] = [
            {"id": "g0", "label": self.inputs.title, "parent": "", "children": []}
        ]
        by_path: dict[tuple[str, ...], dict[str, Any]] = {(): groups[0]}
        members: dict[str, list[dict[str, Any]]] = {"g0": []}

        def group(path: tuple[str, ...]) -> dict[str, Any]:
            found = by_path.get(path)
            if found is not None:
                return found
            parent = group(path[:-1])
            new = {
                "id": f"g{len(groups)}",
                "label": path[-1],
                "parent": parent["id"],
                "children": [],
            }
            groups.append(new)
            parent["children"].append(new["id"])
            by_path[path] = new
            members[new["id"]] = []
            return new

        for n in nodes:
            if n["kind"] != "op":
                n["group"] = "g0"
                continue
            path = tuple(n["scope"].split("/")) if n.get("scope") else ()
            g = group(path)
            members[g["id"]].append(n)
        for gid, ms in list(members.items()):
            parent = next(x for x in groups if x["id"] == gid)
            for n in ms:
                n["group"] = gid
            if len(ms) <= _GROUP_LINES_ABOVE:
                continue
            by_line: dict[str, list[dict[str, Any]]] = {}
            for n in ms:
                by_line.setdefault(n.get("line") or "?", []).append(n)
            loose = []
            for line, ns in by_line.items():
                if len(ns) < 2 or len(by_line) == 1:
                    loose.extend(ns)
                    continue
                sub = self._subgroup(groups, parent, f"line {line}")
                for n in ns:
                    n["group"] = sub["id"]
                self._chunk(groups, sub, ns)
            self._chunk(groups, parent, loose)
        return groups

    def _subgroup(
        self, groups: list[dict[str, Any]], parent: dict[str, Any], label: str
    ) -> dict[str, Any]:
        new = {
            "id": f"g{len(groups)}",
            "label": label,
            "parent": parent["id"],
            "children": [],
        }
        groups.append(new)
        parent["children"].append(new["id"])
        return new

    def _chunk(
        self,
        groups: list[dict[str, Any]],
        parent: dict[str, Any],
        ns: list[dict[str, Any]],
    ) -> None:
        """Runs of ops in program order when a group has more than _CHUNK:
        runs of _CHUNK, gathered into runs of _CHUNK runs, and so on, so that
        no group has more than _CHUNK members."""
        if len(ns) <= _CHUNK:
            return
        size = _CHUNK
        while size * _CHUNK < len(ns):
            size *= _CHUNK
        for start in range(0, len(ns), size):
            run = ns[start : start + size]
            sub = self._subgroup(
                groups, parent, f"ops {start + 1}-{start + len(run)} of {len(ns)}"
            )
            for n in run:
                n["group"] = sub["id"]
            self._chunk(groups, sub, run)

    # -- collectives ---------------------------------------------------------------

    def _collectives(
        self,
        edge_of: dict[tuple[int, int], int],
        edges: list[dict[str, Any]],
        ret: Node | None,
    ) -> list[dict[str, Any]]:
        report = self.inputs.report
        decisions: dict[int, list[str]] = {}
        for d in report.decisions:
            decisions.setdefault(d.site, []).append(d.text().strip())
        remarks: dict[int, list[str]] = {}
        for r in report.remarks:
            remarks.setdefault(r.site, []).append(f"{r.loc}: remark: {r.message}")
        out: dict[int, list[int]] = {}  # node id -> its outgoing edges
        for e, edge_row in enumerate(edges):
            if edge_row["src"].startswith("n"):
                out.setdefault(int(edge_row["src"][1:]), []).append(e)
        rows = []
        for i, c in enumerate(report.collectives):
            site = c.site
            edge = -1
            m = _OPERAND.match(c.reason)
            if m and (site, int(m.group(1))) in edge_of:
                edge = edge_of[(site, int(m.group(1)))]
            m = _RESULT.match(c.reason)
            if m and ret is not None and (ret.id, int(m.group(1))) in edge_of:
                edge = edge_of[(ret.id, int(m.group(1)))]
            # on an op's result: on its one outgoing edge (else a badge)
            if c.reason.startswith("result") and len(out.get(site, [])) == 1:
                edge = out[site][0]
            if edge >= 0:
                edges[edge].setdefault("c", []).append(i)
            explanation = decisions.get(site, []) + remarks.get(site, [])
            rows.append(
                {
                    "index": i,
                    "kind": c.kind,
                    "axes": list(c.axes),
                    "bytes": c.bytes_per_device,
                    "us": round(c.seconds * 1e6, 2),
                    "op": _short_op(c.op),
                    "loc": str(c.loc) if _user(c.loc) else "",
                    "line": _line(c.loc),
                    "reason": c.reason,
                    "node": _site(site, ret),
                    "edge": edge,
                    "explanation": explanation,
                }
            )
        return rows

    def _totals(self) -> dict[str, Any]:
        report = self.inputs.report
        return {
            "count": len(report.collectives),
            "bytes": report.total_bytes,
            "us": round(report.total_seconds * 1e6, 2),
            "counts": report.counts(),
            "issued": report.issued_counts(),
            "combined": [
                {"kind": g.kind, "count": g.count, "bytes": g.bytes}
                for g in report.combined
            ],
            "bound": self.inputs.bound_bytes,
        }

    # -- mesh, arguments and results -----------------------------------------------

    def _mesh(self) -> dict[str, Any]:
        mesh = self.mesh
        ids = list(mesh.logical_device_ids) if mesh.axes else [0]
        procs = self.inputs.processes or {}
        return {
            "name": self.mesh_name,
            "axes": [[a.name, a.size] for a in mesh.axes],
            "devices": ids,
            "processes": [procs.get(d, 0) for d in ids],
        }

    def _grid(self, s: TensorSharding | None, shape: Sequence[int]) -> dict[str, Any]:
        blocks = device_blocks(s, self.mesh, shape)
        key: dict[tuple[int | None, ...], int] = {}
        cells = []
        for b in blocks:
            t = tuple(b)
            key.setdefault(t, len(key))
            cells.append({"block": b, "colour": key[t]})
        return {"cells": cells, "distinct": len(key)}

    # -- memory ----------------------------------------------------------------------

    def _memory(self) -> dict[str, Any]:
        out: dict[str, Any] = {"xla": dict(self.inputs.xla_memory or {})}
        try:
            curve, args, results, peak = _liveness(self.inputs.partitioned_text)
        except Exception as err:  # the chart is optional; say why it is missing
            out["error"] = f"per-device liveness not computed: {err}"
            return out
        out.update(
            {"curve": curve, "arguments": args, "results": results, "peak": peak}
        )
        return out

    # -- provenance ------------------------------------------------------------------

    def _provenance(self) -> None:
        """Where each value's sharding came from, compactly: per value its
        user shardings ("o"), and per dim the latest propagation step ("st":
        dim, axes, op, line, direction and stage (indices into `strings`),
        the source value's row and dim); the page follows the steps back to
        the user sharding. Mapped
        from propagation's graph to the partitioner's by op position."""
        result = self.inputs.propagation
        if result is None:
            return
        mapping = _value_map(result.built.graph, self.graph)
        if mapping is None:
            self.inputs.notes.append(
                "origin paths are missing: the program changed between propagation "
                "and partitioning"
            )
            return
        row_of_slot: dict[int, int] = {}
        for before, slot in result.built.slot_of.items():
            after = mapping.get(before)
            if after is not None and after in self.index and slot not in row_of_slot:
                row_of_slot[slot] = self.index[after]
        p = result.built.problem
        prov = result.provenance
        state = result.state

        def text(t: str) -> int:
            return self.strings.setdefault(t, len(self.strings))

        for o in prov.origins:
            row = row_of_slot.get(o.value)
            if row is not None:
                pr = f" (priority p{o.priority})" if o.priority else ""
                self.values[row].setdefault("o", []).append(o.what + pr)
        latest: dict[tuple[int, int], Any] = {}
        for step in prov.steps:
            latest[(step.value, step.dim)] = step
        for (slot, dim), step in sorted(latest.items()):
            row = row_of_slot.get(slot)
            sh = state[slot] if 0 <= slot < len(state) else None
            if row is None or sh is None:
                continue
            sizes = p.meshes.get(sh.mesh, {})
            source = row_of_slot.get(step.source, -1) if step.source >= 0 else -1
            how = f"{step.direction} [{step.stage}]"
            if source < 0 and step.source >= 0:
                how += f" from {p.names[step.source]}"
            self.values[row].setdefault("st", []).append(
                [
                    dim,
                    describe_axes(step.axes, sizes),
                    text(_short_op(step.op_name)),
                    text(_line(step.loc)),
                    text(how),
                    source,
                    step.source_dim,
                ]
            )
        for c in prov.conflicts:
            sizes = p.meshes.get(state_mesh(state, c.candidates[0][0]), {})
            cands = ", ".join(
                f"{p.names[v]} {describe_axes(a, sizes)}" for v, a in c.candidates
            )
            kept = f": {describe_axes(c.chosen, sizes)}" if c.chosen else ""
            line = (
                f"conflict at {_short_op(c.op_name)} ({c.loc}), factor {c.factor}: "
                f"{cands}; {c.how}{kept} [{c.stage}]"
            )
            for v, _axes in c.candidates:
                row = row_of_slot.get(v)
                if row is not None:
                    self.values[row].setdefault("cf", []).append(text(line))


def _site(site: int, ret: Node | None) -> str:
    if site < 0:
        return ""
    if ret is not None and site == ret.id:
        return "r"
    return f"n{site}"


def _type_text(t: str) -> str:
    return t.replace("tensor<", "").rstrip(">") if t.startswith("tensor<") else t


def _count_nested(g: Graph, node: Node) -> int:
    n = 0
    for region in node.regions:
        for b in region:
            for nid in b.nodes:
                n += 1 + _count_nested(g, g.node(nid))
    return n


def _dicts(value: object) -> list[Mapping[str, object]]:
    if not isinstance(value, tuple):
        return []
    return [v if isinstance(v, Mapping) else {} for v in value]


def _mesh_of(graph: Graph) -> tuple[str, MeshModel] | None:
    for node in graph.walk():
        if node.op == "sdy.mesh":
            mesh_attr, sym = node.attrs.get("mesh"), node.attrs.get("sym_name")
            if isinstance(mesh_attr, Opaque) and isinstance(sym, str):
                mesh = parse_mesh(mesh_attr.text)
                if mesh.axes:
                    return sym, mesh
    return None


def _entry(graph: Graph) -> Node:
    if "main" in graph.symbols:
        return graph.node(graph.symbols["main"])
    public = [
        f for f in graph.funcs() if f.attrs.get("sym_visibility") in (None, "public")
    ]
    if not public:
        raise ReportError("the module has no public function to report on")
    return public[0]


def _value_map(before: Graph, after: Graph) -> dict[int, int] | None:
    """Value ids of `before` -> `after`, when both have the same ops in the
    same order (propagation changes attributes, not ops)."""
    a = list(before.walk())
    b = list(after.walk())
    if len(a) != len(b) or any(x.op != y.op for x, y in zip(a, b, strict=True)):
        return None
    out: dict[int, int] = {}
    for x, y in zip(a, b, strict=True):
        for vx, vy in zip(x.results, y.results, strict=False):
            out[vx] = vy
        for rx, ry in zip(x.regions, y.regions, strict=False):
            for bx, by in zip(rx, ry, strict=False):
                for vx, vy in zip(bx.args, by.args, strict=False):
                    out[vx] = vy
    return out


def _liveness(text: str) -> tuple[list[list[int]], int, int, int]:
    """Per-device bytes live after each op of the partitioned body (program
    order; XLA may reorder, fuse and reuse buffers): (curve, argument bytes,
    result bytes, peak). Arguments stay live throughout (the caller owns
    them); an op with regions counts its results, not its body's temporaries."""
    module = parse_module(text, make_context(), "<partitioned>")
    g = read_graph(module, "<partitioned>")
    manual = next((n for n in g.walk() if n.op == "sdy.manual_computation"), None)
    if manual is None:
        raise ValueError("no sdy.manual_computation body")
    body = manual.regions[0][0]

    def size(vid: int) -> int:
        v = g.value(vid)
        return math.prod(v.shape) * _itemsize(v.dtype) if v.shape is not None else 0

    args = sum(size(a) for a in body.args)
    last: dict[int, int] = {}
    order = list(body.nodes)
    for i, nid in enumerate(order):
        for inner in [g.node(nid), *g.walk(_region_block(g.node(nid)))]:
            for v in inner.operands:
                last[v] = i
    terminator = g.node(order[-1]) if order else None
    returned = set(terminator.operands) if terminator is not None else set()
    results = sum(size(v) for v in returned)
    live = 0
    frees: dict[int, int] = {}
    for v, i in last.items():
        if g.value(v).owner >= 0 and v not in returned:
            frees[i] = frees.get(i, 0) + size(v)
    raw = []
    peak = args
    for i, nid in enumerate(order):
        node = g.node(nid)
        live += sum(size(r) for r in node.results)
        peak = max(peak, args + live)
        raw.append(args + live)
        live -= frees.get(i, 0)
        for r in node.results:  # results nobody uses die at once
            if r not in last and r not in returned:
                live -= size(r)
    step = max(1, -(-len(raw) // _CURVE_POINTS))
    curve = [[i, max(raw[i : i + step])] for i in range(0, len(raw), step)]
    return curve, args, results, peak


def _region_block(node: Node) -> Block:
    """A block holding the node's region bodies' ops (for Graph.walk)."""
    nodes: list[int] = []
    for region in node.regions:
        for b in region:
            nodes.extend(b.nodes)
    return Block((), tuple(nodes))
