"""The partitioner's cost model: estimated seconds for collectives and for
per-device compute, so that choices weigh communication against work.

A collective costs a fixed latency plus the bytes one device sends over the
link bandwidth (ring algorithms: `dialects/reshard.step_bytes` gives those
bytes). Compute costs the larger of its FLOPs over the device's rate and the
bytes it touches over memory bandwidth. Constants are per platform
(`PLATFORMS`); `python -m meshjit.calibrate` measures them on this machine.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from meshjit.dialects.reshard import (
    AllGather,
    AllReduce,
    AllToAll,
    CollectivePermute,
    DimAxes,
    Layout,
    LocalSlice,
    ReduceScatter,
    Step,
    apply_step,
    plan_reshard,
    step_bytes,
)
from meshjit.dialects.sharding import MeshModel


def _of_kind(table: tuple[tuple[str, float], ...], kind: str, default: float) -> float:
    for name, value in table:
        if name == kind:
            return value
    return default


# All-reduces that meshjit's partitioner concatenates into one where the
# platform's variadic all-reduce launches once per operand
# (`CostModel.variadic_launches`): operands of at most this many bytes per
# device. Above it a launch (~160 us on this project's CPU machine) costs less
# than copying the operand into and out of the concatenation (~0.7 us per
# KiB), and the copy is memory XLA's variadic all-reduce does not need.
SMALL_REDUCE_BYTES = 128 << 10


@dataclass(frozen=True, slots=True)
class CostModel:
    """Seconds per collective and per unit of work on one device."""

    latency: float = 300e-6  # per collective launch
    bandwidth: float = 0.8e9  # bytes per second one device sends
    flops: float = 10e9  # per device, all devices busy
    memory_bandwidth: float = 1.2e9  # bytes per second one device touches
    # Per collective kind, where it differs from `bandwidth` (bytes as
    # `dialects/reshard.step_bytes` counts them: ring algorithms) or from
    # `latency`.
    kind_bandwidth: tuple[tuple[str, float], ...] = ()
    kind_latency: tuple[tuple[str, float], ...] = ()
    # XLA's variadic collectives (what its all-reduce combiner makes) launch
    # once per operand (XLA's CPU backend): independent all-reduces share a
    # launch only where meshjit concatenates them (`partitioner/combine.py`).
    variadic_launches: bool = False
    # The platform's compiler compiles each distinct fused kernel on its own
    # (XLA's CPU backend: LLVM per kernel, 10-20 ms each on this project's
    # machine): combined collectives' results are cut out at offsets XLA
    # sees only at run time, so that same-shape consumers share one kernel
    # (`partitioner/combine.py`). Off where a loop costs a host round trip
    # per step (GPUs) and that was not measured.
    runtime_cut_offsets: bool = False
    # A convolution runs as a GEMM per output pixel: N = the kernel's output
    # features, K = its input features times its window. Below these sizes
    # (per device) the GEMM leaves vector lanes or its inner loop idle and
    # runs proportionally slower (`gemm_slowdown`); 1 = no such effect.
    gemm_n_tile: int = 1
    gemm_k_tile: int = 1
    # Bytes one vector instruction holds: a reduction touches its blocks'
    # minor dims in whole vectors (`vector_padding`); 0 = no such effect.
    vector_bytes: int = 0

    def collective_seconds(self, kind: str, nbytes: int, group: int) -> float:
        if nbytes == 0 or (group <= 1 and kind != "collective-permute"):
            return 0.0
        rate = _of_kind(self.kind_bandwidth, kind, self.bandwidth)
        return _of_kind(self.kind_latency, kind, self.latency) + nbytes / rate

    def without_latency(self) -> CostModel:
        """The same model with free launches: what is left is bytes."""
        return dataclasses.replace(self, latency=0.0, kind_latency=())

    def shares_launch(self, kind: str, nbytes: int) -> bool:
        """Whether independent collectives of `kind`, each of `nbytes` per
        device, are launched as one in the program (combined by meshjit's
        partitioner or by XLA)."""
        if kind == "all-reduce" and self.variadic_launches:
            return nbytes <= SMALL_REDUCE_BYTES
        return kind in ("all-reduce", "reduce-scatter")

    def compute_seconds(self, flops: float, nbytes: float) -> float:
        return max(flops / self.flops, nbytes / self.memory_bandwidth)

    def gemm_slowdown(self, kernel: KernelDims, local: Sequence[int]) -> float:
        """How much slower than `flops` a convolution runs whose kernel's
        per-device block is `local` (1.0 at or above both tiles)."""
        n = local[kernel.out_feature]
        k = local[kernel.in_feature] * math.prod(local[d] for d in kernel.spatial)
        return max(1.0, self.gemm_n_tile / max(n, 1)) * max(
            1.0, self.gemm_k_tile / max(k, 1)
        )

    def vector_padding(self, local: Sequence[int], itemsize: int) -> float:
        """How many times its bytes a reduction pays on a block of this
        shape: its minor dim rounded up to whole vectors."""
        lanes = self.vector_bytes // max(itemsize, 1)
        if lanes <= 1 or not local or local[-1] <= 0:
            return 1.0
        m = local[-1]
        return lanes * -(-m // lanes) / m


@dataclass(frozen=True, slots=True)
class KernelDims:
    """A convolution kernel's dims: output feature, input feature, window."""

    out_feature: int
    in_feature: int
    spatial: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Efficiency:
    """What makes an op slower on its per-device blocks than its FLOPs and
    bytes say: a convolution's GEMM shape (`kernel`: operand 1 is the
    kernel), or a reduction's minor dims (`vectors`: rows shorter than a
    vector leave lanes idle)."""

    kernel: KernelDims | None = None
    vectors: bool = False

    def scale(
        self, cost: CostModel, blocks: Sequence[tuple[Sequence[int], int] | None]
    ) -> tuple[float, float]:
        """(FLOPs factor, bytes factor) for the op whose operands then
        results have these per-device blocks (shape, itemsize; None for a
        value that is not a ranked tensor)."""
        flops = bytes_ = 1.0
        if self.kernel is not None and len(blocks) > 1 and blocks[1] is not None:
            flops = cost.gemm_slowdown(self.kernel, blocks[1][0])
        if self.vectors:
            total = padded = 0.0
            for block in blocks:
                if block is None:
                    continue
                local, size = block
                n = math.prod(local) * size
                total += n
                padded += n * cost.vector_padding(local, size)
            if total:
                bytes_ = padded / total
        return flops, bytes_


PLAIN = Efficiency()


# Documented defaults per platform. "cpu": this project's machine class, 8
# virtual devices on 2 cores, as `python -m meshjit.calibrate` measured it
# (2026-11-25, rounded medians of six runs; single runs varied by up to 2x).
# A collective costs what it adds to a program, measured as chains of
# dependent collectives (a program holding one collective measures twice as
# much: the program's own launch and synchronisation, which a collective in a
# partitioned program does not pay again): about 160 us for every kind before
# its bytes, then per kind the rate of the bytes a ring algorithm sends (an
# all-to-all is the slowest in-process, a permute or an all-reduce the
# fastest). XLA's CPU backend launches a variadic all-reduce once per operand
# (16 small operands: 2.6 ms, one all-reduce of the same bytes: 0.23 ms), so
# combining independent all-reduces shares nothing unless meshjit
# concatenates them. The devices share two cores (~19 GFLOP/s and ~3 GB/s of
# memory traffic each, from two sizes less the program's launch).
# A convolution whose per-device kernel has fewer than 8 output features or
# a window times input features under 32 runs slower per FLOP in proportion
# (XLA's CPU convolutions, measured 2026-11-26 inside 8-device programs: a
# 7x7x3 kernel with 2 output features 2.8x slower per FLOP than with 16, a
# 3x3x1x8 one 3.2x slower than 3x3x8x8, a 1x1x16x1 one ~20x). A reduction
# over blocks whose minor dim is under a vector (8 f32) costs as if it were
# padded to one: summing a 16x16x16x2 block over its first three dims takes
# 3x as long as a 2x16x16x16 one, as long as a 16x16x16x8 one. Element-wise
# ops and windows showed no such effect.
# "gpu": one H100 node over NVLink (about 10 us per collective, ~150 GB/s per
# device for ring collectives, ~50 TFLOP/s of f32, 3 TB/s of HBM).
PLATFORMS: dict[str, CostModel] = {
    "cpu": CostModel(
        latency=160e-6,
        bandwidth=2.0e9,
        flops=19e9,
        memory_bandwidth=3.0e9,
        kind_bandwidth=(
            ("all-gather", 2.0e9),
            ("all-reduce", 2.5e9),
            ("reduce-scatter", 1.5e9),
            ("all-to-all", 1.05e9),
            ("collective-permute", 2.1e9),
        ),
        variadic_launches=True,
        runtime_cut_offsets=True,
        gemm_n_tile=8,
        gemm_k_tile=32,
        vector_bytes=32,
    ),
    "gpu": CostModel(
        latency=10e-6, bandwidth=150e9, flops=50e12, memory_bandwidth=3e12
    ),
}
DEFAULT = PLATFORMS["cpu"]


def load_cost(spec: str) -> CostModel:
    """A platform's documented defaults ("cpu", "gpu"), or the constants in a
    JSON file (what `python -m meshjit.calibrate --out FILE` writes)."""
    if spec in PLATFORMS:
        return PLATFORMS[spec]
    try:
        with open(spec, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as err:
        raise ValueError(
            f"cost model {spec!r} is neither a platform ({', '.join(PLATFORMS)}) "
            f"nor a readable JSON file: {err}"
        ) from None
    fields = {"latency", "bandwidth", "flops", "memory_bandwidth"}
    if not isinstance(data, dict) or not fields <= set(data):
        raise ValueError(
            f"cost model file {spec!r} needs the numbers {', '.join(sorted(fields))}"
        )
    values = {k: float(data[k]) for k in fields}
    variadic = data.get("variadic_launches", False)
    if not isinstance(variadic, bool):
        raise ValueError(
            f"cost model file {spec!r}: variadic_launches is not true/false"
        )
    per_kind = {}
    for table in ("kind_bandwidth", "kind_latency"):
        kinds = data.get(table, {})
        if not isinstance(kinds, dict):
            raise ValueError(f"cost model file {spec!r}: {table} is not a mapping")
        unknown = sorted(set(kinds) - set(_KIND.values()))
        if unknown:
            raise ValueError(
                f"cost model file {spec!r}: {table} names {', '.join(unknown)}; "
                f"the kinds are {', '.join(_KIND.values())}"
            )
        per_kind[table] = tuple(sorted((str(k), float(v)) for k, v in kinds.items()))
    runtime_cuts = data.get("runtime_cut_offsets", False)
    if not isinstance(runtime_cuts, bool):
        raise ValueError(
            f"cost model file {spec!r}: runtime_cut_offsets is not true/false"
        )
    tiles = {}
    for name, least in (("gemm_n_tile", 1), ("gemm_k_tile", 1), ("vector_bytes", 0)):
        tile = data.get(name, least)
        if not isinstance(tile, int) or isinstance(tile, bool) or tile < least:
            raise ValueError(
                f"cost model file {spec!r}: {name} is not an integer >= {least}"
            )
        tiles[name] = tile
    numbers = [*values.values(), *(v for t in per_kind.values() for _, v in t)]
    if any(not v > 0 for v in numbers):
        raise ValueError(f"cost model file {spec!r}: every number must be positive")
    return CostModel(
        values["latency"],
        values["bandwidth"],
        values["flops"],
        values["memory_bandwidth"],
        per_kind["kind_bandwidth"],
        per_kind["kind_latency"],
        variadic,
        runtime_cuts,
        **tiles,
    )


def cost_data(model: CostModel) -> dict[str, object]:
    """`model` as a cost-model file holds it (what `load_cost` reads back
    to an equal model; `python -m meshjit.calibrate --out` writes the same
    fields)."""
    data = dataclasses.asdict(model)
    for table in ("kind_bandwidth", "kind_latency"):
        data[table] = dict(getattr(model, table))
    return data


_KIND = {
    AllGather: "all-gather",
    AllToAll: "all-to-all",
    AllReduce: "all-reduce",
    ReduceScatter: "reduce-scatter",
    CollectivePermute: "collective-permute",
}


def fft_flops(elements: int, length: int) -> float:
    """An FFT's work: 5 n log2 n per transform of length n (the classic
    count of a radix-2 complex FFT), over `elements` elements."""
    return 5.0 * elements * math.log2(max(2, length))


def relocation_pays(
    cost: CostModel, operand_bytes: int, result_bytes: int, flops: float, n: int
) -> bool:
    """Whether moving an op's split transformed dim (split `n` ways) to
    another dim by an all-to-all, computing 1/n of the op there and moving
    the result's dim back by another costs less than gathering the operand
    and computing the whole op on every device (propagation's relocation)."""
    if n <= 1:
        return False
    whole = cost.compute_seconds(flops, operand_bytes + result_bytes)
    gathered = cost.collective_seconds("all-gather", operand_bytes * (n - 1) // n, n)
    there = cost.collective_seconds("all-to-all", operand_bytes * (n - 1) // (n * n), n)
    back = cost.collective_seconds("all-to-all", result_bytes * (n - 1) // (n * n), n)
    return there + back + whole / n < gathered + whole


def step_kind(step: Step) -> str:
    return _KIND.get(type(step), "local")


@functools.lru_cache(maxsize=8192)
def reshard_seconds(
    src: Layout,
    dst: Layout,
    shape: tuple[int, ...],
    itemsize: int,
    mesh: MeshModel,
    partial: DimAxes,
    cost: CostModel,
) -> float:
    """Estimated seconds of the collectives taking a value from `src`
    (+ partial sums) to `dst`."""
    if src == dst and not partial:
        return 0.0
    if math.prod(shape) == 0:
        return 0.0
    cur = [list(d) for d in src]
    total = 0.0
    for step in plan_reshard(src, dst, shape, mesh, partial):
        local = [
            -(-n // math.prod(a.full_size(mesh) for a in axes))
            for n, axes in zip(shape, cur, strict=True)
        ]
        apply_step(cur, step)
        if isinstance(step, LocalSlice):
            continue
        kind, nbytes = step_kind(step), step_bytes(step, local, itemsize, mesh)
        group = math.prod(a.full_size(mesh) for a in step.axes)
        if isinstance(step, AllGather) and sums_gather(
            shape[step.dim], local[step.dim], group, bool(cur[step.dim])
        ):
            part = list(local)
            part[step.dim] = shape[step.dim]
            kind = "all-reduce"
            nbytes = step_bytes(AllReduce(step.axes), part, itemsize, mesh)
        total += cost.collective_seconds(kind, nbytes, group)
    return total


def pieces_sum_seconds(
    cost: CostModel,
    local: Sequence[int],
    itemsize: int,
    axes: DimAxes,
    mesh: MeshModel,
) -> float:
    """Estimated seconds of one all-reduce over `axes` of a block of shape
    `local`: pieces that are zero but on the device holding each element,
    summed (dynamic_slice's slice of a split operand)."""
    nbytes = step_bytes(AllReduce(tuple(axes)), local, itemsize, mesh)
    group = math.prod(a.full_size(mesh) for a in axes)
    return cost.collective_seconds("all-reduce", nbytes, group)


def sums_gather(size: int, block: int, count: int, still_split: bool) -> bool:
    """Whether an all-gather making a dim of `size` whole from `count` blocks
    of `block` positions (padding included) is written as a sum instead
    (`PartitionCtx.gather_by_sum`): the blocks are mostly padding and no
    other axis still splits the dim. (Complex values, which that sum does
    not take, are gathered; priced here as summed.)"""
    return not still_split and 2 * size < count * block


_TRANSCENDENTAL = frozenset(
    {
        "stablehlo.exponential",
        "stablehlo.exponential_minus_one",
        "stablehlo.log",
        "stablehlo.log_plus_one",
        "stablehlo.logistic",
        "stablehlo.tanh",
        "stablehlo.rsqrt",
        "stablehlo.sqrt",
        "stablehlo.sine",
        "stablehlo.cosine",
        "stablehlo.power",
        "chlo.erf",
    }
)


# FLOPs' time of one comparison of a sort, of each further operand it moves,
# and of one heap step of top_k (`op_flops`).
_SORT_COMPARISON = 1400.0
_SORT_OPERAND = 300.0
_TOP_K_STEP = 900.0


def op_flops(
    op: str,
    operand_shapes: Sequence[tuple[int, ...] | None],
    result_shapes: Sequence[tuple[int, ...] | None],
    contracted: int = 1,
) -> float:
    """Floating-point work of an op on global shapes. `contracted`: the
    product of the contracted dims (dot_general) or of the kernel's window
    and input features (convolution): each result element sums that many
    products; the window size (reduce_window); the sorted dim's length
    (sort)."""
    out = sum(math.prod(s) for s in result_shapes if s is not None)
    if op in ("stablehlo.dot_general", "stablehlo.convolution"):
        return 2.0 * out * contracted
    if op == "stablehlo.sort":
        # A comparison sort: n log n comparisons along the sorted dim, each a
        # call of the comparator region that moves every operand's element.
        # Measured on this project's CPU with all 8 devices busy (the regime
        # `CostModel.flops`, 19 GFLOP/s, is measured in): 69-79 ns per
        # comparison sorting one operand, 80-100 ns with an index operand
        # (argsort), rows of 64 to 4096: ~1400 FLOPs' time, +300 per operand.
        first = result_shapes[0] if result_shapes else None
        elements = math.prod(first) if first is not None else out
        per = _SORT_COMPARISON + _SORT_OPERAND * max(0, len(result_shapes) - 1)
        return per * elements * max(1.0, math.log2(max(2, contracted)))
    if op == "chlo.top_k":
        # A partial sort: every element against a heap of the k best (the
        # same machine: 26-65 ns per element and log2(k + 1), k = 8).
        inputs = sum(math.prod(s) for s in operand_shapes if s is not None)
        k = result_shapes[0][-1] if result_shapes and result_shapes[0] else 1
        return _TOP_K_STEP * inputs * max(1.0, math.log2(k + 1))
    if op in ("stablehlo.reduce", "stablehlo.reduce_window"):
        inputs = sum(math.prod(s) for s in operand_shapes if s is not None)
        return float(max(out, inputs) * (contracted if op != "stablehlo.reduce" else 1))
    if op in _TRANSCENDENTAL:
        return 10.0 * out
    return float(out)
