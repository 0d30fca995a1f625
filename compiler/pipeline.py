"""Pipeline text, and running a pipeline over a module with instrumentation.

Text follows mlir-opt: `inline,propagate{strategy=basic max-iters=8},partition`,
optionally wrapped in `builtin.module(...)`. An entry is a meshjit pass, a
registered pipeline alias, or an upstream MLIR pass jaxlib registers
(`canonicalize`, `cse`, `func.func(canonicalize)`, ...).
"""

from __future__ import annotations

import gc
import os
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import TextIO

from meshjit.compiler.diagnostics import (
    Diagnostic,
    DiagnosticError,
    Diagnostics,
    SourceLoc,
)
from meshjit.compiler.graph import graph_session, invalidate_graphs
from meshjit.compiler.ir import (
    diagnostics_from_mlir_error,
    ir,
    passmanager,
    print_module,
    verify_module,
)
from meshjit.compiler.pass_base import ModulePass
from meshjit.compiler.registry import (
    UPSTREAM_PASSES,
    pass_classes,
    pipeline_aliases,
)
from meshjit.errors import InternalError, MeshjitError, PipelineError

# Shardy's own propagation and partitioning are references for tests and
# benchmarks only; the product pipeline never runs them.
_REFERENCE_ONLY_PREFIX = "sdy-"


@dataclass(frozen=True, slots=True)
class UpstreamPass:
    """An MLIR pass run by jaxlib's pass manager, by its pipeline text."""

    text: str

    @property
    def name(self) -> str:
        return self.text.split("{", 1)[0].split("(", 1)[0]


Stage = ModulePass | UpstreamPass


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str
    options: str | None  # text inside {...}
    nested: str | None  # text inside (...)
    pos: int


def _split_top_level(text: str, sep: str, start: int = 0) -> list[tuple[str, int]]:
    """Splits on `sep` outside braces/parentheses/quotes; keeps each piece's offset."""
    pieces: list[tuple[str, int]] = []
    depth = 0
    quote = False
    begin = 0
    for i, ch in enumerate(text):
        if ch == '"':
            quote = not quote
        elif quote:
            continue
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
            if depth < 0:
                raise PipelineError(
                    f"unbalanced '{ch}' at column {start + i + 1} of pipeline"
                )
        elif ch == sep and depth == 0:
            pieces.append((text[begin:i], start + begin))
            begin = i + 1
    if depth != 0 or quote:
        raise PipelineError("unbalanced brackets or quotes in pipeline")
    pieces.append((text[begin:], start + begin))
    return pieces


def _parse_entry(piece: str, pos: int) -> _Entry:
    stripped = piece.strip()
    if not stripped:
        raise PipelineError(f"empty pass name at column {pos + 1} of pipeline")
    name_end = len(stripped)
    for i, ch in enumerate(stripped):
        if ch in "{(":
            name_end = i
            break
    name = stripped[:name_end].strip()
    rest = stripped[name_end:]
    options = nested = None
    if rest.startswith("{"):
        if not rest.endswith("}"):
            raise PipelineError(f"expected '}}' after the options of '{name}'")
        options = rest[1:-1]
    elif rest.startswith("("):
        if not rest.endswith(")"):
            raise PipelineError(f"expected ')' after the nested pipeline of '{name}'")
        nested = rest[1:-1]
    if not name or any(c.isspace() for c in name):
        raise PipelineError(f"bad pass name '{name}' at column {pos + 1} of pipeline")
    return _Entry(name, options, nested, pos)


def _parse_options(text: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for item, _ in _split_top_level(text.strip(), " "):
        item = item.strip()
        if not item:
            continue
        key, eq, value = item.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        options[key.strip()] = value if eq else "true"
    return options


def _upstream_known(text: str, ctx: ir.Context) -> str | None:
    """None if jaxlib's pass manager accepts `text`, else its complaint.

    LLVM's option parser writes its complaint straight to file descriptor 2; it
    is captured so that it becomes part of one clear error line.
    """
    with tempfile.TemporaryFile() as captured:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            with ctx:
                passmanager.PassManager.parse(f"builtin.module({text})")
            complaint = None
        except (ValueError, ir.MLIRError) as err:
            complaint = str(err).strip().splitlines()[-1] if str(err).strip() else ""
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        llvm_said = captured.read().decode("utf-8", "replace").strip()
    if complaint is None:
        return None
    detail = llvm_said.lstrip(": ").strip() or complaint or "rejected"
    return detail.splitlines()[0]


def parse_pipeline(text: str, ctx: ir.Context) -> list[Stage]:
    """Parses pipeline text into stages; raises PipelineError naming what is wrong."""
    text = text.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module(") : -1]
    if not text:
        return []
    stages: list[Stage] = []
    for piece, pos in _split_top_level(text, ","):
        entry = _parse_entry(piece, pos)
        stages.extend(_resolve(entry, ctx, seen=()))
    return stages


def _resolve(entry: _Entry, ctx: ir.Context, seen: tuple[str, ...]) -> list[Stage]:
    passes = pass_classes()
    aliases = pipeline_aliases()
    if entry.name in passes:
        if entry.nested is not None:
            raise PipelineError(f"pass '{entry.name}' takes no nested pipeline")
        opts = _parse_options(entry.options) if entry.options else {}
        return [passes[entry.name].from_options(opts)]
    if entry.name in aliases:
        if entry.nested:
            raise PipelineError(f"pipeline '{entry.name}' takes no nested pipeline")
        if entry.name in seen:
            raise InternalError(f"pipeline '{entry.name}' expands to itself")
        alias = aliases[entry.name]
        try:
            text = alias.expand(_parse_options(entry.options) if entry.options else {})
        except ValueError as err:
            raise PipelineError(str(err)) from None
        out: list[Stage] = []
        for piece, pos in _split_top_level(text, ","):
            out.extend(_resolve(_parse_entry(piece, pos), ctx, (*seen, entry.name)))
        return out
    if entry.name.startswith(_REFERENCE_ONLY_PREFIX):
        raise PipelineError(
            f"'{entry.name}' is one of Shardy's passes; meshjit-opt runs meshjit's "
            "own passes (see --list-passes)"
        )
    upstream = entry.name
    if entry.options is not None:
        upstream += "{" + entry.options + "}"
    if entry.nested is not None:
        upstream += "(" + entry.nested + ")"
    complaint = _upstream_known(upstream, ctx)
    if complaint is None:
        return [UpstreamPass(upstream)]
    if entry.name in passes or any(entry.name == n for n, _ in UPSTREAM_PASSES):
        raise PipelineError(f"bad options for pass '{entry.name}': {complaint}")
    known = sorted([*passes, *aliases, *(n for n, _ in UPSTREAM_PASSES)])
    raise PipelineError(
        f"unknown pass '{entry.name}' (known: {', '.join(known)}; "
        "see meshjit-opt --list-passes)"
    )


@dataclass(slots=True)
class Instrumentation:
    """What to do around each pass (mlir-opt's flags)."""

    verify_each: bool = True
    # Without verify_each: verify once, after the last stage (meshjit.jit's
    # compiles: the passes' output is checked before XLA reads it; a verify
    # of a Llama-size module is ~2 ms).
    verify_last: bool = False
    print_after_all: bool = False
    print_after: frozenset[str] = frozenset()
    debug_info: bool = False
    timing: bool = False
    reports: frozenset[str] = frozenset()  # passed to passes as Diagnostics.requested
    out: TextIO = field(default_factory=lambda: sys.stderr)
    timings: list[tuple[str, float]] = field(default_factory=list)

    def wants_print(self, name: str) -> bool:
        return self.print_after_all or name in self.print_after


def run_pipeline(
    stages: list[Stage],
    module: ir.Module,
    source_name: str,
    inst: Instrumentation | None = None,
    diags: Diagnostics | None = None,
) -> Diagnostics:
    """Runs each stage, verifying after each one (or after the last, as `inst`
    says); raises DiagnosticError on error.

    Warnings and remarks are returned in the Diagnostics for the caller to print.
    """
    inst = inst or Instrumentation()
    if diags is None:
        diags = Diagnostics(source_name=source_name, requested=inst.reports)
    # Passes build many small acyclic objects (a 100k-op module: millions);
    # the cyclic collector kept re-scanning them (20-35% of the time at 100k
    # ops) and found nothing to free: it is paused while the passes run, and
    # reference counting frees their objects as before.
    collecting = gc.isenabled()
    gc.disable()
    try:
        with graph_session(module):
            for stage in stages:
                _run_timed(stage, module, source_name, inst, diags)
            if stages and inst.verify_last and not inst.verify_each:
                verify_module(module, source_name, f"pass '{stages[-1].name}'")
    finally:
        if collecting:
            gc.enable()
    return diags


def _run_timed(
    stage: Stage,
    module: ir.Module,
    source_name: str,
    inst: Instrumentation,
    diags: Diagnostics,
) -> None:
    start = time.perf_counter()
    _run_stage(stage, module, source_name, diags)
    inst.timings.append((stage.name, time.perf_counter() - start))
    if inst.verify_each:
        verify_module(module, source_name, f"pass '{stage.name}'")
    if inst.wants_print(stage.name):
        inst.out.write(f"// -----// IR Dump After {stage.name} //----- //\n")
        inst.out.write(print_module(module, debug_info=inst.debug_info))


def _run_stage(
    stage: Stage, module: ir.Module, source_name: str, diags: Diagnostics
) -> None:
    if isinstance(stage, UpstreamPass):
        invalidate_graphs(module)
        try:
            with module.context:
                pm = passmanager.PassManager.parse(f"builtin.module({stage.text})")
                pm.run(module.operation)
        except ir.MLIRError as err:
            raise DiagnosticError(
                diagnostics_from_mlir_error(err, source_name, f"{stage.name} failed")
            ) from None
        return
    try:
        with module.context:
            stage.run(module, diags)
    except DiagnosticError:
        raise
    except MeshjitError as err:
        if isinstance(err, InternalError):
            raise
        diags.error(SourceLoc(), str(err))
    except Exception as err:  # a bug in the pass, not in the input
        raise InternalError(
            f"pass '{stage.name}' crashed: {type(err).__name__}: {err}\n"
            + "".join(traceback.format_exception(err)[-3:])
        ) from err
    diags.raise_if_errors()


def format_timings(timings: list[tuple[str, float]]) -> str:
    total = sum(t for _, t in timings) or 1e-12
    rule = "===" + "-" * 73 + "==="
    lines = [
        rule,
        "                      ... Execution time report ...",
        rule,
        f"  Total Execution Time: {total:.4f} seconds",
        "",
        "  ----Wall Time----  ----Name----",
    ]
    for name, t in timings:
        lines.append(f"  {t:8.4f} ({100 * t / total:5.1f}%)  {name}")
    lines.append(f"  {total:8.4f} (100.0%)  Total")
    return "\n".join(lines) + "\n"


def diagnostics_text(items: list[Diagnostic]) -> str:
    return "".join(f"{d}\n" for d in items)
