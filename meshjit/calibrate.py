"""python -m meshjit.calibrate [--out FILE] [--devices N]

Measures the partitioner's cost-model constants on this machine's default JAX
backend and prints them as JSON (and writes them to FILE): a collective's
fixed latency and the bandwidth one device sends at, from all-gathers of two
sizes; FLOP/s from a matmul; memory bandwidth from an elementwise op. Use the
file with `meshjit-opt -p 'partition{cost=FILE}'` or `MESHJIT_COST=FILE` for
`meshjit.jit`. Timings are medians of repeated runs; on a busy or small
machine they are noisy, so run it on an idle one.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def _seconds(fn: Callable[[], Any], repeat: int) -> float:
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _collective(mesh: Mesh, elements: int, repeat: int) -> float:
    """Seconds of one all-gather of `elements` f32 per device, less the same
    program without it."""
    n = mesh.size
    x = jax.device_put(
        np.ones((n * elements,), np.float32), NamedSharding(mesh, P("x"))
    )

    def gathered(a: jax.Array) -> jax.Array:
        full: jax.Array = jax.lax.all_gather(a, "x", tiled=True)
        return full[: a.shape[0]] * 2

    def local(a: jax.Array) -> jax.Array:
        return a * 2

    spec = P("x")
    with_ = jax.jit(jax.shard_map(gathered, mesh=mesh, in_specs=spec, out_specs=spec))
    without = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=spec, out_specs=spec))
    return max(
        0.0, _seconds(lambda: with_(x), repeat) - _seconds(lambda: without(x), repeat)
    )


def calibrate(devices: int = 8, repeat: int = 30) -> dict[str, float]:
    """The cost model's four constants, measured."""
    mesh = Mesh(np.array(jax.devices()[:devices]), ("x",))
    n = mesh.size
    small, large = 16, 1 << 18
    t_small = _collective(mesh, small, repeat)
    t_large = _collective(mesh, large, repeat)
    sent = (n - 1) * (large - small) * 4  # ring all-gather: n-1 blocks each
    bandwidth = sent / max(t_large - t_small, 1e-9)
    latency = max(t_small - (n - 1) * small * 4 / bandwidth, 1e-7)

    # Work on every device at once, as a partitioned program runs (devices
    # that share cores share their speed).
    size = 256
    spec = P("x")
    blocks = jax.device_put(
        np.ones((n * size, size), np.float32), NamedSharding(mesh, spec)
    )
    matmul = jax.jit(
        jax.shard_map(lambda m: m @ m, mesh=mesh, in_specs=spec, out_specs=spec)
    )
    flops = 2 * size**3 / _seconds(lambda: matmul(blocks), repeat)
    elements = 1 << 20
    v = jax.device_put(np.ones((n * elements,), np.float32), NamedSharding(mesh, spec))
    add = jax.jit(
        jax.shard_map(lambda u: u + 1.0, mesh=mesh, in_specs=spec, out_specs=spec)
    )
    memory = 2 * elements * 4 / _seconds(lambda: add(v), repeat)  # read + write
    return {
        "latency": latency,
        "bandwidth": bandwidth,
        "flops": flops,
        "memory_bandwidth": memory,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshjit.calibrate")
    parser.add_argument("--out", help="write the constants to this JSON file")
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args(argv)
    found: dict[str, Any] = dict(calibrate(args.devices, args.repeat))
    found["platform"] = jax.devices()[0].platform
    found["devices"] = args.devices
    text = json.dumps(found, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
