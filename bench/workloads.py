"""Benchmark workloads, written in plain JAX, each with meshes and named layouts.

A workload is a function, example arguments, and layouts: for each mesh, the
in/out PartitionSpecs of a named sharding strategy. Where an analytic minimum of
communication is known it is given as a function of the layout (bytes per
device, ring algorithms), so the report can compare against it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

MESHES: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {
    "8": ((8,), ("x",)),
    "2x4": ((2, 4), ("x", "y")),
}

# `python -m bench --one-device` sets this (its child processes inherit it):
# every mesh keeps its axis names with size 1, on the first device of the
# default platform (a GPU run: JAX_PLATFORMS=cuda).
ONE_DEVICE_ENV = "MESHJIT_BENCH_ONE_DEVICE"


def one_device() -> bool:
    return os.environ.get(ONE_DEVICE_ENV) == "1"


def bench_mesh(name: str) -> jax.sharding.Mesh:
    """The mesh a layout names, over the first devices."""
    shape, names = MESHES[name]
    if one_device():
        shape = (1,) * len(shape)
    devices = np.array(jax.devices()[: math.prod(shape)]).reshape(shape)
    return jax.sharding.Mesh(devices, names)


@dataclass(frozen=True)
class Layout:
    name: str
    mesh: str
    in_specs: tuple[Any, ...]
    out_specs: Any
    # Analytic minimum: (kinds, bytes per device), or None when not known.
    bound: tuple[tuple[str, ...], int] | None = None


@dataclass(frozen=True)
class Workload:
    name: str
    fn: Callable[..., Any]
    make_args: Callable[[], tuple[np.ndarray, ...]]
    layouts: tuple[Layout, ...]
    quick: bool = False  # part of --quick
    tags: tuple[str, ...] = field(default=())
    # The unsharded reference for the numerics check, where `fn` cannot run on
    # one device (a shard_map that names an 8-device mesh); default: `fn`.
    reference: Callable[..., Any] | None = None


def _rand(*shape: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _all_reduce(nbytes: int, k: int) -> int:
    return 2 * nbytes * (k - 1) // k


# MLP train step, DP x TP ------------------------------------------------------

B, D, H = 64, 256, 1024


def mlp_forward(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
    return jax.nn.gelu(x @ w1) @ w2


def mlp_train_step(w1: jax.Array, w2: jax.Array, x: jax.Array, y: jax.Array) -> Any:
    def loss(w1: jax.Array, w2: jax.Array) -> jax.Array:
        return jnp.mean((mlp_forward(w1, w2, x) - y) ** 2)

    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 0.01 * g1, w2 - 0.01 * g2


def _mlp_args() -> tuple[np.ndarray, ...]:
    return (
        _rand(D, H, scale=0.05),
        _rand(H, D, seed=1, scale=0.05),
        _rand(B, D, seed=2),
        _rand(B, D, seed=3),
    )


MLP = Workload(
    "mlp_train_dp_tp",
    mlp_train_step,
    _mlp_args,
    (
        Layout(
            "dp8",
            "8",
            (P(), P(), P("x"), P("x")),
            (P(), P()),
            # DP: one all-reduce of both gradients.
            (("all-reduce",), _all_reduce((D * H * 2) * 4, 8)),
        ),
        Layout(
            "dp2_tp4",
            "2x4",
            (P(None, "y"), P("y", None), P("x"), P("x")),
            (P(None, "y"), P("y", None)),
        ),
    ),
    quick=True,
)


# Megatron transformer layer ----------------------------------------------------

S, E, HEADS, F = 32, 256, 8, 1024


def _layer_norm(x: jax.Array) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)


def transformer_layer(
    x: jax.Array,
    wq: jax.Array,
    wk: jax.Array,
    wv: jax.Array,
    wo: jax.Array,
    w1: jax.Array,
    w2: jax.Array,
) -> jax.Array:
    b, s, e = x.shape
    h = _layer_norm(x)
    q = (h @ wq).reshape(b, s, HEADS, -1)
    k = (h @ wk).reshape(b, s, HEADS, -1)
    v = (h @ wv).reshape(b, s, HEADS, -1)
    logits = jnp.einsum("bshd,bthd->bhst", q, k) / np.sqrt(e // HEADS)
    attn = jnp.einsum("bhst,bthd->bshd", jax.nn.softmax(logits, -1), v)
    x = x + attn.reshape(b, s, e) @ wo
    return x + jax.nn.gelu(_layer_norm(x) @ w1) @ w2


def transformer_train_step(*args: jax.Array) -> Any:
    x, params = args[0], args[1:]

    def loss(params: tuple[jax.Array, ...]) -> jax.Array:
        return jnp.mean(transformer_layer(x, *params) ** 2)

    grads = jax.grad(loss)(params)
    return tuple(p - 0.01 * g for p, g in zip(params, grads, strict=True))


def _transformer_args() -> tuple[np.ndarray, ...]:
    return (
        _rand(8, S, E),
        *(_rand(E, E, seed=i, scale=0.05) for i in (1, 2, 3, 4)),
        _rand(E, F, seed=5, scale=0.05),
        _rand(F, E, seed=6, scale=0.05),
    )


_COL, _ROW = P(None, "y"), P("y", None)
_MEGATRON_IN = (P("x"), _COL, _COL, _COL, _ROW, _COL, _ROW)
_ACT = (8 // 2) * S * E * 4  # local activations per device, f32

TRANSFORMER_FWD = Workload(
    "megatron_layer_fwd",
    transformer_layer,
    _transformer_args,
    (
        Layout(
            "megatron_dp2_tp4",
            "2x4",
            _MEGATRON_IN,
            P("x"),
            # One all-reduce of the activations per block (attention, MLP).
            (("all-reduce", "all-reduce"), 2 * _all_reduce(_ACT, 4)),
        ),
        Layout("dp8", "8", (P("x"), *(P(),) * 6), P("x"), ((), 0)),
    ),
    quick=True,
)

TRANSFORMER_TRAIN = Workload(
    "megatron_layer_train",
    transformer_train_step,
    _transformer_args,
    (
        Layout("megatron_dp2_tp4", "2x4", _MEGATRON_IN, _MEGATRON_IN[1:]),
        Layout("dp8", "8", (P("x"), *(P(),) * 6), (P(),) * 6),
    ),
)


# FSDP with Adam ----------------------------------------------------------------


def fsdp_adam_step(w1: jax.Array, w2: jax.Array, m: Any, v: Any, x: jax.Array) -> Any:
    def loss(params: tuple[jax.Array, jax.Array]) -> jax.Array:
        return jnp.mean(mlp_forward(*params, x) ** 2)

    params = (w1, w2)
    grads = jax.grad(loss)(params)
    m = tuple(0.9 * a + 0.1 * g for a, g in zip(m, grads, strict=True))
    v = tuple(0.999 * a + 0.001 * g * g for a, g in zip(v, grads, strict=True))
    new = tuple(
        p - 0.001 * a / (jnp.sqrt(b) + 1e-8)
        for p, a, b in zip(params, m, v, strict=True)
    )
    return new, m, v


def _fsdp_args() -> tuple[Any, ...]:
    w1, w2 = _rand(D, H, scale=0.05), _rand(H, D, seed=1, scale=0.05)
    zeros = (np.zeros_like(w1), np.zeros_like(w2))
    ones = (np.ones_like(w1), np.ones_like(w2))
    return (w1, w2, zeros, ones, _rand(B, D, seed=2))


_FS8 = P("x")
_PARAM_BYTES = (D * H * 2) * 4
FSDP = Workload(
    "fsdp_adam",
    fsdp_adam_step,
    _fsdp_args,
    (
        Layout(
            "fsdp8",
            "8",
            (_FS8, _FS8, (_FS8, _FS8), (_FS8, _FS8), P("x")),
            ((_FS8, _FS8), (_FS8, _FS8), (_FS8, _FS8)),
            # All-gather the params once, reduce-scatter the grads once.
            (("all-gather", "reduce-scatter"), 2 * _PARAM_BYTES * 7 // 8),
        ),
        Layout(
            "fsdp_2x4",
            "2x4",
            (P(("x", "y")),) * 2 + ((P(("x", "y")),) * 2,) * 2 + (P(("x", "y")),),
            ((P(("x", "y")),) * 2,) * 3,
            (("all-gather", "reduce-scatter"), 2 * _PARAM_BYTES * 7 // 8),
        ),
    ),
)


# Conv net ----------------------------------------------------------------------


def conv_net(x: jax.Array, k1: jax.Array, k2: jax.Array) -> jax.Array:
    dn = ("NHWC", "HWIO", "NHWC")
    y = jax.nn.relu(
        jax.lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=dn)
    )
    y = jax.nn.relu(
        jax.lax.conv_general_dilated(y, k2, (1, 1), "SAME", dimension_numbers=dn)
    )
    return y.mean(axis=(1, 2))


def _conv_args() -> tuple[np.ndarray, ...]:
    return (
        _rand(16, 32, 32, 8),
        _rand(3, 3, 8, 16, seed=1, scale=0.2),
        _rand(3, 3, 16, 16, seed=2, scale=0.2),
    )


CONV = Workload(
    "conv_net",
    conv_net,
    _conv_args,
    (
        Layout("batch8", "8", (P("x"), P(), P()), P("x"), ((), 0)),
        Layout("height8", "8", (P(None, "x"), P(), P()), P()),
        Layout("batch2_height4", "2x4", (P("x", "y"), P(), P()), P("x")),
    ),
)


# Embedding + gather ------------------------------------------------------------


def embedding_model(table: jax.Array, ids: jax.Array, w: jax.Array) -> jax.Array:
    return jnp.tanh(jnp.take(table, ids, axis=0).mean(axis=1) @ w)


def _embedding_args() -> tuple[np.ndarray, ...]:
    ids = np.random.default_rng(0).integers(0, 4096, size=(64, 16)).astype(np.int32)
    return (_rand(4096, 128, scale=0.1), ids, _rand(128, 128, seed=1, scale=0.1))


EMBEDDING = Workload(
    "embedding_gather",
    embedding_model,
    _embedding_args,
    (
        Layout("vocab8", "8", (P("x"), P(), P()), P()),
        Layout("batch2_dim4", "2x4", (P(None, "y"), P("x"), P("y")), P("x")),
    ),
)


# A deep stack of identical layers, and a long while loop -------------------------

LAYERS = 24


def deep_stack(x: jax.Array, ws: jax.Array) -> jax.Array:
    for i in range(LAYERS):
        x = jnp.tanh(x @ ws[i]) + x
    return x


def _deep_args() -> tuple[np.ndarray, ...]:
    return (_rand(64, 128), _rand(LAYERS, 128, 128, seed=1, scale=0.05))


DEEP = Workload(
    "deep_stack",
    deep_stack,
    _deep_args,
    (
        Layout("dp8", "8", (P("x"), P()), P("x"), ((), 0)),
        Layout("dp2_tp4", "2x4", (P("x"), P(None, None, "y")), P("x")),
    ),
)


def long_while(x: jax.Array, w: jax.Array) -> jax.Array:
    def body(i: jax.Array, x: jax.Array) -> jax.Array:
        return jnp.tanh(x @ w) * 0.5 + x * 0.5

    return jax.lax.fori_loop(0, 200, body, x)


def _while_args() -> tuple[np.ndarray, ...]:
    return (_rand(64, 128), _rand(128, 128, seed=1, scale=0.05))


WHILE = Workload(
    "long_while",
    long_while,
    _while_args,
    (
        Layout("dp8", "8", (P("x"), P()), P("x"), ((), 0)),
        Layout("dp2_tp4", "2x4", (P("x"), P(None, "y")), P("x")),
    ),
    quick=True,
)

ALL = (MLP, TRANSFORMER_FWD, TRANSFORMER_TRAIN, FSDP, CONV, EMBEDDING, DEEP, WHILE)
# The real-model workloads live in bench.models (ResNet, GPT-2, Llama, ...);
# `bench.models.MODELS` extends ALL in `python -m bench`.
