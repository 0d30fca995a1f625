"""meshjit-opt: run meshjit's passes on MLIR files, like mlir-opt.

meshjit-opt model.mlir -p 'inline,annotate-sharding-rules' -o out.mlir
meshjit-opt cases.mlir -p canonicalize --split-input-file
meshjit-opt --list-passes
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn, TextIO

from meshjit.compiler.diagnostics import (
    Diagnostic,
    DiagnosticError,
    Severity,
    SourceLoc,
)
from meshjit.compiler.ir import make_context, parse_module, print_module
from meshjit.compiler.pipeline import (
    Instrumentation,
    Stage,
    diagnostics_text,
    format_timings,
    parse_pipeline,
    run_pipeline,
)
from meshjit.compiler.registry import UPSTREAM_PASSES, pass_classes, pipeline_aliases
from meshjit.errors import InternalError, PipelineError, ReportError

_SPLIT_MARKER = re.compile(r"^// -----.*$", re.MULTILINE)
_OUTPUT_SEPARATOR = "// -----\n"


class _ArgParser(argparse.ArgumentParser):
    """argparse that exits 1 with one `meshjit-opt: error:` line, like mlir-opt."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(1)


def build_parser() -> argparse.ArgumentParser:
    p = _ArgParser(
        prog="meshjit-opt",
        description=(
            "Run meshjit's passes (and upstream MLIR passes jaxlib registers) on a "
            "StableHLO/Shardy module and print the result."
        ),
        epilog="See --list-passes for the passes, their options and named pipelines.",
    )
    p.add_argument(
        "input", nargs="?", default="-", help="input .mlir file ('-' = stdin)"
    )
    p.add_argument("-o", dest="output", default="-", help="output file ('-' = stdout)")
    p.add_argument(
        "-p",
        "--pass-pipeline",
        default="",
        metavar="PIPELINE",
        help="comma-separated passes, e.g. 'inline,annotate-sharding-rules'; "
        "options in braces: 'name{opt=value other=value}'",
    )
    p.add_argument(
        "--split-input-file",
        action="store_true",
        help="split the input at '// -----' lines and process each part on its own",
    )
    p.add_argument("--list-passes", action="store_true", help="list passes and exit")
    p.add_argument(
        "--timing", action="store_true", help="print per-pass wall time to stderr"
    )
    p.add_argument(
        "--print-ir-after-all",
        action="store_true",
        help="print the module to stderr after every pass",
    )
    p.add_argument(
        "--print-ir-after",
        action="append",
        default=[],
        metavar="NAME",
        help="print the module to stderr after pass NAME (repeatable)",
    )
    p.add_argument(
        "--no-verify-each",
        dest="verify_each",
        action="store_false",
        help="do not run the verifier after each pass (it runs by default)",
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="print to stderr why each value got its sharding (propagation passes)",
    )
    p.add_argument(
        "--collectives",
        action="store_true",
        help="print to stderr the collectives the partitioner inserted, with bytes",
    )
    p.add_argument(
        "--report",
        metavar="FILE.html",
        default=None,
        help="write the partitioned program as one self-contained HTML page (mesh, "
        "argument and result layouts, the program graph with its collectives, a "
        "table of them, per-device memory); the pipeline must end in partition, "
        "e.g. -p spmd-pipeline",
    )
    p.add_argument(
        "--mlir-print-debuginfo",
        "--print-debuginfo",
        dest="debug_info",
        action="store_true",
        help="print source locations in the output",
    )
    return p


def list_passes(out: TextIO) -> None:
    out.write("meshjit passes:\n")
    for name, cls in sorted(pass_classes().items()):
        out.write(f"  {name:<28} {cls.summary()}\n")
        for opt in cls.options():
            out.write(f"      {opt.describe()}\n")
    aliases = pipeline_aliases()
    if aliases:
        out.write("\nnamed pipelines:\n")
        for name, alias in sorted(aliases.items()):
            out.write(f"  {name:<28} {alias.summary}\n")
            out.write(f"      = {alias.pipeline}\n")
            for option, help_text, values in alias.options:
                out.write(f"      {option}: {help_text}\n")
                for value, text in values:
                    out.write(f"        {option}={value}: {text}\n")
    out.write("\nupstream MLIR passes (jaxlib's pass manager runs them):\n")
    for name, summary in UPSTREAM_PASSES:
        out.write(f"  {name:<28} {summary}\n")
    out.write(
        "  (any other pass jaxlib registers is accepted by name, except Shardy's "
        "sdy-* passes,\n   which are references for tests and benchmarks only)\n"
    )


def split_input(text: str) -> list[tuple[str, int]]:
    """The parts between `// -----` lines, each with the line it starts on (0-based)."""
    parts: list[tuple[str, int]] = []
    start, line = 0, 0
    for m in _SPLIT_MARKER.finditer(text):
        parts.append((text[start : m.start()], line))
        line += text.count("\n", start, m.end()) + 1
        start = m.end() + 1
    parts.append((text[start:], line))
    return parts


def _read_input(path: str) -> tuple[str, str]:
    """(text, source name); raises DiagnosticError for unreadable input."""
    name = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except OSError as err:
        reason = err.strerror or str(err)
        raise DiagnosticError(
            [
                Diagnostic(
                    Severity.ERROR,
                    SourceLoc(),
                    f"cannot open input file '{path}': {reason}",
                )
            ]
        ) from None
    try:
        return data.decode("utf-8"), name
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise DiagnosticError(
            [
                Diagnostic(
                    Severity.ERROR,
                    SourceLoc(name, line, 1),
                    f"input is not UTF-8 text (byte 0x{data[err.start]:02x} at "
                    f"offset {err.start}); expected an MLIR text file",
                )
            ]
        ) from None


def process_one(
    text: str,
    first_line: int,
    source_name: str,
    stages: list[Stage],
    inst: Instrumentation,
    report: str | None = None,
) -> tuple[str | None, list[Diagnostic], list[tuple[str, str]]]:
    """Parses, runs and prints one module: (output or None, diagnostics, reports).
    With `report`, also writes the HTML report there (a ValueError says why
    it cannot: ReportError)."""
    ctx = make_context()
    try:
        # Leading newlines keep line numbers those of the whole input file.
        module = parse_module("\n" * first_line + text, ctx, source_name)
        diags = run_pipeline(stages, module, source_name, inst)
    except DiagnosticError as err:
        return None, err.diagnostics, []
    if report is not None:
        from meshjit import htmlreport  # only --report needs the page

        htmlreport.write_html(
            htmlreport.inputs_from(module, diags, os.path.basename(source_name)),
            report,
        )
    return print_module(module, debug_info=inst.debug_info), diags.items, diags.reports


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list_passes:
        list_passes(sys.stdout)
        return 0
    try:
        return _run(args)
    except InternalError as err:
        sys.stderr.write(f"meshjit-opt: internal error: {err}\n")
        return 2


def _run(args: argparse.Namespace) -> int:
    try:
        text, source_name = _read_input(args.input)
    except DiagnosticError as err:
        sys.stderr.write(diagnostics_text(err.diagnostics))
        return 1
    try:
        stages = parse_pipeline(args.pass_pipeline, make_context())
    except PipelineError as err:
        sys.stderr.write(f"meshjit-opt: error: {err}\n")
        return 1
    known = {s.name for s in stages}
    for name in args.print_ir_after:
        if name not in known:
            sys.stderr.write(
                f"meshjit-opt: error: --print-ir-after={name} names no pass of the "
                f"pipeline ({', '.join(sorted(known)) or 'empty'})\n"
            )
            return 1
    inst = Instrumentation(
        verify_each=args.verify_each,
        print_after_all=args.print_ir_after_all,
        print_after=frozenset(args.print_ir_after),
        debug_info=args.debug_info,
        timing=args.timing,
        reports=frozenset(
            name
            for name, on in (
                ("explain", args.explain),
                ("collectives", args.collectives),
                ("html", args.report is not None),
            )
            if on
        ),
    )
    if args.report is not None and args.split_input_file:
        sys.stderr.write(
            "meshjit-opt: error: --report writes one module's page; it cannot be "
            "combined with --split-input-file\n"
        )
        return 1
    parts = split_input(text) if args.split_input_file else [(text, 0)]
    outputs: list[str] = []
    failed = False
    for part, first_line in parts:
        try:
            out, diags, reports = process_one(
                part, first_line, source_name, stages, inst, args.report
            )
        except ReportError as err:
            sys.stderr.write(f"meshjit-opt: error: --report: {err}\n")
            return 1
        except OSError as err:
            sys.stderr.write(
                f"meshjit-opt: error: cannot write '{args.report}': {err.strerror}\n"
            )
            return 1
        sys.stderr.write(diagnostics_text(diags))
        for _, text in reports:
            sys.stderr.write(text if text.endswith("\n") else text + "\n")
        if out is None:
            failed = True
        else:
            outputs.append(out)
    if inst.timing:
        sys.stderr.write(format_timings(inst.timings))
    result = _OUTPUT_SEPARATOR.join(outputs)
    if args.output == "-":
        sys.stdout.write(result)
    else:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(result)
        except OSError as err:
            sys.stderr.write(
                f"meshjit-opt: error: cannot write '{args.output}': {err.strerror}\n"
            )
            return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
