"""Kernels XLA compiles per workload: meshjit's program against jax.jit's.

XLA's CPU backend compiles each distinct kernel (a fusion, an elemental op)
as its own LLVM module, 10-20 ms each on this machine: most of a first call
on the real-model workloads is that, and the kernel count is the part of it
that does not move with the machine's noise (first-call timings vary by up
to 30% from process to process). Each side compiles in a new process as
the bench's first-call column does (`python -m bench.first_call`: a tiny
warm-up compile, then the program) with `--xla_dump_to`; the count is the
number of LLVM modules XLA dumps for the program's module (the last one it
compiled), kernels XLA deduplicated counted once, as it compiles them.

`python -m bench.kernels [--only NAME]` prints a markdown table (about five
minutes for every workload). Not part of `python -m bench`: dumping slows
the compile it counts, so the first-call column is timed without it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_SUFFIX = ".ir-no-opt.ll"


def count_in(folder: Path) -> int:
    """LLVM modules XLA dumped for the last module it compiled (the
    program's, after the warm-up's; `module_NNNN.NAME.KERNEL.ir-no-opt.ll`,
    NNNN in compile order), -1 if none."""
    by_module: Counter[int] = Counter()
    for path in folder.iterdir():
        if path.name.endswith(_SUFFIX):
            by_module[int(path.name.split(".")[0].removeprefix("module_"))] += 1
    return by_module[max(by_module)] if by_module else -1


def kernels(side: str, name: str, index: int) -> int:
    """Distinct kernels XLA compiles for `side`'s ("meshjit" or "jax") program
    of the workload's layout `index`, in a new process."""
    with tempfile.TemporaryDirectory(prefix="meshjit-kernels-") as dump:
        env = dict(os.environ)
        env["XLA_FLAGS"] = (
            f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8"
            f" --xla_dump_to={dump}"
        ).strip()
        env.pop("MESHJIT_CACHE_DIR", None)
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        root = Path(__file__).resolve().parent.parent
        proc = subprocess.run(
            [sys.executable, "-m", "bench.first_call", side, name, str(index)],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
            raise RuntimeError(
                f"{side} compile of {name} layout {index} failed:\n{tail}"
            )
        return count_in(Path(dump))


HEADER = (
    "| workload | layout | kernels meshjit | kernels jax.jit | difference |",
    "|---|---|---|---|---|",
)


def rows(only: list[str]) -> Iterator[str]:
    """One table row per workload layout (`only`: these workloads)."""
    for work in _all_workloads():
        if only and work.name not in only:
            continue
        for index, layout in enumerate(work.layouts):
            ours = kernels("meshjit", work.name, index)
            theirs = kernels("jax", work.name, index)
            yield (
                f"| {work.name} | {layout.name} | {ours} | {theirs} | "
                f"{ours - theirs:+d} |"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.kernels",
        description="Distinct kernels XLA compiles for each workload, meshjit's "
        "program against jax.jit's (each side in a new process).",
    )
    parser.add_argument("--only", action="append", default=[], help="workload name")
    args = parser.parse_args(argv)
    known = {w.name for w in _all_workloads()}
    unknown = [n for n in args.only if n not in known]
    if unknown:
        parser.error(
            f"unknown workload {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    for line in HEADER:
        print(line)
    for line in rows(args.only):
        print(line, flush=True)
    return 0


def _all_workloads() -> tuple[Any, ...]:
    from bench import models, workloads

    return (*workloads.ALL, *models.MODELS)


if __name__ == "__main__":
    sys.exit(main())
