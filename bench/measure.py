"""Measurements: each figure for meshjit and its anchor taken in the same run.

- propagation: meshjit's propagation-pipeline (and + partition) vs Shardy's
  sdy-propagation-pipeline on the identical module text;
- first call: `meshjit.jit(...).lower(...).compile()` (trace + meshjit's
  pipeline + PJRT compile) vs `jax.jit(...).lower(...).compile()`;
- step time: medians of interleaved A/B calls after warm-up;
- collectives: meshjit's partitioner report (with a shard_map body's own
  collectives, as XLA's HLO has them) vs XLA's SPMD partitioner, read from
  XLA's HLO dump right after `spmd-partitioning` (before collective combiners),
  priced with the same ring formulas;
- memory: per-device bytes from PJRT's compiled memory stats for both;
- numerics: max relative error of meshjit's outputs vs an unsharded run.
"""

from __future__ import annotations

import glob
import math
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jaxlib.mlir import passmanager

import meshjit
from bench import first_call
from bench.workloads import Layout, Workload, bench_mesh, one_device
from meshjit.compiler.graph import graph_session
from meshjit.compiler.ir import make_context, parse_module
from meshjit.compiler.pipeline import parse_pipeline, run_pipeline

SHARDY_PIPELINE = "builtin.module(sdy-propagation-pipeline)"  # reference only


@dataclass
class Row:
    workload: str
    layout: str
    mesh: str
    prop_ms: float = math.nan  # meshjit propagation-pipeline
    prop_part_ms: float = math.nan  # + partition
    shardy_ms: float = math.nan
    first_call_s: float = math.nan
    jax_first_call_s: float = math.nan
    step_ms: float = math.nan
    jax_step_ms: float = math.nan
    collectives: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    xla_collectives: dict[str, int] = field(default_factory=dict)
    xla_bytes: int = 0
    bound: tuple[tuple[str, ...], int] | None = None
    mem: int = 0
    jax_mem: int = 0
    max_rel_err: float = math.nan  # against one device, unsharded
    jax_rel_err: float = math.nan  # jax.jit's sharded run, the same way
    flops: float = math.nan  # per device, XLA's cost analysis of the executable
    xla_flops: float = math.nan
    remarks: list[str] = field(default_factory=list)
    error: str = ""


def mesh_of(name: str) -> Mesh:
    return bench_mesh(name)


def _shardings(mesh: Mesh, specs: Any) -> Any:
    return jax.tree.map(
        lambda s: NamedSharding(mesh, s), specs, is_leaf=lambda s: isinstance(s, P)
    )


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _seconds(fn: Callable[..., Any], *args: Any) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def time_passes(text: str, repeat: int) -> tuple[float, float, float]:
    """Best-of-N ms for meshjit propagation, + partition, and Shardy's, the
    sides alternating. N is at least `repeat`, and for small modules grows
    until each side has run for about a quarter second (at most 50 rounds):
    a few-millisecond run is easily hit by this machine's noise."""
    best = [math.inf, math.inf, math.inf]
    rounds = 0
    spent = 0.0
    while rounds < repeat or (spent < 0.25 and rounds < 50):
        rounds += 1
        ctx = make_context()
        module = parse_module(text, ctx)
        prop = parse_pipeline("propagation-pipeline", ctx)
        part = parse_pipeline("partition", ctx)
        with graph_session(module):  # as meshjit.jit runs them: one graph read
            t1 = _seconds(run_pipeline, prop, module, "bench")
            t2 = _seconds(run_pipeline, part, module, "bench")
        best[0] = min(best[0], t1 * 1e3)
        best[1] = min(best[1], (t1 + t2) * 1e3)
        ctx = make_context()
        module = parse_module(text, ctx)
        with ctx:
            pm = passmanager.PassManager.parse(SHARDY_PIPELINE)
            t3 = _seconds(pm.run, module.operation)
        best[2] = min(best[2], t3 * 1e3)
        spent += min(t1, t3)
    return best[0], best[1], best[2]


_COLLECTIVE = re.compile(
    r"=\s*(?P<shape>\(?[^=]*?\)?)\s+(?P<kind>all-reduce|all-gather|reduce-scatter|"
    r"all-to-all|collective-permute)(?:-start)?\(",
)
_ARRAY = re.compile(r"(pred|[a-z]+\d+)\[([0-9,]*)\]")
_ITEM = {"pred": 1}


def _array_bytes(text: str) -> int:
    total = 0
    for dtype, dims in _ARRAY.findall(text):
        n = math.prod(int(d) for d in dims.split(",") if d) if dims else 1
        size = _ITEM.get(dtype) or max(1, int(re.sub(r"\D", "", dtype) or 32) // 8)
        total += n * size
    return total


def _group_size(line: str) -> int:
    """Devices per replica group, in each spelling XLA prints: explicit
    `{{0,1},{2,3}}`, iota `[2,4]<=[8]`, or mesh axes `mesh['a'=2,'b'=4] {'b'}`
    (with `, device_ids=(...)` between them when the devices are permuted)."""
    mesh = re.search(
        r"replica_groups=mesh\[([^\]]*)\](?:,\s*device_ids=[^{]*)?\s*\{([^}]*)\}",
        line,
    )
    if mesh:
        sizes = dict(re.findall(r"'([^']+)'=(\d+)", mesh.group(1)))
        names = re.findall(r"'([^']+)'", mesh.group(2))
        return math.prod(int(sizes[n]) for n in names if n in sizes)
    iota = re.search(r"replica_groups=\[(\d+),(\d+)\]", line)
    if iota:
        return int(iota.group(2))
    listed = re.search(r"replica_groups=\{\{([0-9,]*)\}", line)
    if listed:
        return len(listed.group(1).split(","))
    return 1


def xla_collectives(hlo: str) -> tuple[dict[str, int], int]:
    """Collective counts and bytes sent per device in XLA-partitioned HLO."""
    counts: dict[str, int] = {}
    total = 0
    for line in hlo.splitlines():
        m = _COLLECTIVE.search(line)
        if m is None:
            continue
        kind = m.group("kind")
        nbytes = _array_bytes(m.group("shape"))
        k = _group_size(line)
        if kind == "all-reduce":
            sent = 2 * nbytes * (k - 1) // k
        elif kind == "all-gather":
            sent = nbytes * (k - 1) // k
        elif kind == "reduce-scatter":
            sent = nbytes * (k - 1)
        elif kind == "all-to-all":
            sent = nbytes * (k - 1) // k
        else:
            sent = nbytes
        if kind != "collective-permute" and k <= 1:
            continue
        counts[kind] = counts.get(kind, 0) + 1
        total += sent
    return counts, total


def max_rel_err(got: Any, want: Any) -> float:
    """The largest |got - want| of any output leaf, relative to that
    output's largest |want|."""
    err = 0.0
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        scale = max(float(np.abs(w).max()), 1e-30)
        err = max(err, float(np.abs(g - w).max()) / scale)
    return err


def _memory(stats: Any) -> int:
    return int(
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        + stats.temp_size_in_bytes
        - stats.alias_size_in_bytes
    )


def _flops(compiled: Any) -> float:
    """`cost_analysis()["flops"]` (a dict, or a list of one per program);
    NaN where the analysis is missing or fails."""
    try:
        found = compiled.cost_analysis()
    except Exception:  # not every backend or build has it
        return math.nan
    if isinstance(found, list | tuple):
        found = found[0] if found else None
    if not found or "flops" not in found:
        return math.nan
    return float(found["flops"])


def measure(
    work: Workload,
    layout: Layout,
    steps: int,
    pass_repeat: int,
    cold_processes: bool = False,
) -> Row:
    """One table row. `cold_processes`: the first-call columns come from
    `first_call.cold_pair` (each side in its own new process) rather than
    from this process, where the second side to trace reuses JAX's caches."""
    bound = None if one_device() else layout.bound  # bounds are for 8 devices
    row = Row(work.name, layout.name, layout.mesh, bound=bound)
    mesh = mesh_of(layout.mesh)
    args = work.make_args()
    in_sh = _shardings(mesh, layout.in_specs)
    out_sh = _shardings(mesh, layout.out_specs)
    placed = jax.device_put(args, in_sh)
    jitted = jax.jit(work.fn, in_shardings=in_sh, out_shardings=out_sh)

    # First call: trace + lower + compile, each side from scratch (meshjit.jit
    # traces with JAX, then runs its own pipeline and PJRT's compile).
    def meshjit_compile() -> Any:
        fresh = meshjit.jit(work.fn, in_shardings=in_sh, out_shardings=out_sh)
        return fresh.lower(*args).compile()

    row.first_call_s, compiled = _timed(meshjit_compile)
    text = jitted.lower(*args).as_text()
    dump = tempfile.mkdtemp(prefix="meshjit-bench-")

    def jax_compile() -> Any:  # a fresh jit: no cache hit
        fresh = jax.jit(work.fn, in_shardings=in_sh, out_shardings=out_sh)
        options = {"xla_dump_to": dump, "xla_dump_hlo_pass_re": "spmd-partitioning"}
        return fresh.lower(*args).compile(compiler_options=options)

    row.jax_first_call_s, jax_compiled = _timed(jax_compile)

    if cold_processes:
        index = work.layouts.index(layout)
        row.first_call_s, row.jax_first_call_s = first_call.cold_pair(work.name, index)

    # Passes: meshjit's vs Shardy's, on the identical module.
    row.prop_ms, row.prop_part_ms, row.shardy_ms = time_passes(text, pass_repeat)

    # Collectives.
    # meshjit's: those its partitioner inserted and a shard_map body's own
    # (XLA's HLO holds both kinds).
    report = compiled.partition_report
    row.collectives = report.counts()
    for c in report.own:
        row.collectives[c.kind] = row.collectives.get(c.kind, 0) + 1
    row.bytes = sent_bytes(report)
    row.remarks = [r.message for r in report.remarks]
    files = glob.glob(os.path.join(dump, "*after_spmd-partitioning*"))
    if files:
        with open(files[0], encoding="utf-8") as f:
            row.xla_collectives, row.xla_bytes = xla_collectives(f.read())

    # Memory per device.
    row.mem = _memory(compiled.memory_analysis())
    row.jax_mem = _memory(jax_compiled.memory_analysis())

    # FLOPs per device, as XLA's cost analysis counts them in each executable.
    row.flops = _flops(compiled)
    row.xla_flops = _flops(jax_compiled)

    # Numerics: against one device, unsharded.
    got = jax.tree.leaves(compiled(*placed))
    one = jax.devices()[0]
    reference = work.reference or work.fn
    want = jax.tree.leaves(jax.jit(reference)(*jax.device_put(args, one)))
    row.max_rel_err = max_rel_err(got, want)
    # jax.jit's own sharded run against the same reference: how far apart
    # sharding puts the two with this program's dtypes (bf16: ~1e-2)
    row.jax_rel_err = max_rel_err(jax.tree.leaves(jax_compiled(*placed)), want)

    # Steady state: interleaved A/B, medians after warm-up.
    def run_meshjit() -> None:
        jax.block_until_ready(compiled(*placed))

    def run_jax() -> None:
        jax.block_until_ready(jax_compiled(*placed))

    ours, theirs = interleaved_medians([run_meshjit, run_jax], steps)
    row.step_ms, row.jax_step_ms = ours * 1e3, theirs * 1e3
    return row


def sent_bytes(report: Any) -> int:
    """Bytes one device sends in a meshjit program: the collectives its
    partitioner inserted and a shard_map body's own (XLA's HLO holds both
    kinds)."""
    return int(report.total_bytes + sum(c.bytes_per_device for c in report.own))


def interleaved_medians(runs: list[Callable[[], None]], steps: int) -> list[float]:
    """Median seconds of each of `runs`, called in turn `steps` times after
    three warm-up rounds (so that they share the machine's noise)."""
    for _ in range(3):
        for run in runs:
            run()
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(steps):
        for k, run in enumerate(runs):
            times[k].append(_timed(run)[0])
    return [statistics.median(t) for t in times]
