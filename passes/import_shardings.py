"""Read and check the shardings of a module before propagation.

Checks every `sdy.sharding` on func arguments and results and on ops, every
`sdy.sharding_constraint`/`sdy.reshard`: the mesh exists, each axis is on it and
used once, sub-axes fit, each sharded dim divides, priorities are well formed.
Errors name the value, dim and axis at the op's `file:line:col`.

GSPMD `mhlo.sharding` strings (older JAX, XLA) are converted to Shardy's form
first: on func arguments and results they become `sdy.sharding`, and
`stablehlo.custom_call @Sharding` becomes `sdy.sharding_constraint`. They are
expressed on the module's `sdy.mesh` when it has one, otherwise on a mesh
`@mesh` built from the first tiled sharding (one axis per tiling factor).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from meshjit.compiler.diagnostics import UNKNOWN_LOC, Diagnostics, SourceLoc
from meshjit.compiler.graph import (
    AttrPlan,
    Graph,
    Node,
    Opaque,
    read_graph,
    write_attrs,
)
from meshjit.compiler.ir import ir, print_module, replace_module
from meshjit.compiler.pass_base import ModulePass
from meshjit.dialects.gspmd_text import (
    HloKind,
    mesh_and_sharding_from_hlo,
    parse_hlo_sharding,
    tensor_sharding_from_hlo,
)
from meshjit.dialects.sdy_text import parse_mesh, print_mesh_op, print_sharding
from meshjit.dialects.sharding import MeshModel
from meshjit.errors import ShardingError
from meshjit.passes.propagation.build import build_problem

_GSPMD = "mhlo.sharding"
_SDY = "sdy.sharding"
_MESH_NAME = "mesh"
# `%1 = stablehlo.custom_call @Sharding(%0) {...} : (tensor<..>) -> tensor<..>`
_SHARDING_CALL = re.compile(
    r"^(?P<lhs>\s*%[\w.#:-]+ = )stablehlo\.custom_call @Sharding\((?P<arg>%[\w.#-]+)\)"
    r" \{(?P<attrs>.*)\} : \((?P<in>tensor<[^>]*>)\) -> (?P<out>tensor<[^>]*>)"
    r"(?P<loc> loc\(.*\))?$"
)
_HLO_ATTR = re.compile(r'mhlo\.sharding = "((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True)
class _Site:
    """One GSPMD string: where it is and the rank of the value it shards."""

    text: str
    rank: int
    what: str
    loc: SourceLoc


@dataclass(frozen=True)
class ImportShardingsPass(ModulePass):
    """Check sdy meshes and shardings; convert GSPMD `mhlo.sharding` to sdy."""

    name: ClassVar[str] = "import-shardings"

    def run(self, module: ir.Module, diags: Diagnostics) -> None:
        graph = read_graph(module, diags.source_name)
        if _has_inline_mesh(graph):
            _lift_inline_meshes(module, graph, diags.source_name)
            graph = read_graph(module, diags.source_name)
        if _gspmd_sites(graph):
            if not _convert_gspmd(module, graph, diags):
                return
            graph = read_graph(module, diags.source_name)
        build_problem(graph, diags)


# A mesh written inside a sharding: `#sdy.sharding<mesh<["a"=2]>, [...]>`.
_INLINE_MESH = re.compile(r"<(mesh<\[[^\]]*\](?:, device_ids=\[[^\]]*\])?>),")


def _has_opaque(value: object, needle: str) -> bool:
    if isinstance(value, Opaque):
        return needle in value.text
    if isinstance(value, tuple):
        return any(_has_opaque(v, needle) for v in value)
    if isinstance(value, Mapping):
        return any(_has_opaque(v, needle) for v in value.values())
    return False


def _has_inline_mesh(graph: Graph) -> bool:
    """Whether a sharding attribute writes its mesh inline (only attributes
    that can hold a sharding are looked at: shardings, func arg/res attrs)."""
    return any(
        _has_opaque(v, "<mesh<")
        for node in graph.nodes
        for k, v in node.attrs.items()
        if "sharding" in k or k.endswith("_attrs")
    )


def _lift_inline_meshes(module: ir.Module, graph: Graph, source_name: str) -> None:
    """Shardings that write their mesh inline name a module-level `sdy.mesh`
    instead, as Shardy's import does: one with the same definition where the
    module has it, else a new one (`@mesh`, or `@mesh_N` where that is
    taken)."""
    defined: dict[MeshModel, str] = {}
    taken: set[str] = set()
    for node in graph.walk():
        sym, body = node.attrs.get("sym_name"), node.attrs.get("mesh")
        if node.op == "sdy.mesh" and isinstance(sym, str) and isinstance(body, Opaque):
            defined.setdefault(parse_mesh(body.text), sym)
            taken.add(sym)
    text = print_module(module, debug_info=True)
    added: list[str] = []

    def name_of(match: re.Match[str]) -> str:
        mesh = parse_mesh(match.group(1)[len("mesh") :])
        name = defined.get(mesh)
        if name is None:
            name, n = _MESH_NAME, 0
            while name in taken:
                name, n = f"{_MESH_NAME}_{n}", n + 1
            defined[mesh] = name
            taken.add(name)
            added.append("  " + print_mesh_op(name, mesh))
        return f"<@{name},"

    text = _INLINE_MESH.sub(name_of, text)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("module"):
            lines[i + 1 : i + 1] = added
            break
    replace_module(module, "\n".join(lines) + "\n", source_name)


def _func_block_args(graph: Graph, func: Node) -> tuple[int, ...]:
    block = func.regions[0][0] if func.regions and func.regions[0] else None
    return block.args if block is not None else ()


def _returned(graph: Graph, func: Node) -> tuple[int, ...]:
    block = func.regions[0][0] if func.regions and func.regions[0] else None
    if block is None:
        return ()
    for nid in block.nodes:
        node = graph.node(nid)
        if node.op == "func.return":
            return node.operands
    return ()


def _entry_text(entries: object, index: int) -> str | None:
    if not isinstance(entries, tuple) or index >= len(entries):
        return None
    entry = entries[index]
    if not isinstance(entry, Mapping):
        return None
    value = entry.get(_GSPMD)
    return value if isinstance(value, str) else None


def _rank(graph: Graph, vid: int) -> int:
    shape = graph.value(vid).shape
    return len(shape) if shape is not None else 0


def _gspmd_sites(graph: Graph) -> list[_Site]:
    sites: list[_Site] = []
    for func in graph.funcs():
        name = func.attr("sym_name")
        for key, values in (
            ("arg_attrs", _func_block_args(graph, func)),
            ("res_attrs", _returned(graph, func)),
        ):
            for i, vid in enumerate(values):
                text = _entry_text(func.attr(key), i)
                if text is not None:
                    kind = "argument" if key == "arg_attrs" else "result"
                    what = f"{kind} {i} of @{name}"
                    sites.append(_Site(text, _rank(graph, vid), what, func.loc))
    for node in graph.walk():
        hlo = node.attr(_GSPMD)
        if node.op == "stablehlo.custom_call" and isinstance(hlo, str):
            what = f"stablehlo.custom_call @{node.attr('call_target_name')}"
            rank = _rank(graph, node.results[0]) if node.results else 0
            sites.append(_Site(hlo, rank, what, node.loc))
    return sites


def _module_mesh(graph: Graph) -> tuple[str, MeshModel] | None:
    for nid in graph.body.nodes:
        node = graph.node(nid)
        text = node.attr("mesh")
        name = node.attr("sym_name")
        if node.op == "sdy.mesh" and isinstance(text, Opaque) and isinstance(name, str):
            return name, parse_mesh(text.text)
    return None


def _convert_gspmd(module: ir.Module, graph: Graph, diags: Diagnostics) -> bool:
    """Rewrites every GSPMD string as sdy; False (with an error) if one can't be."""
    sites = _gspmd_sites(graph)
    found = _module_mesh(graph)
    new_mesh: MeshModel | None = None
    if found is None:
        partitions = graph.module_attrs.get("mhlo.num_partitions")
        for site in sites:
            try:
                hlo = parse_hlo_sharding(site.text)
            except ShardingError as err:
                diags.error(site.loc, f"bad mhlo.sharding on {site.what}: {err}")
                return False
            if hlo.kind is HloKind.TILED and not hlo.is_fully_replicated():
                count = partitions if isinstance(partitions, int) else len(hlo.devices)
                try:
                    new_mesh, _ = mesh_and_sharding_from_hlo(
                        hlo, site.rank, count, _MESH_NAME
                    )
                except ShardingError as err:
                    diags.error(site.loc, f"mhlo.sharding on {site.what}: {err}")
                    return False
                break
        if new_mesh is None:
            count = partitions if isinstance(partitions, int) else 1
            new_mesh, _ = mesh_and_sharding_from_hlo(
                parse_hlo_sharding("{replicated}"), 0, count, _MESH_NAME
            )
        _add_mesh(module, new_mesh, diags.source_name)
        graph = read_graph(module, diags.source_name)
        found = (_MESH_NAME, new_mesh)
    mesh_name, mesh = found

    def convert(text: str, rank: int, what: str, loc: SourceLoc) -> str | None:
        try:
            hlo = parse_hlo_sharding(text)
            return print_sharding(tensor_sharding_from_hlo(hlo, mesh, mesh_name, rank))
        except ShardingError as err:
            diags.error(
                loc,
                f"cannot express mhlo.sharding {text!r} on {what} over "
                f"mesh @{mesh_name}: {err}",
            )
            return None

    plan = AttrPlan()
    for func in graph.funcs():
        name = func.attr("sym_name")
        for key, values in (
            ("arg_attrs", _func_block_args(graph, func)),
            ("res_attrs", _returned(graph, func)),
        ):
            for i, vid in enumerate(values):
                text = _entry_text(func.attr(key), i)
                if text is None:
                    continue
                kind = "argument" if key == "arg_attrs" else "result"
                sdy = convert(
                    text, _rank(graph, vid), f"{kind} {i} of @{name}", func.loc
                )
                if sdy is None:
                    return False
                put = plan.set_arg if key == "arg_attrs" else plan.set_result
                put(func.id, i, _SDY, sdy)
                put(func.id, i, _GSPMD, None)
    write_attrs(module, plan)
    calls = [
        n
        for n in graph.walk()
        if n.op == "stablehlo.custom_call" and isinstance(n.attr(_GSPMD), str)
    ]
    if not calls:
        return True
    return _rewrite_calls(module, graph, calls, convert, diags)


def _add_mesh(module: ir.Module, mesh: MeshModel, source_name: str) -> None:
    lines = print_module(module, debug_info=True).splitlines()
    for i, line in enumerate(lines):
        if line.startswith("module"):
            lines.insert(i + 1, "  " + print_mesh_op(_MESH_NAME, mesh))
            break
    replace_module(module, "\n".join(lines) + "\n", source_name)


_Convert = Callable[[str, int, str, SourceLoc], str | None]


def _rewrite_calls(
    module: ir.Module,
    graph: Graph,
    calls: list[Node],
    convert: _Convert,
    diags: Diagnostics,
) -> bool:
    """Turns `@Sharding` custom calls into sharding constraints.

    The printed module lists the calls in the graph's (pre-)order, so the k-th
    `@Sharding` line is `calls[k]`.
    """
    lines = print_module(module, debug_info=True).splitlines()
    out: list[str] = []
    k = 0
    for line in lines:
        if "stablehlo.custom_call @Sharding(" not in line:
            out.append(line)
            continue
        node = calls[k] if k < len(calls) else None
        k += 1
        m = _SHARDING_CALL.match(line)
        hlo = _HLO_ATTR.search(m.group("attrs")) if m else None
        if node is None or m is None or hlo is None or m.group("in") != m.group("out"):
            diags.error(
                node.loc if node is not None else UNKNOWN_LOC,
                "cannot convert this stablehlo.custom_call @Sharding to "
                "sdy.sharding_constraint: expected one operand, one result of the "
                "same type and an mhlo.sharding attribute",
            )
            return False
        rank = _rank(graph, node.results[0])
        sdy = convert(hlo.group(1), rank, "stablehlo.custom_call @Sharding", node.loc)
        if sdy is None:
            return False
        body = sdy[len("#sdy.sharding") :]
        out.append(
            f"{m.group('lhs')}sdy.sharding_constraint {m.group('arg')} {body} : "
            f"{m.group('out')}{m.group('loc') or ''}"
        )
    replace_module(module, "\n".join(out) + "\n", diags.source_name)
    return True
