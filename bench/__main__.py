"""python -m bench [--quick] [--only NAME] [--out bench/results.md]

Runs the workloads and prints one table of ratios meshjit / anchor, every pair
measured side by side in this one process. Benchmarks print figures; they never
fail on a timing.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import datetime
import math
import platform
import statistics
import sys
import tempfile
import traceback

import jax

from bench import (
    dispatch,
    first_call,
    multiprocess,
    report_pages,
    scaling,
    tradeoff,
)
from bench.measure import Row, measure
from bench.models import MODELS
from bench.workloads import ALL, ONE_DEVICE_ENV, one_device
from meshjit import native


def _ratio(a: float, b: float) -> str:
    if not (a == a and b == b) or b == 0:  # NaN or no anchor
        return "n/a"
    return f"{a / b:.2f}x"


def _kinds(counts: dict[str, int]) -> str:
    short = {
        "all-reduce": "AR",
        "all-gather": "AG",
        "reduce-scatter": "RS",
        "all-to-all": "A2A",
        "collective-permute": "CP",
    }
    return " ".join(f"{short.get(k, k)}{v}" for k, v in sorted(counts.items())) or "-"


def _bytes_ratio(row: Row) -> str:
    if row.xla_bytes:
        return _ratio(row.bytes, row.xla_bytes)
    return "=" if row.bytes == 0 else "n/a"


def _bound(row: Row) -> str:
    if row.bound is None:
        return "n/a"
    _, nbytes = row.bound
    if nbytes == 0:
        return "0 B" if row.bytes == 0 else f"0 B (meshjit {row.bytes} B)"
    return _ratio(row.bytes, nbytes)


HEADER = (
    "| workload | layout | mesh | prop / Shardy | prop+part / Shardy "
    "| first call / jax | step / jax | collectives meshjit | collectives XLA "
    "| bytes meshjit / XLA | bytes / bound | mem / jax | flops / XLA "
    "| max rel err (jax.jit's) |"
)


def _flops(r: Row) -> str:
    if not (r.flops == r.flops and r.xla_flops == r.xla_flops):
        return "n/a"
    return f"{_ratio(r.flops, r.xla_flops)} ({r.flops:.3g} / {r.xla_flops:.3g})"


def table_row(r: Row) -> str:
    if r.error:
        return f"| {r.workload} | {r.layout} | {r.mesh} | error: {r.error} |"
    return (
        f"| {r.workload} | {r.layout} | {r.mesh} "
        f"| {_ratio(r.prop_ms, r.shardy_ms)} ({r.prop_ms:.1f} / {r.shardy_ms:.1f} ms) "
        f"| {_ratio(r.prop_part_ms, r.shardy_ms)} "
        f"| {_ratio(r.first_call_s, r.jax_first_call_s)} "
        f"({r.first_call_s:.2f} / {r.jax_first_call_s:.2f} s) "
        f"| {_ratio(r.step_ms, r.jax_step_ms)} "
        f"({r.step_ms:.2f} / {r.jax_step_ms:.2f} ms) "
        f"| {_kinds(r.collectives)} | {_kinds(r.xla_collectives)} "
        f"| {_bytes_ratio(r)} ({r.bytes} / {r.xla_bytes} B) "
        f"| {_bound(r)} | {_ratio(r.mem, r.jax_mem)} | {_flops(r)} "
        f"| {r.max_rel_err:.1e} ({r.jax_rel_err:.1e}) |"
    )


def _median_ratio(rows: list[Row], a: str, b: str) -> tuple[float, float]:
    ratios = [
        getattr(r, a) / getattr(r, b)
        for r in rows
        if not r.error
        and getattr(r, b)
        and getattr(r, b) == getattr(r, b)
        and getattr(r, a) == getattr(r, a)  # NaN: not measured (n/a)
    ]
    if not ratios:
        return math.nan, math.nan
    return statistics.median(ratios), max(ratios)


def summary(rows: list[Row]) -> list[str]:
    out = []
    for label, a, b in (
        ("step time / jax.jit", "step_ms", "jax_step_ms"),
        ("first call / jax.jit", "first_call_s", "jax_first_call_s"),
        ("propagation / Shardy", "prop_ms", "shardy_ms"),
        ("propagate+partition / Shardy", "prop_part_ms", "shardy_ms"),
        ("collective bytes / XLA", "bytes", "xla_bytes"),
        ("per-device memory / jax.jit", "mem", "jax_mem"),
        ("per-device flops / XLA", "flops", "xla_flops"),
    ):
        med, worst = _median_ratio(rows, a, b)
        out.append(f"- {label}: median {med:.2f}x, worst {worst:.2f}x")
    measured = [r for r in rows if not r.error]
    if measured:
        worst = max(measured, key=lambda r: r.max_rel_err)
        out.append(
            f"- numerics: max relative error {worst.max_rel_err:.1e} "
            f"({worst.workload}/{worst.layout}; jax.jit's sharded run there: "
            f"{worst.jax_rel_err:.1e}), both against one unsharded device"
        )
    failed = [f"{r.workload}/{r.layout}" for r in rows if r.error]
    out.append(f"- rows that failed: {', '.join(failed) or 'none'}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small set, under 5 min")
    parser.add_argument("--only", action="append", default=[], help="workload name")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per side")
    parser.add_argument("--out", default=None, help="write the markdown report here")
    parser.add_argument("--no-scaling", action="store_true", help="skip scaling runs")
    parser.add_argument(
        "--no-dispatch", action="store_true", help="skip the per-call overhead runs"
    )
    parser.add_argument(
        "--no-first-call",
        action="store_true",
        help="skip the warm persistent cache runs",
    )
    parser.add_argument(
        "--no-multiprocess",
        action="store_true",
        help="skip the 1 x 8 vs 2 x 4 processes runs",
    )
    parser.add_argument(
        "--no-report",
        action="store_true",
        help="skip opening HTML reports in headless Chromium",
    )
    parser.add_argument(
        "--no-tradeoff",
        action="store_true",
        help="skip timing the fewest-bytes plans of rows above XLA's bytes",
    )
    parser.add_argument(
        "--one-device",
        action="store_true",
        help="every mesh on one device (axes of size 1), of the default platform: "
        "with JAX_PLATFORMS=cuda, the GPU rows; skips the several-process runs",
    )
    args = parser.parse_args(argv)
    if args.one_device:
        os.environ[ONE_DEVICE_ENV] = "1"  # child processes inherit it
        args.no_multiprocess = True
    steps = args.steps or (10 if args.quick else 30)
    works = [w for w in (*ALL, *MODELS) if (not args.quick or w.quick)]
    if args.only:
        works = [w for w in works if w.name in args.only]
    rows: list[Row] = []
    print(f"meshjit modules: {_native_line()}")
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    for work in works:
        for layout in work.layouts:
            try:
                row = measure(
                    work,
                    layout,
                    steps,
                    1 if args.quick else 7,
                    cold_processes=not args.quick,
                )
            except Exception as err:  # report, keep going: a benchmark never stops
                row = Row(work.name, layout.name, layout.mesh)
                row.error = f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
                traceback.print_exc(file=sys.stderr)
            rows.append(row)
            print(table_row(row), flush=True)
    lines = ["", "Summary (meshjit / anchor):", *summary(rows)]
    remarks = sorted({f"{r.workload}/{r.layout}: {m}" for r in rows for m in r.remarks})
    if remarks:
        lines += ["", "Partitioner remarks (ops computed replicated, uneven values):"]
        lines += [f"- {m}" for m in remarks]
    if not args.no_tradeoff and not args.quick:
        lines += [
            "",
            "Bytes against time (rows above 1.00x XLA's bytes): the plan chosen "
            "by the cost model against the one it gives less its launch latency "
            "(each choice then sends the fewest bytes), both timed with jax.jit's "
            "in this process, medians of interleaved steps:",
        ]
        lines += tradeoff.lines(rows, steps)
    if not args.no_dispatch:
        lines += [
            "",
            "Per-call overhead (a step on N small arrays "
            + ("on one device" if dispatch.device_count() == 1 else "split 8 ways")
            + ", "
            "single calls alternating with jax.jit's, medians):",
        ]
        lines += dispatch.lines(samples=60 if args.quick else 0)
    if not args.no_first_call:
        lines += [
            "",
            "First call (trace + compile) with meshjit's persistent "
            "cache warm, in a new process, vs jax.jit's cold first call:",
        ]
        lines += first_call.lines(first_call.WORKLOADS[:1] if args.quick else None)
    if not args.no_multiprocess:
        lines += [
            "",
            "Several processes (python -m meshjit.launch, gloo over loopback): "
            "the same step on 1 process x 8 devices and 2 processes x 4 devices, "
            "medians of single steps alternating with jax.jit's:",
        ]
        lines += multiprocess.lines(
            steps=min(steps, 10) if args.quick else steps,
            workloads=multiprocess.WORKLOADS[:1]
            if args.quick
            else multiprocess.WORKLOADS,
        )
    if not args.no_report and not args.quick:
        lines += [
            "",
            "HTML report (`Compiled.report`, `meshjit-opt --report`) opened in "
            "headless Chromium:",
        ]
        with tempfile.TemporaryDirectory(prefix="meshjit-reports-") as pages:
            lines += report_pages.lines(pages)
    if not args.no_scaling:
        sizes = [1000, 10000] if args.quick else [1000, 10000, 100000]
        points = scaling.size_scaling(sizes)
        lines += ["", "Scaling with module size (generated chain, mesh 2x4):"]
        for ops, prop, part, shardy in points:
            lines.append(
                f"- {ops} ops: propagation {prop:.2f} s (Shardy {shardy:.2f} s, "
                f"{prop / shardy:.2f}x), partition {part:.2f} s"
            )
        s_prop = scaling.slope([(n, p) for n, p, _, _ in points])
        s_all = scaling.slope([(n, p + q) for n, p, q, _ in points])
        lines.append(
            f"- log-log slope: propagation {s_prop:.2f}, both passes {s_all:.2f}"
        )
        devs = scaling.device_scaling(200)
        (n8, p8, q8), (n512, p512, q512) = devs
        lines.append(
            f"- 1000 ops, {n8} vs {n512} devices (passes only, no execution): "
            f"{p8 + q8:.2f} s vs {p512 + q512:.2f} s = {(p512 + q512) / (p8 + q8):.2f}x"
        )
    print("\n".join(lines))
    if args.out:
        write_report(args.out, rows, lines, args.quick)
    return 0


def _devices_line() -> str:
    device = jax.devices()[0]
    if device.platform == "cpu":
        kind = f"{len(jax.devices())} virtual CPU devices"
    else:
        kind = f"{len(jax.devices())} x {device.device_kind} ({device.platform})"
    return kind + (", every mesh on one device (--one-device)" if one_device() else "")


def _native_line() -> str:
    st = native.status()
    if native.active():
        return "compiled with mypyc (meshjit-native build)"
    return f"the Python source ({st.reason})"


def write_report(path: str, rows: list[Row], lines: list[str], quick: bool) -> None:
    import jaxlib

    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = [
        "# meshjit benchmark results",
        "",
        f"Generated by `python -m bench{' --quick' if quick else ''}"
        f"{' --one-device' if one_device() else ''} --out {path}` "
        f"on {when}.",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, "
        f"{_devices_line()}; "
        f"Python {platform.python_version()}, "
        f"jax {jax.__version__}, jaxlib {jaxlib.__version__}; "
        f"meshjit modules: {_native_line()}.",
        "Every ratio is meshjit / anchor, both measured in the same process run. "
        "Timings on this machine are noisy; compare ratios, not seconds.",
        "",
        "Columns: propagation vs Shardy's `sdy-propagation-pipeline` on the same "
        "module (propagation and partition share one graph read, as in "
        "`meshjit.jit`); first call = trace + compile, each side in its own new "
        "process after one tiny compile on each side, the fastest of 3 processes "
        "per side (`--quick`: both in the bench's process, meshjit first); "
        "step = median of interleaved runs; "
        "collectives: counts (AR all-reduce, AG all-gather, RS reduce-scatter, A2A "
        "all-to-all, CP collective-permute) and bytes sent per device, XLA's read "
        "right after its SPMD partitioner, each op counted once as written (one "
        "in a loop body once, not per iteration, on both sides); "
        "bound = analytic minimum where known "
        "(for FSDP: the cost of the FSDP pattern, gather parameters and "
        "reduce-scatter gradients, which meshjit may beat by moving activations "
        "instead); flops = per-device FLOPs by XLA's cost analysis of each "
        "compiled executable (meshjit's vs jax.jit's), n/a where unavailable; "
        "max rel err = the largest difference of an output from the program run "
        "unsharded on one device, relative to that output's largest value, and "
        "in brackets jax.jit's sharded run's (bf16 programs: ~1e-2 on both).",
        "",
        HEADER,
        "|" + "---|" * (HEADER.count("|") - 1),
        *(table_row(r) for r in rows),
        *lines,
    ]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(head) + "\n")


if __name__ == "__main__":
    sys.exit(main())
