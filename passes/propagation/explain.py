"""Provenance as records and as the text `meshjit-opt --explain` prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from meshjit.compiler.diagnostics import SourceLoc
from meshjit.passes.propagation.build import Built, describe_axes, sh_text
from meshjit.passes.propagation.core import Conflict, Origin, Provenance, Sh, Step

_MAX_CHAIN = 24


@dataclass(frozen=True, slots=True)
class ExplainRecord:
    """One value: its final sharding, where its user sharding came from, and
    for each dim the chain of steps that brought its axes."""

    value: str  # "argument 1 of @main"
    sharding: str  # `<@mesh, [{"x", ?}, {?}]>`
    origins: tuple[Origin, ...]
    chains: tuple[tuple[int, tuple[Step, ...]], ...]  # (dim, steps, latest first)
    conflicts: tuple[Conflict, ...]


def explain_records(
    built: Built, state: Sequence[Sh | None], prov: Provenance
) -> list[ExplainRecord]:
    p = built.problem
    by_value: dict[tuple[int, int], list[Step]] = {}
    for s in prov.steps:
        by_value.setdefault((s.value, s.dim), []).append(s)
    origins: dict[int, list[Origin]] = {}
    for o in prov.origins:
        origins.setdefault(o.value, []).append(o)
    conflicts: dict[int, list[Conflict]] = {}
    for c in prov.conflicts:
        for v, _axes in c.candidates:
            conflicts.setdefault(v, []).append(c)
    records = []
    for slot, sh in enumerate(state):
        if sh is None:
            continue
        chains = []
        for d in range(len(sh.dims)):
            if not sh.dims[d]:
                continue
            steps: list[Step] = []
            seen: set[tuple[int, int]] = set()
            key = (slot, d)
            while key in by_value and key not in seen and len(steps) < _MAX_CHAIN:
                seen.add(key)
                step = by_value[key][-1]
                steps.append(step)
                if step.source < 0 or step.source_dim < 0:
                    break
                key = (step.source, step.source_dim)
            chains.append((d, tuple(steps)))
        records.append(
            ExplainRecord(
                p.names[slot],
                sh_text(sh, p.meshes.get(sh.mesh, {})),
                tuple(origins.get(slot, ())),
                tuple(chains),
                tuple(conflicts.get(slot, ())),
            )
        )
    return records


def _loc(loc: SourceLoc) -> str:
    return str(loc) if loc.known else "<unknown location>"


def explain_text(built: Built, state: Sequence[Sh | None], prov: Provenance) -> str:
    p = built.problem
    lines = ["// propagate: why each value is sharded so"]
    origin_name = {o.value: o for o in prov.origins}
    for rec in explain_records(built, state, prov):
        lines.append(f"{rec.value}: {rec.sharding}")
        for o in rec.origins:
            pr = f" (priority p{o.priority})" if o.priority else ""
            lines.append(f"  from user sharding: {o.what}{pr}")
        for d, steps in rec.chains:
            if not steps:
                continue
            sizes = p.meshes.get(state_mesh(state, steps[0].value), {})
            first = steps[0]
            lines.append(f"  dim {d} {describe_axes(first.axes, sizes)}:")
            for s in steps:
                src = p.names[s.source] if s.source >= 0 else "?"
                lines.append(
                    f"    <- {s.direction} through {s.op_name} at {_loc(s.loc)} "
                    f"from {src} [{s.stage}]"
                )
                if s.source in origin_name and s is steps[-1]:
                    o = origin_name[s.source]
                    lines.append(f"       {src} has the user sharding of {o.what}")
        for c in rec.conflicts:
            sizes = p.meshes.get(state_mesh(state, c.candidates[0][0]), {})
            cands = ", ".join(
                f"{p.names[v]} {describe_axes(a, sizes)}" for v, a in c.candidates
            )
            kept = f": {describe_axes(c.chosen, sizes)}" if c.chosen else ""
            lines.append(
                f"  conflict at {c.op_name} ({_loc(c.loc)}), factor {c.factor}: "
                f"{cands}; {c.how}{kept} [{c.stage}]"
            )
    return "\n".join(lines) + "\n"


def state_mesh(state: Sequence[Sh | None], slot: int) -> str:
    sh = state[slot] if 0 <= slot < len(state) else None
    return sh.mesh if sh is not None else ""
