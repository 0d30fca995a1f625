"""Scaling of meshjit's passes: module size (log-log slope) and device count.

The modules are generated StableHLO text (a chain of identical small layers), so
the figure measures meshjit's propagation and partitioning, not JAX's tracing.
"""

from __future__ import annotations

import math
import time

from meshjit.compiler.ir import make_context, parse_module, passmanager
from meshjit.compiler.pipeline import Instrumentation, parse_pipeline, run_pipeline

OPS_PER_LAYER = 5


def chain_module(layers: int, mesh: tuple[tuple[str, int], ...], rows: int) -> str:
    """x[rows,256] sharded on the first mesh axis, w[256,256] on the last; each
    layer is dot, tanh, add, multiply, negate (5 ops)."""
    axes = ", ".join(f'"{n}"={s}' for n, s in mesh)
    first, last = mesh[0][0], mesh[-1][0]
    t = f"tensor<{rows}x256xf32>"
    w = "tensor<256x256xf32>"
    x_sharding = f'#sdy.sharding<@mesh, [{{"{first}"}}, {{}}]>'
    w_sharding = f'#sdy.sharding<@mesh, [{{}}, {{"{last}"}}]>'
    lines = [
        f"sdy.mesh @mesh = <[{axes}]>",
        f"func.func @main(%x: {t} {{sdy.sharding = {x_sharding}}}, "
        f"%w: {w} {{sdy.sharding = {w_sharding}}}) -> {t} {{",
    ]
    cur = "%x"
    for i in range(layers):
        lines += [
            f"  %d{i} = stablehlo.dot_general {cur}, %w, contracting_dims = [1] x [0]"
            f" : ({t}, {w}) -> {t}",
            f"  %t{i} = stablehlo.tanh %d{i} : {t}",
            f"  %a{i} = stablehlo.add %t{i}, {cur} : {t}",
            f"  %m{i} = stablehlo.multiply %a{i}, %a{i} : {t}",
            f"  %n{i} = stablehlo.negate %m{i} : {t}",
        ]
        cur = f"%n{i}"
    lines += [f"  return {cur} : {t}", "}"]
    return "\n".join(lines) + "\n"


def pass_seconds(text: str) -> tuple[float, float]:
    """(propagation-pipeline seconds, partition seconds) on `text`, run as
    `meshjit.jit` runs them: one pipeline, the graph read once and shared."""
    ctx = make_context()
    module = parse_module(text, ctx)
    inst = Instrumentation()
    run_pipeline(
        parse_pipeline("propagation-pipeline,partition", ctx), module, "scaling", inst
    )
    partition = sum(t for name, t in inst.timings if name == "partition")
    propagation = sum(t for name, t in inst.timings) - partition
    return propagation, partition


def shardy_seconds(text: str) -> float:
    """Shardy's sdy-propagation-pipeline on `text` (the reference, timed only)."""
    ctx = make_context()
    module = parse_module(text, ctx)
    with ctx:
        pm = passmanager.PassManager.parse("builtin.module(sdy-propagation-pipeline)")
        start = time.perf_counter()
        pm.run(module.operation)
    return time.perf_counter() - start


def size_scaling(op_counts: list[int]) -> list[tuple[int, float, float, float]]:
    """(ops, meshjit propagation s, partition s, Shardy propagation s)."""
    out = []
    for ops in op_counts:
        text = chain_module(max(1, ops // OPS_PER_LAYER), (("x", 2), ("y", 4)), 64)
        prop, part = pass_seconds(text)
        out.append((ops, prop, part, shardy_seconds(text)))
    return out


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(time) against log(size)."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(max(t, 1e-9)) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    num = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    den = sum((x - mx) ** 2 for x in xs) or 1.0
    return num / den


def device_scaling(layers: int) -> list[tuple[int, float, float]]:
    """Pass time for the same program on 8 and 512 devices (no execution)."""
    out = []
    for mesh, rows in (((("x", 2), ("y", 4)), 64), ((("x", 64), ("y", 8)), 1024)):
        text = chain_module(layers, mesh, rows)
        prop, part = pass_seconds(text)
        out.append((math.prod(s for _, s in mesh), prop, part))
    return out
