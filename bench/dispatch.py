"""Per-call overhead: a jitted step on N small sharded arrays, meshjit vs jax.jit.

The step is tiny (each leaf times 2), so the time is dispatch: flattening the
arguments, checking them, launching one executable on every device and building
the output arrays. Both sides run the same kind of compiled program; single calls,
each waited for, alternate between them and the medians are compared.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import meshjit
from bench.workloads import one_device

LEAVES = (1, 8, 64, 512)


def _step(xs: list[jax.Array]) -> list[jax.Array]:
    return [x * 2.0 for x in xs]


def _latency(fn: Callable[[Any], Any], xs: Any) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn(xs))
    return time.perf_counter() - start


def device_count() -> int:
    """8 devices, or 1 with `python -m bench --one-device`."""
    return 1 if one_device() else 8


def per_call_overhead(leaves: int, samples: int = 0) -> tuple[float, float]:
    """(meshjit seconds per call, jax.jit seconds per call) on `leaves` arrays
    of shape [8] split over 8 devices (1 with --one-device): medians of
    single calls (each waited for), alternating between the two sides so
    drift hits both alike."""
    devices = np.array(jax.devices()[: device_count()])
    mesh = jax.sharding.Mesh(devices, ("x",))
    sharding = jax.sharding.NamedSharding(mesh, jax.P("x"))
    xs = [jax.device_put(jnp.full((8,), float(i)), sharding) for i in range(leaves)]
    ours, theirs = meshjit.jit(_step), jax.jit(_step)
    samples = samples or max(60, 4000 // leaves)
    for _ in range(5):  # compile and warm up
        _latency(ours, xs)
        _latency(theirs, xs)
    a, b = [], []
    for _ in range(samples):
        a.append(_latency(ours, xs))
        b.append(_latency(theirs, xs))
    return statistics.median(a), statistics.median(b)


def _mlp(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.tanh(x @ w1) @ w2


def mlp_step(width: int, samples: int = 50) -> tuple[float, float, float]:
    """(meshjit seconds, jax.jit seconds, max relative difference) of a
    two-matmul MLP step on [width, width] f32 operands on one device: where
    the device is fast (a GPU), the dispatch shows in a real step's time."""
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",))
    sharding = jax.sharding.NamedSharding(mesh, jax.P())
    keys = jax.random.split(jax.random.key(0), 3)
    args = [
        jax.device_put(jax.random.normal(k, (width, width), jnp.float32), sharding)
        for k in keys
    ]
    ours, theirs = meshjit.jit(_mlp), jax.jit(_mlp)
    for _ in range(5):
        _latency(lambda a: ours(*a), args)
        _latency(lambda a: theirs(*a), args)
    a, b = [], []
    for _ in range(samples):
        a.append(_latency(lambda a: ours(*a), args))
        b.append(_latency(lambda a: theirs(*a), args))
    want = theirs(*args)
    diff = float(jnp.max(jnp.abs(ours(*args) - want)) / jnp.max(jnp.abs(want)))
    return statistics.median(a), statistics.median(b), diff


def lines(samples: int = 0) -> list[str]:
    out = []
    for n in LEAVES:
        ours, theirs = per_call_overhead(n, samples)
        out.append(
            f"- {n} leaves: meshjit {ours * 1e6:.0f} us, jax.jit {theirs * 1e6:.0f} us"
            f" per call = {ours / theirs:.2f}x"
        )
    return out


def main() -> None:
    """`python -m bench.dispatch [--one-device] [--mlp WIDTH ...]`: the
    per-call rows alone (with --mlp, two-matmul MLP steps too), for a machine
    where the whole bench does not fit its time (a lent GPU)."""
    import argparse
    import os

    from bench.workloads import ONE_DEVICE_ENV

    parser = argparse.ArgumentParser(prog="python -m bench.dispatch")
    parser.add_argument("--one-device", action="store_true")
    parser.add_argument("--mlp", type=int, action="append", default=[])
    parser.add_argument("--samples", type=int, default=0)
    args = parser.parse_args()
    if args.one_device:
        os.environ[ONE_DEVICE_ENV] = "1"
    device = jax.devices()[0]
    print(f"device: {device.platform} {device.device_kind}, jax {jax.__version__}")
    for line in lines(args.samples):
        print(line, flush=True)
    for width in args.mlp:
        ours, theirs, diff = mlp_step(width)
        print(
            f"- two-matmul MLP step, {width}x{width} f32: meshjit "
            f"{ours * 1e3:.3f} ms, jax.jit {theirs * 1e3:.3f} ms = "
            f"{ours / theirs:.2f}x (max rel diff {diff:.1e})",
            flush=True,
        )


if __name__ == "__main__":
    main()
