"""Differential fuzzing: meshjit.jit against the unsharded single-device run.

Random programs (`programs.py`: elementwise chains, dot_general with batch and
contracting dims, reductions, broadcasts, reshapes, transposes, slices,
concatenates, pads, gathers, scatters, convolutions, loops, nested jits,
with_sharding_constraint; float32, int32 and complex64) on random meshes
with random valid in/out shardings run on 8 CPU devices and must match the
unsharded run (`differential.py`).
Uneven shardings appear only where meshjit must raise.

Profiles: the default run is a fixed (derandomized) ~100-case sample; the long
profile (`--fuzz-long`) runs MESHJIT_FUZZ_CASES cases (default 10,000), keeps
going after a failure and writes what it found to MESHJIT_FUZZ_REPORT (JSON)
when that is set. Propagation is also compared with Shardy's (test oracle):
the share of identical shardings is reported, not asserted.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import meshjit

from .differential import (
    check,
    check_auto,
    check_memory_limited,
    compare_with_shardy,
    jitted,
    known_bug,
    place_args,
)
from .programs import C64, DTYPES, Program, programs, spec_text

FAST = settings(
    max_examples=int(os.environ.get("MESHJIT_FUZZ_FAST_CASES", "90")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.devices(8)
@FAST
@given(programs())
def test_meshjit_matches_unsharded_run(prog: Program) -> None:
    assume(known_bug(prog) is None)
    check(prog)


@pytest.mark.devices(8)
@settings(FAST, max_examples=int(os.environ.get("MESHJIT_FUZZ_COMPLEX_CASES", "25")))
@given(programs(dtype=C64))
def test_complex_programs_match_unsharded_run(prog: Program) -> None:
    """complex64 programs: the partitioner's zeros, identities and packed
    collectives in a type with two parts (the long profile draws them too)."""
    assume(known_bug(prog) is None)
    check(prog)


@pytest.mark.devices(8)
@settings(FAST, max_examples=int(os.environ.get("MESHJIT_FUZZ_MEMORY_CASES", "20")))
@given(programs())
def test_under_a_memory_limit_matches_unsharded_run(prog: Program) -> None:
    """Partitioned under a memory limit just above what the values take as
    laid out (gathers refused, pieces exchanged): the same answers."""
    assume(known_bug(prog) is None)
    check_memory_limited(prog)


@pytest.mark.devices(8)
@settings(FAST, max_examples=int(os.environ.get("MESHJIT_FUZZ_AUTO_CASES", "20")))
@given(programs())
def test_auto_sharding_matches_unsharded_run(prog: Program) -> None:
    """Every argument and output AUTO: the layouts the integer program
    chooses compute what the unsharded program computes."""
    assume(known_bug(prog) is None)
    check_auto(prog)


@pytest.mark.devices(8)
@settings(FAST, max_examples=25)
@given(programs())
def test_propagation_vs_shardy_runs_and_partitions(prog: Program) -> None:
    """Both propagations run on the module meshjit attaches shardings to, and
    meshjit's partitioner accepts Shardy's choices; agreement is reported only."""
    assume(known_bug(prog) is None)
    found = compare_with_shardy(prog)
    assert found.identical <= found.values
    if found.meshjit_bytes is not None:
        assert found.shardy_bytes is not None


# ----------------------------------------------------------------------------
# Uneven shardings: meshjit must raise, naming the argument


def _uneven(prog: Program, data: st.DataObject) -> tuple[int, int, str] | None:
    """(input index, dim, axis) where the axis does not divide the dim."""
    sizes = prog.sizes
    options = [
        (k, d, a)
        for k, i in enumerate(prog.inputs)
        for d, n in enumerate(i.shape)
        for a in prog.axis_names
        if n % sizes[a]
    ]
    return data.draw(st.sampled_from(options)) if options else None


@pytest.mark.devices(8)
@settings(FAST, max_examples=20)
@given(programs(max_ops=3), st.data())
def test_uneven_in_sharding_raises_naming_the_argument(
    prog: Program, data: st.DataObject
) -> None:
    found = _uneven(prog, data)
    assume(found is not None)
    assert found is not None
    k, d, axis = found
    bad = prog.inputs[k]
    spec = [None] * len(bad.shape)
    spec[d] = axis
    prog.inputs[k] = dataclasses.replace(bad, spec=tuple(spec), placed=None)
    mesh = prog.mesh()
    with pytest.raises(meshjit.ShardingError, match=f"v{bad.vid}.*divisible"):
        jitted(prog, mesh)(*place_args(prog, mesh))


@pytest.mark.devices(8)
@settings(FAST, max_examples=20)
@given(programs(max_ops=2), st.data())
def test_uneven_constraint_matches_unsharded(
    prog: Program, data: st.DataObject
) -> None:
    """A constraint whose axes do not divide a dim: padded blocks, the same
    answer as the unsharded program."""
    sizes = prog.sizes
    last = prog.values[prog.outputs[0]]
    options = [
        (d, a)
        for d, n in enumerate(last.shape)
        for a in prog.axis_names
        if n % sizes[a]
    ]
    assume(bool(options))
    d, axis = data.draw(st.sampled_from(options))
    spec = [None] * len(last.shape)
    spec[d] = axis
    prog.lines.append(
        f"v{prog.outputs[0]} = meshjit.with_sharding_constraint("
        f"v{prog.outputs[0]}, NamedSharding(MESH, {spec_text(tuple(spec))}))"
    )
    check(prog)


# ----------------------------------------------------------------------------
# Long profile


def _signature(err: BaseException) -> str:
    text = str(err).strip()
    if isinstance(err, AssertionError) and ("Mismatch" in text or "Not equal" in text):
        return "AssertionError: wrong values"
    lines = text.splitlines() or [""]
    first = lines[0]
    if first.endswith("rejected the function:") and len(lines) > 1:
        first += " " + re.sub(r"\d+", "N", lines[1].split(": error: ")[-1])
    return f"{type(err).__name__}: {first[:200]}"


class _Stats:
    def __init__(self) -> None:
        self.cases = 0
        self.failures: Counter[str] = Counter()
        self.examples: dict[str, str] = {}
        self.values = self.identical = self.structure = 0
        self.differ = self.more_bytes = self.fewer_bytes = 0
        self.more_examples: list[str] = []
        self.start = time.perf_counter()

    def dump(self, path: str | None) -> None:
        if not path:
            return
        elapsed = time.perf_counter() - self.start
        report: dict[str, Any] = {
            "cases": self.cases,
            "seconds": round(elapsed, 1),
            "cases_per_second": round(self.cases / max(elapsed, 1e-9), 3),
            "failures": dict(self.failures),
            "examples": self.examples,
            "shardy": {
                "values": self.values,
                "identical": self.identical,
                "share": round(self.identical / max(self.values, 1), 4),
                "structure_differs": self.structure,
                "cases_differing": self.differ,
                "meshjit_moves_more_bytes": self.more_bytes,
                "meshjit_moves_fewer_bytes": self.fewer_bytes,
                "more_bytes_examples": self.more_examples[:5],
            },
        }
        Path(path).write_text(json.dumps(report, indent=2) + "\n")


LONG_CASES = int(os.environ.get("MESHJIT_FUZZ_CASES", "10000"))
SHARDY_EVERY = int(os.environ.get("MESHJIT_FUZZ_SHARDY_EVERY", "4"))
AUTO_EVERY = int(os.environ.get("MESHJIT_FUZZ_AUTO_EVERY", "4"))


@pytest.mark.slow
def test_long_profile() -> None:
    stats = _Stats()
    report = os.environ.get("MESHJIT_FUZZ_REPORT")

    @settings(
        max_examples=LONG_CASES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(programs(dtypes=(*DTYPES, C64)))
    def one(prog: Program) -> None:
        stats.cases += 1
        try:
            check(prog)
            if stats.cases % AUTO_EVERY == 0:
                check_auto(prog)
            if stats.cases % SHARDY_EVERY == 0:
                found = compare_with_shardy(prog)
                stats.values += found.values
                stats.identical += found.identical
                stats.structure += found.structure_differs
                if found.meshjit_bytes is not None and found.shardy_bytes is not None:
                    stats.differ += 1
                    if found.meshjit_bytes > found.shardy_bytes:
                        stats.more_bytes += 1
                        stats.more_examples.append(
                            f"meshjit {found.meshjit_bytes} B, shardy "
                            f"{found.shardy_bytes} B\n{prog.describe()}"
                        )
                    elif found.meshjit_bytes < found.shardy_bytes:
                        stats.fewer_bytes += 1
        except Exception as err:  # keep going: the long run collects every kind
            known = known_bug(prog)
            key = f"known ({known}): {_signature(err)}" if known else _signature(err)
            stats.failures[key] += 1
            stats.examples.setdefault(
                key,
                prog.describe()
                + "\n"
                + "".join(traceback.format_exception(err))[-3000:],
            )
        if stats.cases % 50 == 0:
            stats.dump(report)

    one()
    stats.dump(report)
    share = stats.identical / max(stats.values, 1)
    print(
        f"{stats.cases} cases, {sum(stats.failures.values())} failures, "
        f"shardy agreement {share:.2%}"
    )
    new = {k: n for k, n in stats.failures.items() if not k.startswith("known")}
    assert not new, "\n\n".join(
        f"{n} x {k}\n{stats.examples[k]}" for k, n in new.items()
    )


def test_long_profile_report_fields(tmp_path: Path) -> None:
    """The report the long run writes has the fields docs/fuzzing.md quotes."""
    stats = _Stats()
    stats.cases = 3
    stats.failures["X: y"] = 1
    stats.examples["X: y"] = "def f(): ..."
    path = tmp_path / "fuzz.json"
    stats.dump(str(path))
    data = json.loads(path.read_text())
    assert data["cases"] == 3
    assert data["failures"] == {"X: y": 1}
    assert math.isfinite(data["cases_per_second"])
    assert set(data["shardy"]) >= {"share", "meshjit_moves_more_bytes"}
