"""Combining independent collectives (passes/partitioner/combine.py): the
grouping on plain data, and programs whose collectives are combined computing
what the unsharded program computes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit
from meshjit.frontend.stages import partition_pipeline
from meshjit.passes.partitioner.combine import (
    GATHER_LIMIT_BYTES,
    REDUCE_LIMIT_BYTES,
    Candidate,
    plan_groups,
)
from meshjit.passes.partitioner.cost import SMALL_REDUCE_BYTES

RS = ("stablehlo.reduce_scatter", "groups", "add", "f32", "True")
AR = ("stablehlo.all_reduce", "groups", "add", "f32", "True")
AG = ("stablehlo.all_gather", "groups", "", "f32", "True")


def _in_order(key: tuple[str, ...], depends_on: list[int]) -> list[Candidate]:
    """Candidates of one key and 100 bytes each, at positions 0, 1, ...;
    candidate i depends on those whose bits `depends_on[i]` sets."""
    return [Candidate(i, key, 100, mask) for i, mask in enumerate(depends_on)]


def test_independent_collectives_of_one_key_form_one_group() -> None:
    cands = _in_order(RS, [0, 0, 0, 0])
    assert plan_groups(cands) == [[0, 1, 2, 3]]


def test_a_dependent_collective_closes_the_group() -> None:
    # The second and third feed later ones: the third depends on the second
    # (bit 1), so they cannot share a group; the fourth depends on the third.
    cands = _in_order(RS, [0, 0, 0b10, 0b100, 0b1000])
    assert plan_groups(cands) == [[0, 4]]


def test_what_nothing_depends_on_groups_apart_from_what_feeds_later_ones() -> None:
    """A backward pass through batch norms: each layer's statistics (1, 3, 5,
    then 7 and 8) feed the next layer's, its gradients (0, 2, 4, 6, 9)
    nothing. Mixed, each statistic closed the group before it ([0, 1],
    [2, 3], [4, 5], ...: a buffer each); the gradients wait for the last one
    instead, and one layer's two statistics (7, 8: neither depends on the
    other) still pair."""
    deps = [0, 0, 0b10, 0b10, 0b1010, 0b1010, 0b101010, 0b101010, 0b101010]
    cands = _in_order(AR, [*deps, 0b110101010])
    assert plan_groups(cands) == [[0, 2, 4, 6, 9], [7, 8]]


def test_keys_do_not_mix_and_singletons_are_left_alone() -> None:
    cands = [
        Candidate(0, RS, 100, 0),
        Candidate(1, AR, 100, 0),
        Candidate(2, RS, 100, 0),
        Candidate(3, AG, 100, 0),
    ]
    assert plan_groups(cands) == [[0, 2]]


def test_byte_limits() -> None:
    cands = [Candidate(i, RS, 40, 0) for i in range(5)]
    assert plan_groups(cands, limit=100) == [[0, 1], [2, 3]]
    big = GATHER_LIMIT_BYTES // 2 + 1  # all-gathers have their own limit
    gathers = [Candidate(i, AG, big, 0) for i in range(3)]
    assert plan_groups(gathers) == []
    small = [Candidate(i, AG, 1024, 0) for i in range(3)]
    assert plan_groups(small) == [[0, 1, 2]]
    half = REDUCE_LIMIT_BYTES // 2  # and all-reduces theirs
    reduces = [Candidate(i, AR, half, 0) for i in range(3)]
    assert plan_groups(reduces) == [[0, 1]]


def mesh_2x4() -> Mesh:
    return Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))


@pytest.mark.devices(8)
@pytest.mark.parametrize("env", ["", "1", "0", "off"])
def test_combined_reduce_scatters_all_reduces_and_gathers_match_unsharded(
    env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three partial sums reduce-scattered along different dims, two small
    ones all-reduced, three small values gathered: on the CPU cost model
    (XLA's CPU variadic all-reduce launches once per operand) each kind is
    combined into one collective, and every output equals the unsharded one.
    `MESHJIT_COMBINE=0` (or off) leaves all eight as written."""
    monkeypatch.setenv("MESHJIT_COMBINE", env)
    m = mesh_2x4()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 64)).astype(np.float32)
    bs = [rng.standard_normal((64, 24)).astype(np.float32) for _ in range(5)]
    small = [rng.standard_normal((8, 4)).astype(np.float32) for _ in range(3)]

    def f(a, b0, b1, b2, b3, b4, s0, s1, s2):  # type: ignore[no-untyped-def]
        dots = [a @ b for b in (b0, b1, b2, b3, b4)]
        return (*dots, *(jnp.sin(s) for s in (s0, s1, s2)))

    in_specs = [P(None, "y")] + [P("y")] * 5 + [P("y")] * 3
    out_specs = [P("y"), P(None, "y"), P("y"), P(), P()] + [P()] * 3
    in_sh = [NamedSharding(m, s) for s in in_specs]
    out_sh = tuple(NamedSharding(m, s) for s in out_specs)
    args = [a, *bs, *small]
    compiled = (
        meshjit.jit(f, in_shardings=in_sh, out_shardings=out_sh).lower(*args).compile()
    )
    got = compiled(*[jax.device_put(x, s) for x, s in zip(args, in_sh, strict=True)])
    want = f(*args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
    report = compiled.partition_report
    combined = {c.kind: c.count for c in report.combined}
    want_combined = {"reduce-scatter": 3, "all-gather": 3, "all-reduce": 2}
    hlo = compiled.as_text("partitioned")
    if env in ("0", "off"):
        assert combined == {}, report.collectives_text()
        assert "issued after combining" not in report.collectives_text()
        assert hlo.count('"stablehlo.reduce_scatter"') == 3
        assert hlo.count('"stablehlo.all_gather"') == 3
        assert hlo.count('"stablehlo.all_reduce"') == 2
        return
    assert combined == want_combined, report.collectives_text()
    assert "issued after combining" in report.collectives_text()
    assert hlo.count('"stablehlo.reduce_scatter"') == 1
    assert hlo.count('"stablehlo.all_gather"') == 1
    assert hlo.count('"stablehlo.all_reduce"') == 1


def test_combine_env_value_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MESHJIT_COST", raising=False)
    monkeypatch.setenv("MESHJIT_COMBINE", "maybe")
    with pytest.raises(meshjit.ShardingError, match="MESHJIT_COMBINE='maybe'"):
        partition_pipeline([])
    monkeypatch.setenv("MESHJIT_COMBINE", "No")
    assert partition_pipeline([]) == "partition{cost=cpu combine=false}"


@pytest.mark.devices(8)
@pytest.mark.parametrize("cost", ["cpu", "gpu"])
def test_only_small_all_reduces_are_combined_and_only_on_cpu(
    cost: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two small all-reduces and one above SMALL_REDUCE_BYTES: the CPU model
    concatenates the small two and leaves the large one alone; the GPU model
    (one launch for XLA's variadic all-reduce) leaves all three to XLA."""
    monkeypatch.setenv("MESHJIT_COST", cost)
    m = mesh_2x4()
    rng = np.random.default_rng(2)
    side = 256
    assert side * side * 4 > SMALL_REDUCE_BYTES
    a = rng.standard_normal((side, 64)).astype(np.float32)
    b = rng.standard_normal((64, side)).astype(np.float32)
    c = rng.standard_normal((8, 64)).astype(np.float32)

    def f(a, b, c):  # type: ignore[no-untyped-def]
        return a @ b, c @ b[:, :8], c @ b[:, 8:16]

    sh = [NamedSharding(m, P(None, "y")), NamedSharding(m, P("y")), None]
    sh[2] = sh[0]
    compiled = (
        meshjit.jit(f, in_shardings=sh, out_shardings=NamedSharding(m, P()))
        .lower(a, b, c)
        .compile()
    )
    got = compiled(*[jax.device_put(v, s) for v, s in zip((a, b, c), sh, strict=True)])
    for g, w in zip(got, f(a, b, c), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-4)
    report = compiled.partition_report
    assert report.counts() == {"all-reduce": 3}, report.collectives_text()
    combined = [(g.kind, g.count) for g in report.combined]
    hlo = compiled.as_text("partitioned")
    if cost == "cpu":
        assert combined == [("all-reduce", 2)], report.collectives_text()
        assert hlo.count('"stablehlo.all_reduce"') == 2
    else:
        assert combined == [], report.collectives_text()
        assert hlo.count('"stablehlo.all_reduce"') == 3


@pytest.mark.devices(8)
def test_dependent_collectives_are_not_combined() -> None:
    """A chain of matmuls, each reducing the last one's output: nothing to
    combine; still right."""
    m = mesh_2x4()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 32)).astype(np.float32)
    ws = rng.standard_normal((3, 32, 32)).astype(np.float32) * 0.2

    def f(x, ws):  # type: ignore[no-untyped-def]
        for i in range(3):
            x = jnp.tanh(x @ ws[i])
        return x

    sh = (NamedSharding(m, P(None, "y")), NamedSharding(m, P(None, "y", None)))
    compiled = (
        meshjit.jit(f, in_shardings=sh, out_shardings=sh[0]).lower(x, ws).compile()
    )
    got = compiled(*[jax.device_put(v, s) for v, s in zip((x, ws), sh, strict=True)])
    np.testing.assert_allclose(
        np.asarray(got), np.asarray(f(x, ws)), rtol=1e-5, atol=1e-5
    )
    assert compiled.partition_report.combined == []


@pytest.mark.devices(8)
def test_cut_outs_let_same_shape_consumers_share_a_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Adam-style update of 8 same-shape parameters, the batch split 8
    ways: the 8 gradient all-reduces are combined (CPU cost model), and each
    gradient is cut out at an offset XLA sees only at run time, so the
    per-parameter update kernels are one compiled kernel as they are
    without combining. XLA's kernels are counted from its LLVM dump (one
    module per distinct kernel); with constant offsets the 8 members' two
    updates each would be 16 more."""
    mesh = Mesh(np.array(jax.devices()[:8]), ("x",))
    params = [np.full((16, 16), 0.1 * (i + 1), np.float32) for i in range(8)]
    mu = [np.zeros((16, 16), np.float32) for _ in range(8)]
    x = np.random.default_rng(0).standard_normal((64, 16)).astype(np.float32)

    def step(ps: list[jax.Array], ms: list[jax.Array], x: jax.Array) -> Any:
        def loss(ps: list[jax.Array]) -> jax.Array:
            h = x
            for p in ps:
                h = jnp.tanh(h @ p)
            return (h * h).mean()

        grads = jax.grad(loss)(ps)
        ms = [0.9 * m + 0.1 * g for m, g in zip(ms, grads, strict=True)]
        vs = [0.99 * m + 0.01 * g * g for m, g in zip(ms, grads, strict=True)]
        ps = [
            p - 0.01 * m / (jnp.sqrt(v) + 1e-8)
            for p, m, v in zip(ps, ms, vs, strict=True)
        ]
        return ps, ms

    rep, rows = NamedSharding(mesh, P()), NamedSharding(mesh, P("x"))
    ins = ([rep] * 8, [rep] * 8, rows)

    def kernels(env: str) -> tuple[int, Any]:
        monkeypatch.setenv("MESHJIT_COMBINE", env)
        dump = tmp_path / f"combine{env}"
        compiled = (
            meshjit.jit(step, in_shardings=ins)
            .lower(params, mu, x)
            .compile({"xla_dump_to": str(dump)})
        )
        assert "combined: " in compiled.partition_report.collectives_text() or (
            env == "0"
        )
        return len(list(dump.glob("*ir-with-opt.ll"))), compiled(params, mu, x)

    combined, got = kernels("1")
    separate, _ = kernels("0")
    want = jax.jit(step)(params, mu, x)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
    # the concatenation and the offsets' loop (cond and body) may add a few
    assert separate > 0
    assert combined <= separate + 5, (combined, separate)


@pytest.mark.devices(8)
def test_a_bodys_own_psums_combined_count_once_in_issued() -> None:
    """Two independent psums of a shard_map body are one all-reduce after
    combining; nothing is inserted, and the report's issued count (the
    program's own included) says one, not two or none."""
    m = Mesh(np.array(jax.devices()[:8]), ("x",))

    def body(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jax.lax.psum(a * 2, "x"), jax.lax.psum(b + 1, "x")

    f = jax.shard_map(body, mesh=m, in_specs=(P("x"), P("x")), out_specs=(P(), P()))
    a = np.arange(64, dtype=np.float32).reshape(16, 4)
    b = np.ones((8, 4), np.float32)
    sh = NamedSharding(m, P("x"))
    compiled = meshjit.jit(f, in_shardings=(sh, sh)).lower(a, b).compile()
    report = compiled.partition_report
    assert report.collectives == []
    assert [c.kind for c in report.own] == ["all-reduce"] * 2
    assert [(g.kind, g.count) for g in report.combined] == [("all-reduce", 2)]
    assert report.issued_counts() == {"all-reduce": 1}
    text = report.collectives_text()
    assert "issued after combining (the program's own included): all-reduce x1" in text
    assert compiled.as_text("partitioned").count('"stablehlo.all_reduce"') == 1
    got = compiled(jax.device_put(a, sh), jax.device_put(b, sh))
    np.testing.assert_allclose(
        np.asarray(got[0]), (a * 2).reshape(8, 2, 4).sum(0), rtol=1e-6
    )
    np.testing.assert_allclose(np.asarray(got[1]), np.full((1, 4), 16.0))
