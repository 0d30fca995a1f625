"""Bytes against time: where meshjit's program sends more bytes than XLA's.

meshjit's partitioner chooses each exchange by its cost model's estimated
time (a launch latency per collective plus bytes over bandwidth), so one
all-gather of a convolution's halo pieces can win over two permutes that
send a third of the bytes. For every row of the table above 1.00x XLA's
bytes, this compiles the same program again with the same constants less
the launch latency (so the plan that sends the fewest bytes wins each
choice) and times both programs and jax.jit's, interleaved in this process:
what the fewer bytes would cost or save, measured.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import jax

import meshjit
from bench.measure import Row, _shardings, interleaved_medians, mesh_of, sent_bytes
from bench.models import MODELS
from bench.workloads import ALL
from meshjit.passes.partitioner.cost import PLATFORMS, cost_data

# A launch latency the model cannot tell from zero (a cost-model file
# wants every number positive).
_NO_LATENCY = 1e-12


def bytes_first_cost(path: str) -> str:
    """Writes the CPU cost model less its launch latency to `path` (a
    cost-model file, as `python -m meshjit.calibrate --out` writes) and
    returns `path`."""
    model = dataclasses.replace(PLATFORMS["cpu"], latency=_NO_LATENCY, kind_latency=())
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cost_data(model), f)
    return path


def _compile(work: Any, layout: Any, cost: str | None) -> Any:
    mesh = mesh_of(layout.mesh)
    in_sh = _shardings(mesh, layout.in_specs)
    out_sh = _shardings(mesh, layout.out_specs)
    saved = os.environ.get("MESHJIT_COST")
    if cost is not None:
        os.environ["MESHJIT_COST"] = cost
    try:
        # a new function each time: no wrapper shares another's cache
        fn = (lambda f: lambda *a: f(*a))(work.fn)
        fresh = meshjit.jit(fn, in_shardings=in_sh, out_shardings=out_sh)
        return fresh.lower(*work.make_args()).compile()
    finally:
        if saved is None:
            os.environ.pop("MESHJIT_COST", None)
        else:
            os.environ["MESHJIT_COST"] = saved


def lines(rows: Sequence[Row], steps: int) -> list[str]:
    works = {w.name: w for w in (*ALL, *MODELS)}
    out: list[str] = []
    with tempfile.TemporaryDirectory(prefix="meshjit-cost-") as folder:
        cost = bytes_first_cost(os.path.join(folder, "bytes_first.json"))
        for row in rows:
            if row.error or not row.xla_bytes or row.bytes <= row.xla_bytes:
                continue
            work = works[row.workload]
            layout = next(x for x in work.layouts if x.name == row.layout)
            try:
                out.append(_line(row, work, layout, cost, steps))
            except Exception as err:  # a benchmark reports and goes on
                out.append(
                    f"- {row.workload}/{row.layout}: failed ({type(err).__name__}: "
                    f"{str(err).splitlines()[0][:120]})"
                )
    return out or ["- no row sends more bytes than XLA's"]


def _line(row: Row, work: Any, layout: Any, cost: str, steps: int) -> str:
    mesh = mesh_of(layout.mesh)
    in_sh = _shardings(mesh, layout.in_specs)
    out_sh = _shardings(mesh, layout.out_specs)
    placed = jax.device_put(work.make_args(), in_sh)
    chosen = _compile(work, layout, None)
    fewest = _compile(work, layout, cost)
    theirs = jax.jit(work.fn, in_shardings=in_sh, out_shardings=out_sh)

    def runner(f: Any) -> Callable[[], None]:
        return lambda: jax.block_until_ready(f(*placed))

    a, b, j = interleaved_medians(
        [runner(chosen), runner(fewest), runner(theirs)], steps
    )
    ours = sent_bytes(chosen.partition_report)
    other = sent_bytes(fewest.partition_report)
    xla = row.xla_bytes
    same = " (the same plan)" if ours == other else ""
    return (
        f"- {row.workload}/{row.layout}: chosen {ours / xla:.2f}x XLA's bytes, "
        f"step {a / j:.2f}x jax.jit's; fewest bytes{same} {other / xla:.2f}x, "
        f"step {b / j:.2f}x; chosen / fewest-bytes step {a / b:.2f}x "
        f"({a * 1e3:.2f} / {b * 1e3:.2f} ms, jax.jit {j * 1e3:.2f} ms)"
    )
