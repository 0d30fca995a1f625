"""shard_map bodies: full-manual bodies run as written and their results
keep their layout; partial-manual bodies (`axis_names` a subset of the mesh)
are partitioned over the free axes. Checked against jax.jit on 8 devices."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit

pytestmark = pytest.mark.devices(8)

MESH8 = Mesh(np.array(jax.devices()[:8]), ("x",))
MESH24 = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))


def check(
    fn: Callable[..., Any], x: np.ndarray, mesh: Mesh, in_spec: P, out_spec: P
) -> meshjit.Compiled:
    in_sh, out_sh = NamedSharding(mesh, in_spec), NamedSharding(mesh, out_spec)
    compiled = (
        meshjit.jit(fn, in_shardings=in_sh, out_shardings=out_sh).lower(x).compile()
    )
    placed = jax.device_put(x, in_sh)
    got = compiled(placed)
    want = jax.jit(fn, in_shardings=in_sh, out_shardings=out_sh)(placed)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    assert got.sharding.is_equivalent_to(out_sh, x.ndim)
    return compiled


def rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


def test_full_manual_result_keeps_its_layout() -> None:
    def f(x: jax.Array) -> jax.Array:
        y = jax.shard_map(
            lambda a: a * 2, mesh=MESH8, in_specs=P("x"), out_specs=P("x")
        )(x)
        return y + 1

    compiled = check(f, rand(64, 16), MESH8, P("x"), P("x"))
    assert compiled.partition_report.collectives == []


def test_full_manual_psum_then_global_ops() -> None:
    def f(x: jax.Array) -> jax.Array:
        def body(a: jax.Array) -> jax.Array:
            return jax.lax.psum(a.sum(0, keepdims=True), "x")

        y = jax.shard_map(body, mesh=MESH8, in_specs=P("x"), out_specs=P())(x)
        return jnp.tanh(y) * 3

    check(f, rand(64, 16), MESH8, P("x"), P())


def test_full_manual_pipeline_with_calls_in_its_loop() -> None:
    """A GPipe-style schedule: one stage per device, microbatches passed on
    by ppermute in a fori_loop. The body calls private functions
    (`jnp.where`, `jnp.clip`, the loop's body), in the loop and after it,
    which are inlined as written."""
    n, micro = 8, 4
    ws = np.random.default_rng(1).standard_normal((n, 16, 16)).astype(np.float32)
    ring = [(k, (k + 1) % n) for k in range(n)]

    def f(xs: jax.Array) -> jax.Array:
        def stage(w: jax.Array, xs: jax.Array) -> jax.Array:
            i = jax.lax.axis_index("x")

            def step(t: jax.Array, c: tuple[jax.Array, jax.Array]) -> Any:
                state, outs = c
                inp = jnp.where(i == 0, xs[jnp.minimum(t, micro - 1)], state)
                y = jnp.tanh(inp @ (w[0] * 0.3))
                slot = jnp.clip(t - (n - 1), 0, micro - 1)
                done = (i == n - 1) & (t >= n - 1)
                outs = jnp.where(done, outs.at[slot].set(y), outs)
                return jax.lax.ppermute(y, "x", ring), outs

            start = (jnp.zeros(xs.shape[1:]), jnp.zeros_like(xs))
            _, outs = jax.lax.fori_loop(0, micro + n - 1, step, start)
            return jax.lax.psum(jnp.where(i == n - 1, outs, 0.0), "x")

        return jax.shard_map(
            stage, mesh=MESH8, in_specs=(P("x"), P()), out_specs=P(), check_vma=False
        )(jnp.asarray(ws), xs)

    compiled = check(f, rand(micro, 4, 16), MESH8, P(), P())
    # the program's own ppermute and psum; the pipeline added nothing
    kinds = sorted({c.kind for c in compiled.partition_report.collectives})
    assert kinds == [], kinds


_BODIES: dict[str, tuple[Callable[[jax.Array], jax.Array], P, P]] = {
    "all_gather": (
        lambda b: jax.lax.all_gather(b, "y", axis=1, tiled=True) * 2,
        P(None, "y"),
        P(),
    ),
    "psum_scatter": (
        lambda b: jax.lax.psum_scatter(b, "y", scatter_dimension=1, tiled=True),
        P(),
        P(None, "y"),
    ),
    "all_to_all": (
        lambda b: jax.lax.all_to_all(b, "y", 2, 1, tiled=True),
        P(None, "y"),
        P(None, None, "y"),
    ),
}


@pytest.mark.parametrize("collective", sorted(_BODIES))
def test_partial_manual_collectives_run_on_free_axis_blocks(collective: str) -> None:
    """A body's all_gather, psum_scatter and all_to_all over the manual axis
    "y" run on the blocks of dim 0 split over the free axis "x": each moves
    a quarter of what it would on the whole, and nothing is gathered."""
    body, in_spec, out_spec = _BODIES[collective]

    def f(a: jax.Array) -> jax.Array:
        mapped = jax.shard_map(
            body,
            mesh=MESH24,
            in_specs=in_spec,
            out_specs=out_spec,
            axis_names={"y"},
            check_vma=False,
        )(a)
        return jnp.sin(mapped)

    def with_x(spec: P) -> P:  # dim 0 split over the free axis "x" too
        return P("x", *[*spec, None, None, None][1:3])

    compiled = check(f, rand(8, 16, 12), MESH24, with_x(in_spec), with_x(out_spec))
    assert compiled.partition_report.collectives == []
    assert not compiled.partition_report.remarks


@pytest.mark.parametrize(
    ("layout", "inserted"),
    [(P(("y", "x")), []), (P(("x", "y")), ["collective-permute"] * 2)],
    ids=["expert_major", "data_major"],
)
def test_expert_parallel_moe_all_to_all_over_free_axis_blocks(
    layout: P, inserted: list[str]
) -> None:
    """Expert parallelism as MoE layers write it: a shard_map manual over
    "y" (one expert per device) dispatches top-1 routed tokens with capacity
    to their expert by all_to_all and back, the token groups split over the
    free axis "x" too. With the groups laid out expert-major the body runs
    on its blocks: the all_to_alls move each device's share of its "x"
    block, and nothing is inserted. Laid out data-major (("x", "y")), the
    in_sharding takes "x" minor to "y" (propagation's reorder): one
    collective-permute reorders the blocks in, one out, and the body still
    runs on "x" blocks (its all_to_alls move no more than expert-major).
    Checked against the routing computed densely (each expert on every
    token, kept where routed)."""
    experts, capacity, d, f = 4, 8, 32, 64
    rng = np.random.default_rng(5)
    wg = rng.standard_normal((d, experts)).astype(np.float32)
    w1 = (rng.standard_normal((experts, d, f)) * 0.2).astype(np.float32)
    w2 = (rng.standard_normal((experts, f, d)) * 0.2).astype(np.float32)

    def routed(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        onehot = jax.nn.one_hot(jnp.argmax(x @ wg, -1), experts)
        pos = jnp.cumsum(onehot, 1) * onehot - 1
        return onehot, (pos < capacity) & (onehot > 0)

    def body(x: jax.Array, w1: jax.Array, w2: jax.Array) -> jax.Array:
        _, keep = routed(x)
        pos = jnp.cumsum(keep, 1) * keep - 1
        slots = jax.nn.one_hot(jnp.where(keep, pos, -1), capacity) * keep[..., None]
        xin = jnp.einsum("gtec,gtd->egcd", slots, x)
        xin = jax.lax.all_to_all(xin, "y", 0, 0, tiled=True)
        h = jax.nn.gelu(jnp.einsum("egcd,df->egcf", xin, w1[0]))
        y = jax.lax.all_to_all(
            jnp.einsum("egcf,fd->egcd", h, w2[0]), "y", 0, 0, tiled=True
        )
        return jnp.einsum("gtec,egcd->gtd", slots, y)

    def f_(x: jax.Array) -> jax.Array:
        return jax.shard_map(
            body,
            mesh=MESH24,
            in_specs=(P("y"), P("y"), P("y")),
            out_specs=P("y"),
            axis_names={"y"},
            check_vma=False,
        )(x, jnp.asarray(w1), jnp.asarray(w2))

    x = rand(16, 16, d)
    compiled = check(f_, x, MESH24, layout, layout)
    report = compiled.partition_report
    assert [c.kind for c in report.collectives] == inserted
    # the body's all_to_alls on a device's share of its "x" block of groups:
    # [4 experts, 2 groups, capacity 8, 32] f32, 3/4 of it sent
    assert [(c.kind, c.bytes_per_device) for c in report.own] == [
        ("all-to-all", 4 * 2 * capacity * d * 4 * 3 // 4)
    ] * 2
    _, keep = routed(jnp.asarray(x))
    want = sum(
        jnp.where(keep[..., k : k + 1], jax.nn.gelu(x @ w1[k]) @ w2[k], 0.0)
        for k in range(experts)
    )
    placed = jax.device_put(x, NamedSharding(MESH24, layout))
    np.testing.assert_allclose(
        np.asarray(compiled(placed)), np.asarray(want), rtol=1e-5, atol=1e-5
    )


def _ring_attention(mesh: Mesh, axis_names: set[str] | None) -> Any:
    """Ring attention (sequence parallel): each device keeps its query block
    and passes key/value blocks around the ring over "y" by ppermute in a
    fori_loop, with an online softmax."""
    n = mesh.shape["y"]
    ring = [(k, (k + 1) % n) for k in range(n)]

    def body(qkv: jax.Array) -> jax.Array:
        q, k, v = qkv[0], qkv[1], qkv[2]

        def step(_: jax.Array, c: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
            m, total, o, k, v = c
            s = jnp.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1])
            m2 = jnp.maximum(m, s.max(-1))
            p, a = jnp.exp(s - m2[..., None]), jnp.exp(m - m2)
            o = o * a[..., None] + jnp.einsum("bqk,bkd->bqd", p, v)
            k, v = jax.lax.ppermute(k, "y", ring), jax.lax.ppermute(v, "y", ring)
            return m2, total * a + p.sum(-1), o, k, v

        start = (
            jnp.full(q.shape[:-1], -jnp.inf),
            jnp.zeros(q.shape[:-1]),
            jnp.zeros_like(q),
            k,
            v,
        )
        _, total, o, _, _ = jax.lax.fori_loop(0, n, step, start)
        return o / total[..., None]

    extra = {} if axis_names is None else {"axis_names": axis_names}
    spec = P(None, None, "y")
    attend = jax.shard_map(
        body,
        mesh=mesh,
        in_specs=spec,
        out_specs=P(None, "y"),
        check_vma=False,
        **extra,
    )
    return lambda qkv: jnp.tanh(attend(qkv))


@pytest.mark.parametrize(
    ("axis_names", "in_spec"),
    [(None, P(None, None, "y")), ({"y"}, P(None, "x", "y"))],
    ids=["full_manual", "partial_manual_batch_split_over_free_x"],
)
def test_ring_attention_passes_blocks_on_local_pieces(
    axis_names: set[str] | None, in_spec: P
) -> None:
    """The body's own ppermutes run on blocks split over the free axis too
    (each ring joins devices of one "x" block): nothing gathered. Checked
    against attention computed whole in numpy."""
    qkv = rand(3, 4, 32, 8)
    out_spec = P(*in_spec[1:])
    compiled = check(
        _ring_attention(MESH24, axis_names), qkv, MESH24, in_spec, out_spec
    )
    report = compiled.partition_report
    assert report.collectives == []
    # the body's own two ppermutes, reported as the program's (not inserted)
    own = [(c.kind, c.axes) for c in report.own]
    assert own == [("collective-permute", ('"y"',))] * 2
    q, k, v = qkv.astype(np.float64)
    s = np.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.tanh(np.einsum("bqk,bkd->bqd", p / p.sum(-1, keepdims=True), v))
    placed = jax.device_put(qkv, NamedSharding(MESH24, in_spec))
    np.testing.assert_allclose(np.asarray(compiled(placed)), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("in_spec", [P("x", "y"), P("x"), P(None, "y")])
def test_partial_manual_body_is_partitioned_over_free_axes(in_spec: P) -> None:
    def body(a: jax.Array) -> jax.Array:
        return jax.lax.psum(jnp.tanh(a @ a.T), "x")

    def f(x: jax.Array) -> jax.Array:
        y = jax.shard_map(
            body, mesh=MESH24, in_specs=P("x"), out_specs=P(), axis_names={"x"}
        )(x)
        return y + 1

    compiled = check(f, rand(64, 16), MESH24, in_spec, P())
    assert not [
        r for r in compiled.partition_report.remarks if "replicated" in r.message
    ]


def test_partial_manual_body_keeps_free_axis_split() -> None:
    """The body's elementwise work stays split over the free axis "y"."""

    def body(a: jax.Array) -> jax.Array:
        return jnp.exp(a) * 2 + jax.lax.pmean(a, "x")

    def f(x: jax.Array) -> jax.Array:
        return jax.shard_map(
            body, mesh=MESH24, in_specs=P("x"), out_specs=P("x"), axis_names={"x"}
        )(x)

    compiled = check(f, rand(64, 32), MESH24, P("x", "y"), P("x", "y"))
    assert compiled.partition_report.collectives == []


MESH42 = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("i", "j"))


def _split(x: jax.Array, spec: P) -> jax.Array:
    return jax.lax.with_sharding_constraint(x, NamedSharding(MESH42, spec))


def _over_i(body: Callable[[jax.Array], jax.Array]) -> Callable[..., jax.Array]:
    return jax.shard_map(
        body,
        mesh=MESH42,
        in_specs=P("i"),
        out_specs=P("i"),
        check_vma=False,
        axis_names={"i"},
    )


@pytest.mark.parametrize(
    ("fn", "shape"),
    [
        # jax's shard_map_test: test_partially_sharded_dim_with_auto
        pytest.param(
            lambda x: _split(
                _over_i(lambda b: jnp.sum(b)[None])(_split(x, P(("i", "j")))),
                P(("i", "j")),
            ),
            (8,),
            id="result",
        ),
        pytest.param(
            lambda x: _over_i(lambda b: jnp.sum(b, keepdims=True))(
                _split(x[:4], P(("i", "j")))
            ),
            (8,),
            id="operand",
        ),
        pytest.param(
            lambda x: _split(
                _over_i(lambda b: b.sum(0, keepdims=True) * b[:, :1].sum())(x),
                P(("i", "j"), None),
            ),
            (8, 6),
            id="result_2d",
        ),
        pytest.param(
            lambda x: _split(
                _over_i(lambda b: jnp.cumsum(b, axis=0))(
                    _split(x[:12], P(("i", "j"), None))
                ),
                P(("i", "j"), None),
            ),
            (16, 6),
            id="both_2d",
        ),
    ],
)
def test_free_axes_that_do_not_divide_a_manual_block(
    fn: Callable[[jax.Array], jax.Array], shape: tuple[int, ...]
) -> None:
    """A dim of a partial-manual body's operand or result whose free axis
    ("j"=2) does not divide each manual block (a row, or 3 rows, per "i"):
    split by "j" inside each block, it is not laid out as "i","j" split the
    whole dim (each block padded, not the dim), so it crosses the boundary
    unsplit by "j". All four came back wrong before ([1, 1, 5, 5] for jax's
    [1, 5, 9, 13]: each block's padding taken for the next rows)."""
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    want = jax.jit(fn)(x)
    got = meshjit.jit(fn)(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
