"""Shardings in the exact form Shardy's export leaves them (the work of the
export-shardings pass, compiled by `meshjit-native build`).

Func inputs and outputs are made evenly divisible (a dim keeps only the major
axes that divide it) and lose sub-axes, as Shardy's export does for the
boundary of the program. With `close` (what `propagation-pipeline` runs, like
Shardy's propagation pipeline) every dim is closed and explicitly replicated
axes are dropped; without it open dims keep their `?`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from math import gcd

from meshjit.compiler.diagnostics import Diagnostics, SourceLoc
from meshjit.compiler.graph import AttrPlan, Graph, Opaque
from meshjit.dialects.sdy_text import (
    parse_mesh,
    parse_sharding,
    parse_sharding_per_value,
)
from meshjit.errors import ShardingError
from meshjit.passes.propagation.axes import Ax
from meshjit.passes.propagation.build import SHARDING, sh_text, to_sh
from meshjit.passes.propagation.core import Sh


def even_boundary(
    sh: Sh,
    shape: tuple[int, ...],
    sizes: Mapping[str, int],
    keep_sub_axes: bool = False,
) -> Sh:
    """Keeps per dim the major axes whose product divides it; an open dim of
    a public function also stops at its first sub-axis (Shardy's
    update-non-divisible-input-output-shardings and
    remove-sub-axes-in-input-output-shardings; a private callee keeps its
    sub-axes, so that its body is partitioned like its call sites)."""
    dims: list[tuple[Ax, ...]] = []
    for size, axes, closed in zip(shape, sh.dims, sh.closed, strict=True):
        left = size
        kept: list[Ax] = []
        for a in axes:
            sub = a[1] != 1 or a[2] != sizes.get(a[0], a[2])
            if (sub and not closed and not keep_sub_axes) or gcd(left, a[2]) != a[2]:
                break
            kept.append(a)
            left //= a[2]
        dims.append(tuple(kept))
    return Sh(sh.mesh, tuple(dims), sh.closed, sh.replicated, sh.unreduced)


def _warn_dropped(
    sh: Sh,
    shape: tuple[int, ...],
    sizes: Mapping[str, int],
    keep_sub_axes: bool,
    what: str,
    loc: SourceLoc,
    diags: Diagnostics,
) -> None:
    """A closed dim of a function's boundary (a layout someone fixed, not one
    propagation suggested) loses axes that do not divide it: say so."""
    even = even_boundary(sh, shape, sizes, keep_sub_axes)
    for d, (kept, had, closed) in enumerate(
        zip(even.dims, sh.dims, sh.closed, strict=True)
    ):
        if closed and kept != had:
            dropped = ", ".join(
                f'"{a[0]}"' if a[2] == sizes.get(a[0]) else f'"{a[0]}":({a[1]}){a[2]}'
                for a in had[len(kept) :]
            )
            diags.warning(
                loc,
                f"{what}: dim {d} has size {shape[d]}, which mesh axes {{{dropped}}} "
                f"do not divide; the program's boundary keeps only the axes that "
                f"divide it (its per-device blocks must be equal)",
            )


class Exporter:
    """Converts a graph's shardings to the exported form."""

    def __init__(self, close_shardings: bool, even_callees: bool = True) -> None:
        self.close_shardings = close_shardings
        self.even_callees = even_callees

    def plan(self, graph: Graph, diags: Diagnostics) -> AttrPlan:
        """What to write: each sharding in its exported form."""
        meshes: dict[str, dict[str, int]] = {}
        for nid in graph.body.nodes:
            node = graph.node(nid)
            text = node.attr("mesh")
            name = node.attr("sym_name")
            if (
                node.op == "sdy.mesh"
                and isinstance(text, Opaque)
                and isinstance(name, str)
            ):
                meshes[name] = {a.name: a.size for a in parse_mesh(text.text).axes}
        plan = AttrPlan()

        def convert(
            text: str,
            loc: SourceLoc,
            boundary: tuple[int, ...] | None,
            keep_sub_axes: bool = False,
            what: str = "",
        ) -> str | None:
            try:
                ts = parse_sharding(text)
            except ShardingError as err:
                diags.error(loc, f"bad sharding: {err}")
                return None
            sizes = meshes.get(ts.mesh_name)
            if sizes is None:
                diags.error(loc, f"sharding names unknown mesh @{ts.mesh_name}")
                return None
            sh = to_sh(ts, sizes)
            if ts.rank == 0:
                boundary = None  # a maximal sharding: any rank, nothing to even
            if boundary is not None:
                _warn_dropped(sh, boundary, sizes, keep_sub_axes, what, loc, diags)
            return self._body(sh, sizes, boundary, keep_sub_axes)

        for func in graph.funcs():
            block = func.regions[0][0] if func.regions and func.regions[0] else None
            if block is None:
                continue
            types = [graph.value(v).shape for v in block.args]
            fid = func.id
            private = func.attr("sym_visibility") == "private"
            even = not private or self.even_callees

            def put_convert(
                text: str,
                loc: SourceLoc,
                shape: tuple[int, ...] | None,
                what: str,
                private: bool = private,
                even: bool = even,
            ) -> str | None:
                return convert(text, loc, shape if even else None, private, what)

            def put_arg(i: int, t: str, fid: int = fid) -> None:
                plan.set_arg(fid, i, SHARDING, t)

            def put_result(i: int, t: str, fid: int = fid) -> None:
                plan.set_result(fid, i, SHARDING, t)

            name = func.attr("sym_name")
            self._boundary(
                func.attr("arg_attrs"),
                types,
                func.loc,
                put_convert,
                put_arg,
                f"argument {{}} of @{name}",
            )
            ret = [
                graph.node(n) for n in block.nodes if graph.node(n).op == "func.return"
            ]
            rtypes = [graph.value(v).shape for v in ret[0].operands] if ret else []
            self._boundary(
                func.attr("res_attrs"),
                rtypes,
                func.loc,
                put_convert,
                put_result,
                f"result {{}} of @{name}",
            )
        seen: dict[str, str] = {}
        for node in graph.walk():
            if node.op in ("sdy.sharding_constraint", "sdy.reshard"):
                text = node.attr("sharding")
                if isinstance(text, Opaque):
                    body = convert(text.text, node.loc, None)
                    if body is not None:
                        plan.set_op(node.id, "sharding", "#sdy.sharding" + body)
                continue
            names = (
                ("in_shardings", "out_shardings")
                if node.op == "sdy.manual_computation"
                else (SHARDING,)
            )
            for name in names:
                per_value = node.attr(name)
                if not isinstance(per_value, Opaque):
                    continue
                # Shardings repeat across a module (layers): convert each
                # distinct text once.
                exported = seen.get(per_value.text)
                if exported is None:
                    try:
                        shardings = parse_sharding_per_value(per_value.text)
                    except ShardingError as err:
                        diags.error(node.loc, f"bad {name}: {err}")
                        continue
                    bodies = []
                    for ts in shardings:
                        sizes = meshes.get(ts.mesh_name, {})
                        bodies.append(self._body(to_sh(ts, sizes), sizes, None))
                    exported = "#sdy.sharding_per_value<[" + ", ".join(bodies) + "]>"
                    seen[per_value.text] = exported
                if exported != per_value.text:
                    plan.set_op(node.id, name, exported)
        return plan

    def _body(
        self,
        sh: Sh,
        sizes: Mapping[str, int],
        boundary: tuple[int, ...] | None,
        keep_sub_axes: bool = False,
    ) -> str:
        if boundary is not None:
            sh = even_boundary(sh, boundary, sizes, keep_sub_axes)
        return sh_text(sh, sizes, closed=self.close_shardings)

    def _boundary(
        self,
        entries: object,
        shapes: list[tuple[int, ...] | None],
        loc: SourceLoc,
        convert: Callable[[str, SourceLoc, tuple[int, ...] | None, str], str | None],
        put: Callable[[int, str], None],
        what: str,
    ) -> None:
        if not isinstance(entries, tuple):
            return
        for i, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                continue
            text = entry.get(SHARDING)
            shape = shapes[i] if i < len(shapes) else None
            if not isinstance(text, Opaque) or shape is None:
                continue
            body = convert(text.text, loc, shape, what.format(i))
            if body is not None:
                put(i, "#sdy.sharding" + body)
