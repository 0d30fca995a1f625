"""Programs as others write them in plain JAX, partitioned on 8 devices and
checked against the unsharded run: a Fourier neural operator block on a
split grid (FFTs along the split dims by all-to-alls), a heat-equation
stencil of rolls in a loop, Switch-style top-1 routing with capacity by
cumsum, graph message passing by segment_sum over split edges, an int8
matmul with int32 partial sums, a strided transposed-convolution decoder,
per-example (DP-SGD) gradients, a CLIP contrastive loss, an LSTM scan with
split gates, bilinear resizing, pixel shuffle, sliding-window attention,
scatter-add with repeated indices and a filling gather, cumulative
max/product/logsumexp, medians and percentiles along split dims, a video
convolution's train step strided along split time, reflect padding with
rolls, Perceiver cross-attention over a split sequence.

Where the program's point is a particular way of partitioning (the FFTs'
all-to-alls, the stencil's halo permutes), the partitioned module is checked
for it too."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from . import numerics
from .numerics import rand

pytestmark = pytest.mark.devices(8)

MESH8 = Mesh(np.array(jax.devices()[:8]), ("x",))
MESH24 = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))


check = functools.partial(numerics.check, rtol=1e-5)


def fno_block(x: Any, wr: Any, wi: Any, wp: Any) -> Any:
    b, h, w, _ = x.shape
    modes = 8
    f = jnp.fft.rfft2(x, axes=(1, 2))
    weights = wr + 1j * wi
    low = jnp.einsum("bhwc,hwcd->bhwd", f[:, :modes, :modes, :], weights)
    spectrum = jnp.zeros((b, h, w // 2 + 1, wr.shape[-1]), f.dtype)
    spectrum = spectrum.at[:, :modes, :modes, :].set(low)
    y = jnp.fft.irfft2(spectrum, s=(h, w), axes=(1, 2))
    return jax.nn.gelu(y + x @ wp)


@pytest.mark.parametrize(
    ("mesh", "spec"),
    [(MESH8, P(None, "x")), (MESH24, P("x", "y"))],
    ids=["height8", "batch2_height4"],
)
def test_fourier_neural_operator_block(mesh: Mesh, spec: P) -> None:
    args = (
        rand(8, 64, 64, 16, seed=1),
        rand(8, 8, 16, 16, seed=2, scale=0.1),
        rand(8, 8, 16, 16, seed=3, scale=0.1),
        rand(16, 16, seed=4, scale=0.2),
    )
    compiled = check(fno_block, args, mesh, (spec, P(), P(), P()), spec, rtol=1e-4)
    text = compiled.as_text("partitioned")
    # the FFTs along the split height move it to another dim and back
    assert "stablehlo.all_to_all" in text
    assert "stablehlo.all_gather" not in text


def test_heat_stencil_loop_exchanges_halos() -> None:
    def heat(u: Any) -> Any:
        def step(_: Any, u: Any) -> Any:
            lap = (
                jnp.roll(u, 1, 0)
                + jnp.roll(u, -1, 0)
                + jnp.roll(u, 1, 1)
                + jnp.roll(u, -1, 1)
                - 4 * u
            )
            return u + 0.1 * lap

        return jax.lax.fori_loop(0, 10, step, u)

    spec = P("x", "y")
    compiled = check(heat, (rand(128, 128, seed=1),), MESH24, (spec,), spec)
    text = compiled.as_text("partitioned")
    assert "stablehlo.collective_permute" in text
    assert "stablehlo.all_gather" not in text


def test_switch_routing_with_capacity() -> None:
    def switch(x: Any, wg: Any, we: Any) -> Any:
        experts, capacity = wg.shape[1], 16
        logits = x @ wg
        expert = jnp.argmax(logits, -1)
        gate = jax.nn.softmax(logits, -1).max(-1)
        onehot = jax.nn.one_hot(expert, experts)
        position = jnp.cumsum(onehot, axis=0) * onehot - 1
        keep = (position < capacity) & (onehot > 0)
        dispatch = jax.nn.one_hot(position.astype(jnp.int32), capacity)
        dispatch = dispatch * keep[..., None]
        routed = jnp.einsum("tec,td->ecd", dispatch, x)
        y = jnp.einsum("ecd,edf->ecf", routed, we)
        return jnp.einsum("tec,ecf->tf", dispatch, y) * gate[:, None]

    args = (rand(64, 32, seed=1), rand(32, 8, seed=2), rand(8, 32, 32, seed=3))
    check(switch, args, MESH8, (P("x"), P(), P()), P("x"))
    check(switch, args, MESH8, (P(), P(), P("x")), P())


def test_message_passing_over_split_edges() -> None:
    def gnn(h: Any, w: Any, src: Any, dst: Any) -> Any:
        messages = jnp.tanh(h[src] @ w)
        total = jax.ops.segment_sum(messages, dst, num_segments=h.shape[0])
        ones = jnp.ones(dst.shape, jnp.float32)
        degree = jax.ops.segment_sum(ones, dst, num_segments=h.shape[0])
        return jax.nn.relu(h + total / jnp.maximum(degree, 1.0)[:, None])

    rng = np.random.default_rng(5)
    args = (
        rand(128, 32, seed=1),
        rand(32, 32, seed=2, scale=0.2),
        rng.integers(0, 128, 512).astype(np.int32),
        rng.integers(0, 128, 512).astype(np.int32),
    )
    check(gnn, args, MESH8, (P(), P(), P("x"), P("x")), P())
    check(gnn, args, MESH8, (P("x"), P(), P(), P()), P("x"))


def test_int8_matmul_int32_partial_sums() -> None:
    def qmm(x: Any, wq: Any) -> Any:
        xs = jnp.max(jnp.abs(x), axis=-1, keepdims=True) / 127.0
        xq = jnp.round(x / xs).astype(jnp.int8)
        dims = (((1,), (0,)), ((), ()))
        return jax.lax.dot_general(xq, wq, dims, preferred_element_type=jnp.int32)

    wq = np.random.default_rng(3).integers(-127, 128, (256, 64)).astype(np.int8)
    # integers: the partial sums over the split contraction are exact
    check(qmm, (rand(32, 256, seed=1), wq), MESH8, (P(None, "x"), P("x")), P())


def test_strided_transposed_convolution_decoder() -> None:
    def decoder(x: Any, w1: Any, w2: Any) -> Any:
        dn = ("NWC", "WIO", "NWC")
        y = jax.lax.conv_transpose(x, w1, (2,), "SAME", dimension_numbers=dn)
        y = jax.nn.leaky_relu(y)
        return jax.lax.conv_transpose(y, w2, (2,), "SAME", dimension_numbers=dn)

    args = (
        rand(4, 64, 8, seed=1),
        rand(4, 8, 8, seed=2, scale=0.3),
        rand(4, 8, 4, seed=3, scale=0.3),
    )
    check(decoder, args, MESH8, (P(None, "x"), P(), P()), P(None, "x"))
    check(decoder, args, MESH24, (P("x", "y"), P(), P()), P("x", "y"))


def test_per_example_gradients_clipped() -> None:
    def dpsgd(w: Any, x: Any, y: Any) -> Any:
        def loss(w: Any, xi: Any, yi: Any) -> Any:
            return ((jnp.tanh(xi @ w) - yi) ** 2).sum()

        g = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(w, x, y)
        norms = jnp.sqrt((g**2).sum(axis=(1, 2)))
        g = g / jnp.maximum(1.0, norms)[:, None, None]
        return w - 0.1 * g.mean(0)

    args = (rand(16, 8, seed=1, scale=0.3), rand(64, 16, seed=2), rand(64, 8, seed=3))
    check(dpsgd, args, MESH8, (P(), P("x"), P("x")), P())


def test_contrastive_loss_and_grads() -> None:
    def clip(wi: Any, wt: Any, img: Any, txt: Any) -> Any:
        def loss(wi: Any, wt: Any) -> Any:
            a = img @ wi
            b = txt @ wt
            a = a / jnp.linalg.norm(a, axis=-1, keepdims=True)
            b = b / jnp.linalg.norm(b, axis=-1, keepdims=True)
            logits = a @ b.T * 10.0
            labels = jnp.arange(logits.shape[0])
            rows = jax.nn.log_softmax(logits, -1)
            cols = jax.nn.log_softmax(logits, 0)
            l1 = -jnp.take_along_axis(rows, labels[:, None], 1).mean()
            l2 = -jnp.take_along_axis(cols, labels[None, :], 0).mean()
            return (l1 + l2) / 2

        return jax.value_and_grad(loss, argnums=(0, 1))(wi, wt)

    args = (
        rand(64, 32, seed=1, scale=0.1),
        rand(48, 32, seed=2, scale=0.1),
        rand(64, 64, seed=3),
        rand(64, 48, seed=4),
    )
    check(clip, args, MESH8, (P(), P(), P("x"), P("x")), (P(), (P(), P())))
    tp = P(None, "y")
    check(clip, args, MESH24, (tp, tp, P("x"), P("x")), (P(), (tp, tp)))


def test_lstm_scan_with_split_gates() -> None:
    def lstm(params: Any, xs: Any) -> Any:
        wx, wh, b = params

        def cell(carry: Any, x: Any) -> Any:
            h, c = carry
            i, f, g, o = jnp.split(x @ wx + h @ wh + b, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        zeros = jnp.zeros((xs.shape[1], wh.shape[0]))
        _, hs = jax.lax.scan(cell, (zeros, zeros), xs)
        return hs.mean(0)

    params = (
        rand(32, 256, seed=1, scale=0.1),
        rand(64, 256, seed=2, scale=0.1),
        rand(256, seed=3, scale=0.1),
    )
    args = (params, rand(12, 16, 32, seed=4))
    split = (P(None, "x"), P(None, "x"), P("x"))
    check(lstm, args, MESH8, (split, P()), P())
    check(lstm, args, MESH8, ((P(), P(), P()), P(None, "x")), P("x"))


def test_resize_and_pixel_shuffle_on_split_height() -> None:
    dn = ("NHWC", "HWIO", "NHWC")

    def resize_conv(x: Any, w: Any) -> Any:
        n, h, wd, c = x.shape
        y = jax.image.resize(x, (n, h * 2, wd * 2, c), "bilinear")
        return jax.lax.conv_general_dilated(y, w, (1, 1), "SAME", dimension_numbers=dn)

    def pixel_shuffle(x: Any, w: Any) -> Any:
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dn)
        n, h, wd, c = y.shape
        y = y.reshape(n, h, wd, 2, 2, c // 4).transpose(0, 1, 3, 2, 4, 5)
        return jax.nn.relu(y.reshape(n, h * 2, wd * 2, c // 4))

    x = rand(4, 16, 16, 8, seed=1)
    for fn, w in (
        (resize_conv, rand(3, 3, 8, 8, seed=2, scale=0.2)),
        (pixel_shuffle, rand(3, 3, 8, 16, seed=2, scale=0.2)),
    ):
        check(fn, (x, w), MESH8, (P(None, "x"), P()), P(None, "x"))
        check(fn, (x, w), MESH24, (P("x", "y"), P()), P("x", "y"))


def test_video_convolution_train_step_strided_along_split_time() -> None:
    dn = ("NDHWC", "DHWIO", "NDHWC")

    def loss(w: Any, x: Any) -> Any:
        y = jax.lax.conv_general_dilated(x, w, (2, 1, 1), "SAME", dimension_numbers=dn)
        y = jax.lax.conv_general_dilated(
            jax.nn.gelu(y), w, (1, 1, 1), ((1, 1), (1, 1), (1, 1)), dimension_numbers=dn
        )
        return jnp.mean(y**2)

    def step(w: Any, x: Any) -> Any:
        value, grad = jax.value_and_grad(loss)(w, x)
        return value, w - 0.1 * grad

    args = (rand(3, 3, 3, 8, 8, seed=1, scale=0.2), rand(2, 16, 6, 6, 8, seed=2))
    check(step, args, MESH8, (P(), P(None, "x")), (P(), P()))
    check(step, args, MESH24, (P(), P("x", "y")), (P(), P()))


def test_reflect_pad_convolution_and_rolls_on_split_height() -> None:
    def reflect_roll(x: Any, w: Any) -> Any:
        y = jnp.pad(x, ((0, 0), (2, 2), (2, 2), (0, 0)), mode="reflect")
        dn = ("NHWC", "HWIO", "NHWC")
        y = jax.lax.conv_general_dilated(y, w, (1, 1), "VALID", dimension_numbers=dn)
        return jnp.roll(y, 3, axis=1) - jnp.roll(y, -1, axis=2)

    args = (rand(2, 32, 16, 4, seed=1), rand(5, 5, 4, 4, seed=2, scale=0.1))
    check(reflect_roll, args, MESH8, (P(None, "x"), P()), P(None, "x"))
    check(reflect_roll, args, MESH24, (P("x", "y"), P()), P("x", "y"))


def test_perceiver_cross_attention_over_a_split_sequence() -> None:
    def cross(latents: Any, x: Any, wq: Any, wk: Any, wv: Any) -> Any:
        s = jnp.einsum("ld,bnd->bln", latents @ wq, x @ wk) / 8.0
        return jnp.einsum("bln,bnd->bld", jax.nn.softmax(s, axis=-1), x @ wv)

    w = [rand(32, 32, seed=i, scale=0.1) for i in (3, 4, 5)]
    args = (rand(16, 32, seed=1), rand(4, 256, 32, seed=2), *w)
    check(cross, args, MESH8, (P(), P(None, "x"), P(), P(), P()), P())
    check(cross, args, MESH24, (P(), P("x", "y"), P(), P(), P()), P("x"))


def test_sliding_window_attention() -> None:
    def swa(q: Any, k: Any, v: Any) -> Any:
        s = q.shape[1]
        i = jnp.arange(s)[:, None]
        j = jnp.arange(s)[None, :]
        band = (j <= i) & (j > i - 16)
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / 8.0
        logits = jnp.where(band, logits, -1e30)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, -1), v)

    args = tuple(rand(2, 64, 4, 16, seed=i) for i in range(3))
    check(swa, args, MESH8, (P(None, "x"),) * 3, P(None, "x"))
    check(swa, args, MESH24, (P("x", None, "y"),) * 3, P("x", None, "y"))


def test_scatter_add_repeated_indices_and_filling_gather() -> None:
    def scatter(table: Any, idx: Any, upd: Any) -> Any:
        t = table.at[idx].add(upd)
        return t, t.at[idx + 3].get(mode="fill", fill_value=0.0)

    rng = np.random.default_rng(9)
    idx = rng.integers(0, 128, 64).astype(np.int32)
    idx[:8] = idx[8:16]  # repeated indices add up
    args = (rand(128, 16, seed=1), idx, rand(64, 16, seed=2))
    check(scatter, args, MESH8, (P("x"), P(), P()), (P("x"), P()))
    check(scatter, args, MESH8, (P(), P("x"), P("x")), (P(), P("x")))


def test_cumulative_ops_and_medians_along_split_dims() -> None:
    def cumulative(x: Any) -> Any:
        return (
            jax.lax.cummax(x, axis=1),
            jnp.cumprod(1 + 0.01 * x, axis=1),
            jax.lax.cumlogsumexp(x, axis=1),
        )

    def medians(x: Any) -> Any:
        return jnp.median(x, axis=1), jnp.percentile(x, 90, axis=0)

    spec = P(None, "x")
    check(cumulative, (rand(8, 256, seed=1),), MESH8, (spec,), (spec,) * 3)
    check(medians, (rand(64, 96, seed=1),), MESH8, (spec,), (P(), P("x")))
    check(medians, (rand(64, 96, seed=1),), MESH8, (P("x"),), (P("x"), P()))


def test_spectral_filter_along_a_split_signal_keeps_the_spectrum_split() -> None:
    # rfft along the split dim moves it to the rows by an all-to-all; the
    # spectrum stays split by rows for the filter (propagation's relocation)
    # and the irfft moves the signal dim back: no gather of the spectrum
    def spectral(x: Any, k: Any) -> Any:
        f = jnp.fft.rfft(x, axis=-1)
        return jnp.fft.irfft(f * k, n=x.shape[-1], axis=-1)

    args = (rand(64, 1024, seed=1), rand(513, seed=2))
    spec = P(None, "x")
    compiled = check(spectral, args, MESH8, (spec, P()), spec, rtol=1e-4)
    kinds = [c.kind for c in compiled.partition_report.collectives]
    assert kinds == ["all-to-all", "all-to-all"]


@pytest.mark.parametrize("dim", [0, 1, 2, 3])
def test_fft_beside_a_gather_along_any_dim(dim: int) -> None:
    # XLA's CPU backend gives a gather along a middle dim a layout with that
    # dim major and carries it onto an FFT beside it, which its FFT thunk
    # refuses (jax.jit fails so on dims 1-2); meshjit gathers such dims
    # along dim 0 between transposes in modules with an FFT
    def volume(x: Any) -> Any:
        return jnp.abs(jnp.fft.rfftn(x, axes=(1, 2, 3)))

    def planes(x: Any) -> Any:
        return jnp.abs(jnp.fft.rfftn(x, axes=(2, 3)))

    spec = P(*([None] * dim), "x")
    x = rand(8, 8, 16, 8, seed=6)
    check(volume, (x,), MESH8, (spec,), P(), rtol=1e-4)
    check(planes, (x,), MESH8, (spec,), P(), rtol=1e-4)


@pytest.mark.parametrize(
    ("mesh", "spec", "batch"),
    [(MESH24, P("x", "y"), 1), (MESH8, P(None, "x"), 2)],
    ids=["batch2_height4", "height8"],
)
def test_class_token_train_step_moves_tokens_split_to_the_batch(
    mesh: Mesh, spec: P, batch: int
) -> None:
    """A ViT-style train step on images split by rows: 4 rows of patches
    split 4 ways (by "y", or by the 4-way sub-axis of "x" on height8), a
    class token concatenated in front (17 tokens over 4 devices).
    Propagation joins that axis onto the batch dim there (split by "x"
    already, or empty) with one all-to-all each way, instead of padding the
    tokens to 20 and masking them before every contraction and softmax that
    follows."""

    def loss(params: Any, images: Any) -> Any:
        patch, cls, wq, wk, wv, head = params
        b = images.shape[0]
        x = jax.lax.conv_general_dilated(
            images, patch, (8, 8), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        x = x.reshape(b, -1, x.shape[-1])
        x = jnp.concatenate([jnp.broadcast_to(cls, (b, 1, x.shape[-1])), x], axis=1)
        q, k, v = x @ wq, x @ wk, x @ wv
        att = jax.nn.softmax(q @ k.transpose(0, 2, 1) / 4.0, axis=-1)
        x = x + att @ v
        return jnp.mean((x[:, 0] @ head) ** 2)

    def step(params: Any, images: Any) -> Any:
        value, grads = jax.value_and_grad(loss)(params, images)
        return value, jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    params = (
        rand(8, 8, 3, 16, seed=1, scale=0.1),
        rand(1, 1, 16, seed=2),
        *(rand(16, 16, seed=s, scale=0.3) for s in (3, 4, 5)),
        rand(16, 4, seed=6, scale=0.3),
    )
    images = rand(8, 32, 32, 3, seed=7)
    rep = (P(),) * len(params)
    compiled = check(step, (params, images), mesh, (rep, spec), (P(), rep), rtol=1e-4)
    text = compiled.as_text("partitioned")
    assert "stablehlo.all_to_all" in text
    # 17 whole tokens a device (the batch split 8 or 4 ways), no padded
    # 5-token blocks
    assert f"<{batch}x17x16xf32>" in text
    assert "x5x16xf32>" not in text


def test_picking_each_rows_label_stays_on_the_rows_device() -> None:
    """`logits[jnp.arange(n), labels]` (negative labels counting from the
    end) on rows split 8 ways, and an NT-Xent loss that picks each row's
    positive pair so: the gather is batched over the rows
    (`batch-gathers`), so no device gathers the logits."""

    def pick(logits: Any, labels: Any) -> Any:
        return logits[jnp.arange(logits.shape[0]), labels]

    logits = rand(64, 40, seed=1)
    labels = np.random.default_rng(2).integers(-40, 40, 64).astype(np.int32)
    compiled = check(pick, (logits, labels), MESH8, (P("x"), P("x")), P("x"))
    assert "stablehlo.all_gather" not in compiled.as_text("partitioned")

    def ntxent(z1: Any, z2: Any) -> Any:
        z = jnp.concatenate([z1, z2], 0)
        z = z / jnp.linalg.norm(z, axis=-1, keepdims=True)
        sim = z @ z.T / 0.1
        n = z1.shape[0]
        sim = jnp.where(jnp.eye(2 * n, dtype=bool), -1e9, sim)
        tgt = jnp.concatenate([jnp.arange(n) + n, jnp.arange(n)])
        return (jax.nn.logsumexp(sim, -1) - sim[jnp.arange(2 * n), tgt]).mean()

    args = (rand(64, 32, seed=3), rand(64, 32, seed=4))
    compiled = check(ntxent, args, MESH8, (P("x"), P("x")), P())
    # z is gathered for z @ z.T; the 128 x 128 similarities never are
    for line in compiled.as_text("partitioned").splitlines():
        if "all_gather" in line:
            assert "128x128" not in line


def test_cross_entropy_gradient_adds_into_each_rows_own_device() -> None:
    """The gradient of `logits[jnp.arange(n), labels]` is a scatter-add at
    the same index vector, and `x.at[jnp.arange(n), labels].add(v)` is one
    too: on rows split 8 ways `batch-gathers` writes both as batched
    scatters, so no device gathers the indices or adds into rows it does not
    hold."""

    def xent(w: Any, x: Any, labels: Any) -> Any:
        logits = x @ w
        n = logits.shape[0]
        picked = logits[jnp.arange(n), labels]
        return (jax.nn.logsumexp(logits, -1) - picked).mean()

    args = (
        rand(32, 48, seed=5, scale=0.2),
        rand(64, 32, seed=6),
        np.random.default_rng(7).integers(-48, 48, 64).astype(np.int32),
    )
    compiled = check(
        jax.grad(xent, argnums=(0, 1)),
        args,
        MESH8,
        (P(), P("x"), P("x")),
        (P(), P("x")),
    )
    text = compiled.as_text("partitioned")
    assert "stablehlo.all_gather" not in text
    assert "input_batching_dims = [0]" in text

    def add_at(x: Any, labels: Any, v: Any) -> Any:
        return x.at[jnp.arange(x.shape[0]), labels].add(v)

    args = (
        rand(64, 40, seed=8),
        np.random.default_rng(9).integers(0, 40, 64).astype(np.int32),
        rand(64, seed=10),
    )
    compiled = check(add_at, args, MESH8, (P("x"), P("x"), P("x")), P("x"))
    assert "stablehlo.all_gather" not in compiled.as_text("partitioned")


def test_picking_by_two_aranges_stays_local() -> None:
    """`x[arange(b)[:, None], arange(s), labels]` (a per-token pick written
    with explicit aranges) and its gradient on batch x sequence split 2 x 4:
    both aranges become batching dims (`batch-gathers`, one a round), so
    neither the pick nor the scatter-add gathers anything."""

    def pick(x: Any, labels: Any) -> Any:
        b, s, _ = x.shape
        return x[jnp.arange(b)[:, None], jnp.arange(s)[None, :], labels]

    def grad(x: Any, labels: Any) -> Any:
        return jax.grad(lambda x: (pick(x, labels) ** 2).sum())(x)

    args = (
        rand(4, 16, 32, seed=11),
        np.random.default_rng(12).integers(-32, 32, (4, 16)).astype(np.int32),
    )
    for fn in (pick, grad):
        compiled = check(fn, args, MESH24, (P("x", "y"), P("x", "y")), P("x", "y"))
        assert "stablehlo.all_gather" not in compiled.as_text("partitioned")


def test_embedding_gradient_adds_into_the_vocab_block_in_place() -> None:
    """The gradient of an embedding lookup from a vocabulary split 8 ways (a
    scatter-add of every token's gradient): each device adds its own rows'
    updates and zeros for the others into its block in place, no scratch
    row (the block, bigger than the updates, is not copied). With the tokens
    split too, and with `.at[...].set` (a replace), which keeps the scratch
    row; with many more updates than the block holds (a select over them
    would touch more bytes than the block's copies), the scratch row too."""

    def grad(emb: Any, toks: Any, g: Any) -> Any:
        return jax.grad(lambda e: (e[toks] * g).sum())(emb)

    args = (
        rand(1024, 16, seed=21),
        np.random.default_rng(22).integers(0, 1024, (8, 12)).astype(np.int32),
        rand(8, 12, 16, seed=23),
    )
    compiled = check(grad, args, MESH8, (P("x"), P(), P()), P("x"))
    text = compiled.as_text("partitioned")
    assert "stablehlo.pad" not in text
    assert "stablehlo.all_" not in text
    check(grad, args, MESH24, (P("y"), P("x"), P("x")), P("y"))
    small = (args[0][:128], args[1] % 128, args[2])  # 16 rows a block
    compiled = check(grad, small, MESH8, (P("x"), P(), P()), P("x"))
    assert "stablehlo.pad" in compiled.as_text("partitioned")

    def put(emb: Any, toks: Any, rows: Any) -> Any:
        return emb.at[toks].set(rows)

    rows = rand(6, 16, seed=24)
    toks = np.array([3, 200, 77, 129, 31, 1023], np.int32)
    check(put, (args[0], toks, rows), MESH8, (P("x"), P(), P()), P("x"))
