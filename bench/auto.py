"""Auto-sharding against hand-written layouts, side by side in one process.

`python -m bench.auto [--only NAME] [--steps N] [--rounds R] [--out FILE]`: for each
real-model workload on the meshes (8,) and (2, 4), compiles the step with
every argument and result `AUTO(mesh)` and with the hand layouts an expert
would try first: data parallel (batch split over every axis, parameters
replicated), FSDP (parameters also split on their first dim the mesh
divides) and the workload's own layouts for that mesh (Megatron DP x TP,
expert parallel, ...). Reports step time (interleaved medians; a train step
as a loop runs it: on the previous step's outputs, moved into the argument
layouts where they differ) of each, AUTO / the best hand layout (the median
over `--rounds` rounds of interleaved steps, with the rounds' range), XLA's
per-device memory, the solver's status, size and time, and numerics against
one device. Then one memory case: AUTO with a budget of 3/4 of data
parallelism's peak (the search's own estimate of it), which must fit and
run; then the search's time on larger modules: the Llama step with Adam at
4 and 8 layers (about 2k and 4k ops) over (8,) and (2, 4) (`--scale 0`
skips it). Benchmarks print figures; they never fail on
a timing.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import datetime
import math
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit
from bench.measure import _memory, max_rel_err
from bench.models import MODELS, llama_adam_step, llama_args
from bench.workloads import ALL, Workload, bench_mesh
from meshjit.passes.partitioner.memory import fmt_bytes
from meshjit.sharding import AUTO

# Per workload: which positional arguments are the batch (the rest are
# parameters and optimizer state; a 0-d argument stays replicated).
BATCH_ARGS: dict[str, tuple[int, ...]] = {
    "mlp_train_dp_tp": (2, 3),
    "fsdp_adam": (4,),
    "resnet_train": (1, 2),
    "gpt2_train": (1, 2),
    "llama_fsdp": (4, 5),
    "vit_fwd": (1,),
    "t5_fwd": (1, 2),
    "moe_layer": (0,),
}
# Train steps: how many leading positional arguments (parameters, optimizer
# state) the step returns first, updated, for the next step. Their step time
# is measured as a training loop runs it: those arguments donated, each step
# taking the last one's outputs, moved into the argument layouts where they
# differ (for every layout, hand-written or AUTO).
FEEDBACK: dict[str, int] = {
    "mlp_train_dp_tp": 2,
    "fsdp_adam": 4,
    "resnet_train": 1,
    "gpt2_train": 1,
    "llama_fsdp": 3,
}
MESHES = ("8", "2x4")


@dataclass
class Case:
    workload: str
    mesh: str
    steps_ms: dict[str, float] = field(default_factory=dict)
    memory: dict[str, int] = field(default_factory=dict)
    errors: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    auto_summary: str = ""
    auto_layouts: str = ""
    solve_s: float = math.nan
    build_s: float = math.nan
    same_as: str = ""  # a hand layout whose partitioned program AUTO's equals
    # Per round of interleaved steps, each layout's median (ms): a ratio is
    # judged by its median over rounds, and the rounds' range says how much
    # it moves within one process.
    rounds_ms: list[dict[str, float]] = field(default_factory=list)

    def round_ratios(self) -> list[float]:
        """AUTO / the best hand layout (overall) in each round."""
        best, _ = self.best_hand()
        return [
            r["AUTO"] / r[best]
            for r in self.rounds_ms
            if "AUTO" in r and best in r and r[best] > 0
        ]

    def best_hand(self) -> tuple[str, float]:
        hand = {k: v for k, v in self.steps_ms.items() if k != "AUTO"}
        if not hand:
            return "", math.nan
        name = min(hand, key=lambda k: hand[k])
        return name, hand[name]


def _find(name: str) -> Workload:
    for w in (*ALL, *MODELS):
        if w.name == name:
            return w
    raise KeyError(name)


def _all_axes(mesh: jax.sharding.Mesh) -> Any:
    names = tuple(mesh.axis_names)
    return names[0] if len(names) == 1 else names


def _split_first(x: Any, mesh: jax.sharding.Mesh, any_dim: bool) -> P:
    """The leaf split over every mesh axis on its first dim the mesh size
    divides (only dim 0 unless `any_dim`), else replicated."""
    shape = np.shape(x)
    for d, n in enumerate(shape):
        if n % mesh.size == 0:
            return P(*([None] * d), _all_axes(mesh))
        if not any_dim:
            break
    return P()


def hand_layouts(work: Workload, mesh_name: str) -> dict[str, tuple[Any, Any]]:
    """name -> (in_shardings, out_shardings) of the layouts an expert tries."""
    mesh = bench_mesh(mesh_name)
    args = work.make_args()
    batch = BATCH_ARGS[work.name]

    def layout(params_split: bool) -> tuple[Any, Any]:
        specs = []
        for i, a in enumerate(args):
            if i in batch:
                specs.append(jax.tree.map(lambda x: _split_first(x, mesh, False), a))
            elif params_split:
                specs.append(jax.tree.map(lambda x: _split_first(x, mesh, True), a))
            else:
                specs.append(jax.tree.map(lambda _: P(), a))
        shard = jax.tree.map(
            lambda s: NamedSharding(mesh, s),
            tuple(specs),
            is_leaf=lambda s: isinstance(s, P),
        )
        return shard, None

    out = {"DP": layout(False), "FSDP": layout(True)}
    for own in work.layouts:
        if own.mesh != mesh_name:
            continue

        def named(specs: Any) -> Any:
            return jax.tree.map(
                lambda s: NamedSharding(mesh, s),
                specs,
                is_leaf=lambda s: isinstance(s, P),
            )

        out[own.name] = (named(own.in_specs), named(own.out_specs))
    return out


def _layouts_text(shardings: Any) -> str:
    """How many argument leaves the choice splits, and over which specs."""
    specs = [str(s.spec) for s in jax.tree.leaves(shardings)]
    split = sum(1 for s in specs if s != "PartitionSpec()")
    common = sorted(set(specs), key=specs.count, reverse=True)[:3]
    return (
        f"{split}/{len(specs)} argument leaves split; most common {', '.join(common)}"
    )


def _stepper(compiled: Any, placed: Any, fed: int) -> Callable[[], Any]:
    """One step; for a train step (`fed` > 0) one loop iteration: the step
    on the previous outputs, those moved into the argument layouts where
    they differ (an AUTO choice whose outputs come out in other layouts than
    its arguments pays for that here, as a training loop would)."""
    if not fed:
        return lambda: jax.block_until_ready(compiled(*placed))
    tree = jax.tree.structure(tuple(placed[:fed]))
    targets = jax.tree.leaves(compiled.input_shardings[0][:fed])
    state = [tuple(placed)]

    def step() -> Any:
        current = state[0]
        outs = jax.tree.leaves(compiled(*current))[: tree.num_leaves]
        moved = [
            x if x.sharding.is_equivalent_to(t, x.ndim) else jax.device_put(x, t)
            for x, t in zip(outs, targets, strict=True)
        ]
        state[0] = (*jax.tree.unflatten(tree, moved), *current[fed:])
        return jax.block_until_ready(state[0])

    return step


def run_case(work: Workload, mesh_name: str, steps: int, rounds: int = 1) -> Case:
    case = Case(work.name, mesh_name)
    mesh = bench_mesh(mesh_name)
    args = work.make_args()
    one = jax.devices()[0]
    want = jax.jit(work.reference or work.fn)(*jax.device_put(args, one))
    runs: dict[str, Callable[[], Any]] = {}
    programs: dict[str, str] = {}
    layouts: dict[str, tuple[Any, Any]] = dict(hand_layouts(work, mesh_name))
    layouts["AUTO"] = (AUTO(mesh), AUTO(mesh))
    for name, (ins, outs) in layouts.items():
        try:
            kwargs: dict[str, Any] = {"in_shardings": ins}
            if outs is not None:
                kwargs["out_shardings"] = outs
            fed = FEEDBACK.get(work.name, 0)
            if fed:  # as a training loop does: the state's buffers are reused
                kwargs["donate_argnums"] = tuple(range(fed))
            f = meshjit.jit(work.fn, **kwargs)
            compiled = f.lower(*args).compile()
            placed = jax.device_put(args, compiled.input_shardings[0])
            case.errors[name] = max_rel_err(compiled(*placed), want)
            placed = jax.device_put(args, compiled.input_shardings[0])
            case.memory[name] = _memory(compiled.memory_analysis())
            programs[name] = compiled.as_text("partitioned")
            if name == "AUTO" and compiled.auto_shard is not None:
                result = compiled.auto_shard
                case.auto_summary = result.summary()
                case.solve_s = result.solution.seconds
                case.build_s = result.build_seconds
                case.auto_layouts = _layouts_text(compiled.input_shardings[0])

            runs[name] = _stepper(compiled, placed, fed)
        except Exception as err:  # a layout that does not compile is reported
            case.failed[name] = f"{type(err).__name__}: {str(err)[:200]}"
    same = [k for k, t in programs.items() if k != "AUTO" and t == programs.get("AUTO")]
    case.same_as = ", ".join(same)
    for run in runs.values():
        for _ in range(2):
            run()
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        this: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(steps):
            for name, run in runs.items():
                start = time.perf_counter()
                run()
                this[name].append(time.perf_counter() - start)
        case.rounds_ms.append({k: statistics.median(v) * 1e3 for k, v in this.items()})
        for k, v in this.items():
            times[k] += v
    case.steps_ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    return case


@dataclass
class BudgetCase:
    workload: str
    mesh: str
    dp_peak: float = math.nan  # the search's estimate for data parallelism
    budget: float = math.nan
    peak: float = math.nan  # the budgeted choice's estimate
    dp_ms: float = math.nan
    auto_ms: float = math.nan
    dp_mem: int = 0
    auto_mem: int = 0
    err: float = math.nan
    note: str = ""


def run_budget(work: Workload, mesh_name: str, steps: int) -> BudgetCase:
    """AUTO under 3/4 of data parallelism's peak of live values."""
    case = BudgetCase(work.name, mesh_name)
    mesh = bench_mesh(mesh_name)
    args = work.make_args()
    want = jax.jit(work.reference or work.fn)(*jax.device_put(args, jax.devices()[0]))
    dp_in, _ = hand_layouts(work, mesh_name)["DP"]
    dp = meshjit.jit(work.fn, in_shardings=dp_in, out_shardings=AUTO(mesh))
    dp_compiled = dp.lower(*args).compile()  # arguments fixed: only DP's peak
    assert dp_compiled.auto_shard is not None
    case.dp_peak = dp_compiled.auto_shard.peak()[0]
    case.budget = 0.75 * case.dp_peak
    auto = AUTO(mesh, memory_budget=int(case.budget))
    f = meshjit.jit(work.fn, in_shardings=auto, out_shardings=auto)
    try:
        compiled = f.lower(*args).compile()
    except Exception as err:
        case.note = f"{type(err).__name__}: {str(err)[:300]}"
        return case
    assert compiled.auto_shard is not None
    case.peak = compiled.auto_shard.peak()[0]
    placed = jax.device_put(args, compiled.input_shardings[0])
    case.err = max_rel_err(compiled(*placed), want)
    dp_placed = jax.device_put(args, dp_compiled.input_shardings[0])
    case.dp_mem, case.auto_mem = (
        _memory(dp_compiled.memory_analysis()),
        _memory(compiled.memory_analysis()),
    )
    a, b = [], []
    for i in range(steps + 2):
        start = time.perf_counter()
        jax.block_until_ready(dp_compiled(*dp_placed))
        mid = time.perf_counter()
        jax.block_until_ready(compiled(*placed))
        if i >= 2:
            a.append(mid - start)
            b.append(time.perf_counter() - mid)
    case.dp_ms, case.auto_ms = statistics.median(a) * 1e3, statistics.median(b) * 1e3
    return case


@dataclass
class ScaleCase:
    """The search on a deeper Llama step: its size and time."""

    layers: int
    mesh: str
    ops: int  # stablehlo/chlo ops of the traced module, its functions included
    solve_s: float
    build_s: float
    summary: str


_OP = re.compile(r"^\s*(?:%[^=]*= )?\"?(?:stablehlo|chlo)\.", re.MULTILINE)


def run_scale(layers: int, mesh_name: str) -> ScaleCase:
    """The Llama step with Adam at `layers` layers, every argument and
    result AUTO over `mesh_name`: the module's op count and the search's
    build and solve time (`share-layers=auto`, as `meshjit.jit` runs it)."""
    args = llama_args(layers)
    auto = AUTO(bench_mesh(mesh_name))
    lowered = meshjit.jit(llama_adam_step, in_shardings=auto, out_shardings=auto).lower(
        *args
    )
    ops = len(_OP.findall(lowered.as_text("traced")))
    result = lowered.compile().auto_shard
    assert result is not None
    return ScaleCase(
        layers,
        mesh_name,
        ops,
        result.solution.seconds,
        result.build_seconds,
        result.summary(),
    )


def scale_report(scales: Sequence[ScaleCase]) -> list[str]:
    if not scales:
        return []
    lines = [
        "",
        "Search time on larger modules (the Llama step with Adam, deeper; every "
        "argument and result AUTO):",
        "",
        "| layers | mesh | ops | solve | build | search |",
        "|---|---|---|---|---|---|",
    ]
    for c in scales:
        lines.append(
            f"| {c.layers} | {c.mesh} | {c.ops} | {c.solve_s:.2f} s | "
            f"{c.build_s:.2f} s | {c.summary} |"
        )
    return lines


def report(cases: Sequence[Case], budgets: Sequence[BudgetCase]) -> list[str]:
    lines = [
        "| workload | mesh | AUTO step (train: a loop step) | best hand layout | "
        "AUTO / best | "
        "other hand layouts | memory AUTO / best | solve (build) | AUTO chose | "
        "max rel err |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    ratios = []
    solves = []
    for c in cases:
        best, best_ms = c.best_hand()
        auto_ms = c.steps_ms.get("AUTO", math.nan)
        ratio = auto_ms / best_ms if best_ms == best_ms else math.nan
        by_round = c.round_ratios()
        if len(by_round) > 1:  # judged by the rounds' median
            ratio = statistics.median(by_round)
        measured = ratio
        if c.same_as:  # one executable twice: its timings differ only by noise
            ratio = 1.0
        if ratio == ratio:
            ratios.append(ratio)
        if c.solve_s == c.solve_s:
            solves.append(c.solve_s)
        others = ", ".join(
            f"{k} {v:.2f} ms" for k, v in c.steps_ms.items() if k not in ("AUTO", best)
        )
        if c.failed:
            others += "; failed: " + ", ".join(sorted(c.failed))
        mem = (
            f"{c.memory['AUTO'] / c.memory[best]:.2f}x"
            if "AUTO" in c.memory and best in c.memory and c.memory[best]
            else "n/a"
        )
        spread = (
            f"rounds {min(by_round):.2f}-{max(by_round):.2f}x"
            if len(by_round) > 1
            else ""
        )
        same = (
            f" (the same program as {c.same_as}; measured {measured:.2f}x"
            + (f", {spread}" if spread else "")
            + ")"
            if c.same_as
            else (f" ({spread})" if spread else "")
        )
        err = max(c.errors.values(), default=math.nan)
        lines.append(
            f"| {c.workload} | {c.mesh} | {auto_ms:.2f} ms | "
            f"{best} {best_ms:.2f} ms | {ratio:.2f}x{same} | {others} | {mem} | "
            f"{c.solve_s:.2f} s ({c.build_s:.2f} s) | {c.auto_layouts} | {err:.1e} |"
        )
    lines.append("")
    if ratios:
        lines.append(
            f"AUTO / best hand layout: median {statistics.median(ratios):.2f}x, "
            f"worst {max(ratios):.2f}x, best {min(ratios):.2f}x over "
            f"{len(ratios)} cases; solve time: median "
            f"{statistics.median(solves):.2f} s, worst {max(solves):.2f} s"
        )
    for c in cases:
        if c.failed:
            for k, v in c.failed.items():
                lines.append(f"- {c.workload}/{c.mesh} {k} failed: {v}")
    lines.append("")
    lines.append("Searches (auto-shard's own summary):")
    for c in cases:
        lines.append(f"- {c.workload}/{c.mesh}: {c.auto_summary}")
    lines.append("")
    lines.append(
        "Memory budget (3/4 of data parallelism's peak of live values, as the "
        "search estimates it):"
    )
    for b in budgets:
        if b.note:
            lines.append(f"- {b.workload}/{b.mesh}: {b.note}")
            continue
        fits = "fits" if b.peak <= b.budget else "DOES NOT FIT"
        lines.append(
            f"- {b.workload}/{b.mesh}: DP peak {fmt_bytes(b.dp_peak)}, budget "
            f"{fmt_bytes(b.budget)}, chosen peak {fmt_bytes(b.peak)} ({fits}); "
            f"XLA's memory per device DP {fmt_bytes(b.dp_mem)}, AUTO "
            f"{fmt_bytes(b.auto_mem)}; step DP {b.dp_ms:.2f} ms, AUTO "
            f"{b.auto_ms:.2f} ms; max rel err {b.err:.1e}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="workload name (repeatable)")
    parser.add_argument("--mesh", action="append", choices=MESHES)
    parser.add_argument(
        "--steps", type=int, default=15, help="interleaved steps per round"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of interleaved steps; AUTO / best is the rounds' median",
    )
    parser.add_argument("--out", help="also write the report (markdown) here")
    parser.add_argument(
        "--scale",
        type=int,
        default=8,
        help="search time on the Llama step at 4 and up to this many layers (0: skip)",
    )
    args = parser.parse_args(argv)
    names = args.only or list(BATCH_ARGS)
    meshes = args.mesh or list(MESHES)
    cases = []
    for name in names:
        for mesh in meshes:
            print(f"== {name} on {mesh}", file=sys.stderr, flush=True)
            cases.append(run_case(_find(name), mesh, args.steps, args.rounds))
    budgets = []
    for name in ("gpt2_train", "mlp_train_dp_tp"):
        if name in names:
            print(f"== {name} with a memory budget", file=sys.stderr, flush=True)
            budgets.append(run_budget(_find(name), "8", args.steps))
    scales = []
    for layers in (4, 8):
        if layers > args.scale:
            continue
        for mesh in meshes:
            print(f"== llama, {layers} layers, on {mesh}", file=sys.stderr, flush=True)
            scales.append(run_scale(layers, mesh))
    lines = report(cases, budgets) + scale_report(scales)
    print("\n".join(lines))
    if args.out:
        head = [
            "# Auto-sharding against hand layouts",
            "",
            f"Generated by `python -m bench.auto` on "
            f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; "
            f"{jax.device_count()} {jax.devices()[0].platform} devices, jax "
            f"{jax.__version__}. Step times are medians of interleaved runs in one "
            f"process ({args.rounds} rounds of {args.steps} steps per layout; "
            "AUTO / best is the median of the rounds' ratios, their range in "
            "brackets); ratios, not seconds, are what compare.",
            "",
        ]
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(head + lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
