"""What the partitioner tells its users: the collectives it inserted, its
remarks (what runs replicated and why), and the errors that stop it."""

from __future__ import annotations

from dataclasses import dataclass, field

from meshjit.compiler.diagnostics import SourceLoc
from meshjit.passes.partitioner.combine import Combined


class PartitionFailure(Exception):
    """Input the partitioner cannot handle, with where it is."""

    def __init__(self, loc: SourceLoc, message: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message


@dataclass(frozen=True, slots=True)
class Collective:
    """One collective the partitioner inserted, and why."""

    kind: str  # "all-gather", "all-reduce", ...
    axes: tuple[str, ...]  # as Shardy prints them: '"x"', '"y":(2)2'
    bytes_per_device: int
    op: str  # the op that needed it
    loc: SourceLoc
    reason: str  # "operand 0: [{"x"}, {}] -> [{}, {}]"
    seconds: float = 0.0  # the cost model's estimate
    # The op of @main's body being partitioned when it was inserted (a node id
    # of the partitioner's input graph; -1 when unknown): where the HTML report
    # draws it.
    site: int = -1


@dataclass(frozen=True, slots=True)
class Remark:
    loc: SourceLoc
    message: str
    site: int = -1  # as Collective.site


@dataclass(frozen=True, slots=True)
class Decision:
    """How an op was split: the chosen plan and the best one it beat, with
    the cost model's estimates (seconds: compute share + collectives)."""

    op: str
    loc: SourceLoc
    chosen: str  # "[{"x"}, {}] x [{}, {}] -> [{"x"}, {}]"
    seconds: float
    other: str  # "" when there was no other candidate
    other_seconds: float
    site: int = -1  # as Collective.site

    def text(self) -> str:
        line = f"{self.loc}: remark: {self.op} split as {self.chosen} (estimated "
        line += f"{self.seconds * 1e6:.1f} us)"
        if self.other:
            line += f" rather than {self.other} ({self.other_seconds * 1e6:.1f} us)"
        return line + "\n"


@dataclass(slots=True)
class PartitionReport:
    collectives: list[Collective] = field(default_factory=list)
    remarks: list[Remark] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    # Independent collectives written as one after partitioning (combine.py).
    combined: list[Combined] = field(default_factory=list)
    # A shard_map body's own collectives (the program's psums, ppermutes, ...),
    # as they run on local blocks: not inserted by partition, so not in
    # `collectives`; the bench counts them on both sides.
    own: list[Collective] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(c.bytes_per_device for c in self.collectives)

    @property
    def total_seconds(self) -> float:
        return sum(c.seconds for c in self.collectives)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.collectives:
            out[c.kind] = out.get(c.kind, 0) + 1
        return out

    def collectives_text(self) -> str:
        lines = ["collectives inserted by partition (bytes sent per device):"]
        for c in self.collectives:
            axes = ",".join(c.axes)
            lines.append(
                f"  {c.kind:<15} axes {{{axes}}} {c.bytes_per_device:>10} B "
                f"{c.seconds * 1e6:>8.1f} us  {c.op} at {c.loc}: {c.reason}"
            )
        counts = ", ".join(f"{k} x{v}" for k, v in sorted(self.counts().items()))
        lines.append(
            f"  total: {len(self.collectives)} collectives ({counts or 'none'}), "
            f"{self.total_bytes} B per device, estimated "
            f"{self.total_seconds * 1e6:.1f} us"
        )
        for g in self.combined:
            lines.append(
                f"  combined: {g.count} independent {g.kind} ops into one "
                f"({g.bytes} B operand per device)"
            )
        for c in self.own:
            axes = ",".join(c.axes)
            lines.append(
                f"  program's own: {c.kind:<15} axes {{{axes}}} "
                f"{c.bytes_per_device:>10} B {c.seconds * 1e6:>8.1f} us  {c.op} at "
                f"{c.loc} (a shard_map body's, as written)"
            )
        if self.combined:
            issued = ", ".join(
                f"{k} x{v}" for k, v in sorted(self.issued_counts().items())
            )
            own = " (the program's own included)" if self.own else ""
            lines.append(f"  issued after combining{own}: {issued}")
        return "\n".join(lines) + "\n"

    def issued_counts(self) -> dict[str, int]:
        """Collectives in the program as written: the partitioner's (as
        `counts`) and a shard_map body's own, a combined group counted once
        (combining merges either kind: two independent psums of a body are
        one all-reduce)."""
        out = self.counts()
        for c in self.own:
            out[c.kind] = out.get(c.kind, 0) + 1
        for g in self.combined:
            out[g.kind] = out.get(g.kind, 0) - g.count + 1
        return {k: v for k, v in out.items() if v > 0}

    def remarks_text(self) -> str:
        return "".join(f"{r.loc}: remark: {r.message}\n" for r in self.remarks)

    def decisions_text(self) -> str:
        return "".join(d.text() for d in self.decisions)
