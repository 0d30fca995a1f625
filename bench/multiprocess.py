"""One train step on 1 process x 8 devices and on 2 processes x 4 devices.

`lines()` starts each job with `python -m meshjit.launch` running this module
(`python -m bench.multiprocess WORKLOAD LAYOUT_INDEX`): every process builds the
workload's arguments as global arrays, compiles the step with meshjit and with
jax.jit, and times single steps alternating between the two; process 0 prints
the medians. Between processes the collectives go through gloo over loopback.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

JOBS = ((1, 8), (2, 4))
WORKLOADS = (("mlp_train_dp_tp", 1), ("gpt2_train", 0))


def _child(name: str, layout_index: int, steps: int) -> None:
    import meshjit.distributed

    meshjit.distributed.initialize()
    import jax
    import numpy as np

    import meshjit
    from bench import models, workloads
    from bench.measure import _shardings, mesh_of

    work = {w.name: w for w in (*workloads.ALL, *models.MODELS)}[name]
    layout = work.layouts[layout_index]
    mesh = mesh_of(layout.mesh)
    in_sh = _shardings(mesh, layout.in_specs)
    out_sh = _shardings(mesh, layout.out_specs)
    values = work.make_args()

    def global_array(v: np.ndarray, s: jax.sharding.NamedSharding) -> jax.Array:
        v = np.asarray(v)
        return jax.make_array_from_callback(v.shape, s, lambda i: v[i])

    args = jax.tree_util.tree_map(
        global_array,
        tuple(values),
        tuple(in_sh),
        is_leaf=lambda x: isinstance(x, np.ndarray),
    )
    sides = {
        "meshjit": meshjit.jit(work.fn, in_shardings=in_sh, out_shardings=out_sh),
        "jax": jax.jit(work.fn, in_shardings=in_sh, out_shardings=out_sh),
    }
    times: dict[str, list[float]] = {k: [] for k in sides}
    for f in sides.values():
        for _ in range(3):
            jax.block_until_ready(f(*args))
    for _ in range(steps):
        for k, f in sides.items():
            start = time.perf_counter()
            jax.block_until_ready(f(*args))
            times[k].append(time.perf_counter() - start)
    if jax.process_index() == 0:
        found = {k: statistics.median(v) for k, v in times.items()}
        print("RESULT " + json.dumps(found), flush=True)


def run_job(processes: int, devices: int, name: str, index: int, steps: int) -> dict:
    """Medians {side: seconds} of one job, or {"error": text}."""
    command = [
        sys.executable,
        "-m",
        "meshjit.launch",
        "-n",
        str(processes),
        "--devices-per-process",
        str(devices),
        "--timeout",
        "900",
        "-m",
        "bench.multiprocess",
        name,
        str(index),
        str(steps),
    ]
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": top}
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=top, env=env, check=False
    )
    for line in done.stdout.splitlines():
        if line.startswith("[p0] RESULT "):
            found: dict = json.loads(line.removeprefix("[p0] RESULT "))
            return found
    tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
    return {"error": " | ".join(tail)[:300]}


def lines(
    steps: int = 30, workloads: tuple[tuple[str, int], ...] = WORKLOADS
) -> list[str]:
    out = []
    for name, index in workloads:
        for processes, devices in JOBS:
            r = run_job(processes, devices, name, index, steps)
            label = f"- {name} (layout {index}), {processes} x {devices} devices"
            if "error" in r:
                out.append(f"{label}: error: {r['error']}")
                continue
            ours, theirs = r["meshjit"], r["jax"]
            out.append(
                f"{label}: meshjit {ours * 1e3:.2f} ms, jax.jit {theirs * 1e3:.2f} ms "
                f"per step = {ours / theirs:.2f}x"
            )
    return out


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
