"""Source locations and diagnostics in the `file:line:col: error: message` form."""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from meshjit.errors import MeshjitError


class SourceLoc(NamedTuple):
    """Where an op or value came from: a file position, optionally with a name.

    JAX records `loc("jit(f)/dot_general"("model.py":17:9))`; the name is the
    op's JAX name and the file position is the user's line. (A named tuple:
    the graph reader makes one per op.)
    """

    file: str = ""
    line: int = 0
    col: int = 0
    name: str = ""

    @property
    def known(self) -> bool:
        return bool(self.file)

    def __str__(self) -> str:
        if not self.file:
            return "<unknown>"
        return f"{self.file}:{self.line}:{self.col}"


UNKNOWN_LOC = SourceLoc()

_FILE_POS = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')
_NAME = re.compile(r'^loc\("((?:[^"\\]|\\.)*)"\(')


def parse_loc_text(text: str, source_name: str = "") -> SourceLoc:
    """Reads the printed form of an MLIR location (`loc(...)`) into a SourceLoc.

    Call-site and fused locations give their first file position: for JAX
    output that is the user's own line. `"-"` (a buffer parsed from a string)
    becomes `source_name` when one is given.
    """
    name_match = _NAME.match(text)
    name = name_match.group(1) if name_match else ""
    pos = _FILE_POS.search(text)
    if pos is None:
        return SourceLoc(name=name)
    file = pos.group(1)
    if file == "-" and source_name:
        file = source_name
    return SourceLoc(file, int(pos.group(2)), int(pos.group(3)), name)


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    REMARK = "remark"
    NOTE = "note"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    severity: Severity
    loc: SourceLoc
    message: str

    def __str__(self) -> str:
        where = f"{self.loc}: " if self.loc.known else ""
        return f"{where}{self.severity.value}: {self.message}"


class DiagnosticError(MeshjitError):
    """Raised to stop a pass or the pipeline once an error has been reported."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        super().__init__("\n".join(str(d) for d in diagnostics))


@dataclass(slots=True)
class Diagnostics:
    """Collects what passes report. Errors stop the pipeline after the pass."""

    items: list[Diagnostic] = field(default_factory=list)
    source_name: str = "-"  # the input file, for `read_graph(module, source_name)`
    requested: frozenset[str] = frozenset()  # reports asked for: "explain", ...
    reports: list[tuple[str, str]] = field(default_factory=list)  # (kind, text)
    # Structured results a pass leaves for Python callers (e.g. "partition" ->
    # PartitionReport), whether or not a text report was asked for.
    payloads: dict[str, object] = field(default_factory=dict)
    # Warnings that `meshjit.jit` passes on to its caller as Python warnings
    # (the rest concern the module as a compiler developer reads it).
    user_warnings: list[str] = field(default_factory=list)
    _warned_once: set[str] = field(default_factory=set)

    def wants(self, report: str) -> bool:
        """Whether the user asked for this report (`meshjit-opt --explain`)."""
        return report in self.requested

    def report(self, kind: str, text: str) -> None:
        """Adds a report (e.g. the propagation explanation) for the caller to print."""
        self.reports.append((kind, text))

    def error(self, loc: SourceLoc, message: str) -> None:
        self.items.append(Diagnostic(Severity.ERROR, loc, message))

    def warning(self, loc: SourceLoc, message: str) -> None:
        self.items.append(Diagnostic(Severity.WARNING, loc, message))

    def user_warning(self, loc: SourceLoc, message: str) -> None:
        """A warning that `meshjit.jit`'s caller hears too."""
        self.warning(loc, message)
        self.user_warnings.append(message)

    def warning_once(self, key: str, loc: SourceLoc, message: str) -> None:
        """A warning reported once per key (e.g. once per unknown op name)."""
        if key in self._warned_once:
            return
        self._warned_once.add(key)
        self.warning(loc, message)

    @property
    def warned_keys(self) -> frozenset[str]:
        return frozenset(self._warned_once)

    def replay(self, items: Sequence[Diagnostic], warned_keys: Iterable[str]) -> None:
        """Reports again what an earlier run of the same work reported (once)."""
        for d in items:
            if d not in self.items:
                self.items.append(d)
        self._warned_once.update(warned_keys)

    def remark(self, loc: SourceLoc, message: str) -> None:
        self.items.append(Diagnostic(Severity.REMARK, loc, message))

    def fail(self, loc: SourceLoc, message: str) -> DiagnosticError:
        """Reports an error and returns the exception that stops the pass."""
        self.error(loc, message)
        return DiagnosticError(self.errors)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity is Severity.ERROR]

    @property
    def has_errors(self) -> bool:
        return any(d.severity is Severity.ERROR for d in self.items)

    def raise_if_errors(self) -> None:
        if self.has_errors:
            raise DiagnosticError(self.errors)
