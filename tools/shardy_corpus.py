"""Shardy's propagation lit cases run through meshjit-opt, with a pass count.

    python tools/shardy_corpus.py SHARDY_CHECKOUT [--files GLOB ...]
        [-k SUBSTRING] [--json OUT] [--shardy] [--verbose] [--jobs N]
        [--per-case] [--timeout S] [--debugging]

SHARDY_CHECKOUT is a checkout of github.com/openxla/shardy (measured at
e8b51060); the cases are read in place from
`shardy/dialect/sdy/transforms/propagation/test/*.mlir` and never copied here
(`--debugging`: the 44 cases of `propagation/debugging/test/`, whose RUN
lines ask for debug-sharding-origins and debug-propagation-edge-sharding,
mapped to propagate's options of those names).
Each file is split on `// -----` lines the way `-split-input-file` does (only
when its RUN line has that flag) and every case is run alone: its text, with
leading blank lines so that line numbers are the file's, goes through
`meshjit-opt -p PIPELINE`, and the case's own CHECK lines are checked against
that case's own output with the `filecheck` package (LLVM FileCheck's clone).
A case is named FILE:INDEX, INDEX counting the file's chunks from 0; `-k`
keeps the cases whose FILE:INDEX or first func's name contains SUBSTRING.

How meshjit-opt is run: by default one `meshjit-opt --split-input-file`
process per file (over the selected cases), which parses every case into a
fresh context and runs it alone, as lit's `-split-input-file` does; its
modules and diagnostics are then given back to each case by their line
numbers. When that cannot be done with certainty (a crash, a diagnostic
without a line of the file, a module count that does not add up) the file's
cases are run again one process per case, and the report says so.
`--per-case` always runs one process per case (the same results, about ten
times slower: each process imports jax). Files run in parallel in a pool of
`--jobs` processes (2).

Which cases: the default is every `*.mlir` file of that folder except
`op_sharding_rule_registry*.mlir` (those three run
`-sdy-populate-op-sharding-rules`, not a propagation pass, and have no
`// -----` lines). At e8b51060 that is 13 files and 292 cases:

    aggressive_propagation 23, basic_propagation 78,
    basic_propagation_conservative 5, basic_propagation_data_flow_edges 28,
    basic_propagation_keep_sharding_rules 1 (no -split-input-file),
    basic_propagation_manual_computation 27, basic_propagation_token 2,
    op_priority_propagation 15, propagation_pipeline 47,
    propagation_pipeline_data_flow_edges 29,
    propagation_pipeline_dedup_functions_fully_true 7,
    sharding_group_propagation 11, user_priority_propagation 19

(a file with n `// -----` lines has n + 1 cases). With the three registry
files it would be 295. `--files 'op_sharding_rule_registry*'` runs them too
(mapped to annotate-sharding-rules).

RUN line -> meshjit pipeline (Shardy's pass definitions at e8b51060: the
op-priority pass extends the aggressive one, the user-priority pass extends
the op-priority one; `-run-op-priority-propagation` defaults to true and
`-propagation-strategy` to aggressive):

    Shardy (sdy_opt)                  meshjit-opt -p
    -sdy-basic-propagate              propagate{strategy=basic op-priority=false
                                        user-priority=false}
    -sdy-aggressive-propagate         propagate{strategy=aggressive
                                        op-priority=false user-priority=false}
    -sdy-op-priority-propagate        propagate{strategy=aggressive
                                        op-priority=true user-priority=false}
    -sdy-user-priority-propagate      propagate{strategy=aggressive
                                        op-priority=true user-priority=true}
    -sdy-propagation-pipeline         propagation-pipeline (import-shardings,
                                        propagate with meshjit's defaults =
                                        user + op priorities, aggressive,
                                        export-shardings{close-shardings=true})
      dedup-functions-fully=B         propagation-pipeline{dedup-functions-fully=B}
    propagation-strategy=S            strategy=S (basic or aggressive;
                                        basic-then-aggressive: unsupported)
    run-op-priority-propagation=B     op-priority=B
    conservative-propagation=true     conservative=true
    keep-sharding-rules=true          propagate{...},annotate-sharding-rules
                                        (propagate uses existing rules and
                                        annotate-sharding-rules writes the
                                        rest, keeping existing ones)
    -sdy-add-data-flow-edges,         no meshjit passes: meshjit's propagate
    -sdy-sink-data-flow-edges           handles data-flow edges itself; folded
                                        into the propagate above (noted, not
                                        failed)
    -sdy-populate-op-sharding-rules   annotate-sharding-rules
    any other -sdy-* option           dropped, noted "option unsupported"

Output: `2>&1` on the RUN line sends meshjit-opt's stderr (diagnostics,
written before the module) into what FileCheck reads, as the shell would.

`-verify-diagnostics` (aggressive_propagation, basic_propagation,
sharding_group_propagation): `// expected-error|warning|remark|note[@above|
@below|@+N|@-N] {{message}}` lines are matched like MLIR's verifier: same
severity, message contains the text, same line. A case whose expected
diagnostic is not produced fails its CHECK ("expected warning not
produced"), and so does one where meshjit reports a warning the case does
not expect (as MLIR's verifier fails it); an unexpected error makes the case
an `error`. Matched diagnostics are consumed, not shown to FileCheck. If all
of a case's errors were expected, its (empty) output is still checked.

Each case ends in one state: `pass`; `check-fail` (meshjit-opt ran without
error but a CHECK or an expected diagnostic failed: the first failing CHECK
line and the output line nearest to it are recorded); `error` (meshjit-opt
exited non-zero or crashed: its first error line is recorded). `--shardy`
runs Shardy's own passes (registered by jaxlib) on every case as well, in
the pool's processes with meshjit's MLIR context (`make_ir_context`), the
RUN line's passes as written (a pass restricted to func.func is nested, as
sdy_opt nests it), printing the module as sdy_opt does (pretty form), and
judged the same way; its counts are shown beside meshjit's. A reference
only: jaxlib's Shardy is the one its jax was built with, not e8b51060.

The report: a table per file (cases, run without error, CHECK pass), totals,
then meshjit's failing cases grouped by cause; `--json OUT` writes every
case's result. The exit status is 0 whatever the counts (it is a
measurement), 2 when SHARDY_CHECKOUT holds no propagation tests. Run it with
the virtualenv's python: meshjit-opt is run as `sys.executable -m
meshjit.compiler.opt` with MESHJIT_NATIVE=0.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import difflib
import fnmatch
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

TEST_DIR = Path("shardy/dialect/sdy/transforms/propagation/test")
EXCLUDED = "op_sharding_rule_registry*"
SPLIT_MARKER = re.compile(r"^// -----.*$", re.MULTILINE)
FUNC_LINE = re.compile(r"func\.func\s+(?:(?:private|public|nested)\s+)?@([\w.$-]+)")
DIAG_LINE = re.compile(
    r"^(?:(?P<file>[^\n]*?):(?P<line>\d+):(?P<col>\d+): )?"
    r"(?P<sev>error|warning|remark|note): (?P<msg>.*)$"
)
LOC_POS = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')
EXPECTED = re.compile(
    r"expected-(?P<sev>error|warning|remark|note)(?P<re>-re)?"
    r"(?:@(?P<where>above|below|[+-]\d+|\d+))?\s*\{\{(?P<msg>.*)\}\}\s*$"
)
FILECHECK_ERROR = re.compile(
    r"^(?P<file>.*?):(?P<line>\d+):(?:\d+:)? error: (?P<msg>.*)$"
)
# The FileCheck to run (`--filecheck`; workers inherit it): the `filecheck`
# package by default, or a path such as LLVM's FileCheck.
FILECHECK_ENV = "SHARDY_CORPUS_FILECHECK"
CHECK_KIND = re.compile(r"//\s*(CHECK(?:-[A-Z]+)?):\s?(.*)$")

PROPAGATE_PASSES = {
    # Shardy pass -> (strategy, op priority, user priority) before options.
    "sdy-basic-propagate": ("basic", False, False),
    "sdy-aggressive-propagate": ("aggressive", False, False),
    "sdy-op-priority-propagate": ("aggressive", True, False),
    "sdy-user-priority-propagate": ("aggressive", True, True),
}
FOLDED_PASSES = (
    "sdy-add-data-flow-edges",
    "sdy-sink-data-flow-edges",
    "sdy-apply-sharding-constraints",
)
# Shardy's debug options -> the propagate option that writes the same form
DEBUG_OPTIONS = {
    "debug-sharding-origins": "debug-sharding-origins",
    "debug-propagation-edge-sharding": "debug-propagation-edge-sharding",
    # -sdy-apply-sharding-constraints: propagate's option of that name
    "apply-sharding-constraints": "apply-sharding-constraints",
}
DEBUG_DIR = Path("shardy/dialect/sdy/transforms/propagation/debugging/test")


# --- RUN lines ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What a file's RUN line asks for, and meshjit's closest pipeline."""

    run_line: str
    shardy_passes: tuple[str, ...]  # pipeline pieces, `name{opts}`
    split: bool
    verify_diagnostics: bool
    stderr_to_stdout: bool
    pipeline: str | None  # meshjit-opt -p; None when nothing maps
    notes: tuple[str, ...]


def _parse_pass_options(text: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for item in text.split():
        key, eq, value = item.partition("=")
        options[key] = value if eq else "true"
    return options


def _bool(value: str) -> bool:
    return value.lower() in ("true", "1", "on")


def map_run_line(run_line: str) -> RunSpec:
    """Parses `// RUN: sdy_opt %s ... | FileCheck %s` into a RunSpec."""
    words = shlex.split(run_line.split("RUN:", 1)[1])
    cut = words.index("|") if "|" in words else len(words)
    opt_args = words[:cut]
    split = "-split-input-file" in opt_args or "--split-input-file" in opt_args
    verify = any(a.lstrip("-") == "verify-diagnostics" for a in opt_args)
    stderr_to_stdout = "2>&1" in opt_args
    shardy: list[str] = []
    meshjit: list[str] = []
    notes: list[str] = []
    unmapped = False
    debug: set[str] = set()  # Shardy debug options asked for anywhere
    for arg in opt_args:
        if not arg.startswith("-sdy-"):
            continue
        name, _, opt_text = arg[1:].partition("=")
        options = _parse_pass_options(opt_text)
        shardy.append(f"{name}{{{opt_text}}}" if opt_text else name)
        if name in FOLDED_PASSES:
            notes.append(f"-{name} folded into propagate")
            debug.update(k for k in options if k in DEBUG_OPTIONS and _bool(options[k]))
            if name == "sdy-apply-sharding-constraints":
                debug.add("apply-sharding-constraints")
            continue
        if name in PROPAGATE_PASSES:
            strategy, op_prio, user_prio = PROPAGATE_PASSES[name]
            conservative, keep_rules = False, False
            for key, value in options.items():
                if key == "propagation-strategy" and value in ("basic", "aggressive"):
                    strategy = value
                elif key == "run-op-priority-propagation" and name in (
                    "sdy-op-priority-propagate",
                    "sdy-user-priority-propagate",
                ):
                    op_prio = _bool(value)
                elif key == "conservative-propagation":
                    conservative = _bool(value)
                elif key == "keep-sharding-rules":
                    keep_rules = _bool(value)
                elif key in DEBUG_OPTIONS and _bool(value):
                    debug.add(key)
                else:
                    notes.append(f"{key}={value} option unsupported")
            opts = (
                f"strategy={strategy} op-priority={str(op_prio).lower()} "
                f"user-priority={str(user_prio).lower()}"
            )
            if conservative:
                opts += " conservative=true"
            meshjit.append(f"propagate{{{opts}}}")
            if keep_rules:
                meshjit.append("annotate-sharding-rules")
                notes.append("keep-sharding-rules=true -> annotate-sharding-rules")
        elif name == "sdy-propagation-pipeline":
            dedup = options.pop("dedup-functions-fully", None)
            if dedup is not None:
                meshjit.append(f"propagation-pipeline{{dedup-functions-fully={dedup}}}")
            else:
                meshjit.append("propagation-pipeline")
            notes.extend(f"{k}={v} option unsupported" for k, v in options.items())
        elif name == "sdy-populate-op-sharding-rules":
            meshjit.append("annotate-sharding-rules")
            notes.extend(f"{k}={v} option unsupported" for k, v in options.items())
        else:
            notes.append(f"-{name} has no meshjit equivalent")
            unmapped = True
    if debug:
        # the debug option may come on a folded pass before or after propagate
        for i, piece in enumerate(meshjit):
            if piece.startswith("propagate{"):
                extra = " ".join(f"{DEBUG_OPTIONS[d]}=true" for d in sorted(debug))
                meshjit[i] = piece[:-1] + " " + extra + "}"
    pipeline = ",".join(meshjit) if meshjit and not unmapped else None
    return RunSpec(
        run_line=run_line.strip(),
        shardy_passes=tuple(shardy),
        split=split,
        verify_diagnostics=verify,
        stderr_to_stdout=stderr_to_stdout,
        pipeline=pipeline,
        notes=tuple(notes),
    )


# --- cases -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    file: str  # file name in the test folder
    index: int  # 0-based position among the file's `// -----` chunks
    first_line: int  # 0-based line of the file the chunk starts on
    text: str
    func: str  # first line of the case's first func.func, stripped
    func_name: str

    @property
    def case_id(self) -> str:
        return f"{self.file}:{self.index}"

    def padded(self) -> str:
        """The chunk with leading newlines: line numbers are the file's."""
        return "\n" * self.first_line + self.text


def split_cases(name: str, text: str, split: bool) -> list[Case]:
    """A file's cases, as `-split-input-file` cuts it (one case without it)."""
    parts: list[tuple[str, int]] = []
    if split:
        start, line = 0, 0
        for marker in SPLIT_MARKER.finditer(text):
            parts.append((text[start : marker.start()], line))
            line += text.count("\n", start, marker.end()) + 1
            start = marker.end() + 1
        parts.append((text[start:], line))
    else:
        parts.append((text, 0))
    cases = []
    for index, (part, first_line) in enumerate(parts):
        m = FUNC_LINE.search(part)
        func_line, func_name = "", ""
        if m:
            line_start = part.rfind("\n", 0, m.start()) + 1
            line_end = part.find("\n", m.start())
            func_line = part[line_start : line_end if line_end >= 0 else None]
            func_name = m.group(1)
        cases.append(
            Case(name, index, first_line, part, func_line.strip()[:200], func_name)
        )
    return cases


def find_test_dir(checkout: Path, debugging: bool = False) -> Path | None:
    if debugging:
        found = checkout / DEBUG_DIR
        return found if found.is_dir() and any(found.glob("*.mlir")) else None
    for candidate in (checkout / TEST_DIR, checkout):
        if candidate.is_dir() and any(candidate.glob("*propagation*.mlir")):
            return candidate
    return None


def select_files(test_dir: Path, globs: list[str] | None) -> list[Path]:
    files = sorted(test_dir.glob("*.mlir"))
    if globs:
        return [
            f
            for f in files
            if any(
                fnmatch.fnmatch(f.name, g) or fnmatch.fnmatch(f.stem, g) for g in globs
            )
        ]
    return [f for f in files if not fnmatch.fnmatch(f.name, EXCLUDED)]


# --- running -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Diag:
    severity: str
    line: int | None
    message: str
    text: str  # as printed


@dataclass(slots=True)
class Output:
    """What one run printed; `failed` when it exited with an error."""

    stdout: str
    stderr: str
    diags: list[Diag]
    failed: bool
    crashed: str = ""  # a crash or timeout, instead of diagnostics


@dataclass(slots=True)
class Result:
    status: str  # "pass", "check-fail", "error"
    reason: str  # first error line / first failing CHECK line
    expected: str = ""  # check-fail: the failing CHECK line
    got: str = ""  # check-fail: the output line nearest to it
    detail: str = ""  # nearby output / stderr, for --verbose


def parse_diag_text(text: str) -> list[Diag]:
    diags = []
    for line in text.splitlines():
        m = DIAG_LINE.match(line)
        if m:
            diags.append(
                Diag(
                    m.group("sev"),
                    int(m.group("line")) if m.group("line") else None,
                    m.group("msg"),
                    line,
                )
            )
    return diags


def run_meshjit(case: Case, spec: RunSpec, workdir: Path, timeout: float) -> Output:
    """meshjit-opt on the case alone (a fresh process, as lit would run it)."""
    assert spec.pipeline is not None
    path = workdir / case.file
    path.write_text(case.padded(), encoding="utf-8")
    env = dict(os.environ, MESHJIT_NATIVE="0")
    cmd = [sys.executable, "-m", "meshjit.compiler.opt", str(path)]
    cmd += ["-p", spec.pipeline]
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            env=env,
            cwd=workdir,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return Output("", "", [], True, f"timed out after {timeout:.0f} s")
    crashed = ""
    if done.returncode not in (0, 1):
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        first = next((ln for ln in lines if "internal error" in ln), "")
        crashed = first or f"exit {done.returncode}: " + (lines[-1] if lines else "")
    return Output(
        done.stdout,
        done.stderr,
        parse_diag_text(done.stderr),
        done.returncode != 0,
        crashed,
    )


def batch_text(cases: list[Case]) -> tuple[str, list[tuple[int, int]]]:
    """The cases joined by `// -----` lines, each on its own lines of the file
    (skipped cases leave blank lines), and each case's 1-based line span."""
    pieces: list[str] = []
    spans: list[tuple[int, int]] = []
    line = 0  # 0-based line the next piece starts on
    for k, case in enumerate(cases):
        if k:
            pieces.append("// -----\n")
            line += 1
        pad = case.first_line - line
        if pad < 0:
            raise ValueError("cases out of order")
        chunk = "\n" * pad + case.text
        if not chunk.endswith("\n"):
            chunk += "\n"
        pieces.append(chunk)
        spans.append((case.first_line + 1, line + chunk.count("\n")))
        line += chunk.count("\n")
    return "".join(pieces), spans


def run_meshjit_batch(
    cases: list[Case], spec: RunSpec, workdir: Path, timeout: float
) -> list[Output] | None:
    """One `meshjit-opt --split-input-file` over a file's cases, its output and
    diagnostics given back to each case (by their line numbers). Each case is
    still parsed into a fresh context and run alone, as with lit's
    -split-input-file. None when that cannot be done with certainty (a crash,
    a diagnostic without a line of this file, an output count that does not
    add up): the caller then runs one process per case."""
    assert spec.pipeline is not None
    text, spans = batch_text(cases)
    path = workdir / cases[0].file
    path.write_text(text, encoding="utf-8")
    cmd = [sys.executable, "-m", "meshjit.compiler.opt", str(path)]
    cmd += ["-p", spec.pipeline, "--split-input-file"]
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            env=dict(os.environ, MESHJIT_NATIVE="0"),
            cwd=workdir,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return None
    if done.returncode not in (0, 1):
        return None
    errs: list[list[str]] = [[] for _ in cases]
    current: int | None = None
    for line in done.stderr.splitlines():
        m = DIAG_LINE.match(line)
        if m and m.group("line") and m.group("file") == str(path):
            at = int(m.group("line"))
            current = next(
                (k for k, (lo, hi) in enumerate(spans) if lo <= at <= hi), None
            )
            if current is None:
                return None
        elif m and m.group("sev") != "note":
            return None  # a diagnostic with no line of this file
        elif current is None:
            return None
        errs[current].append(line)
    outs = [
        Output("", "".join(f"{ln}\n" for ln in e), parse_diag_text("\n".join(e)), False)
        for e in errs
    ]
    for out in outs:
        out.failed = any(d.severity == "error" for d in out.diags)
    printed = done.stdout.split("// -----\n") if done.stdout else []
    ok = [out for out in outs if not out.failed]
    if len(printed) != len(ok) or (done.returncode == 1) != (len(ok) < len(outs)):
        return None
    for out, module_text in zip(ok, printed, strict=True):
        out.stdout = module_text
    return outs


def _shardy_pass_manager(spec: RunSpec) -> Any:
    """Shardy's passes as sdy_opt runs them: a pass restricted to func.func
    (sdy-sink-data-flow-edges, ...) is nested, as sdy_opt nests it."""
    from jaxlib.mlir import passmanager

    pieces = []
    for piece in spec.shardy_passes:
        try:
            passmanager.PassManager.parse(f"builtin.module({piece})")
            pieces.append(piece)
        except ValueError:
            pieces.append(f"func.func({piece})")
    return passmanager.PassManager.parse(f"builtin.module({','.join(pieces)})")


def _diag_from_mlir(d: Any) -> Diag:
    severity = str(d.severity).rsplit(".", 1)[-1].lower()
    loc = str(d.location)
    m = LOC_POS.search(loc)
    line = int(m.group(2)) if m else None
    where = f"{m.group(1)}:{m.group(2)}:{m.group(3)}: " if m else ""
    return Diag(severity, line, str(d.message), f"{where}{severity}: {d.message}")


def run_shardy(case: Case, spec: RunSpec) -> Output:
    """Shardy's own passes on the case, in this process (jaxlib registers them)."""
    from jaxlib.mlir import ir

    from meshjit.compiler.bridge import make_ir_context

    ctx = make_ir_context()
    diags: list[Diag] = []

    def handler(d: Any) -> bool:
        diags.append(_diag_from_mlir(d))
        return True

    ctx.attach_diagnostic_handler(handler)
    failed, stdout = False, ""
    with ctx:
        try:
            module = ir.Module.parse(case.padded())
            pm = _shardy_pass_manager(spec)
            pm.run(module.operation)
            stdout = str(module)
        except ir.MLIRError as err:
            failed = True
            diags.extend(_diag_from_mlir(d) for d in err.error_diagnostics)
            if not err.error_diagnostics:
                diags.append(Diag("error", None, str(err), f"error: {err}"))
        except ValueError as err:  # a pass pipeline jaxlib does not know
            failed = True
            msg = str(err).strip().splitlines()[0] if str(err).strip() else "rejected"
            diags.append(Diag("error", None, msg, f"error: {msg}"))
    stderr = "".join(f"{d.text}\n" for d in diags)
    return Output(stdout, stderr, diags, failed)


# --- checking ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Expectation:
    severity: str
    line: int  # 1-based line of the file
    pattern: str
    regex: bool
    text: str


def expected_diagnostics(case: Case) -> list[Expectation]:
    """The case's `expected-*` lines, with the line each one designates."""
    lines = case.padded().split("\n")
    found: list[tuple[int, re.Match[str]]] = []
    for i, line in enumerate(lines):
        m = EXPECTED.search(line)
        if m:
            found.append((i, m))
    marked = {i for i, _ in found}
    out = []
    for i, m in found:
        where = m.group("where")
        target = i
        if where == "below":
            target = i + 1
            while target in marked and target < len(lines) - 1:
                target += 1
        elif where == "above":
            target = i - 1
            while target in marked and target > 0:
                target -= 1
        elif where and where[0] in "+-":
            target = i + int(where)
        elif where:
            target = int(where) - 1
        out.append(
            Expectation(
                m.group("sev"),
                target + 1,
                m.group("msg"),
                bool(m.group("re")),
                lines[i].strip(),
            )
        )
    return out


def _expectation_regex(exp: Expectation) -> re.Pattern[str]:
    if not exp.regex:
        return re.compile(re.escape(exp.pattern))
    parts = re.split(r"\{\{(.*?)\}\}", exp.pattern)
    return re.compile(
        "".join(p if i % 2 else re.escape(p) for i, p in enumerate(parts))
    )


def verify_diagnostics(
    case: Case, diags: list[Diag]
) -> tuple[list[Expectation], list[Diag], list[Diag]]:
    """(expectations not met, diagnostics nothing expected, matched ones)."""
    missing: list[Expectation] = []
    matched: list[Diag] = []
    left = list(diags)
    for exp in expected_diagnostics(case):
        rx = _expectation_regex(exp)
        hit = next(
            (
                d
                for d in left
                if d.severity == exp.severity
                and rx.search(d.message)
                and (d.line is None or d.line == exp.line)
            ),
            None,
        )
        if hit is None:
            missing.append(exp)
        else:
            left.remove(hit)
            matched.append(hit)
    unexpected = [d for d in left if d.severity != "note"]
    return missing, unexpected, matched


def _check_lines(case: Case) -> list[str]:
    return [ln for ln in case.text.splitlines() if CHECK_KIND.search(ln)]


def _pattern_words(pattern: str) -> str:
    """A CHECK pattern with its regex and variable parts blanked, for matching."""
    text = re.sub(r"\{\{.*?\}\}", " ", pattern)
    text = re.sub(r"\[\[(\w+)(?::[^\]]*)?\]\]", r"%\1", text)
    return " ".join(text.split())


def _shown_line(said: list[str], header: str, skip: int = 0) -> str:
    """The output line filecheck shows under `header` (after a `file:L:C` line
    when `skip`), stripped; "" when it shows none."""
    for i, line in enumerate(said):
        if line.startswith(header):
            j = i + 1 + skip
            return said[j].strip() if j < len(said) else ""
    return ""


def _focus(pattern: str, got: str, width: int = 160) -> str:
    """`got` from where the pattern's first word occurs in it (a func's
    signature is one long line; a CHECK-SAME checks a piece of it)."""
    words = _pattern_words(pattern).split()
    if len(got) <= width or not words:
        return got
    at = got.rfind(words[0]) if words[0] == "->" else got.find(words[0])
    return got if at <= 0 else "…" + got[at:]


def _nearest(pattern: str, out_lines: list[str], start: int) -> str:
    """The output line (from `start` on) that looks most like `pattern`."""
    want = _pattern_words(pattern)
    window = out_lines[start : start + 60] or out_lines
    best, score = "", -1.0
    for line in window:
        r = difflib.SequenceMatcher(None, want, " ".join(line.split())).ratio()
        if r > score:
            best, score = line, r
    return best.strip()


def filecheck(case: Case, output: str, workdir: Path, timeout: float) -> Result:
    """The case's CHECK lines against `output`, with the filecheck package
    (or the FileCheck `--filecheck` names)."""
    if not _check_lines(case):
        return Result("pass", "no CHECK lines")
    check_file = workdir / f"check-{case.index}.mlir"
    out_file = workdir / f"output-{case.index}.txt"
    check_file.write_text(case.padded(), encoding="utf-8")
    out_file.write_text(output, encoding="utf-8")
    try:
        chosen = os.environ.get(FILECHECK_ENV)
        command = [chosen] if chosen else [sys.executable, "-m", "filecheck"]
        done = subprocess.run(
            [*command, str(check_file), "--input-file", str(out_file)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(os.environ, NO_COLOR="1"),
        )
    except subprocess.TimeoutExpired:
        return Result("check-fail", f"filecheck timed out after {timeout:.0f} s")
    if done.returncode == 0:
        return Result("pass", "")
    said = (done.stdout + done.stderr).strip()
    lines = case.padded().split("\n")
    m = next(
        (
            FILECHECK_ERROR.match(ln)
            for ln in said.splitlines()
            if FILECHECK_ERROR.match(ln)
        ),
        None,
    )
    if m is None:
        return Result(
            "check-fail", said.splitlines()[0] if said else "filecheck failed"
        )
    check_line = lines[int(m.group("line")) - 1].strip()
    kind = CHECK_KIND.search(check_line)
    pattern = kind.group(2) if kind else check_line
    said_lines = said.splitlines()
    current = _shown_line(said_lines, "Current position at ")
    got = _shown_line(said_lines, "Possible intended match at:", skip=1)
    got = got or _shown_line(said_lines, "Matching at: ")  # a CHECK-NOT that hit
    if not got and kind and kind.group(1) in ("CHECK-SAME", "CHECK-NEXT"):
        got = current
    if not got:
        out_lines = output.splitlines()
        stripped = [ln.strip() for ln in out_lines]
        start = stripped.index(current.strip()) if current.strip() in stripped else 0
        got = _nearest(pattern, out_lines, start)
    return Result(
        "check-fail",
        f"line {m.group('line')}: {check_line}",
        expected=check_line,
        got=_focus(pattern, got),
        detail=said[:2000],
    )


def first_error(out: Output) -> str:
    if out.crashed:
        return out.crashed
    for d in out.diags:
        if d.severity == "error":
            return d.text
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    return lines[0] if lines else "failed with no message"


def evaluate(
    case: Case, spec: RunSpec, out: Output, workdir: Path, timeout: float
) -> Result:
    """Classifies one run: pass, check-fail or error."""
    stderr_lines = out.stderr
    if spec.verify_diagnostics and not out.crashed:
        missing, unexpected, matched = verify_diagnostics(case, out.diags)
        expected_error = any(d.severity == "error" for d in matched)
        if out.failed and (
            not expected_error or any(d.severity == "error" for d in unexpected)
        ):
            return Result("error", first_error(out), detail=out.stderr[:2000])
        if missing:
            exp = missing[0]
            return Result(
                "check-fail",
                f"expected {exp.severity} not produced: {exp.pattern}",
                expected=exp.text,
                got="; ".join(d.text for d in out.diags)[:300] or "(no diagnostics)",
                detail=out.stderr[:2000],
            )
        if unexpected:
            d = unexpected[0]
            return Result(
                "check-fail",
                f"unexpected {d.severity} (-verify-diagnostics): {d.message}",
                expected="(no diagnostic)",
                got=d.text,
                detail=out.stderr[:2000],
            )
        consumed = {d.text for d in matched}
        stderr_lines = "".join(
            f"{ln}\n" for ln in out.stderr.splitlines() if ln not in consumed
        )
    elif out.failed:
        return Result("error", first_error(out), detail=out.stderr[:2000])
    text = (stderr_lines + out.stdout) if spec.stderr_to_stdout else out.stdout
    return filecheck(case, text, workdir, timeout)


# --- the pool ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Task:
    """One file's selected cases on one side."""

    cases: tuple[Case, ...]
    spec: RunSpec
    side: str  # "meshjit" or "shardy"
    timeout: float
    per_case: bool  # meshjit: one process per case, never one per file


def _guarded(
    case: Case,
    spec: RunSpec,
    workdir: Path,
    run: Callable[[], Output] | Output,
    timeout: float,
) -> Result:
    """Runs (unless given its output) and evaluates one case; a harness bug
    becomes the case's error instead of ending the run."""
    try:
        out = run if isinstance(run, Output) else run()
        result = evaluate(case, spec, out, workdir, timeout)
    except Exception as err:  # the harness, not the case: recorded all the same
        return Result("error", f"harness: {type(err).__name__}: {err}")
    here = f"{workdir}/"  # the temp folder, from paths in diagnostics
    result.reason = result.reason.replace(here, "")
    result.got = result.got.replace(here, "")
    result.detail = result.detail.replace(here, "")
    return result


def run_task(task: Task) -> tuple[list[Result], bool]:
    """A file's cases on one side (in a pool worker): the results, and whether
    meshjit's cases were run one process per case."""
    cases, spec = list(task.cases), task.spec
    with tempfile.TemporaryDirectory(prefix="shardy-corpus-") as tmp:
        workdir = Path(tmp)
        if task.side == "shardy":
            return [
                _guarded(c, spec, workdir, partial(run_shardy, c, spec), task.timeout)
                for c in cases
            ], False
        if spec.pipeline is None:
            reason = "; ".join(spec.notes) or "RUN line has no sdy pass"
            return [
                Result("error", f"no meshjit pipeline: {reason}") for _ in cases
            ], False
        outs = None
        if not task.per_case:
            try:
                outs = run_meshjit_batch(
                    cases, spec, workdir, task.timeout * len(cases)
                )
            except (OSError, ValueError):
                outs = None
        if outs is not None:
            return [
                _guarded(c, spec, workdir, o, task.timeout)
                for c, o in zip(cases, outs, strict=True)
            ], False
        return [
            _guarded(
                c,
                spec,
                workdir,
                partial(run_meshjit, c, spec, workdir, task.timeout),
                task.timeout,
            )
            for c in cases
        ], True


def run_all(
    tasks: list[Task], jobs: int, verbose: bool
) -> tuple[dict[tuple[str, str], list[Result]], list[str]]:
    """(file, side) -> results, and the files meshjit ran one case at a time."""
    results: dict[tuple[str, str], list[Result]] = {}
    per_case: list[str] = []
    order = sorted(tasks, key=lambda t: -len(t.cases))  # the longest first
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_task, t): t for t in order}
        for fut in concurrent.futures.as_completed(futures):
            t = futures[fut]
            key = (t.cases[0].file, t.side)
            try:
                rows, one_by_one = fut.result()
            except concurrent.futures.process.BrokenProcessPool as err:
                rows, one_by_one = (
                    [Result("error", f"worker died: {err}")] * len(t.cases),
                    False,
                )
            results[key] = rows
            if one_by_one and not t.per_case:
                per_case.append(t.cases[0].file)
            if verbose:
                for c, r in zip(t.cases, rows, strict=True):
                    print(
                        f"{t.side:7} {c.case_id:52} {r.status:10} {r.reason[:110]}",
                        flush=True,
                    )
    return results, per_case


# --- report ------------------------------------------------------------------------

_ERROR_NOISE = [
    (re.compile(r"^\S*?:\d+:\d+: "), ""),  # file:line:col:
    (re.compile(r"^(?:error|warning): "), ""),
    (re.compile(r" at \S+:\d+:\d+"), ""),  # `at FILE:L:C` inside the message
    (re.compile(r" ?\([^()]*\)"), ""),  # (size 4), (shape ...)
    (re.compile(r'"[^"]*"(?:\s*\*\s*"[^"]*")*'), '"…"'),  # axis lists
    (re.compile(r"\[[^\]]*\]"), "[…]"),
    (re.compile(r"@[\w.$-]+"), "@F"),
    (re.compile(r"\d+"), "N"),
    (re.compile(r"\s+"), " "),
]
_CHECK_OP = re.compile(r"\b([a-z_]+\.[a-z_][a-z_.]*)")
_ATTR_NAMES = frozenset(
    (
        "sdy.sharding",
        "sdy.sharding_per_value",
        "sdy.sharding_rule",
        "sdy.op_sharding_rule",
    )
)


def cause(result: Result) -> str:
    """A short cause, so that alike failures group: an error's first line with
    names, numbers, shapes and axes blurred; for a failed CHECK its kind and
    what it is about (func argument/result or the op it names, and whether it
    checks a sharding)."""
    if result.status == "error":
        text = result.reason
        for noise, repl in _ERROR_NOISE:
            text = noise.sub(repl, text)
        return "error: " + text.split(";")[0].strip()[:100]
    if result.reason.startswith(("expected ", "unexpected ")):
        return result.reason.split(":", 1)[0]
    kind = CHECK_KIND.search(result.expected)
    if not kind:
        return "check: " + result.reason[:100]
    pattern = kind.group(2).strip()
    sharded = re.search(r"sdy\.sharding(?!_rule)|<@\w+, \[", pattern)
    if kind.group(1) == "CHECK-NOT":
        return f"CHECK-NOT: {pattern[:40]} found"
    if re.match(r"%arg\d+:", pattern):
        what = "func argument"
    elif pattern.startswith("->"):
        what = "func result"
    elif kind.group(1) == "CHECK-LABEL":
        what = re.sub(r"@[\w.$-]+.*", "@F", pattern)
    else:
        ops = [m for m in _CHECK_OP.findall(pattern) if m not in _ATTR_NAMES]
        what = ops[0] if ops else re.sub(r"\s+", " ", pattern)[:40]
    if sharded and kind.group(1) != "CHECK-LABEL":
        what += " sharding"
    return f"{kind.group(1)}: {what}"


def _counts(rows: list[Result]) -> tuple[int, int, int]:
    ran = sum(r.status != "error" for r in rows)
    passed = sum(r.status == "pass" for r in rows)
    return len(rows), ran, passed


@dataclass(slots=True)
class FileRows:
    spec: RunSpec
    meshjit: list[Result] = field(default_factory=list)
    shardy: list[Result] = field(default_factory=list)


def report(
    cases: list[Case],
    specs: dict[str, RunSpec],
    mj: list[Result],
    sd: list[Result] | None,
) -> None:
    per_file: dict[str, FileRows] = {}
    for i, case in enumerate(cases):
        rows = per_file.setdefault(case.file, FileRows(specs[case.file]))
        rows.meshjit.append(mj[i])
        if sd is not None:
            rows.shardy.append(sd[i])
    head = f"{'file':48} {'cases':>5} {'ran':>5} {'CHECK':>5}"
    if sd is not None:
        head += f"  {'shardy ran':>10} {'CHECK':>5}"
    print(head)
    print("-" * len(head))
    for name, rows in per_file.items():
        n, ran, ok = _counts(rows.meshjit)
        line = f"{name.removesuffix('.mlir'):48} {n:5d} {ran:5d} {ok:5d}"
        if sd is not None:
            _, s_ran, s_ok = _counts(rows.shardy)
            line += f"  {s_ran:10d} {s_ok:5d}"
        print(line)
    print("-" * len(head))
    n, ran, ok = _counts(mj)
    line = f"{'total':48} {n:5d} {ran:5d} {ok:5d}"
    if sd is not None:
        _, s_ran, s_ok = _counts(sd)
        line += f"  {s_ran:10d} {s_ok:5d}"
    print(line)
    print(f"\nmeshjit: {n} cases, {ran} run without error, {ok} pass their CHECKs")
    if sd is not None:
        _, s_ran, s_ok = _counts(sd)
        print(
            f"Shardy:  {n} cases, {s_ran} run without error, {s_ok} pass their CHECKs"
        )
    print("\npipelines:")
    for name, rows in per_file.items():
        notes = f"  [{'; '.join(rows.spec.notes)}]" if rows.spec.notes else ""
        print(f"  {name.removesuffix('.mlir')}: -p '{rows.spec.pipeline}'{notes}")

    groups: dict[str, list[int]] = collections.defaultdict(list)
    for i, r in enumerate(mj):
        if r.status != "pass":
            groups[cause(r)].append(i)
    print(f"\nmeshjit failures: {n - ok}, by cause:")
    for why, idx in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"  {len(idx):4d}  {why}")
        r = mj[idx[0]]
        extra = f" (+{len(idx) - 1} more)" if len(idx) > 1 else ""
        print(
            f"          e.g. {cases[idx[0]].case_id} @{cases[idx[0]].func_name}{extra}"
        )
        if r.status == "check-fail":
            print(f"            expected: {r.expected[:150]}")
            print(f"            got:      {r.got[:150]}")
        else:
            print(f"            {r.reason[:150]}")
    if sd is not None:
        shardy_fail = [i for i, r in enumerate(sd) if r.status != "pass"]
        print(f"\nShardy failures: {len(shardy_fail)}")
        for i in shardy_fail:
            print(f"  {cases[i].case_id} @{cases[i].func_name}: {sd[i].reason[:150]}")
        both = sum(
            a.status == "pass" and b.status != "pass"
            for a, b in zip(sd, mj, strict=True)
        )
        print(f"Shardy passes and meshjit does not: {both}")


def write_json(
    path: Path,
    checkout: Path,
    cases: list[Case],
    specs: dict[str, RunSpec],
    mj: list[Result],
    sd: list[Result] | None,
) -> None:
    rows = []
    for i, case in enumerate(cases):
        row: dict[str, Any] = {
            "file": case.file,
            "index": case.index,
            "line": case.first_line + 1,
            "func": case.func,
            "func_name": case.func_name,
            "pipeline": specs[case.file].pipeline,
            "status": mj[i].status,
            "reason": mj[i].reason,
            "cause": cause(mj[i]) if mj[i].status != "pass" else "",
            "expected": mj[i].expected,
            "got": mj[i].got,
        }
        if sd is not None:
            row["shardy_status"] = sd[i].status
            row["shardy_reason"] = sd[i].reason
        rows.append(row)
    n, ran, ok = _counts(mj)
    totals: dict[str, Any] = {"cases": n, "ran": ran, "check_pass": ok}
    if sd is not None:
        _, s_ran, s_ok = _counts(sd)
        totals["shardy"] = {"cases": n, "ran": s_ran, "check_pass": s_ok}
    data = {
        "checkout": str(checkout),
        "totals": totals,
        "files": {name: asdict(spec) for name, spec in specs.items()},
        "cases": rows,
    }
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="shardy_corpus",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("checkout", type=Path, help="a checkout of openxla/shardy")
    parser.add_argument(
        "--files",
        nargs="+",
        default=None,
        metavar="GLOB",
        help=f"test file names (globs) to run; default: all but {EXCLUDED}.mlir",
    )
    parser.add_argument(
        "-k",
        dest="keyword",
        default=None,
        metavar="SUBSTRING",
        help="only cases whose FILE:INDEX or func name contains this",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="OUT",
        help="write every case's result (and the totals) to this file",
    )
    parser.add_argument(
        "--shardy",
        action="store_true",
        help="also run Shardy's own passes on every case (a reference)",
    )
    parser.add_argument("--verbose", action="store_true", help="a line per case")
    parser.add_argument(
        "--debugging",
        action="store_true",
        help="run the debugging cases instead (propagation/debugging/test: "
        "debug-sharding-origins and debug-propagation-edge-sharding)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument(
        "--per-case",
        action="store_true",
        help="one meshjit-opt process per case (slower; the default is one "
        "--split-input-file process per file, falling back to this when its "
        "output cannot be split by case)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per case")
    parser.add_argument(
        "--filecheck",
        default=None,
        metavar="PATH",
        help="the FileCheck to check with (default: the Python `filecheck` "
        "package; e.g. /usr/lib/llvm-15/bin/FileCheck from Debian's "
        "llvm-15-tools, which bounds CHECK-NOT ranges as Shardy's own tests "
        "expect)",
    )
    args = parser.parse_args(argv)
    if args.filecheck:
        os.environ[FILECHECK_ENV] = args.filecheck
    checkout = args.checkout.resolve()
    test_dir = find_test_dir(checkout, args.debugging)
    if test_dir is None:
        wanted = DEBUG_DIR if args.debugging else TEST_DIR
        parser.error(f"{checkout} has no {wanted}/*.mlir (not a shardy checkout?)")
    start = time.perf_counter()
    specs: dict[str, RunSpec] = {}
    cases: list[Case] = []
    for path in select_files(test_dir, args.files):
        text = path.read_text(encoding="utf-8")
        run = next((ln for ln in text.splitlines() if "RUN:" in ln), None)
        if run is None:
            continue
        specs[path.name] = spec = map_run_line(run)
        for case in split_cases(path.name, text, spec.split):
            if args.keyword and not (
                args.keyword in case.case_id or args.keyword in case.func_name
            ):
                continue
            cases.append(case)
    specs = {
        name: spec for name, spec in specs.items() if any(c.file == name for c in cases)
    }
    if not cases:
        print("no cases selected")
        return 0
    print(f"{len(cases)} cases from {len(specs)} files in {test_dir}", flush=True)
    by_file: dict[str, list[Case]] = collections.defaultdict(list)
    for case in cases:
        by_file[case.file].append(case)
    sides = ("meshjit", "shardy") if args.shardy else ("meshjit",)
    tasks = [
        Task(tuple(group), specs[name], side, args.timeout, args.per_case)
        for name, group in by_file.items()
        for side in sides
    ]
    results, one_by_one = run_all(tasks, max(1, args.jobs), args.verbose)
    mj = [r for name in by_file for r in results[(name, "meshjit")]]
    sd = (
        [r for name in by_file for r in results[(name, "shardy")]]
        if args.shardy
        else None
    )
    if one_by_one:
        print(
            "meshjit-opt ran one process per case for (its --split-input-file "
            f"output could not be split by case): {', '.join(one_by_one)}"
        )
    if args.verbose:
        for case, r in zip(cases, mj, strict=True):
            if r.status != "pass" and r.detail:
                print(f"\n== {case.case_id} @{case.func_name}: {r.status}")
                print(r.detail[:1500])
    print()
    report(cases, specs, mj, sd)
    if args.json:
        write_json(args.json, checkout, cases, specs, mj, sd)
        print(f"\nper-case results in {args.json}")
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
