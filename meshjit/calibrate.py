"""python -m meshjit.calibrate [--out FILE] [--devices N]

Measures the partitioner's cost-model constants on this machine's default JAX
backend and prints them as JSON (and writes them to FILE): a collective's
fixed latency and the bandwidth one device sends at, per collective kind,
from chains of dependent collectives inside one program at two sizes (what a
collective adds to a partitioned program); whether a variadic all-reduce
launches once per operand; FLOP/s from a matmul; memory bandwidth from an
elementwise op (both from two sizes, less the program's launch); the
small-block constants (`gemm_n_tile`, `gemm_k_tile`, `vector_bytes`) are
copied from the platform's documented defaults and listed as
`not_measured`, as is `runtime_cut_offsets` (whether the platform's
compiler compiles each distinct kernel on its own). Use the
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

from meshjit.passes.partitioner.cost import PLATFORMS, CostModel

BLOCK_FIELDS = ("gemm_n_tile", "gemm_k_tile", "vector_bytes")
# Copied from the platform's defaults as well: a property of its compiler.
COPIED_FIELDS = (*BLOCK_FIELDS, "runtime_cut_offsets")


def _seconds(fn: Callable[[], Any], repeat: int) -> float:
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


Block = Callable[[jax.Array], jax.Array]


def _blockwise_seconds(
    mesh: Mesh, fn: Block, shape: tuple[int, ...], repeat: int
) -> float:
    """Seconds of `fn` on every device's block of ones of `shape` at once, as
    a partitioned program runs (devices that share cores share their speed)."""
    spec = P("x")
    a = jax.device_put(
        np.ones((mesh.size * shape[0], *shape[1:]), np.float32),
        NamedSharding(mesh, spec),
    )
    run = jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=spec, out_specs=spec))
    return _seconds(lambda: run(a), repeat)


def _one(kind: str, a: jax.Array, n: int) -> jax.Array:
    """One collective of `kind` on a block, giving a block of the same shape."""
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
        out = jax.lax.ppermute(a, "x", [(i, (i + 1) % n) for i in range(n)])
    return out


def _collective_seconds(mesh: Mesh, kind: str, elements: int, repeat: int) -> float:
    """Seconds one collective of `kind` on `elements` f32 per device adds to a
    program: the slope between a chain of 1 and of 1 + CHAIN dependent
    collectives in one program. A program with a single collective would also
    count what launching and synchronising the program costs (on XLA's CPU
    backend about twice the in-program figure), which a collective inside a
    partitioned program does not pay again."""
    n = mesh.size

    def chain(k: int) -> Block:
        def body(a: jax.Array) -> jax.Array:
            for _ in range(k):
                a = _one(kind, a, n) * 0.5  # dependent: no two can combine
            return a

        return body

    long = _blockwise_seconds(mesh, chain(1 + CHAIN), (elements,), repeat)
    short = _blockwise_seconds(mesh, chain(1), (elements,), repeat)
    return max(0.0, (long - short) / CHAIN)


CHAIN = 8


def _variadic_launches(mesh: Mesh, repeat: int) -> bool:
    """Whether a variadic all-reduce (what XLA's all-reduce combiner makes)
    launches once per operand: one of 8 small operands against one all-reduce
    of the same bytes. On XLA's CPU backend it costs about 8 single ones."""
    parts, elements = 8, 1024

    def split(a: jax.Array) -> jax.Array:
        pieces = [a[i * elements : (i + 1) * elements] * (i + 1) for i in range(parts)]
        out: jax.Array = jnp.concatenate(jax.lax.psum(pieces, "x"))
        return out

    def whole(a: jax.Array) -> jax.Array:
        out: jax.Array = jax.lax.psum(a * 2, "x")
        return out

    def local(a: jax.Array) -> jax.Array:
        return a * 2

    def seconds(fn: Block) -> float:
        return _blockwise_seconds(mesh, fn, (parts * elements,), repeat)

    base = seconds(local)
    return seconds(split) - base > 3 * max(seconds(whole) - base, 1e-6)


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
    """The cost model's constants, measured: a latency and a bandwidth per
    collective kind (and their medians as the defaults), FLOP/s and memory
    bandwidth."""
    mesh = Mesh(np.array(jax.devices()[:devices]), ("x",))
    n = mesh.size
    small, large = 64, 1 << 18
    latencies: dict[str, float] = {}
    rates: dict[str, float] = {}
    for kind in KINDS:
        t_small = _collective_seconds(mesh, kind, small, repeat)
        t_large = _collective_seconds(mesh, kind, large, repeat)
        extra = _sent(kind, large * 4, n) - _sent(kind, small * 4, n)
        # Noise can make the large run no slower than the small one: cap the
        # rate at 1 TB/s rather than divide by ~0.
        rate = min(extra / max(t_large - t_small, 1e-9), 1e12)
        rates[kind] = rate
        latencies[kind] = max(t_small - _sent(kind, small * 4, n) / rate, 1e-7)
    # Work on every device at once, as a partitioned program runs (devices
    # that share cores share their speed); rates from the difference between
    # two sizes, so the program's own launch does not count.

    def blockwise(fn: Block, shape: tuple[int, ...]) -> float:
        return _blockwise_seconds(mesh, fn, shape, repeat)

    def matmul(m: jax.Array) -> jax.Array:
        return m @ m

    def add(u: jax.Array) -> jax.Array:
        return u + 1.0

    lo, hi = 128, 256
    spent = blockwise(matmul, (hi, hi)) - blockwise(matmul, (lo, lo))
    flops = 2 * (hi**3 - lo**3) / max(spent, 1e-9)
    lo, hi = 1 << 16, 1 << 20
    spent = blockwise(add, (hi,)) - blockwise(add, (lo,))
    memory = 2 * (hi - lo) * 4 / max(spent, 1e-9)  # read + write
    return {
        "latency": statistics.median(latencies.values()),
        "bandwidth": statistics.median(rates.values()),
        "flops": flops,
        "memory_bandwidth": memory,
        "kind_bandwidth": rates,
        "kind_latency": latencies,
        "variadic_launches": _variadic_launches(mesh, repeat),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshjit.calibrate")
    parser.add_argument("--out", help="write the constants to this JSON file")
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args(argv)
    found = calibrate(args.devices, args.repeat)
    found["platform"] = jax.devices()[0].platform
    # Not measured here: how small per-device blocks slow convolutions and
    # reductions (measured by hand, `cost.py`'s "cpu" comment). The file
    # carries the platform's documented values so that using it keeps them.
    defaults = PLATFORMS.get(found["platform"], CostModel())
    for name in COPIED_FIELDS:
        found[name] = getattr(defaults, name)
    found["not_measured"] = list(COPIED_FIELDS)
    found["devices"] = args.devices
    text = json.dumps(found, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
