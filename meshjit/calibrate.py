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
import jax.numpy as jnp
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


def _collective_seconds(mesh: Mesh, kind: str, elements: int, repeat: int) -> float:
    """Seconds of one collective of `kind` on `elements` f32 per device, less
    the same program without it."""
    n = mesh.size
    spec = P("x")
    x = jax.device_put(np.ones((n * elements,), np.float32), NamedSharding(mesh, spec))
    pairs = [(i, (i + 1) % n) for i in range(n)]

    def body(a: jax.Array) -> jax.Array:
        out: jax.Array
        if kind == "all-gather":
            out = jax.lax.all_gather(a, "x", tiled=True)[: a.shape[0]]
        elif kind == "all-reduce":
            out = jax.lax.psum(a, "x")
        elif kind == "reduce-scatter":
            out = jnp.tile(jax.lax.psum_scatter(a, "x", tiled=True), n)
        elif kind == "all-to-all":
            out = jax.lax.all_to_all(a.reshape(n, -1), "x", 0, 0).reshape(-1)
        else:
            out = jax.lax.ppermute(a, "x", pairs)
        return out * 2

    def local(a: jax.Array) -> jax.Array:
        return a * 2

    with_ = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=spec, out_specs=spec))
    without = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=spec, out_specs=spec))
    spent = _seconds(lambda: with_(x), repeat) - _seconds(lambda: without(x), repeat)
    return max(0.0, spent)


def _sent(kind: str, block_bytes: int, n: int) -> float:
    """Bytes one device sends (ring algorithms), as the partitioner counts."""
    if kind == "all-gather":
        return (n - 1) * block_bytes
    if kind == "all-reduce":
        return 2 * block_bytes * (n - 1) / n
    if kind in ("reduce-scatter", "all-to-all"):
        return block_bytes * (n - 1) / n
    return block_bytes


KINDS = (
    "all-gather",
    "all-reduce",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
)


def calibrate(devices: int = 8, repeat: int = 30) -> dict[str, Any]:
    """The cost model's constants, measured: a latency common to all
    collectives, a bandwidth per kind, FLOP/s and memory bandwidth."""
    mesh = Mesh(np.array(jax.devices()[:devices]), ("x",))
    n = mesh.size
    small, large = 64, 1 << 18
    latencies = []
    rates: dict[str, float] = {}
    for kind in KINDS:
        t_small = _collective_seconds(mesh, kind, small, repeat)
        t_large = _collective_seconds(mesh, kind, large, repeat)
        extra = _sent(kind, large * 4, n) - _sent(kind, small * 4, n)
        # Noise can make the large run no slower than the small one: cap the
        # rate at 1 TB/s rather than divide by ~0.
        rate = min(extra / max(t_large - t_small, 1e-9), 1e12)
        rates[kind] = rate
        latencies.append(max(t_small - _sent(kind, small * 4, n) / rate, 1e-7))
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
        "latency": statistics.median(latencies),
        "bandwidth": statistics.median(rates.values()),
        "flops": flops,
        "memory_bandwidth": memory,
        "kind_bandwidth": rates,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshjit.calibrate")
    parser.add_argument("--out", help="write the constants to this JSON file")
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args(argv)
    found = calibrate(args.devices, args.repeat)
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
