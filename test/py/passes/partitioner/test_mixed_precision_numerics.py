"""Mixed-precision programs as real models write them (float32 master
weights, bfloat16 compute, float32 softmax and loss), partitioned on 8
devices against the unsharded run: FSDP (all-to-alls between the batch and
the model dims, in bfloat16), DP x TP, attention, a height-split convolution
and bfloat16 parameters with float32 optimizer state. bfloat16 sums taken in
another order round differently, so the tolerance is a few bfloat16 ulps of
each output's largest value."""

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
BF = jnp.bfloat16


check = functools.partial(numerics.check, rtol=3e-2)


def test_fsdp_step_bf16_compute_moves_activations_by_all_to_all() -> None:
    def loss(ps: list[jax.Array], x: jax.Array, y: jax.Array) -> Any:
        h = x.astype(BF)
        for i, w in enumerate(ps):
            h = h @ w.astype(BF)
            if i < len(ps) - 1:
                h = jax.nn.gelu(h)
        out = h.astype(jnp.float32)
        return jnp.mean((out - y) ** 2), out

    def step(ps: list[jax.Array], x: jax.Array, y: jax.Array) -> Any:
        (value, out), grads = jax.value_and_grad(loss, has_aux=True)(ps, x, y)
        return value, out, [p - 0.01 * g for p, g in zip(ps, grads, strict=True)]

    ps = [rand(64, 128, seed=1, scale=0.1), rand(128, 128, seed=2, scale=0.1)]
    ps.append(rand(128, 64, seed=3, scale=0.1))
    x, y = rand(32, 64, seed=4), rand(32, 64, seed=5)
    fs = [P("x", None)] * 3
    compiled = check(step, (ps, x, y), MESH8, (fs, P("x"), P("x")), (P(), P("x"), fs))
    kinds = {c.kind for c in compiled.partition_report.collectives}
    assert "all-to-all" in kinds
    assert "stablehlo.all_to_all" in compiled.as_text("partitioned")


def test_dp_tp_step_bf16() -> None:
    def step(w1: jax.Array, w2: jax.Array, x: jax.Array, y: jax.Array) -> Any:
        def loss(w1: jax.Array, w2: jax.Array) -> jax.Array:
            h = jax.nn.relu(x.astype(BF) @ w1.astype(BF))
            out = h @ w2.astype(BF)
            return jnp.mean((out.astype(jnp.float32) - y) ** 2)

        value, (g1, g2) = jax.value_and_grad(loss, argnums=(0, 1))(w1, w2)
        return value, w1 - 0.01 * g1, w2 - 0.01 * g2

    args = (
        rand(64, 256, seed=1, scale=0.1),
        rand(256, 64, seed=2, scale=0.1),
        rand(32, 64, seed=3),
        rand(32, 64, seed=4),
    )
    check(
        step,
        args,
        MESH24,
        (P(None, "y"), P("y", None), P("x"), P("x")),
        (P(), P(None, "y"), P("y", None)),
    )


def test_attention_bf16_with_f32_softmax_over_a_split_sequence() -> None:
    def attn(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        s = jnp.einsum("bqhd,bkhd->bhqk", q.astype(BF), k.astype(BF))
        p = jax.nn.softmax(s.astype(jnp.float32) / 4.0, axis=-1).astype(BF)
        return jnp.einsum("bhqk,bkhd->bqhd", p, v.astype(BF)).astype(jnp.float32)

    args = tuple(rand(2, 32, 4, 16, seed=i) for i in range(3))
    check(attn, args, MESH8, (P(None, "x"),) * 3, P(None, "x"))


def test_conv_bf16_along_a_split_height() -> None:
    dn = ("NHWC", "HWIO", "NHWC")

    def conv(x: jax.Array, w1: jax.Array, w2: jax.Array) -> jax.Array:
        h = jax.lax.conv_general_dilated(
            x.astype(BF), w1.astype(BF), (1, 1), "SAME", dimension_numbers=dn
        )
        h = jax.lax.conv_general_dilated(
            jax.nn.relu(h), w2.astype(BF), (2, 2), "SAME", dimension_numbers=dn
        )
        return h.astype(jnp.float32)

    args = (
        rand(2, 32, 16, 4, seed=1),
        rand(3, 3, 4, 8, seed=2, scale=0.2),
        rand(3, 3, 8, 8, seed=3, scale=0.2),
    )
    check(conv, args, MESH24, (P("x", "y"), P(), P()), P("x", "y"))


def test_bf16_params_with_f32_optimizer_state() -> None:
    def step(w: jax.Array, m: jax.Array, x: jax.Array) -> Any:
        def loss(w: jax.Array) -> jax.Array:
            return jnp.sum(jnp.tanh(x @ w).astype(jnp.float32) ** 2)

        g = jax.grad(loss)(w).astype(jnp.float32)
        m = 0.9 * m + 0.1 * g
        return (w.astype(jnp.float32) - 0.01 * m).astype(BF), m

    args = (
        rand(128, 128, seed=1, scale=0.1).astype(BF),
        np.zeros((128, 128), np.float32),
        rand(32, 128, seed=2).astype(BF),
    )
    check(step, args, MESH8, (P("x"), P("x"), P()), (P("x"), P("x")))
    check(step, args, MESH8, (P(None, "x"), P(None, "x"), P()), (P(None, "x"),) * 2)
