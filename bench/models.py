"""Real-model workloads, written in plain JAX the way people write these models.

Each model keeps its usual structure (ResNet bottlenecks with batch norm, GPT-2
with a fused QKV projection and tied embeddings, Llama with RMSNorm, RoPE and
SwiGLU, a GShard-style MoE layer, ...) at sizes small enough that one step runs
in well under 100 ms on a 2-core CPU with 8 virtual devices.

Parameters are nested dicts/lists of arrays. Each model describes its
parameters once, as a tree of `_Leaf`s (shape, PartitionSpec, init); the
arguments and the layout's spec tree are both read off that one tree, so they
always match.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from bench.workloads import Layout, Workload, bench_mesh

# Parameter trees -----------------------------------------------------------------


_REPLICATED = P()


@dataclass(frozen=True)
class _Leaf:
    """One parameter: shape, its spec in a layout, and how it is initialised."""

    shape: tuple[int, ...]
    spec: P = _REPLICATED
    init: str = "normal"  # "normal" (fan-in scaled), "ones", "zeros"
    scale: float | None = None  # overrides the fan-in scale for "normal"


def _is_leaf(x: Any) -> bool:
    return isinstance(x, _Leaf)


def _arrays(tree: Any, seed: int = 0) -> Any:
    leaves, treedef = jax.tree.flatten(tree, is_leaf=_is_leaf)
    out = []
    for i, leaf in enumerate(leaves):
        if leaf.init == "ones":
            out.append(np.ones(leaf.shape, np.float32))
        elif leaf.init == "zeros":
            out.append(np.zeros(leaf.shape, np.float32))
        else:
            fan_in = math.prod(leaf.shape[:-1]) or 1
            scale = leaf.scale if leaf.scale is not None else 1 / math.sqrt(fan_in)
            rng = np.random.default_rng(seed * 1000 + i)
            out.append((rng.standard_normal(leaf.shape) * scale).astype(np.float32))
    return jax.tree.unflatten(treedef, out)


def _specs(tree: Any) -> Any:
    return jax.tree.map(lambda leaf: leaf.spec, tree, is_leaf=_is_leaf)


def _same_specs(tree: Any, spec: P) -> Any:
    return jax.tree.map(lambda _: spec, tree, is_leaf=_is_leaf)


def _rand(*shape: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _ints(*shape: int, high: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, high, size=shape).astype(np.int32)


# Shared layers -------------------------------------------------------------------

_DN = ("NHWC", "HWIO", "NHWC")


def _conv(x: jax.Array, w: jax.Array, stride: int = 1, groups: int = 1) -> jax.Array:
    return jax.lax.conv_general_dilated(
        x,
        w,
        (stride, stride),
        "SAME",
        dimension_numbers=_DN,
        feature_group_count=groups,
    )


def _batch_norm(x: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
    # Training-mode batch norm: statistics of this batch over N, H, W.
    mean = x.mean(axis=(0, 1, 2))
    var = x.var(axis=(0, 1, 2))
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["scale"] + p["bias"]


def _max_pool(x: jax.Array, window: int, stride: int, padding: str) -> jax.Array:
    return jax.lax.reduce_window(
        x,
        -jnp.inf,
        jax.lax.max,
        (1, window, window, 1),
        (1, stride, stride, 1),
        padding,
    )


def _layer_norm(x: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["scale"] + p["bias"]


def _rms_norm(x: jax.Array, scale: jax.Array) -> jax.Array:
    return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) * scale


def _attention(
    q: jax.Array, k: jax.Array, v: jax.Array, causal: bool, scale: bool = True
) -> jax.Array:
    """q: [B, S, H, D], k/v: [B, T, H, D] -> [B, S, H, D]."""
    logits = jnp.einsum("bshd,bthd->bhst", q, k)
    if scale:
        logits = logits / np.sqrt(q.shape[-1]).astype(np.float32)
    if causal:
        s, t = q.shape[1], k.shape[1]
        mask = jnp.tril(jnp.ones((s, t), bool))
        logits = jnp.where(mask, logits, jnp.finfo(logits.dtype).min)
    return jnp.einsum("bhst,bthd->bshd", jax.nn.softmax(logits, axis=-1), v)


def _cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Softmax cross-entropy against integer labels, mean over the batch."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, labels[..., None], axis=-1).mean()


def _sgd(params: Any, grads: Any, lr: float = 0.01) -> Any:
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def _sgd_train_step(loss: Callable[..., Any], name: str) -> Callable[..., Any]:
    """The train step of `loss(params, *batch)`: one SGD update of the
    parameters, and the loss."""

    def step(params: Any, *batch: jax.Array) -> Any:
        value, grads = jax.value_and_grad(loss)(params, *batch)
        return _sgd(params, grads), value

    step.__name__ = step.__qualname__ = name
    return step


# ResNet ----------------------------------------------------------------------------

RESNET_CLASSES = 10


def _bn(c: int) -> dict[str, _Leaf]:
    return {"scale": _Leaf((c,), init="ones"), "bias": _Leaf((c,), init="zeros")}


def _bottleneck(cin: int, mid: int, cout: int) -> dict[str, Any]:
    return {
        "conv1": _Leaf((1, 1, cin, mid)),
        "bn1": _bn(mid),
        "conv2": _Leaf((3, 3, mid, mid)),
        "bn2": _bn(mid),
        "conv3": _Leaf((1, 1, mid, cout)),
        "bn3": _bn(cout),
        "proj": _Leaf((1, 1, cin, cout)),
        "proj_bn": _bn(cout),
    }


# (in, mid, out, stride) per bottleneck block; stride on the 3x3 (ResNet v1.5).
RESNET_BLOCKS = ((16, 8, 32, 1), (32, 16, 64, 2))
RESNET_PARAMS: dict[str, Any] = {
    "stem": _Leaf((7, 7, 3, 16)),
    "stem_bn": _bn(16),
    "blocks": [_bottleneck(i, m, o) for i, m, o, _ in RESNET_BLOCKS],
    "head": {
        "w": _Leaf((64, RESNET_CLASSES)),
        "b": _Leaf((RESNET_CLASSES,), init="zeros"),
    },
}


def _bottleneck_fwd(x: jax.Array, p: dict[str, Any], stride: int) -> jax.Array:
    y = jax.nn.relu(_batch_norm(_conv(x, p["conv1"]), p["bn1"]))
    y = jax.nn.relu(_batch_norm(_conv(y, p["conv2"], stride), p["bn2"]))
    y = _batch_norm(_conv(y, p["conv3"]), p["bn3"])
    shortcut = _batch_norm(_conv(x, p["proj"], stride), p["proj_bn"])
    return jax.nn.relu(y + shortcut)


def resnet(params: dict[str, Any], images: jax.Array) -> jax.Array:
    x = _conv(images, params["stem"], 2)
    x = jax.nn.relu(_batch_norm(x, params["stem_bn"]))
    x = _max_pool(x, 3, 2, "SAME")
    for p, (_, _, _, stride) in zip(params["blocks"], RESNET_BLOCKS, strict=True):
        x = _bottleneck_fwd(x, p, stride)
    x = x.mean(axis=(1, 2))  # global average pool
    return x @ params["head"]["w"] + params["head"]["b"]


def resnet_train_step(
    params: dict[str, Any], images: jax.Array, labels: jax.Array
) -> Any:
    def loss_fn(params: dict[str, Any]) -> jax.Array:
        return _cross_entropy(resnet(params, images), labels)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return _sgd(params, grads), loss


def _resnet_fwd_args() -> tuple[Any, ...]:
    return (_arrays(RESNET_PARAMS), _rand(8, 64, 64, 3, seed=7))


def _resnet_train_args() -> tuple[Any, ...]:
    return (
        _arrays(RESNET_PARAMS),
        _rand(16, 32, 32, 3, seed=7),
        _ints(16, high=RESNET_CLASSES, seed=8),
    )


_RESNET_REP = _same_specs(RESNET_PARAMS, P())

RESNET_FWD = Workload(
    "resnet_fwd",
    resnet,
    _resnet_fwd_args,
    (
        Layout("batch2_height4", "2x4", (_RESNET_REP, P("x", "y")), P("x")),
        Layout("height8", "8", (_RESNET_REP, P(None, "x")), P()),
    ),
    tags=("model", "conv"),
)

RESNET_TRAIN = Workload(
    "resnet_train",
    resnet_train_step,
    _resnet_train_args,
    (Layout("batch8", "8", (_RESNET_REP, P("x"), P("x")), (_RESNET_REP, P())),),
    tags=("model", "conv", "train"),
)


# Small conv net, spatially partitioned ------------------------------------------

CONV_PARAMS: dict[str, Any] = {
    "conv1": _Leaf((3, 3, 4, 16)),
    "b1": _Leaf((16,), init="zeros"),
    "conv2": _Leaf((3, 3, 16, 32)),
    "b2": _Leaf((32,), init="zeros"),
    "dense": _Leaf((16 * 16 * 32, 10)),
    "dense_b": _Leaf((10,), init="zeros"),
}


def conv_classifier(params: dict[str, jax.Array], images: jax.Array) -> jax.Array:
    x = jax.nn.relu(_conv(images, params["conv1"]) + params["b1"])
    x = jax.nn.relu(_conv(x, params["conv2"], 2) + params["b2"])
    x = _max_pool(x, 2, 2, "VALID")
    x = x.reshape(x.shape[0], -1)  # flatten, as in the classic CNN tutorials
    return x @ params["dense"] + params["dense_b"]


def conv_train_step(
    params: dict[str, jax.Array], images: jax.Array, labels: jax.Array
) -> Any:
    def loss_fn(params: dict[str, jax.Array]) -> jax.Array:
        return _cross_entropy(conv_classifier(params, images), labels)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return _sgd(params, grads), loss


def _conv_train_args() -> tuple[Any, ...]:
    return (
        _arrays(CONV_PARAMS, seed=1),
        _rand(8, 64, 64, 4, seed=9),
        _ints(8, high=10, seed=10),
    )


_CONV_REP = _same_specs(CONV_PARAMS, P())

CONV_TRAIN = Workload(
    "conv_train_height",
    conv_train_step,
    _conv_train_args,
    (
        Layout(
            "batch2_height4", "2x4", (_CONV_REP, P("x", "y"), P("x")), (_CONV_REP, P())
        ),
        Layout("height8", "8", (_CONV_REP, P(None, "x"), P()), (_CONV_REP, P())),
    ),
    tags=("model", "conv", "train"),
)


# GPT-2 -----------------------------------------------------------------------------

GPT_VOCAB, GPT_E, GPT_HEADS, GPT_SEQ, GPT_BATCH, GPT_LAYERS = 512, 128, 4, 32, 8, 2

# Megatron tensor parallelism over "y": the fused QKV and fc1 are column-split,
# the attention output and fc2 row-split. The token embedding (tied with the
# output projection) is split over the vocabulary, as Megatron's
# VocabParallelEmbedding does, so the logits come out vocab-sharded.
_COL, _ROW, _VEC_COL = P(None, "y"), P("y", None), P("y")


def _ln(e: int) -> dict[str, _Leaf]:
    return {"scale": _Leaf((e,), init="ones"), "bias": _Leaf((e,), init="zeros")}


def _gpt_block(e: int) -> dict[str, Any]:
    return {
        "ln1": _ln(e),
        "qkv": {"w": _Leaf((e, 3 * e), _COL), "b": _Leaf((3 * e,), _VEC_COL, "zeros")},
        "proj": {"w": _Leaf((e, e), _ROW), "b": _Leaf((e,), init="zeros")},
        "ln2": _ln(e),
        "fc": {"w": _Leaf((e, 4 * e), _COL), "b": _Leaf((4 * e,), _VEC_COL, "zeros")},
        "fc_proj": {"w": _Leaf((4 * e, e), _ROW), "b": _Leaf((e,), init="zeros")},
    }


GPT_PARAMS: dict[str, Any] = {
    "wte": _Leaf((GPT_VOCAB, GPT_E), P("y", None), scale=0.02),
    "wpe": _Leaf((GPT_SEQ, GPT_E), scale=0.01),
    "blocks": [_gpt_block(GPT_E) for _ in range(GPT_LAYERS)],
    "ln_f": _ln(GPT_E),
}


def _gpt_block_fwd(x: jax.Array, p: dict[str, Any]) -> jax.Array:
    b, s, e = x.shape
    qkv = _layer_norm(x, p["ln1"]) @ p["qkv"]["w"] + p["qkv"]["b"]
    q, k, v = jnp.split(qkv, 3, axis=-1)  # nanoGPT: qkv.split(n_embd, dim=2)
    q, k, v = (t.reshape(b, s, GPT_HEADS, e // GPT_HEADS) for t in (q, k, v))
    y = _attention(q, k, v, causal=True).reshape(b, s, e)
    x = x + y @ p["proj"]["w"] + p["proj"]["b"]
    h = jax.nn.gelu(_layer_norm(x, p["ln2"]) @ p["fc"]["w"] + p["fc"]["b"])
    return x + h @ p["fc_proj"]["w"] + p["fc_proj"]["b"]


def gpt2_logits(params: dict[str, Any], tokens: jax.Array) -> jax.Array:
    x = params["wte"][tokens] + params["wpe"][: tokens.shape[1]]
    for p in params["blocks"]:
        x = _gpt_block_fwd(x, p)
    x = _layer_norm(x, params["ln_f"])
    return x @ params["wte"].T  # tied output projection


def gpt2_train_step(
    params: dict[str, Any], tokens: jax.Array, targets: jax.Array
) -> Any:
    def loss_fn(params: dict[str, Any]) -> jax.Array:
        return _cross_entropy(gpt2_logits(params, tokens), targets)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return _sgd(params, grads), loss


def _gpt2_args() -> tuple[Any, ...]:
    seq = _ints(GPT_BATCH, GPT_SEQ + 1, high=GPT_VOCAB, seed=11)
    return (_arrays(GPT_PARAMS, seed=2), seq[:, :-1], seq[:, 1:])


_GPT_SPECS = _specs(GPT_PARAMS)

GPT2_TRAIN = Workload(
    "gpt2_train",
    gpt2_train_step,
    _gpt2_args,
    (Layout("dp2_tp4", "2x4", (_GPT_SPECS, P("x"), P("x")), (_GPT_SPECS, P())),),
    tags=("model", "transformer", "train"),
)


# Llama, FSDP ---------------------------------------------------------------------

LLAMA_VOCAB, LLAMA_E, LLAMA_HEADS, LLAMA_FF = 512, 128, 4, 256
LLAMA_SEQ, LLAMA_BATCH, LLAMA_LAYERS = 32, 8, 2


def _llama_block(e: int, f: int) -> dict[str, _Leaf]:
    return {
        "attention_norm": _Leaf((e,), init="ones"),
        "wq": _Leaf((e, e)),
        "wk": _Leaf((e, e)),
        "wv": _Leaf((e, e)),
        "wo": _Leaf((e, e)),
        "ffn_norm": _Leaf((e,), init="ones"),
        "w1": _Leaf((e, f)),  # gate
        "w3": _Leaf((e, f)),  # up
        "w2": _Leaf((f, e)),  # down
    }


LLAMA_PARAMS: dict[str, Any] = {
    "tok_embeddings": _Leaf((LLAMA_VOCAB, LLAMA_E), scale=0.02),
    "layers": [_llama_block(LLAMA_E, LLAMA_FF) for _ in range(LLAMA_LAYERS)],
    "norm": _Leaf((LLAMA_E,), init="ones"),
    "output": _Leaf((LLAMA_E, LLAMA_VOCAB)),
}


def _rope(x: jax.Array) -> jax.Array:
    """Rotary embeddings, HF Llama's rotate_half form. x: [B, S, H, D]."""
    s, d = x.shape[1], x.shape[-1]
    inv_freq = 1.0 / (10000.0 ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d))
    freqs = jnp.outer(jnp.arange(s, dtype=jnp.float32), inv_freq)  # [S, D/2]
    emb = jnp.concatenate([freqs, freqs], axis=-1)[None, :, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    rotated = jnp.concatenate([-x2, x1], axis=-1)
    return x * jnp.cos(emb) + rotated * jnp.sin(emb)


def _llama_block_fwd(x: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
    b, s, e = x.shape
    hd = e // LLAMA_HEADS
    h = _rms_norm(x, p["attention_norm"])
    q = (h @ p["wq"]).reshape(b, s, LLAMA_HEADS, hd)
    k = (h @ p["wk"]).reshape(b, s, LLAMA_HEADS, hd)
    v = (h @ p["wv"]).reshape(b, s, LLAMA_HEADS, hd)
    q, k = _rope(q), _rope(k)
    x = x + _attention(q, k, v, causal=True).reshape(b, s, e) @ p["wo"]
    h = _rms_norm(x, p["ffn_norm"])
    return x + (jax.nn.silu(h @ p["w1"]) * (h @ p["w3"])) @ p["w2"]


def llama_logits(params: dict[str, Any], tokens: jax.Array) -> jax.Array:
    x = params["tok_embeddings"][tokens]
    for p in params["layers"]:
        x = _llama_block_fwd(x, p)
    return _rms_norm(x, params["norm"]) @ params["output"]


def llama_adam_step(
    params: dict[str, Any],
    mu: dict[str, Any],
    nu: dict[str, Any],
    step: jax.Array,
    tokens: jax.Array,
    targets: jax.Array,
) -> Any:
    def loss_fn(params: dict[str, Any]) -> jax.Array:
        return _cross_entropy(llama_logits(params, tokens), targets)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    b1, b2, lr = 0.9, 0.95, 3e-4
    mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, mu, grads)
    nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, nu, grads)
    t = step + 1.0
    c1, c2 = 1 - b1**t, 1 - b2**t
    params = jax.tree.map(
        lambda p, m, v: p - lr * (m / c1) / (jnp.sqrt(v / c2) + 1e-8), params, mu, nu
    )
    return params, mu, nu, loss


def llama_args(layers: int = LLAMA_LAYERS) -> tuple[Any, ...]:
    """The Llama step's arguments; `layers` deeper or shallower than the
    bench's (`bench.auto --scale`)."""
    spec = dict(LLAMA_PARAMS)
    spec["layers"] = [_llama_block(LLAMA_E, LLAMA_FF) for _ in range(layers)]
    params = _arrays(spec, seed=3)
    zeros = jax.tree.map(np.zeros_like, params)
    seq = _ints(LLAMA_BATCH, LLAMA_SEQ + 1, high=LLAMA_VOCAB, seed=12)
    return (params, zeros, zeros, np.float32(0.0), seq[:, :-1], seq[:, 1:])


# FSDP / ZeRO-3: every parameter and optimizer state sharded on its first dim.
_LLAMA_FSDP = _same_specs(LLAMA_PARAMS, P("x"))

LLAMA_FSDP = Workload(
    "llama_fsdp",
    llama_adam_step,
    llama_args,
    (
        Layout(
            "fsdp8",
            "8",
            (_LLAMA_FSDP, _LLAMA_FSDP, _LLAMA_FSDP, P(), P("x"), P("x")),
            (_LLAMA_FSDP, _LLAMA_FSDP, _LLAMA_FSDP, P()),
        ),
    ),
    tags=("model", "transformer", "train", "fsdp"),
)


# Scanned decoder (MaxText / Flax `nn.scan` style) ---------------------------------
# The layers' weights stacked on a leading dim and run by one `lax.scan`, each
# layer under `jax.checkpoint` with a save-the-matmuls policy; f32 parameters,
# bf16 compute, dropout keys split per layer, AdamW with global-norm clipping.
# The partitioner sees the layers once, inside a while loop, forward and
# backward.

SLM_VOCAB, SLM_E, SLM_HEADS, SLM_FF = 1000, 128, 4, 512
SLM_SEQ, SLM_BATCH, SLM_LAYERS = 64, 8, 4


def _slm_params(col: P, row: P, embed: P, stack: P) -> dict[str, Any]:
    """The stacked parameter tree; `col`/`row`: the specs of the matrices
    that widen/narrow the features (after the layer dim), `embed`: the
    embedding's, `stack`: the norms'."""
    n, e, f = SLM_LAYERS, SLM_E, SLM_FF
    return {
        "embed": _Leaf((SLM_VOCAB, e), embed, scale=0.05),
        "pos": _Leaf((SLM_SEQ, e), scale=0.05),
        "layers": {
            "ln1": _Leaf((n, e), stack, "ones"),
            "qkv": _Leaf((n, e, 3 * e), col, scale=0.05),
            "out": _Leaf((n, e, e), row, scale=0.05),
            "ln2": _Leaf((n, e), stack, "ones"),
            "fc1": _Leaf((n, e, f), col, scale=0.05),
            "fc2": _Leaf((n, f, e), row, scale=0.05),
        },
        "ln_f": _Leaf((e,), init="ones"),
    }


def _slm_norm(x: jax.Array, scale: jax.Array) -> jax.Array:
    x = x.astype(jnp.float32)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return ((x - mean) * jax.lax.rsqrt(var + 1e-5) * scale).astype(jnp.bfloat16)


def _slm_layer(x: jax.Array, p: dict[str, jax.Array], key: jax.Array) -> jax.Array:
    b, s, e = x.shape
    bf = jnp.bfloat16
    q, k, v = jnp.split(_slm_norm(x, p["ln1"]) @ p["qkv"].astype(bf), 3, axis=-1)
    heads = (b, s, SLM_HEADS, e // SLM_HEADS)
    att = _attention(q.reshape(heads), k.reshape(heads), v.reshape(heads), True)
    o = att.reshape(b, s, e) @ p["out"].astype(bf)
    keep = jax.random.bernoulli(key, 0.9, o.shape)
    x = x + jnp.where(keep, o / 0.9, 0).astype(x.dtype)
    h = _slm_norm(x, p["ln2"])
    return x + (jax.nn.gelu(h @ p["fc1"].astype(bf)) @ p["fc2"].astype(bf)).astype(
        x.dtype
    )


_SLM_REMAT = jax.checkpoint(
    _slm_layer, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable
)


def scan_lm_loss(params: dict[str, Any], tokens: jax.Array, key: jax.Array) -> Any:
    x = params["embed"][tokens[:, :-1]] + params["pos"]

    def body(x: jax.Array, layer: Any) -> tuple[jax.Array, None]:
        p, k = layer
        return _SLM_REMAT(x, p, k), None

    keys = jax.random.split(key, SLM_LAYERS)
    x, _ = jax.lax.scan(body, x, (params["layers"], keys))
    h = _slm_norm(x, params["ln_f"])
    logits = (h @ params["embed"].T.astype(jnp.bfloat16)).astype(jnp.float32)
    return _cross_entropy(logits, tokens[:, 1:])


def scan_lm_train_step(
    params: dict[str, Any],
    mu: dict[str, Any],
    nu: dict[str, Any],
    tokens: jax.Array,
    key: jax.Array,
) -> Any:
    loss, grads = jax.value_and_grad(scan_lm_loss)(params, tokens, key)
    norm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree.leaves(grads)))
    grads = jax.tree.map(lambda g: g * jnp.minimum(1.0, 1.0 / (norm + 1e-6)), grads)
    b1, b2, lr, wd = 0.9, 0.999, 1e-3, 0.01
    mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, mu, grads)
    nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, nu, grads)
    params = jax.tree.map(
        lambda p, m, v: p - lr * (m / (jnp.sqrt(v) + 1e-8) + wd * p), params, mu, nu
    )
    return params, mu, nu, loss


# Megatron tensor parallelism over "y" (data over "x"), and FSDP over all 8
# devices (every matrix and the embedding split on the model dim).
_SLM_TP = _slm_params(P(None, None, "y"), P(None, "y", None), P("y"), P())
_SLM_FSDP = _slm_params(P(None, "x", None), P(None, None, "x"), P("x"), P())


def scan_lm_args() -> tuple[Any, ...]:
    params = _arrays(_SLM_TP, seed=21)
    mu = jax.tree.map(np.zeros_like, params)
    # second moments as after some steps: with zeros the first update is
    # sign(grad), which flips with bf16 rounding where a gradient is ~0
    nu = jax.tree.map(lambda p: np.full_like(p, 1e-6), params)
    tokens = _ints(SLM_BATCH, SLM_SEQ + 1, high=SLM_VOCAB, seed=22)
    return (params, mu, nu, tokens, np.asarray(jax.random.PRNGKey(23)))


def _slm_layout(name: str, mesh: str, params: Any, batch: P) -> Layout:
    specs = _specs(params)
    return Layout(
        name, mesh, (specs, specs, specs, batch, P()), (specs, specs, specs, P())
    )


SCAN_LM_TRAIN = Workload(
    "scan_lm_train",
    scan_lm_train_step,
    scan_lm_args,
    (
        _slm_layout("dp2_tp4", "2x4", _SLM_TP, P("x")),
        _slm_layout("fsdp8", "8", _SLM_FSDP, P("x")),
    ),
    tags=("model", "transformer", "train", "loop"),
)


# ViT -------------------------------------------------------------------------------

VIT_PATCH, VIT_E, VIT_HEADS, VIT_MLP, VIT_CLASSES, VIT_LAYERS = 8, 128, 4, 512, 10, 2
VIT_TOKENS = (32 // VIT_PATCH) ** 2 + 1


def _vit_block(e: int, f: int) -> dict[str, Any]:
    return {
        "ln1": _ln(e),
        "q": _Leaf((e, e), _COL),
        "k": _Leaf((e, e), _COL),
        "v": _Leaf((e, e), _COL),
        "out": _Leaf((e, e), _ROW),
        "ln2": _ln(e),
        "fc1": _Leaf((e, f), _COL),
        "fc1_b": _Leaf((f,), _VEC_COL, "zeros"),
        "fc2": _Leaf((f, e), _ROW),
        "fc2_b": _Leaf((e,), init="zeros"),
    }


VIT_PARAMS: dict[str, Any] = {
    "patch": _Leaf((VIT_PATCH, VIT_PATCH, 3, VIT_E)),
    "patch_b": _Leaf((VIT_E,), init="zeros"),
    "cls": _Leaf((1, 1, VIT_E), scale=0.02),
    "pos": _Leaf((1, VIT_TOKENS, VIT_E), scale=0.02),
    "blocks": [_vit_block(VIT_E, VIT_MLP) for _ in range(VIT_LAYERS)],
    "ln_f": _ln(VIT_E),
    "head": _Leaf((VIT_E, VIT_CLASSES)),
}


def vit(params: dict[str, Any], images: jax.Array) -> jax.Array:
    x = jax.lax.conv_general_dilated(
        images,
        params["patch"],
        (VIT_PATCH, VIT_PATCH),
        "VALID",
        dimension_numbers=_DN,
    )
    x = x + params["patch_b"]
    b, h, w, e = x.shape
    x = x.reshape(b, h * w, e)
    cls = jnp.broadcast_to(params["cls"], (b, 1, e))
    x = jnp.concatenate([cls, x], axis=1) + params["pos"]
    s = x.shape[1]
    for p in params["blocks"]:
        y = _layer_norm(x, p["ln1"])
        q, k, v = ((y @ p[n]).reshape(b, s, VIT_HEADS, e // VIT_HEADS) for n in "qkv")
        x = x + _attention(q, k, v, causal=False).reshape(b, s, e) @ p["out"]
        y = jax.nn.gelu(_layer_norm(x, p["ln2"]) @ p["fc1"] + p["fc1_b"])
        x = x + y @ p["fc2"] + p["fc2_b"]
    return _layer_norm(x[:, 0], params["ln_f"]) @ params["head"]


def _vit_args() -> tuple[Any, ...]:
    return (_arrays(VIT_PARAMS, seed=4), _rand(8, 32, 32, 3, seed=13))


VIT_FWD = Workload(
    "vit_fwd",
    vit,
    _vit_args,
    (Layout("dp2_tp4", "2x4", (_specs(VIT_PARAMS), P("x")), P("x")),),
    tags=("model", "transformer"),
)


def vit_train_step(
    params: dict[str, Any], images: jax.Array, labels: jax.Array
) -> tuple[dict[str, Any], jax.Array]:
    """One SGD step of the ViT on a softmax cross-entropy: the patch
    embedding's kernel gradient is a convolution whose output gradient
    (4 patch rows, dilated by 8) slides over the whole image."""

    def loss_fn(params: dict[str, Any]) -> jax.Array:
        logits = vit(params, images)
        return -(jax.nn.log_softmax(logits) * labels).sum(-1).mean()

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return _sgd(params, grads), loss


def _vit_train_args() -> tuple[Any, ...]:
    labels = np.eye(VIT_CLASSES, dtype=np.float32)[np.arange(8) % VIT_CLASSES]
    return (*_vit_args(), labels)


_VIT_REP = _same_specs(VIT_PARAMS, P())

VIT_TRAIN = Workload(
    "vit_train",
    vit_train_step,
    _vit_train_args,
    (
        Layout("dp8", "8", (_VIT_REP, P("x"), P("x")), (_VIT_REP, P())),
        # spatial partitioning (as for high-resolution images): each device
        # holds a band of patch rows
        Layout(
            "batch2_height4", "2x4", (_VIT_REP, P("x", "y"), P("x")), (_VIT_REP, P())
        ),
    ),
    tags=("model", "transformer", "train"),
)


# T5 --------------------------------------------------------------------------------

T5_VOCAB, T5_E, T5_HEADS, T5_FF = 512, 128, 4, 256
T5_ENC_LEN, T5_DEC_LEN, T5_BATCH = 32, 16, 8


def _t5_attn(e: int) -> dict[str, _Leaf]:
    # T5 attention: no biases; q/k/v column-split (heads over "y"), o row-split.
    return {
        "q": _Leaf((e, e), _COL),
        "k": _Leaf((e, e), _COL),
        "v": _Leaf((e, e), _COL),
        "o": _Leaf((e, e), _ROW),
    }


def _t5_ff(e: int, f: int) -> dict[str, _Leaf]:
    return {"wi": _Leaf((e, f), _COL), "wo": _Leaf((f, e), _ROW)}


T5_PARAMS: dict[str, Any] = {
    # Shared input/output embedding, vocab-split over "y" like the weights.
    "shared": _Leaf((T5_VOCAB, T5_E), P("y", None)),
    "encoder": {
        "ln_attn": _Leaf((T5_E,), init="ones"),
        "attn": _t5_attn(T5_E),
        "ln_ff": _Leaf((T5_E,), init="ones"),
        "ff": _t5_ff(T5_E, T5_FF),
        "ln_f": _Leaf((T5_E,), init="ones"),
    },
    "decoder": {
        "ln_self": _Leaf((T5_E,), init="ones"),
        "self": _t5_attn(T5_E),
        "ln_cross": _Leaf((T5_E,), init="ones"),
        "cross": _t5_attn(T5_E),
        "ln_ff": _Leaf((T5_E,), init="ones"),
        "ff": _t5_ff(T5_E, T5_FF),
        "ln_f": _Leaf((T5_E,), init="ones"),
    },
}


def _t5_mha(
    p: dict[str, jax.Array], x: jax.Array, kv: jax.Array, causal: bool
) -> jax.Array:
    b, s, e = x.shape
    t = kv.shape[1]
    hd = e // T5_HEADS
    q = (x @ p["q"]).reshape(b, s, T5_HEADS, hd)
    k = (kv @ p["k"]).reshape(b, t, T5_HEADS, hd)
    v = (kv @ p["v"]).reshape(b, t, T5_HEADS, hd)
    # T5 folds the 1/sqrt(d) scaling into the initialisation: none here.
    return _attention(q, k, v, causal, scale=False).reshape(b, s, e) @ p["o"]


def t5(params: dict[str, Any], enc_tokens: jax.Array, dec_tokens: jax.Array) -> Any:
    emb = params["shared"]
    enc, dec = params["encoder"], params["decoder"]

    x = emb[enc_tokens]
    h = _rms_norm(x, enc["ln_attn"])
    x = x + _t5_mha(enc["attn"], h, h, causal=False)
    h = _rms_norm(x, enc["ln_ff"])
    x = x + jax.nn.relu(h @ enc["ff"]["wi"]) @ enc["ff"]["wo"]
    memory = _rms_norm(x, enc["ln_f"])

    y = emb[dec_tokens]
    h = _rms_norm(y, dec["ln_self"])
    y = y + _t5_mha(dec["self"], h, h, causal=True)
    h = _rms_norm(y, dec["ln_cross"])
    y = y + _t5_mha(dec["cross"], h, memory, causal=False)
    h = _rms_norm(y, dec["ln_ff"])
    y = y + jax.nn.relu(h @ dec["ff"]["wi"]) @ dec["ff"]["wo"]
    y = _rms_norm(y, dec["ln_f"])
    return (y * T5_E**-0.5) @ emb.T  # tied lm head, rescaled as in T5 v1.0


def _t5_args() -> tuple[Any, ...]:
    return (
        _arrays(T5_PARAMS, seed=5),
        _ints(T5_BATCH, T5_ENC_LEN, high=T5_VOCAB, seed=14),
        _ints(T5_BATCH, T5_DEC_LEN, high=T5_VOCAB, seed=15),
    )


T5_FWD = Workload(
    "t5_fwd",
    t5,
    _t5_args,
    (
        Layout(
            "dp2_tp4",
            "2x4",
            (_specs(T5_PARAMS), P("x"), P("x")),
            P("x", None, "y"),
        ),
    ),
    tags=("model", "transformer"),
)


# Mixture of experts (GShard-style top-2) ---------------------------------------

MOE_GROUPS, MOE_GROUP_SIZE, MOE_D, MOE_F, MOE_EXPERTS = 8, 64, 64, 128, 8
MOE_CAPACITY = 2 * MOE_GROUP_SIZE // MOE_EXPERTS * 2  # capacity factor 2


def moe_layer(
    tokens: jax.Array, router: jax.Array, wi: jax.Array, wo: jax.Array
) -> jax.Array:
    """tokens: [G, S, D] (groups sharded), wi: [X, D, F], wo: [X, F, D]."""
    n_exp = router.shape[1]
    probs = jax.nn.softmax(tokens @ router, axis=-1)  # [G, S, X]
    gates, index = jax.lax.top_k(probs, 2)  # [G, S, 2]
    gates = gates / gates.sum(-1, keepdims=True)
    mask1 = jax.nn.one_hot(index[..., 0], n_exp)  # [G, S, X]
    mask2 = jax.nn.one_hot(index[..., 1], n_exp)
    # Position of each token in its expert's buffer, per group; second choices
    # queue behind all first choices.
    pos1 = jnp.cumsum(mask1, axis=1) - 1
    pos2 = jnp.cumsum(mask2, axis=1) - 1 + mask1.sum(axis=1, keepdims=True)
    mask1 = mask1 * (pos1 < MOE_CAPACITY)
    mask2 = mask2 * (pos2 < MOE_CAPACITY)
    slot1 = jax.nn.one_hot((pos1 * mask1).sum(-1).astype(jnp.int32), MOE_CAPACITY)
    slot2 = jax.nn.one_hot((pos2 * mask2).sum(-1).astype(jnp.int32), MOE_CAPACITY)
    combine = (gates[..., 0, None, None] * mask1[..., None] * slot1[..., None, :]) + (
        gates[..., 1, None, None] * mask2[..., None] * slot2[..., None, :]
    )  # [G, S, X, C]
    dispatch = (combine > 0).astype(tokens.dtype)
    expert_in = jnp.einsum("gsxc,gsd->xgcd", dispatch, tokens)
    h = jax.nn.gelu(jnp.einsum("xgcd,xdf->xgcf", expert_in, wi))
    expert_out = jnp.einsum("xgcf,xfd->xgcd", h, wo)
    return jnp.einsum("gsxc,xgcd->gsd", combine, expert_out)


def _moe_args() -> tuple[np.ndarray, ...]:
    return (
        _rand(MOE_GROUPS, MOE_GROUP_SIZE, MOE_D, seed=16),
        _rand(MOE_D, MOE_EXPERTS, seed=17, scale=0.5),
        _rand(MOE_EXPERTS, MOE_D, MOE_F, seed=18, scale=MOE_D**-0.5),
        _rand(MOE_EXPERTS, MOE_F, MOE_D, seed=19, scale=MOE_F**-0.5),
    )


MOE = Workload(
    "moe_layer",
    moe_layer,
    _moe_args,
    (
        Layout(
            "ep8",
            "8",
            (P("x"), P(), P("x"), P("x")),  # tokens by group, experts over "x"
            P("x"),
        ),
    ),
    tags=("model", "moe"),
)


# shard_map mixed with ordinary ops ---------------------------------------------


def _global_norm_block(b: jax.Array) -> jax.Array:
    """Per shard: scale by the global RMS over "x" (a local op and a psum)."""
    sq = jax.lax.psum(jnp.sum(b * b, axis=0, keepdims=True), "x")
    rows = b.shape[0] * jax.lax.axis_size("x")
    return jnp.tanh(b) * jax.lax.rsqrt(sq / rows + 1e-6)


def shard_map_reference(x: jax.Array, w1: jax.Array, w2: jax.Array) -> jax.Array:
    """The same program without shard_map, for the single-device reference."""
    h = x @ w1
    sq = jnp.sum(h * h, axis=0, keepdims=True)
    h = jnp.tanh(h) * jax.lax.rsqrt(sq / h.shape[0] + 1e-6)
    return (h + 1) @ w2


def _shard_map_program(mesh_name: str, axis_names: frozenset[str] | None) -> Any:
    def program(x: jax.Array, w1: jax.Array, w2: jax.Array) -> jax.Array:
        kw: dict[str, Any] = {}
        if axis_names is not None:
            kw["axis_names"] = set(axis_names)
        inner = jax.shard_map(
            _global_norm_block,
            mesh=bench_mesh(mesh_name),
            in_specs=P("x"),
            out_specs=P("x"),
            **kw,
        )
        h = x @ w1
        h = inner(h)
        return (h + 1) @ w2

    return program


def _shard_map_args() -> tuple[np.ndarray, ...]:
    return (
        _rand(64, 128, seed=20),
        _rand(128, 128, seed=21, scale=128**-0.5),
        _rand(128, 128, seed=22, scale=128**-0.5),
    )


# One function per mesh (the shard_map names its mesh), both under one name so
# `--only shard_map_mixed` runs both layouts.
SHARD_MAP_FULL = Workload(
    "shard_map_mixed",
    _shard_map_program("8", None),
    _shard_map_args,
    (Layout("manual8", "8", (P("x"), P(), P()), P("x")),),
    tags=("shard_map",),
    reference=shard_map_reference,
)

SHARD_MAP_PARTIAL = Workload(
    "shard_map_mixed",
    _shard_map_program("2x4", frozenset({"x"})),
    _shard_map_args,
    (
        Layout(
            "partial_x_2x4",
            "2x4",
            (P("x"), P(None, "y"), P("y", None)),
            P("x"),
        ),
    ),
    tags=("shard_map",),
    reference=shard_map_reference,
)


# Ring attention (context parallelism) -------------------------------------------
# Attention over a sequence split over "y" as ring attention does it (Liu et
# al. 2023; MaxText's and EasyLM's context parallelism): in a shard_map manual
# over "y" only (the batch stays split over the free axis "x"), each device
# keeps its queries and passes its key/value block around the ring by
# ppermute in a fori_loop, with an online softmax; projections outside.

RING_B, RING_S, RING_E, RING_H = 8, 256, 128, 4


def _ring_block(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    n = jax.lax.axis_size("y")
    ring = [(i, (i + 1) % n) for i in range(n)]
    scale = q.shape[-1] ** -0.5

    def step(_: jax.Array, c: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        m, total, o, k, v = c
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * scale
        m2 = jnp.maximum(m, s.max(-1))
        p, a = jnp.exp(s - m2[..., None]), jnp.exp(m - m2)
        o = o * a[..., None] + jnp.einsum("bhqk,bkhd->bhqd", p, v)
        k, v = jax.lax.ppermute(k, "y", ring), jax.lax.ppermute(v, "y", ring)
        return m2, total * a + p.sum(-1), o, k, v

    b, sq, h, d = q.shape
    start = (
        jnp.full((b, h, sq), -jnp.inf),
        jnp.zeros((b, h, sq)),
        jnp.zeros((b, h, sq, d)),
        k,
        v,
    )
    _, total, o, _, _ = jax.lax.fori_loop(0, n, step, start)
    return jnp.swapaxes(o / total[..., None], 1, 2)


def _ring_heads(x: jax.Array, w: jax.Array) -> jax.Array:
    return (x @ w).reshape(*x.shape[:2], RING_H, RING_E // RING_H)


def ring_attention(
    x: jax.Array, wq: jax.Array, wk: jax.Array, wv: jax.Array, wo: jax.Array
) -> jax.Array:
    spec = P(None, "y")
    attend = jax.shard_map(
        _ring_block,
        mesh=bench_mesh("2x4"),
        in_specs=(spec, spec, spec),
        out_specs=spec,
        axis_names={"y"},  # the batch stays split over the free axis "x"
        check_vma=False,
    )
    q, k, v = (_ring_heads(x, w) for w in (wq, wk, wv))
    o = attend(q, k, v).reshape(x.shape)
    return x + o @ wo


def ring_reference(
    x: jax.Array, wq: jax.Array, wk: jax.Array, wv: jax.Array, wo: jax.Array
) -> jax.Array:
    """The same attention computed whole, for the single-device reference."""
    q, k, v = (_ring_heads(x, w) for w in (wq, wk, wv))
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * (RING_E // RING_H) ** -0.5
    o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v)
    return x + o.reshape(x.shape) @ wo


def _ring_args() -> tuple[np.ndarray, ...]:
    w = RING_E**-0.5
    return (
        _rand(RING_B, RING_S, RING_E, seed=60),
        *(_rand(RING_E, RING_E, seed=61 + i, scale=w) for i in range(4)),
    )


RING_ATTENTION = Workload(
    "ring_attention",
    ring_attention,
    _ring_args,
    (
        Layout(
            "batch2_seq4",
            "2x4",
            (P("x", "y"), P(), P(), P(), P()),
            P("x", "y"),
        ),
    ),
    tags=("model", "transformer", "shard_map"),
    reference=ring_reference,
)


# Sorting along sharded dims ----------------------------------------------------


def sort_split(x: jax.Array) -> Any:
    return (
        jnp.sort(x, axis=0),
        jnp.argsort(x, axis=1),
        tuple(jax.lax.top_k(x, 8)),  # along axis 1
        tuple(jax.lax.top_k(x.T, 4)),  # along axis 0 of x
    )


def _sort_args() -> tuple[np.ndarray, ...]:
    return (_rand(64, 512, seed=23),)


SORT = Workload(
    "sort_split",
    sort_split,
    _sort_args,
    (
        # axis 0 sharded: jnp.sort and the second top_k run along "x".
        Layout(
            "rows8",
            "8",
            (P("x", None),),
            (P("x", None), P("x", None), (P("x"), P("x")), (P(), P())),
        ),
        # both sharded: the argsort and the first top_k run along "y" too.
        Layout(
            "rows2_cols4",
            "2x4",
            (P("x", "y"),),
            (P("x", "y"), P("x", "y"), (P("x"), P("x")), (P("y"), P("y"))),
        ),
    ),
    quick=True,
    tags=("sort",),
)


# Dropout with jax's `rbg` PRNG ---------------------------------------------------
# (`jax_default_prng_impl="rbg"`, as T5X and MaxText use for speed): the masks
# come from rng_bit_generator. A transformer MLP block (GPT-2 sizes, batch of
# 16 x 128 tokens) with dropout after the activation and on the output,
# data-parallel: each device's mask rows are its batch rows.


def dropout_mlp(
    key_data: jax.Array, x: jax.Array, w1: jax.Array, w2: jax.Array
) -> jax.Array:
    key = jax.random.wrap_key_data(key_data, impl="rbg")
    k1, k2 = jax.random.split(key)
    h = jax.nn.gelu(x @ w1)
    h = jnp.where(jax.random.bernoulli(k1, 0.9, h.shape), h / 0.9, 0.0)
    y = x + h @ w2
    return jnp.where(jax.random.bernoulli(k2, 0.9, y.shape), y / 0.9, 0.0)


def _dropout_args() -> tuple[np.ndarray, ...]:
    key = np.array([0, 42, 0, 42], np.uint32)  # jax.random.key(42, impl="rbg")
    return (
        key,
        _rand(16, 128, 768, seed=31),
        _rand(768, 3072, seed=32, scale=0.02),
        _rand(3072, 768, seed=33, scale=0.02),
    )


DROPOUT_RBG = Workload(
    "dropout_rbg",
    dropout_mlp,
    _dropout_args,
    (Layout("dp8", "8", (P(), P("x"), P(), P()), P("x")),),
    quick=True,
    tags=("model", "transformer", "rng"),
)


# U-Net ---------------------------------------------------------------------------
# Two scales: convs, a 2x2 average pool down, a stride-2 transposed conv up, the
# skip connection concatenated on channels. Train step on split height.

UNET_PARAMS: dict[str, Any] = {
    "down": _Leaf((3, 3, 4, 16)),
    "mid": _Leaf((3, 3, 16, 32)),
    "up": _Leaf((2, 2, 32, 16)),
    "fuse": _Leaf((3, 3, 32, 16)),
    "out": _Leaf((1, 1, 16, 4)),
}


def unet(params: dict[str, jax.Array], images: jax.Array) -> jax.Array:
    skip = jax.nn.relu(_conv(images, params["down"]))
    x = jax.lax.reduce_window(
        skip, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"
    )
    x = jax.nn.relu(_conv(x / 4, params["mid"]))
    x = jax.lax.conv_transpose(x, params["up"], (2, 2), "SAME", dimension_numbers=_DN)
    x = jax.nn.relu(_conv(jnp.concatenate([x, skip], axis=-1), params["fuse"]))
    return _conv(x, params["out"])


def unet_train_step(
    params: dict[str, jax.Array], images: jax.Array, targets: jax.Array
) -> Any:
    def loss_fn(params: dict[str, jax.Array]) -> jax.Array:
        return ((unet(params, images) - targets) ** 2).mean()

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return _sgd(params, grads), loss


def _unet_args() -> tuple[Any, ...]:
    return (
        _arrays(UNET_PARAMS, seed=5),
        _rand(8, 64, 64, 4, seed=14),
        _rand(8, 64, 64, 4, seed=15),
    )


_UNET_REP = _same_specs(UNET_PARAMS, P())

UNET_TRAIN = Workload(
    "unet_train",
    unet_train_step,
    _unet_args,
    (
        Layout(
            "batch2_height4",
            "2x4",
            (_UNET_REP, P("x", "y"), P("x", "y")),
            (_UNET_REP, P()),
        ),
        Layout(
            "height8", "8", (_UNET_REP, P(None, "x"), P(None, "x")), (_UNET_REP, P())
        ),
    ),
    tags=("model", "conv", "train"),
)


# WaveNet ---------------------------------------------------------------------------
# Gated causal convolutions, dilations 1, 2, 4, 8, with residuals: the time dim
# padded on the left and split, so every block's window starts at its own offset.

WAVENET_DILATIONS = (1, 2, 4, 8)
WAVENET_PARAMS: dict[str, Any] = {
    "layers": [
        {"filter": _Leaf((2, 32, 32)), "gate": _Leaf((2, 32, 32))}
        for _ in WAVENET_DILATIONS
    ]
}


def wavenet(params: dict[str, Any], x: jax.Array) -> jax.Array:
    dn = ("NWC", "WIO", "NWC")
    for p, d in zip(params["layers"], WAVENET_DILATIONS, strict=True):
        past = jnp.pad(x, ((0, 0), (d, 0), (0, 0)))  # causal: only the past

        def causal(w: jax.Array, past: jax.Array = past, d: int = d) -> jax.Array:
            return jax.lax.conv_general_dilated(
                past, w, (1,), "VALID", rhs_dilation=(d,), dimension_numbers=dn
            )

        x = x + jnp.tanh(causal(p["filter"])) * jax.nn.sigmoid(causal(p["gate"]))
    return x


_WAVENET_REP = _same_specs(WAVENET_PARAMS, P())

WAVENET_FWD = Workload(
    "wavenet_fwd",
    wavenet,
    lambda: (_arrays(WAVENET_PARAMS, seed=6), _rand(4, 1024, 32, seed=16)),
    (
        Layout("time8", "8", (_WAVENET_REP, P(None, "x")), P(None, "x")),
        Layout("batch2_time4", "2x4", (_WAVENET_REP, P("x", "y")), P("x", "y")),
    ),
    tags=("model", "conv"),
)


# Fourier neural operator ---------------------------------------------------------
# Two spectral layers (rfft2 over the grid, a complex weight on the lowest
# modes, irfft2) beside pointwise ones, a regression loss, one SGD step: the
# transforms run along the grid's dims, so on a height split each rfft2
# moves the height to another dim by an all-to-all and back.

FNO_WIDTH, FNO_MODES, FNO_GRID = 16, 8, 64
FNO_PARAMS: dict[str, Any] = {
    "lift": _Leaf((3, FNO_WIDTH)),
    "layers": [
        {
            "real": _Leaf((FNO_MODES, FNO_MODES, FNO_WIDTH, FNO_WIDTH), scale=0.05),
            "imag": _Leaf((FNO_MODES, FNO_MODES, FNO_WIDTH, FNO_WIDTH), scale=0.05),
            "point": _Leaf((FNO_WIDTH, FNO_WIDTH)),
        }
        for _ in range(2)
    ],
    "proj": _Leaf((FNO_WIDTH, 1)),
}


def fno(params: dict[str, Any], x: jax.Array) -> jax.Array:
    h = x @ params["lift"]
    b, gh, gw, c = h.shape
    m = FNO_MODES
    for p in params["layers"]:
        f = jnp.fft.rfft2(h, axes=(1, 2))
        low = jnp.einsum("bhwc,hwcd->bhwd", f[:, :m, :m], p["real"] + 1j * p["imag"])
        spectrum = jnp.zeros((b, gh, gw // 2 + 1, c), f.dtype).at[:, :m, :m].set(low)
        spectral = jnp.fft.irfft2(spectrum, s=(gh, gw), axes=(1, 2))
        h = jax.nn.gelu(spectral + h @ p["point"])
    return h @ params["proj"]


def fno_train_step(
    params: dict[str, Any], x: jax.Array, y: jax.Array
) -> tuple[dict[str, Any], jax.Array]:
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((fno(p, x) - y) ** 2))(params)
    return _sgd(params, grads), loss


_FNO_REP = _same_specs(FNO_PARAMS, P())

FNO_TRAIN = Workload(
    "fno_train",
    fno_train_step,
    lambda: (
        _arrays(FNO_PARAMS, seed=8),
        _rand(8, FNO_GRID, FNO_GRID, 3, seed=18),
        _rand(8, FNO_GRID, FNO_GRID, 1, seed=19),
    ),
    (
        Layout("batch8", "8", (_FNO_REP, P("x"), P("x")), (_FNO_REP, P())),
        Layout("height8", "8", (_FNO_REP, P(None, "x"), P(None, "x")), (_FNO_REP, P())),
        Layout(
            "batch2_height4",
            "2x4",
            (_FNO_REP, P("x", "y"), P("x", "y")),
            (_FNO_REP, P()),
        ),
    ),
    tags=("model", "train"),
)

# Swin ------------------------------------------------------------------------------
# A shifted-window attention block: roll the image by half a window, attend
# within 8x8 windows, roll back; layer norms and an MLP around it.

SWIN_WINDOW, SWIN_C, SWIN_HEADS = 8, 32, 2
SWIN_PARAMS: dict[str, Any] = {
    "ln1": {
        "scale": _Leaf((SWIN_C,), init="ones"),
        "bias": _Leaf((SWIN_C,), init="zeros"),
    },
    "qkv": _Leaf((SWIN_C, 3 * SWIN_C)),
    "proj": _Leaf((SWIN_C, SWIN_C)),
    "ln2": {
        "scale": _Leaf((SWIN_C,), init="ones"),
        "bias": _Leaf((SWIN_C,), init="zeros"),
    },
    "fc1": _Leaf((SWIN_C, 4 * SWIN_C)),
    "fc2": _Leaf((4 * SWIN_C, SWIN_C)),
}


def swin_block(params: dict[str, Any], x: jax.Array) -> jax.Array:
    b, h, w, c = x.shape
    ws, heads = SWIN_WINDOW, SWIN_HEADS
    shifted = jnp.roll(_layer_norm(x, params["ln1"]), (-ws // 2, -ws // 2), (1, 2))
    windows = shifted.reshape(b, h // ws, ws, w // ws, ws, c)
    windows = windows.transpose(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, c)
    q, k, v = jnp.split(windows @ params["qkv"], 3, axis=-1)
    split = (-1, ws * ws, heads, c // heads)
    y = _attention(q.reshape(split), k.reshape(split), v.reshape(split), causal=False)
    y = y.reshape(b, h // ws, w // ws, ws, ws, c).transpose(0, 1, 3, 2, 4, 5)
    y = jnp.roll(y.reshape(b, h, w, c) @ params["proj"], (ws // 2, ws // 2), (1, 2))
    x = x + y
    hidden = jax.nn.gelu(_layer_norm(x, params["ln2"]) @ params["fc1"])
    return x + hidden @ params["fc2"]


_SWIN_REP = _same_specs(SWIN_PARAMS, P())

SWIN_FWD = Workload(
    "swin_fwd",
    swin_block,
    lambda: (_arrays(SWIN_PARAMS, seed=7), _rand(8, 64, 64, SWIN_C, seed=17)),
    (
        Layout("height8", "8", (_SWIN_REP, P(None, "x")), P(None, "x")),
        Layout("batch2_height4", "2x4", (_SWIN_REP, P("x", "y")), P("x", "y")),
    ),
    tags=("model", "transformer"),
)


# Rematerialised transformer MLPs ----------------------------------------------------
# Megatron MLP blocks under jax.checkpoint (the gradient recomputes each block's
# forward pass behind an optimization_barrier), DP x TP train step.

REMAT_LAYERS, REMAT_D, REMAT_F = 2, 256, 1024
REMAT_PARAMS: dict[str, Any] = {
    "layers": [
        {
            "w1": _Leaf((REMAT_D, REMAT_F), P(None, "y")),
            "w2": _Leaf((REMAT_F, REMAT_D), P("y")),
        }
        for _ in range(REMAT_LAYERS)
    ]
}


def remat_mlp_train_step(params: dict[str, Any], x: jax.Array) -> Any:
    @jax.checkpoint
    def block(h: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
        return h + jax.nn.gelu(h @ p["w1"]) @ p["w2"]

    def loss_fn(params: dict[str, Any]) -> jax.Array:
        h = x
        for p in params["layers"]:
            h = block(h, p)
        return (h**2).mean()

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return _sgd(params, grads), loss


REMAT_TRAIN = Workload(
    "remat_train",
    remat_mlp_train_step,
    lambda: (_arrays(REMAT_PARAMS, seed=8), _rand(64, REMAT_D, seed=18)),
    (
        Layout(
            "dp2_tp4",
            "2x4",
            (_specs(REMAT_PARAMS), P("x")),
            (_specs(REMAT_PARAMS), P()),
        ),
    ),
    tags=("model", "transformer", "train"),
)


# CycleGAN-style ResNet generator -----------------------------------------------------
# Reflection padding before every unpadded convolution (`jnp.pad(mode="reflect")`
# traces to private functions that slice, reverse and concatenate the edges), a
# 7x7 stem, stride-2 downsampling, residual blocks, instance norm, and stride-2
# transposed convolutions back up. Forward on split height.

CYCLEGAN_PARAMS: dict[str, Any] = {
    "stem": _Leaf((7, 7, 3, 8)),
    "down": _Leaf((3, 3, 8, 16)),
    "blocks": [
        {"conv1": _Leaf((3, 3, 16, 16)), "conv2": _Leaf((3, 3, 16, 16))}
        for _ in range(2)
    ],
    "up": _Leaf((3, 3, 16, 8)),
    "head": _Leaf((7, 7, 8, 3)),
}


def _reflect_conv(x: jax.Array, w: jax.Array) -> jax.Array:
    r = w.shape[0] // 2
    x = jnp.pad(x, ((0, 0), (r, r), (r, r), (0, 0)), mode="reflect")
    return jax.lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=_DN)


def _instance_norm(x: jax.Array) -> jax.Array:
    mean = x.mean(axis=(1, 2), keepdims=True)
    var = x.var(axis=(1, 2), keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5)


def cyclegan_generator(params: dict[str, Any], images: jax.Array) -> jax.Array:
    x = jax.nn.relu(_instance_norm(_reflect_conv(images, params["stem"])))
    x = jax.nn.relu(_instance_norm(_conv(x, params["down"], 2)))
    for block in params["blocks"]:
        y = jax.nn.relu(_instance_norm(_reflect_conv(x, block["conv1"])))
        x = x + _instance_norm(_reflect_conv(y, block["conv2"]))
    x = jax.lax.conv_transpose(x, params["up"], (2, 2), "SAME", dimension_numbers=_DN)
    x = jax.nn.relu(_instance_norm(x))
    return jnp.tanh(_reflect_conv(x, params["head"]))


def _cyclegan_args() -> tuple[Any, ...]:
    return (_arrays(CYCLEGAN_PARAMS, seed=21), _rand(4, 64, 64, 3, seed=22))


_CYCLEGAN_REP = _same_specs(CYCLEGAN_PARAMS, P())

CYCLEGAN_FWD = Workload(
    "cyclegan_fwd",
    cyclegan_generator,
    _cyclegan_args,
    (
        Layout("batch2_height4", "2x4", (_CYCLEGAN_REP, P("x", "y")), P("x", "y")),
        Layout("height8", "8", (_CYCLEGAN_REP, P(None, "x")), P(None, "x")),
    ),
    tags=("model", "conv"),
)


# Diffusion UNet block (DDPM/Stable-Diffusion style) --------------------------------
# A residual block (GroupNorm, SiLU, 3x3 convolutions, a sinusoidal timestep
# embedding added per channel) and a self-attention block over the
# flattened height x width tokens, trained on a denoising loss. Height split
# for high-resolution latents (the tokens then split with it), or batch x
# height.

DIFFUSION_C = 32

DIFFUSION_PARAMS: dict[str, Any] = {
    "conv1": _Leaf((3, 3, DIFFUSION_C, DIFFUSION_C)),
    "conv2": _Leaf((3, 3, DIFFUSION_C, DIFFUSION_C)),
    "time": _Leaf((32, DIFFUSION_C)),
    **{k: _Leaf((DIFFUSION_C, DIFFUSION_C)) for k in ("q", "k", "v", "o")},
}


def _group_norm(x: jax.Array, groups: int = 4) -> jax.Array:
    b, h, w, c = x.shape
    y = x.reshape(b, h, w, groups, c // groups)
    mean = y.mean((1, 2, 4), keepdims=True)
    var = y.var((1, 2, 4), keepdims=True)
    return ((y - mean) * jax.lax.rsqrt(var + 1e-5)).reshape(b, h, w, c)


def _timestep_embedding(t: jax.Array, dim: int) -> jax.Array:
    half = dim // 2
    freqs = jnp.exp(-np.log(10000.0) * jnp.arange(half) / half)
    angles = t[:, None] * freqs[None]
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)


def diffusion_block(
    params: dict[str, jax.Array], x: jax.Array, t: jax.Array
) -> jax.Array:
    h = _conv(jax.nn.silu(_group_norm(x)), params["conv1"])
    emb = jax.nn.silu(_timestep_embedding(t, 32)) @ params["time"]
    h = h + emb[:, None, None, :]
    x = x + _conv(jax.nn.silu(_group_norm(h)), params["conv2"])
    b, height, width, c = x.shape
    n = _group_norm(x).reshape(b, height * width, c)
    q, k, v = (n @ params[name] for name in ("q", "k", "v"))
    a = jax.nn.softmax(q @ k.transpose(0, 2, 1) / np.sqrt(c), axis=-1) @ v
    return x + (a @ params["o"]).reshape(b, height, width, c)


def diffusion_train_step(
    params: dict[str, jax.Array], x: jax.Array, t: jax.Array, noise: jax.Array
) -> Any:
    def loss_fn(params: dict[str, jax.Array]) -> jax.Array:
        return ((diffusion_block(params, x, t) - noise) ** 2).mean()

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return _sgd(params, grads), loss


def _diffusion_args() -> tuple[Any, ...]:
    return (
        _arrays(DIFFUSION_PARAMS, seed=23),
        _rand(4, 16, 16, DIFFUSION_C, seed=24),
        np.arange(4, dtype=np.float32) * 100.0,
        _rand(4, 16, 16, DIFFUSION_C, seed=25),
    )


_DIFFUSION_REP = _same_specs(DIFFUSION_PARAMS, P())

DIFFUSION_TRAIN = Workload(
    "diffusion_train",
    diffusion_train_step,
    _diffusion_args,
    (
        Layout(
            "height8",
            "8",
            (_DIFFUSION_REP, P(None, "x"), P(), P(None, "x")),
            (_DIFFUSION_REP, P()),
        ),
        Layout(
            "batch2_height4",
            "2x4",
            (_DIFFUSION_REP, P("x", "y"), P("x"), P("x", "y")),
            (_DIFFUSION_REP, P()),
        ),
    ),
    tags=("model", "conv", "transformer", "train"),
)


# Mamba-style selective state space block ---------------------------------------------
# An input projection into two streams, a causal depthwise convolution along
# time, input-dependent step sizes and B/C projections, the selective scan as
# `lax.associative_scan` along time (a Mamba/S5 formulation), a gate and an
# output projection; time split over the mesh (sequence parallelism).

MAMBA_D, MAMBA_E, MAMBA_N, MAMBA_K = 64, 128, 16, 4

MAMBA_PARAMS = {
    "in": _Leaf((MAMBA_D, 2 * MAMBA_E)),
    "conv": _Leaf((MAMBA_K, MAMBA_E), scale=0.5),
    "dt": _Leaf((MAMBA_E, MAMBA_E), scale=0.05),
    "dt_bias": _Leaf((MAMBA_E,), init="zeros"),
    "b": _Leaf((MAMBA_E, MAMBA_N)),
    "c": _Leaf((MAMBA_E, MAMBA_N)),
    "a_log": _Leaf((MAMBA_E, MAMBA_N), scale=0.5),
    "out": _Leaf((MAMBA_E, MAMBA_D)),
}


def _causal_depthwise(x: jax.Array, w: jax.Array) -> jax.Array:
    # x: (batch, time, channels), w: (window, channels)
    k = w.shape[0]
    return jax.lax.conv_general_dilated(
        x,
        w[:, None, :],
        (1,),
        [(k - 1, 0)],
        dimension_numbers=("NWC", "WIO", "NWC"),
        feature_group_count=x.shape[-1],
    )


def mamba_block(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    xz = x @ params["in"]
    u, z = jnp.split(xz, 2, axis=-1)
    u = jax.nn.silu(_causal_depthwise(u, params["conv"]))
    dt = jax.nn.softplus(u @ params["dt"] + params["dt_bias"])  # (b, t, e)
    a = -jnp.exp(params["a_log"])  # (e, n)
    decay = jnp.exp(dt[..., None] * a)  # (b, t, e, n)
    drive = (dt * u)[..., None] * (u @ params["b"])[:, :, None, :]

    def combine(left: Any, right: Any) -> Any:
        a_l, b_l = left
        a_r, b_r = right
        return a_l * a_r, b_l * a_r + b_r

    _, h = jax.lax.associative_scan(combine, (decay, drive), axis=1)
    y = jnp.einsum("bten,btn->bte", h, u @ params["c"])
    return x + (y * jax.nn.silu(z)) @ params["out"]


def _mamba_args() -> tuple[Any, ...]:
    return (_arrays(MAMBA_PARAMS, seed=41), _rand(4, 256, MAMBA_D, seed=42))


_MAMBA_REP = _same_specs(MAMBA_PARAMS, P())

MAMBA_FWD = Workload(
    "mamba_fwd",
    mamba_block,
    _mamba_args,
    (
        Layout("time8", "8", (_MAMBA_REP, P(None, "x")), P(None, "x")),
        Layout("batch2_time4", "2x4", (_MAMBA_REP, P("x", "y")), P("x", "y")),
    ),
    tags=("model", "scan"),
)


# MobileNetV2-style train step --------------------------------------------------------
# Inverted residual blocks: a 1x1 expansion, a 3x3 depthwise convolution
# (feature_group_count = channels; stride 2, then 1), batch norm and ReLU6, a
# 1x1 projection; global pooling and a classifier; SGD.

MOBILENET_CLASSES = 10


def _inverted(c_in: int, c_out: int, expand: int = 4) -> dict[str, Any]:
    mid = c_in * expand
    return {
        "expand": _Leaf((1, 1, c_in, mid)),
        "bn1": _bn(mid),
        "depthwise": _Leaf((3, 3, 1, mid), scale=1 / 3),
        "bn2": _bn(mid),
        "project": _Leaf((1, 1, mid, c_out)),
        "bn3": _bn(c_out),
    }


MOBILENET_PARAMS = {
    "stem": _Leaf((3, 3, 3, 16)),
    "bn": _bn(16),
    "blocks": [_inverted(16, 24), _inverted(24, 24), _inverted(24, 24)],
    "head": _Leaf((24, MOBILENET_CLASSES)),
}
# (the first block's projection bias reaches the loss through the next
# block's residual; with a 1x1 convolution and batch norm after it and no
# residual between, its gradient would be zero up to rounding)
_MOBILENET_STRIDES = (2, 1, 1)


def _inverted_block(p: dict[str, Any], x: jax.Array, stride: int) -> jax.Array:
    h = jax.nn.relu6(_batch_norm(_conv(x, p["expand"]), p["bn1"]))
    h = _conv(h, p["depthwise"], stride, groups=h.shape[-1])
    h = jax.nn.relu6(_batch_norm(h, p["bn2"]))
    h = _batch_norm(_conv(h, p["project"]), p["bn3"])
    return x + h if stride == 1 and x.shape == h.shape else h


def mobilenet_loss(params: dict[str, Any], x: jax.Array, labels: jax.Array) -> Any:
    h = jax.nn.relu6(_batch_norm(_conv(x, params["stem"], 2), params["bn"]))
    for p, stride in zip(params["blocks"], _MOBILENET_STRIDES, strict=True):
        h = _inverted_block(p, h, stride)
    logits = h.mean(axis=(1, 2)) @ params["head"]
    logp = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(logp, labels[:, None], axis=1).mean()


mobilenet_train_step = _sgd_train_step(mobilenet_loss, "mobilenet_train_step")


def _mobilenet_args() -> tuple[Any, ...]:
    return (
        _arrays(MOBILENET_PARAMS, seed=43),
        _rand(8, 64, 64, 3, seed=44),
        _ints(8, high=MOBILENET_CLASSES, seed=45),
    )


_MOBILENET_REP = _same_specs(MOBILENET_PARAMS, P())

MOBILENET_TRAIN = Workload(
    "mobilenet_train",
    mobilenet_train_step,
    _mobilenet_args,
    (
        Layout(
            "height8",
            "8",
            (_MOBILENET_REP, P(None, "x"), P()),
            (_MOBILENET_REP, P()),
        ),
        Layout(
            "batch2_height4",
            "2x4",
            (_MOBILENET_REP, P("x", "y"), P("x")),
            (_MOBILENET_REP, P()),
        ),
    ),
    tags=("model", "conv", "train"),
)


# VAE decoder -------------------------------------------------------------------------
# From a latent grid to an image: a 3x3 convolution, two stride-2 transposed
# convolutions (`lax.conv_transpose`, lhs-dilated convolutions in StableHLO)
# with group norm and SiLU, a 3x3 convolution to RGB; height split.


VAE_PARAMS = {
    "in": _Leaf((3, 3, 8, 64)),
    "up1": _Leaf((4, 4, 64, 32)),
    "up2": _Leaf((4, 4, 32, 16)),
    "out": _Leaf((3, 3, 16, 3)),
}


def vae_decode(params: dict[str, jax.Array], z: jax.Array) -> jax.Array:
    h = jax.nn.silu(_group_norm(_conv(z, params["in"])))
    for name in ("up1", "up2"):
        h = jax.lax.conv_transpose(
            h, params[name], (2, 2), "SAME", dimension_numbers=_DN
        )
        h = jax.nn.silu(_group_norm(h))
    return jax.nn.sigmoid(_conv(h, params["out"]))


def _vae_args() -> tuple[Any, ...]:
    return (_arrays(VAE_PARAMS, seed=46), _rand(4, 16, 16, 8, seed=47))


_VAE_REP = _same_specs(VAE_PARAMS, P())

VAE_DECODE = Workload(
    "vae_decode",
    vae_decode,
    _vae_args,
    (
        Layout("height8", "8", (_VAE_REP, P(None, "x")), P(None, "x")),
        Layout("batch2_height4", "2x4", (_VAE_REP, P("x", "y")), P("x", "y")),
    ),
    tags=("model", "conv"),
)


# ConvNeXt ---------------------------------------------------------------------------
# A patchify stem (4x4/4), blocks of a depthwise 7x7 convolution, layer norm over
# channels, an inverted MLP with GELU and a layer scale, a 2x2/2 downsample
# between stages; train step, height split.

CONVNEXT_CLASSES = 10


def _convnext_block(c: int) -> dict[str, Any]:
    return {
        "depthwise": _Leaf((7, 7, 1, c), scale=1 / 7),
        "norm": _ln(c),
        "up": _Leaf((c, 4 * c)),
        "down": _Leaf((4 * c, c)),
        "gamma": _Leaf((c,), scale=0.1),
    }


CONVNEXT_PARAMS = {
    "stem": _Leaf((4, 4, 3, 16)),
    "stem_norm": _ln(16),
    "stage1": _convnext_block(16),
    "down_norm": _ln(16),
    "downsample": _Leaf((2, 2, 16, 32)),
    "stage2": _convnext_block(32),
    "head": _Leaf((32, CONVNEXT_CLASSES)),
}


def _patchify(x: jax.Array, w: jax.Array) -> jax.Array:
    k = w.shape[0]
    return jax.lax.conv_general_dilated(x, w, (k, k), "VALID", dimension_numbers=_DN)


def _convnext_block_apply(p: dict[str, Any], x: jax.Array) -> jax.Array:
    h = _conv(x, p["depthwise"], groups=x.shape[-1])
    h = jax.nn.gelu(_layer_norm(h, p["norm"]) @ p["up"]) @ p["down"]
    return x + p["gamma"] * h


def convnext_loss(params: dict[str, Any], x: jax.Array, labels: jax.Array) -> Any:
    h = _layer_norm(_patchify(x, params["stem"]), params["stem_norm"])
    h = _convnext_block_apply(params["stage1"], h)
    h = _patchify(_layer_norm(h, params["down_norm"]), params["downsample"])
    h = _convnext_block_apply(params["stage2"], h)
    return _cross_entropy(h.mean(axis=(1, 2)) @ params["head"], labels)


convnext_train_step = _sgd_train_step(convnext_loss, "convnext_train_step")


def _convnext_args() -> tuple[Any, ...]:
    return (
        _arrays(CONVNEXT_PARAMS, seed=48),
        _rand(8, 128, 128, 3, seed=49),
        _ints(8, high=CONVNEXT_CLASSES, seed=50),
    )


_CONVNEXT_REP = _same_specs(CONVNEXT_PARAMS, P())

CONVNEXT_TRAIN = Workload(
    "convnext_train",
    convnext_train_step,
    _convnext_args,
    (
        Layout(
            "height8", "8", (_CONVNEXT_REP, P(None, "x"), P()), (_CONVNEXT_REP, P())
        ),
        Layout(
            "batch2_height4",
            "2x4",
            (_CONVNEXT_REP, P("x", "y"), P("x")),
            (_CONVNEXT_REP, P()),
        ),
    ),
    tags=("model", "conv", "train"),
)


# Video network (3D convolutions) ------------------------------------------------------
# Clips [N, T, H, W, C]: 3x3x3 convolutions (one with stride 2 in time and
# space), a 3x3x3/2 average pool, global pooling; forward, time split.

_DN3 = ("NDHWC", "DHWIO", "NDHWC")

VIDEO_PARAMS = {
    "conv1": _Leaf((3, 3, 3, 3, 8)),
    "conv2": _Leaf((3, 3, 3, 8, 16)),
    "conv3": _Leaf((3, 3, 3, 16, 16)),
}


def _conv3(x: jax.Array, w: jax.Array, stride: int = 1) -> jax.Array:
    return jax.lax.conv_general_dilated(
        x, w, (stride,) * 3, "SAME", dimension_numbers=_DN3
    )


def video_fwd(params: dict[str, jax.Array], clips: jax.Array) -> jax.Array:
    h = jax.nn.relu(_conv3(clips, params["conv1"]))
    h = jax.nn.relu(_conv3(h, params["conv2"], 2))
    window = (1, 3, 3, 3, 1)
    h = jax.lax.reduce_window(h, 0.0, jax.lax.add, window, (1, 2, 2, 2, 1), "SAME")
    h = jax.nn.relu(_conv3(h / 27.0, params["conv3"]))
    return h.mean(axis=(1, 2, 3))


def _video_args() -> tuple[Any, ...]:
    return (_arrays(VIDEO_PARAMS, seed=51), _rand(4, 32, 32, 32, 3, seed=52))


_VIDEO_REP = _same_specs(VIDEO_PARAMS, P())

VIDEO_FWD = Workload(
    "video3d_fwd",
    video_fwd,
    _video_args,
    (
        Layout("time8", "8", (_VIDEO_REP, P(None, "x")), P()),
        Layout("batch2_time4", "2x4", (_VIDEO_REP, P("x", "y")), P("x")),
    ),
    tags=("model", "conv"),
)


# Graph convolutional network ---------------------------------------------------------
# Two GCN layers: gather the source nodes' rows of every edge, transform, sum
# into the destination nodes (`jax.ops.segment_sum`); train step with edges
# split (and nodes too in the second layout).

GCN_NODES, GCN_EDGES, GCN_FEATURES, GCN_OUT = 512, 4096, 32, 16

GCN_PARAMS = {"w1": _Leaf((GCN_FEATURES, 64)), "w2": _Leaf((64, GCN_OUT))}


def gcn_loss(
    params: dict[str, jax.Array],
    x: jax.Array,
    src: jax.Array,
    dst: jax.Array,
    target: jax.Array,
) -> Any:
    def layer(h: jax.Array, w: jax.Array) -> jax.Array:
        return jax.ops.segment_sum(h[src] @ w, dst, num_segments=x.shape[0])

    h = layer(jax.nn.relu(layer(x, params["w1"])), params["w2"])
    return jnp.mean((h - target) ** 2)


gcn_train_step = _sgd_train_step(gcn_loss, "gcn_train_step")


def _gcn_args() -> tuple[Any, ...]:
    return (
        _arrays(GCN_PARAMS, seed=53),
        _rand(GCN_NODES, GCN_FEATURES, seed=54),
        _ints(GCN_EDGES, high=GCN_NODES, seed=55),
        _ints(GCN_EDGES, high=GCN_NODES, seed=56),
        _rand(GCN_NODES, GCN_OUT, seed=57),
    )


_GCN_REP = _same_specs(GCN_PARAMS, P())

GCN_TRAIN = Workload(
    "gcn_train",
    gcn_train_step,
    _gcn_args,
    (
        Layout(
            "edges8",
            "8",
            (_GCN_REP, P(), P("x"), P("x"), P()),
            (_GCN_REP, P()),
        ),
        Layout(
            "nodes2_edges4",
            "2x4",
            (_GCN_REP, P("x"), P("y"), P("y"), P("x")),
            (_GCN_REP, P()),
        ),
    ),
    tags=("model", "train"),
)


# MLP-Mixer ---------------------------------------------------------------------------
# Token mixing (an MLP across the token dim, applied to the transposed
# activations) and channel mixing, each after a layer norm with a residual;
# train step, batch x tokens split.

MIXER_TOKENS, MIXER_CHANNELS, MIXER_LAYERS = 64, 64, 2


def _mixer_layer() -> dict[str, Any]:
    return {
        "norm1": _ln(MIXER_CHANNELS),
        "token_up": _Leaf((MIXER_TOKENS, 128)),
        "token_down": _Leaf((128, MIXER_TOKENS)),
        "norm2": _ln(MIXER_CHANNELS),
        "channel_up": _Leaf((MIXER_CHANNELS, 256)),
        "channel_down": _Leaf((256, MIXER_CHANNELS)),
    }


MIXER_PARAMS = {"layers": [_mixer_layer() for _ in range(MIXER_LAYERS)]}


def mixer_loss(params: dict[str, Any], x: jax.Array, target: jax.Array) -> Any:
    for p in params["layers"]:
        h = jnp.swapaxes(_layer_norm(x, p["norm1"]), 1, 2)
        h = jax.nn.gelu(h @ p["token_up"]) @ p["token_down"]
        x = x + jnp.swapaxes(h, 1, 2)
        h = _layer_norm(x, p["norm2"])
        x = x + jax.nn.gelu(h @ p["channel_up"]) @ p["channel_down"]
    return jnp.mean((x.mean(axis=1) - target) ** 2)


mixer_train_step = _sgd_train_step(mixer_loss, "mixer_train_step")


def _mixer_args() -> tuple[Any, ...]:
    return (
        _arrays(MIXER_PARAMS, seed=58),
        _rand(16, MIXER_TOKENS, MIXER_CHANNELS, seed=59),
        _rand(16, MIXER_CHANNELS, seed=60),
    )


_MIXER_REP = _same_specs(MIXER_PARAMS, P())

MIXER_TRAIN = Workload(
    "mixer_train",
    mixer_train_step,
    _mixer_args,
    (
        Layout("dp8", "8", (_MIXER_REP, P("x"), P("x")), (_MIXER_REP, P())),
        Layout(
            "batch2_tokens4",
            "2x4",
            (_MIXER_REP, P("x", "y"), P("x")),
            (_MIXER_REP, P()),
        ),
    ),
    tags=("model", "train"),
)


# LSTM ---------------------------------------------------------------------------------
# One LSTM layer over time (`lax.scan`, gates from one fused projection cut
# with `jnp.split`) and a linear readout; train step, batch split (with the
# gates' projection split over the model axis in the second layout).

LSTM_IN, LSTM_HIDDEN, LSTM_STEPS, LSTM_BATCH = 32, 64, 16, 16


def _lstm_params(gates: P) -> dict[str, _Leaf]:
    return {
        "wx": _Leaf((LSTM_IN, 4 * LSTM_HIDDEN), gates),
        "wh": _Leaf((LSTM_HIDDEN, 4 * LSTM_HIDDEN), gates),
        "b": _Leaf((4 * LSTM_HIDDEN,), P(*gates[1:]), init="zeros"),
        "readout": _Leaf((LSTM_HIDDEN, LSTM_IN)),
    }


def lstm_loss(params: dict[str, jax.Array], xs: jax.Array, ys: jax.Array) -> Any:
    batch = xs.shape[1]

    def cell(carry: tuple[jax.Array, jax.Array], x: jax.Array) -> Any:
        h, c = carry
        z = x @ params["wx"] + h @ params["wh"] + params["b"]
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    zeros = jnp.zeros((batch, LSTM_HIDDEN), xs.dtype)
    _, hs = jax.lax.scan(cell, (zeros, zeros), xs)
    return jnp.mean((hs @ params["readout"] - ys) ** 2)


lstm_train_step = _sgd_train_step(lstm_loss, "lstm_train_step")


def _lstm_args() -> tuple[Any, ...]:
    return (
        _arrays(_lstm_params(P()), seed=61),
        _rand(LSTM_STEPS, LSTM_BATCH, LSTM_IN, seed=62),
        _rand(LSTM_STEPS, LSTM_BATCH, LSTM_IN, seed=63),
    )


_LSTM_REP = _specs(_lstm_params(P()))
_LSTM_TP = _specs(_lstm_params(P(None, "y")))

LSTM_TRAIN = Workload(
    "lstm_train",
    lstm_train_step,
    _lstm_args,
    (
        Layout("dp8", "8", (_LSTM_REP, P(None, "x"), P(None, "x")), (_LSTM_REP, P())),
        Layout(
            "dp2_tp4",
            "2x4",
            (_LSTM_TP, P(None, "x"), P(None, "x")),
            (_LSTM_TP, P()),
        ),
    ),
    tags=("model", "train"),
)


# KV-cache decoding --------------------------------------------------------------------
# One decoding step of attention: project this token, write its key and value
# into the caches at a traced position (`lax.dynamic_update_slice`), attend
# over the cache up to that position; heads split (tensor parallel) or the
# cache's sequence split.

DECODE_BATCH, DECODE_LEN, DECODE_HEADS, DECODE_HEAD_DIM = 8, 64, 8, 16
_DECODE_WIDTH = DECODE_HEADS * DECODE_HEAD_DIM


def _decode_params(cols: P, rows: P) -> dict[str, _Leaf]:
    w = _DECODE_WIDTH
    return {
        "wq": _Leaf((w, w), cols),
        "wk": _Leaf((w, w), cols),
        "wv": _Leaf((w, w), cols),
        "wo": _Leaf((w, w), rows),
    }


def kv_decode_step(
    params: dict[str, jax.Array],
    k_cache: jax.Array,
    v_cache: jax.Array,
    x: jax.Array,
    pos: jax.Array,
) -> Any:
    b, length, heads, dim = k_cache.shape

    def heads_of(w: jax.Array) -> jax.Array:
        return (x @ w).reshape(b, 1, heads, dim)

    q = heads_of(params["wq"])
    k_cache = jax.lax.dynamic_update_slice(
        k_cache, heads_of(params["wk"]), (0, pos, 0, 0)
    )
    v_cache = jax.lax.dynamic_update_slice(
        v_cache, heads_of(params["wv"]), (0, pos, 0, 0)
    )
    logits = jnp.einsum("bqhd,bshd->bhqs", q, k_cache) / np.float32(np.sqrt(dim))
    logits = jnp.where(jnp.arange(length) <= pos, logits, jnp.finfo(logits.dtype).min)
    out = jnp.einsum("bhqs,bshd->bqhd", jax.nn.softmax(logits, axis=-1), v_cache)
    return out.reshape(b, heads * dim) @ params["wo"], k_cache, v_cache


def _decode_args() -> tuple[Any, ...]:
    cache = (DECODE_BATCH, DECODE_LEN, DECODE_HEADS, DECODE_HEAD_DIM)
    return (
        _arrays(_decode_params(P(), P()), seed=64),
        _rand(*cache, seed=65),
        _rand(*cache, seed=66),
        _rand(DECODE_BATCH, _DECODE_WIDTH, seed=67),
        np.int32(37),
    )


_DECODE_TP = _specs(_decode_params(P(None, "y"), P("y")))
_DECODE_REP = _specs(_decode_params(P(), P()))
_CACHE_HEADS = P("x", None, "y")
_CACHE_SEQ = P(None, "x")

KV_DECODE = Workload(
    "kv_decode",
    kv_decode_step,
    _decode_args,
    (
        Layout(
            "dp2_tp4",
            "2x4",
            (_DECODE_TP, _CACHE_HEADS, _CACHE_HEADS, P("x"), P()),
            (P("x"), _CACHE_HEADS, _CACHE_HEADS),
        ),
        Layout(
            "seq8",
            "8",
            (_DECODE_REP, _CACHE_SEQ, _CACHE_SEQ, P(), P()),
            (P(), _CACHE_SEQ, _CACHE_SEQ),
        ),
    ),
    tags=("model", "transformer"),
)


MODELS = (
    RESNET_FWD,
    RESNET_TRAIN,
    CONV_TRAIN,
    GPT2_TRAIN,
    LLAMA_FSDP,
    SCAN_LM_TRAIN,
    VIT_FWD,
    VIT_TRAIN,
    T5_FWD,
    MOE,
    SHARD_MAP_FULL,
    SHARD_MAP_PARTIAL,
    RING_ATTENTION,
    SORT,
    DROPOUT_RBG,
    UNET_TRAIN,
    WAVENET_FWD,
    SWIN_FWD,
    REMAT_TRAIN,
    CYCLEGAN_FWD,
    DIFFUSION_TRAIN,
    FNO_TRAIN,
    MAMBA_FWD,
    MOBILENET_TRAIN,
    VAE_DECODE,
    CONVNEXT_TRAIN,
    VIDEO_FWD,
    GCN_TRAIN,
    MIXER_TRAIN,
    LSTM_TRAIN,
    KV_DECODE,
)
