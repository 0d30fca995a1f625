"""The cost model: platform defaults, files from `meshjit.calibrate`, the
partition pass option, and how meshjit.jit picks one."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from meshjit.frontend.stages import cost_spec, partition_pipeline
from meshjit.passes import jit_propagation
from meshjit.passes.partitioner.cost import (
    PLAIN,
    PLATFORMS,
    SMALL_REDUCE_BYTES,
    CostModel,
    Efficiency,
    KernelDims,
    cost_data,
    fft_flops,
    load_cost,
    op_flops,
    relocation_pays,
)


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_cost_data_is_what_load_cost_reads_back(platform: str, tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    model = PLATFORMS[platform]
    path.write_text(json.dumps(cost_data(model)))
    # the same model, its per-kind tables as a file orders them (by kind)
    assert load_cost(str(path)) == dataclasses.replace(
        model,
        kind_bandwidth=tuple(sorted(model.kind_bandwidth)),
        kind_latency=tuple(sorted(model.kind_latency)),
    )


def test_platform_defaults_and_files(tmp_path: Path) -> None:
    assert load_cost("cpu") is PLATFORMS["cpu"]
    assert load_cost("gpu").latency < load_cost("cpu").latency
    path = tmp_path / "model.json"
    path.write_text(
        json.dumps(
            {
                "latency": 1e-5,
                "bandwidth": 2e9,
                "flops": 3e9,
                "memory_bandwidth": 4e9,
                "platform": "cpu",
            }
        )
    )
    assert load_cost(str(path)) == CostModel(1e-5, 2e9, 3e9, 4e9)
    data = json.loads(path.read_text())
    data["kind_bandwidth"] = {"all-reduce": 8e9}
    path.write_text(json.dumps(data))
    model = load_cost(str(path))
    assert model.collective_seconds("all-reduce", 8000, 8) == pytest.approx(1e-5 + 1e-6)
    assert model.collective_seconds("all-gather", 2000, 8) == pytest.approx(1e-5 + 1e-6)
    data["kind_latency"] = {"collective-permute": 3e-5}
    data["variadic_launches"] = True
    path.write_text(json.dumps(data))
    model = load_cost(str(path))
    assert model.collective_seconds("collective-permute", 2000, 2) == pytest.approx(
        3e-5 + 1e-6
    )
    assert model.collective_seconds("all-gather", 2000, 8) == pytest.approx(1e-5 + 1e-6)
    assert model.variadic_launches
    free = model.without_latency()
    assert free.collective_seconds("collective-permute", 2000, 2) == pytest.approx(1e-6)


def test_which_independent_reductions_share_a_launch() -> None:
    """Where XLA's variadic all-reduce launches once per operand (its CPU
    backend) only the all-reduces meshjit concatenates share one."""
    cpu, gpu = PLATFORMS["cpu"], PLATFORMS["gpu"]
    assert cpu.variadic_launches
    assert not gpu.variadic_launches
    assert cpu.shares_launch("all-reduce", SMALL_REDUCE_BYTES)
    assert not cpu.shares_launch("all-reduce", SMALL_REDUCE_BYTES + 1)
    assert gpu.shares_launch("all-reduce", 1 << 30)
    assert cpu.shares_launch("reduce-scatter", 1 << 30)
    assert not cpu.shares_launch("all-to-all", 1)


def test_bad_cost_files_are_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="neither a platform"):
        load_cost(str(tmp_path / "missing.json"))
    path = tmp_path / "partial.json"
    path.write_text('{"latency": 1}')
    with pytest.raises(ValueError, match="needs the numbers"):
        load_cost(str(path))
    path.write_text('{"latency": 1, "bandwidth": 0, "flops": 1, "memory_bandwidth": 1}')
    with pytest.raises(ValueError, match="positive"):
        load_cost(str(path))
    good = {"latency": 1, "bandwidth": 1, "flops": 1, "memory_bandwidth": 1}
    path.write_text(json.dumps({**good, "kind_latency": {"all-gahter": 1}}))
    with pytest.raises(ValueError, match="names all-gahter; the kinds are"):
        load_cost(str(path))
    path.write_text(json.dumps({**good, "variadic_launches": "yes"}))
    with pytest.raises(ValueError, match="variadic_launches is not true/false"):
        load_cost(str(path))
    path.write_text(json.dumps({**good, "runtime_cut_offsets": 1}))
    with pytest.raises(ValueError, match="runtime_cut_offsets is not true/false"):
        load_cost(str(path))
    path.write_text(json.dumps({**good, "runtime_cut_offsets": True}))
    assert load_cost(str(path)).runtime_cut_offsets


def test_collective_and_compute_seconds() -> None:
    m = CostModel(latency=1e-5, bandwidth=1e9, flops=1e9, memory_bandwidth=1e9)
    assert m.collective_seconds("all-gather", 0, 8) == 0.0
    assert m.collective_seconds("all-gather", 1000, 1) == 0.0  # one device
    assert m.collective_seconds("all-gather", 1000, 8) == pytest.approx(1e-5 + 1e-6)
    assert m.compute_seconds(2e9, 1e6) == pytest.approx(2.0)  # FLOP-bound
    assert m.compute_seconds(1e3, 3e9) == pytest.approx(3.0)  # memory-bound


def test_op_flops() -> None:
    dot = op_flops("stablehlo.dot_general", [(8, 16), (16, 4)], [(8, 4)], 16)
    assert dot == 2 * 8 * 4 * 16
    assert op_flops("stablehlo.add", [(8,), (8,)], [(8,)]) == 8
    # n log n comparisons; an argsort's index operand costs more per one
    sort = op_flops("stablehlo.sort", [(4, 1024)], [(4, 1024)], 1024)
    assert sort == 1400 * 4 * 1024 * 10
    argsort = op_flops("stablehlo.sort", [(4, 1024)] * 2, [(4, 1024)] * 2, 1024)
    assert argsort == 1700 * 4 * 1024 * 10
    top_k = op_flops("chlo.top_k", [(4, 1024)], [(4, 7), (4, 7)])
    assert top_k == 900 * 4 * 1024 * 3


class _Device:
    def __init__(self, platform: str) -> None:
        self.platform = platform


def test_jit_picks_the_devices_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MESHJIT_COST", raising=False)
    assert partition_pipeline([_Device("cpu")]) == "partition{cost=cpu}"
    assert partition_pipeline([_Device("gpu")]) == "partition{cost=gpu}"
    monkeypatch.setenv("MESHJIT_COST", "/tmp/calibrated.json")
    assert (
        partition_pipeline([_Device("cpu")]) == "partition{cost=/tmp/calibrated.json}"
    )


def test_relocation_pays_where_bytes_and_work_outweigh_a_launch() -> None:
    # an rfft of rows x n f32 along a dim split 8 ways: two all-to-alls and
    # an eighth of the transform against one gather and the whole transform
    def pays(model: str, rows: int, n: int) -> bool:
        spectrum = rows * (n // 2 + 1) * 8
        flops = fft_flops(rows * n, n)
        return relocation_pays(load_cost(model), rows * n * 4, spectrum, flops, 8)

    assert not pays("cpu", 16, 128)  # launch-bound: the gather is cheaper
    assert not pays("cpu", 64, 256)
    assert pays("cpu", 64, 1024)
    assert pays("cpu", 256, 4096)
    assert not pays("gpu", 256, 1024)  # 10 us launches, 150 GB/s
    assert pays("gpu", 4096, 4096)
    assert not relocation_pays(load_cost("cpu"), 1 << 30, 1 << 30, 1e12, 1)


def test_jit_relocates_with_the_devices_cost_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MESHJIT_COST", raising=False)
    assert "relocate=gpu" in jit_propagation(cost_spec([_Device("gpu")]))
    monkeypatch.setenv("MESHJIT_COST", "/tmp/calibrated.json")
    assert "relocate=/tmp/calibrated.json" in jit_propagation(cost_spec([]))


@pytest.mark.devices(8)
def test_calibrate_measures_a_usable_model(tmp_path: Path) -> None:
    from meshjit.calibrate import main

    out = tmp_path / "cpu.json"
    assert main(["--out", str(out), "--repeat", "3"]) == 0
    model = load_cost(str(out))
    assert model.latency > 0
    assert model.bandwidth > 0
    assert model.flops > 0
    assert model.memory_bandwidth > 0
    kinds = {"all-gather", "all-reduce", "reduce-scatter", "all-to-all"}
    assert kinds <= {k for k, _ in model.kind_latency}
    assert isinstance(model.variadic_launches, bool)
    # The small-block constants are the platform's defaults, and say so.
    cpu = PLATFORMS["cpu"]
    assert (model.gemm_n_tile, model.gemm_k_tile, model.vector_bytes) == (
        cpu.gemm_n_tile,
        cpu.gemm_k_tile,
        cpu.vector_bytes,
    )
    # So is whether its compiler compiles each distinct kernel on its own.
    assert model.runtime_cut_offsets == cpu.runtime_cut_offsets
    assert json.loads(out.read_text())["not_measured"] == [
        "gemm_n_tile",
        "gemm_k_tile",
        "vector_bytes",
        "runtime_cut_offsets",
    ]


@pytest.mark.devices(8)
def test_plans_within_two_percent_are_a_tie_broken_by_bytes() -> None:
    """A stack of matmuls over a 2x4 mesh, weights split on their output dim:
    for the last layer, all-gathering the activation (then the result) and
    all-to-all of the weight + all-reduce are estimated within 2% of each
    other; the tie goes to the plan that moves fewer bytes (XLA's, 24
    all-gathers)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import meshjit

    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))

    def stack(x: jax.Array, ws: jax.Array) -> jax.Array:
        for i in range(ws.shape[0]):
            x = jnp.tanh(x @ ws[i]) + x
        return x

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    ws = (rng.standard_normal((4, 128, 128)) * 0.05).astype(np.float32)
    in_sh = (NamedSharding(mesh, P("x")), NamedSharding(mesh, P(None, None, "y")))
    out_sh = NamedSharding(mesh, P("x"))
    compiled = (
        meshjit.jit(stack, in_shardings=in_sh, out_shardings=out_sh)
        .lower(x, ws)
        .compile()
    )
    got = compiled(*[jax.device_put(a, s) for a, s in zip((x, ws), in_sh, strict=True)])
    np.testing.assert_allclose(np.asarray(got), stack(x, ws), rtol=1e-5, atol=1e-5)
    report = compiled.partition_report
    assert report.counts() == {"all-gather": 4}, report.collectives_text()
    assert report.total_bytes == 4 * 12288


def test_small_blocks_slow_convolutions_and_reductions(tmp_path: Path) -> None:
    """Per-device blocks below the CPU's tiles cost more than their FLOPs and
    bytes: a convolution's GEMM (N = output features, K = input features x
    window) and a reduction's minor dim (rounded up to a vector of 8 f32)."""
    cpu = PLATFORMS["cpu"]
    kernel = KernelDims(out_feature=3, in_feature=2, spatial=(0, 1))
    assert cpu.gemm_slowdown(kernel, (3, 3, 16, 16)) == 1.0  # K = 144, N = 16
    assert cpu.gemm_slowdown(kernel, (7, 7, 3, 2)) == 4.0  # N = 2 of 8
    assert cpu.gemm_slowdown(kernel, (3, 3, 1, 8)) == pytest.approx(32 / 9)
    assert cpu.gemm_slowdown(kernel, (1, 1, 16, 1)) == 8.0 * 2.0
    assert cpu.vector_padding((16, 16, 16, 2), 4) == 4.0
    assert cpu.vector_padding((2, 16, 16, 16), 4) == 1.0
    assert cpu.vector_padding((16, 12), 4) == pytest.approx(16 / 12)
    assert cpu.vector_padding((16, 2), 2) == 8.0  # bf16: 16 lanes
    assert PLAIN.scale(cpu, [((16, 16, 16, 2), 4)]) == (1.0, 1.0)
    reduce = Efficiency(vectors=True)
    # Bytes-weighted over operand and result: 32 KiB at 4x, 8 B at 4x.
    assert reduce.scale(cpu, [((16, 16, 16, 2), 4), ((2,), 4)]) == (1.0, 4.0)
    conv = Efficiency(kernel=kernel)
    assert conv.scale(cpu, [((16, 8, 8, 8), 4), ((7, 7, 3, 2), 4), None]) == (
        4.0,
        1.0,
    )
    # The GPU defaults and files without the fields have no such effects.
    gpu = PLATFORMS["gpu"]
    assert gpu.gemm_slowdown(kernel, (1, 1, 1, 1)) == 1.0
    assert gpu.vector_padding((16, 1), 4) == 1.0
    path = tmp_path / "model.json"
    good = {"latency": 1, "bandwidth": 1, "flops": 1, "memory_bandwidth": 1}
    path.write_text(json.dumps({**good, "gemm_n_tile": 4, "vector_bytes": 64}))
    model = load_cost(str(path))
    assert (model.gemm_n_tile, model.gemm_k_tile, model.vector_bytes) == (4, 1, 64)
    path.write_text(json.dumps({**good, "gemm_k_tile": 0}))
    with pytest.raises(ValueError, match="gemm_k_tile is not an integer >= 1"):
        load_cost(str(path))
    path.write_text(json.dumps({**good, "vector_bytes": 2.5}))
    with pytest.raises(ValueError, match="vector_bytes is not an integer >= 0"):
        load_cost(str(path))


def test_a_gather_of_mostly_padding_is_priced_as_the_sum_it_is_written_as() -> None:
    """A size-1 dim split 8 ways made whole is one all-reduce of the dim
    (`PartitionCtx.gather_by_sum`), not a gather of 8 blocks; an even dim
    is gathered."""
    from meshjit.dialects.reshard import AllGather, AllReduce, step_bytes
    from meshjit.dialects.sharding import AxisRef, MeshAxis, MeshModel
    from meshjit.passes.partitioner.cost import reshard_seconds, sums_gather

    mesh = MeshModel((MeshAxis("x", 8),))
    cpu = PLATFORMS["cpu"]
    split = ((), (AxisRef("x"),), ())
    whole = ((), (), ())
    x = (AxisRef("x"),)
    tiny = reshard_seconds(split, whole, (4, 1, 128), 4, mesh, (), cpu)
    summed = step_bytes(AllReduce(x), [4, 1, 128], 4, mesh)
    assert tiny == pytest.approx(cpu.collective_seconds("all-reduce", summed, 8))
    even = reshard_seconds(split, whole, (4, 16, 128), 4, mesh, (), cpu)
    gathered = step_bytes(AllGather(1, x), [4, 2, 128], 4, mesh)
    assert even == pytest.approx(cpu.collective_seconds("all-gather", gathered, 8))
    assert sums_gather(1, 1, 8, False)
    assert sums_gather(3, 1, 8, False)
    assert not sums_gather(5, 1, 8, False)  # 5 of 8 blocks hold data
    assert not sums_gather(1, 1, 8, True)  # another axis still splits it
