"""jax's own jit/pjit tests with meshjit swapped in, side by side with jax.

    python tools/jax_conformance.py JAX_CHECKOUT [--files pjit_test.py ...]
        [--side both|jax|meshjit] [--out DIR] [-k EXPR] [--timeout S]
        [--jax-results JAX_XML]

JAX_CHECKOUT is a checkout of jax at the installed version's tag (for jax
0.10.2: `git clone --branch jax-v0.10.2 https://github.com/jax-ml/jax`); its
`tests/` are run in place, under its own pytest configuration, never copied
here. Each side runs in its own pytest process on 8 CPU devices: "jax" as
is, "meshjit" with `tools/jax_conformance_plugin.py` loaded (jax.jit, pjit and
with_sharding_constraint replaced by meshjit's inside the test modules). The
report gives pass counts for both, then every test jax passes and meshjit
does not, grouped by cause (exception and first line of its message), and
checks them against `tools/jax_conformance_expected.txt` (one test id per
line, then a tab and the reason): exit status 1 when a failure is not listed
there. The tests need absl-py (`pip install absl-py`).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "jax_conformance_expected.txt"
DEFAULT_FILES = ("pjit_test.py", "array_test.py")


@dataclass(frozen=True, slots=True)
class Outcome:
    state: str  # "passed", "failed", "error", "skipped"
    message: str  # the failure's exception and message, first line


def run_side(
    side: str,
    checkout: Path,
    files: list[str],
    out: Path,
    keyword: str | None,
    timeout: float,
) -> dict[str, Outcome]:
    """One pytest process over `files`; test id -> outcome (from JUnit XML)."""
    xml = out / f"{side}.xml"
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()
    env.setdefault("JAX_PLATFORMS", "cpu")
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(checkout / "pyproject.toml"),
        "--rootdir",
        str(checkout),
        "-q",
        "-p",
        "no:cacheprovider",
        f"--junitxml={xml}",
        "-o",
        "junit_family=xunit1",
    ]
    if keyword:
        cmd += ["-k", keyword]
    if side == "meshjit":
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(HERE), env.get("PYTHONPATH", "")) if p
        )
        cmd += ["-p", "jax_conformance_plugin"]
    cmd += [str(checkout / "tests" / f) for f in files]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as cwd:  # not the checkout: its jax/ source
        done = subprocess.run(
            cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
    seconds = time.perf_counter() - start
    if not xml.exists():
        sys.exit(
            f"jax_conformance: the {side} run wrote no results "
            f"(exit {done.returncode}):\n" + (done.stdout + done.stderr)[-3000:]
        )
    print(f"{side}: pytest exit {done.returncode} in {seconds:.0f} s", flush=True)
    return read_junit(xml)


def read_junit(path: Path) -> dict[str, Outcome]:
    found: dict[str, Outcome] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        state, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                state = "failed" if child.tag == "failure" else "error"
                message = child.get("message") or (child.text or "")
                break
            if child.tag == "skipped":
                state = "skipped"
        found[test_id] = Outcome(
            state, message.strip().splitlines()[0] if message.strip() else ""
        )
    return found


_NOISE = [
    (re.compile(r"0x[0-9a-f]+"), "0x…"),
    (re.compile(r"\d+"), "N"),
    (re.compile(r"'[^']{20,}'"), "'…'"),
]


def cause(message: str) -> str:
    """A failure message with addresses, numbers and long quotes blurred, so
    that failures with one cause group together."""
    text = message
    for pattern, repl in _NOISE:
        text = pattern.sub(repl, text)
    return text[:160]


def read_expected(path: Path) -> dict[str, str]:
    expected: dict[str, str] = {}
    if not path.exists():
        return expected
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        test_id, _, reason = line.partition("\t")
        expected[test_id.strip()] = reason.strip()
    return expected


def report(
    theirs: dict[str, Outcome], ours: dict[str, Outcome], expected: dict[str, str]
) -> int:
    total = len(theirs)
    jax_pass = {t for t, o in theirs.items() if o.state == "passed"}
    mj_pass = {t for t, o in ours.items() if o.state == "passed"}
    both = jax_pass & mj_pass
    print(f"tests: {total}")
    print(f"jax passes:     {len(jax_pass)}")
    print(
        f"meshjit passes: {len(mj_pass)} "
        f"({len(both)} of the {len(jax_pass)} jax passes)"
    )
    missing = sorted(jax_pass - mj_pass)
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for t in missing:
        outcome = ours.get(t, Outcome("missing", "not run"))
        groups[f"{outcome.state}: {cause(outcome.message)}"].append(t)
    print(f"\njax passes, meshjit does not: {len(missing)}, by cause:")
    for why, tests in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(tests):4d}  {why}")
        for t in tests[:3]:
            print(f"          {t}")
    unexpected = [t for t in missing if t not in expected]
    stale = sorted(t for t in expected if t in both)
    print(f"\nnot on {EXPECTED.name}: {len(unexpected)}")
    for t in unexpected:
        print(f"  {t}\t{ours.get(t, Outcome('missing', '')).message[:200]}")
    if stale:
        print(f"\non {EXPECTED.name} but passing now (remove them): {len(stale)}")
        for t in stale:
            print(f"  {t}")
    return 1 if unexpected else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="jax_conformance",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument(
        "checkout", type=Path, help="a jax checkout (its tests/ are run)"
    )
    parser.add_argument("--files", nargs="+", default=list(DEFAULT_FILES))
    parser.add_argument("--side", choices=("both", "jax", "meshjit"), default="both")
    parser.add_argument(
        "--out", type=Path, default=None, help="folder for the JUnit XML"
    )
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    parser.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds per side"
    )
    parser.add_argument("--expected", type=Path, default=EXPECTED)
    parser.add_argument(
        "--jax-results",
        type=Path,
        default=None,
        help="JUnit XML of an earlier jax run of the same files (skips that side)",
    )
    args = parser.parse_args(argv)
    checkout = args.checkout.resolve()
    if not (checkout / "tests").is_dir() or not (checkout / "pyproject.toml").exists():
        parser.error(f"{checkout} is not a jax checkout (no tests/ or pyproject.toml)")
    try:
        import absl  # noqa: F401
    except ImportError:
        parser.error("jax's tests need absl-py: pip install absl-py")
    out = args.out or Path(tempfile.mkdtemp(prefix="jax-conformance-"))
    out.mkdir(parents=True, exist_ok=True)
    sides = ("jax", "meshjit") if args.side == "both" else (args.side,)
    results = {}
    for side in sides:
        if side == "jax" and args.jax_results is not None:
            results[side] = read_junit(args.jax_results)
            continue
        results[side] = run_side(
            side, checkout, args.files, out, args.keyword, args.timeout
        )
    print(f"JUnit XML in {out}")
    if args.side != "both":
        counts = collections.Counter(o.state for o in results[args.side].values())
        print(
            f"{args.side}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        )
        return 0
    return report(results["jax"], results["meshjit"], read_expected(args.expected))


if __name__ == "__main__":
    sys.exit(main())
