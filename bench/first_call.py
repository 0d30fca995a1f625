"""First calls (trace + compile, i.e. `jit(f).lower(*args).compile()`), each
timed in a new process after one tiny compile on each side.

`cold_pair`: meshjit's and jax.jit's first call, each in its own process, no
persistent cache on either side (the bench table's "first call" column).
`lines`: per workload, one process compiles it with `MESHJIT_CACHE_DIR` set to
an empty folder (filling the cache); a second one times meshjit's first call
with that cache warm; a third times jax.jit's cold first call (jax's own
persistent cache off). `python -m bench.first_call SIDE WORKLOAD LAYOUT`
(SIDE: meshjit or jax) prints one measurement as JSON.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time

WORKLOADS = (("llama_fsdp", 0), ("gpt2_train", 0), ("resnet_fwd", 0), ("t5_fwd", 0))


def _warm_up() -> None:
    """One tiny compile on each side, so neither measurement pays the
    process's one-time set-up (XLA's client, meshjit's MLIR context)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import meshjit
    from bench.measure import mesh_of

    mesh = mesh_of("8")
    s = NamedSharding(mesh, P())
    x = jnp.ones((16, 16))

    def tiny(a: jax.Array) -> jax.Array:
        return jnp.sin(a) @ a.T + 1

    meshjit.jit(tiny, in_shardings=s, out_shardings=s).lower(x).compile()
    jax.jit(tiny, in_shardings=s, out_shardings=s).lower(x).compile()


def _measure(side: str, name: str, layout_index: int) -> dict[str, float]:
    """Seconds of `side`'s first call (trace + compile) of the workload, in
    this process, after `_warm_up`."""
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
    _warm_up()
    hits = meshjit.cache_stats().hits  # the warm-up's own, if any
    jit = meshjit.jit if side == "meshjit" else jax.jit
    start = time.perf_counter()
    jit(work.fn, in_shardings=in_sh, out_shardings=out_sh).lower(*args).compile()
    seconds = time.perf_counter() - start
    return {"s": seconds, "hits": meshjit.cache_stats().hits - hits}


def _child(
    side: str, name: str, layout_index: int, cache: str | None = None
) -> dict[str, float]:
    """`_measure` in a new process (meshjit's persistent cache in `cache`, or
    off; jax's off)."""
    env = dict(os.environ)
    env.pop("MESHJIT_CACHE_DIR", None)
    if cache is not None:
        env["MESHJIT_CACHE_DIR"] = cache
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, "-m", "bench.first_call", side, name, str(layout_index)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def cold_pair(name: str, layout_index: int, repeat: int = 3) -> tuple[float, float]:
    """(meshjit, jax.jit) first-call seconds, each side in its own new process
    with no persistent cache: neither reuses what the other traced (JAX
    caches the jaxprs of inner jitted functions, so the second side to trace
    in one process is ~0.1-0.2 s faster on the real-model workloads). The
    fastest of `repeat` processes per side, the sides alternating: one new
    process's first call varies by up to 30% on this machine."""
    ours, theirs = math.inf, math.inf
    for _ in range(repeat):
        ours = min(ours, _child("meshjit", name, layout_index)["s"])
        theirs = min(theirs, _child("jax", name, layout_index)["s"])
    return ours, theirs


def lines(workloads: tuple[tuple[str, int], ...] | None = None) -> list[str]:
    out = []
    ratios = []
    for name, index in workloads or WORKLOADS:
        with tempfile.TemporaryDirectory(prefix="meshjit-cache-") as cache:
            cold = _child("meshjit", name, index, cache)
            warm = _child("meshjit", name, index, cache)
        theirs = _child("jax", name, index)["s"]
        if warm["hits"] < 1:
            out.append(f"- {name}: the warm process did not hit the cache")
            continue
        ratio = warm["s"] / theirs
        ratios.append(ratio)
        out.append(
            f"- {name}: meshjit {warm['s']:.2f} s with the cache warm "
            f"(cold: {cold['s']:.2f} s), jax.jit cold {theirs:.2f} s "
            f"= {ratio:.2f}x"
        )
    if ratios:
        out.append(f"- worst {max(ratios):.2f}x jax.jit's cold first call")
    return out


if __name__ == "__main__":
    print(json.dumps(_measure(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
