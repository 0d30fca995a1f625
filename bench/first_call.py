"""First call with a warm persistent compilation cache, in a new process.

For each workload, one process compiles it with `MESHJIT_CACHE_DIR` set to an
empty folder (filling the cache); a second, new process then times meshjit's
first call (trace + compile, i.e. `jit(f).lower(*args).compile()`) with that
cache warm, and jax.jit's cold first call in the same process (jax's own
persistent cache off). Run as `python -m bench.first_call WORKLOAD LAYOUT`
it prints the two times as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

WORKLOADS = (("llama_fsdp", 0), ("gpt2_train", 0), ("resnet_fwd", 0), ("t5_fwd", 0))


def _measure(name: str, layout_index: int) -> dict[str, float]:
    import jax

    import meshjit
    from bench import models, workloads
    from bench.measure import _shardings, mesh_of

    work = {w.name: w for w in (*workloads.ALL, *models.MODELS)}[name]
    layout = work.layouts[layout_index]
    mesh = mesh_of(layout.mesh)
    args = work.make_args()
    in_sh = _shardings(mesh, layout.in_specs)
    out_sh = _shardings(mesh, layout.out_specs)
    start = time.perf_counter()
    meshjit.jit(work.fn, in_shardings=in_sh, out_shardings=out_sh).lower(
        *args
    ).compile()
    ours = time.perf_counter() - start
    start = time.perf_counter()
    jax.jit(work.fn, in_shardings=in_sh, out_shardings=out_sh).lower(*args).compile()
    theirs = time.perf_counter() - start
    stats = meshjit.cache_stats()
    return {"meshjit_s": ours, "jax_s": theirs, "hits": stats.hits}


def _child(name: str, layout_index: int, cache: str) -> dict[str, float]:
    env = dict(os.environ, MESHJIT_CACHE_DIR=cache)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, "-m", "bench.first_call", name, str(layout_index)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def lines(workloads: tuple[tuple[str, int], ...] | None = None) -> list[str]:
    out = []
    ratios = []
    for name, index in workloads or WORKLOADS:
        with tempfile.TemporaryDirectory(prefix="meshjit-cache-") as cache:
            cold = _child(name, index, cache)
            warm = _child(name, index, cache)
        if warm["hits"] < 1:
            out.append(f"- {name}: the warm process did not hit the cache")
            continue
        ratio = warm["meshjit_s"] / warm["jax_s"]
        ratios.append(ratio)
        out.append(
            f"- {name}: meshjit {warm['meshjit_s']:.2f} s with the cache warm "
            f"(cold: {cold['meshjit_s']:.2f} s), jax.jit cold {warm['jax_s']:.2f} s "
            f"= {ratio:.2f}x"
        )
    if ratios:
        out.append(f"- worst {max(ratios):.2f}x jax.jit's cold first call")
    return out


if __name__ == "__main__":
    print(json.dumps(_measure(sys.argv[1], int(sys.argv[2]))))
