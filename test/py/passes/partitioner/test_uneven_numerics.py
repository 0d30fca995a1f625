"""Dims their axes do not divide (10 rows over 4 devices, a vocabulary of
1001 over 8): split in blocks of ceil(size / ways), the last ones padded;
reductions, contractions, scans and windows mask the padding. Against one
device, 8 CPU devices."""

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


def constrained(mesh: Mesh, spec: P) -> Callable[[jax.Array], jax.Array]:
    return lambda v: meshjit.with_sharding_constraint(v, NamedSharding(mesh, spec))


def check(fn: Callable[..., Any], *args: np.ndarray) -> meshjit.Compiled:
    compiled = meshjit.jit(fn).lower(*args).compile()
    got = jax.tree.leaves(compiled(*args))
    want = jax.tree.leaves(jax.jit(fn)(*args))
    for g, w in zip(got, want, strict=True):
        w = np.asarray(w)
        if w.dtype.kind in "iub":
            np.testing.assert_array_equal(np.asarray(g), w)
        else:
            scale = max(1.0, float(np.abs(w).max()))
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6 * scale)
    return compiled


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


SPLIT10 = constrained(MESH24, P("y"))  # 10 rows over 4 devices: blocks of 3

OPS = {
    "elementwise": lambda x: jnp.tanh(SPLIT10(x)) * 2,
    "sum_rows": lambda x: SPLIT10(x).sum(0),
    "max_rows": lambda x: SPLIT10(x - 3).max(0),
    "min_rows": lambda x: SPLIT10(x + 3).min(0),
    "argmax_rows": lambda x: jnp.argmax(SPLIT10(x), axis=0),
    "mean_all": lambda x: SPLIT10(x).mean(),
    "dot_contracting": lambda x: SPLIT10(x).T @ SPLIT10(x),
    "dot_batch": lambda x: SPLIT10(x) @ jnp.ones((16, 5), jnp.float32),
    "cumsum": lambda x: jnp.cumsum(SPLIT10(x), axis=0),
    "cumsum_reverse": lambda x: jax.lax.cumsum(SPLIT10(x), axis=0, reverse=True),
    "sort": lambda x: jnp.sort(SPLIT10(x), axis=0),
    "transpose_sum": lambda x: SPLIT10(x).T.sum(1),
    "broadcast": lambda x: SPLIT10(x)[:, None, :] * jnp.ones((1, 3, 1)),
    "slice": lambda x: SPLIT10(x)[2:9],
    "pad": lambda x: jnp.pad(SPLIT10(x), ((1, 2), (0, 0))),
    "concat": lambda x: jnp.concatenate([SPLIT10(x), x[:3]]),
    "reverse": lambda x: jnp.flip(SPLIT10(x), 0),
    "softmax": lambda x: jax.nn.softmax(SPLIT10(x), axis=0),
    # ops along the other dim, the uneven one kept split (no gather)
    "slice_cols": lambda x: SPLIT10(x)[:, 3:11:2],
    "concat_cols": lambda x: jnp.concatenate([SPLIT10(x)[:, 1:2], SPLIT10(x)], 1),
    "reverse_cols": lambda x: jnp.flip(SPLIT10(x), 1),
    "reverse_size_one": lambda x: jnp.flip(SPLIT10(x)[:, 4:5], (0, 1)),
    "reflect_pad": lambda x: jnp.pad(SPLIT10(x), ((2, 2), (1, 1)), mode="reflect"),
    "edge_pad": lambda x: jnp.pad(SPLIT10(x), ((1, 1), (3, 0)), mode="edge"),
}


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("slice_cols", lambda x: x[:, 1:2]),
        ("concat_cols", lambda x: jnp.concatenate([jnp.flip(x[:, 1:2], 1), x], 1)),
        ("reverse_cols", lambda x: jnp.flip(x, 1) * 2),
    ],
)
def test_ops_along_a_kept_dim_leave_the_uneven_split_in_place(
    name: str, fn: Callable[[jax.Array], jax.Array]
) -> None:
    """66 rows over 8 devices (blocks of 9): slicing, concatenating or
    reversing the columns is local: only the result, which leaves the
    program whole (an uneven result cannot be split), is gathered."""
    split = constrained(MESH8, P("x"))
    compiled = check(lambda x: split(fn(split(x))), rand(66, 12))
    moved = compiled.partition_report.collectives
    assert [c.op for c in moved] == ["func.return"], compiled.collectives_text()


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_on_ten_rows_over_four_devices(name: str) -> None:
    check(OPS[name], rand(10, 16))


def test_uneven_vocabulary_cross_entropy() -> None:
    """Logits over a vocabulary of 1001 split over 8 devices (blocks of 126,
    the last one with 119 rows and 7 of padding)."""
    vocab = 1001
    split = constrained(MESH8, P(None, "x"))

    def loss(x: jax.Array, w: jax.Array, labels: jax.Array) -> jax.Array:
        logits = x @ split(w)
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.take_along_axis(logp, labels[:, None], axis=-1).mean()

    labels = np.random.default_rng(1).integers(0, vocab, 32).astype(np.int32)
    args = (rand(32, 64), rand(64, vocab, seed=2) * 0.1, labels)
    check(loss, *args)
    check(jax.grad(loss, argnums=1), *args)


def test_uneven_windows_conv_and_pool() -> None:
    """A height of 13 over 4 devices through a SAME conv and a max pool."""
    split = constrained(MESH24, P(None, "y"))

    def f(x: jax.Array, k: jax.Array) -> jax.Array:
        y = jax.lax.conv_general_dilated(
            split(x), k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        return jax.lax.reduce_window(
            y, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"
        )

    check(f, rand(2, 13, 8, 4), rand(3, 3, 4, 8, seed=1))
    check(
        jax.grad(lambda x, k: (f(x, k) ** 2).sum()),
        rand(2, 13, 8, 4),
        rand(3, 3, 4, 8, seed=1),
    )


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "bool"])
def test_a_size_one_dim_gathered_by_one_sum_keeps_every_bit(dtype: str) -> None:
    """`x[:, :1]` of a sequence split 8 ways is split as its input (one
    block holds the row, seven are padding); made whole, it is summed across
    devices from zeros (1,792 B per device) rather than gathered (7 blocks,
    7,168 B). Floats are summed on their bits: -0.0, NaN and inf come back
    as they were."""
    x = np.random.default_rng(3).standard_normal((8, 64, 32)).astype(np.float32)
    x[0, 0, :4] = [-0.0, np.nan, np.inf, -np.inf]
    x = np.asarray(jnp.asarray(x * 100).astype(dtype))
    sh = NamedSharding(MESH8, P(None, "x"))
    out = NamedSharding(MESH8, P())
    fn = lambda x: x[:, :1].reshape(8, 32)  # noqa: E731
    compiled = meshjit.jit(fn, in_shardings=sh, out_shardings=out).lower(x).compile()
    got = np.asarray(compiled(jax.device_put(x, sh)))
    want = x[:, 0]
    assert got.tobytes() == want.tobytes()
    kinds = [c.kind for c in compiled.partition_report.collectives]
    assert kinds == ["all-reduce"], compiled.partition_report.collectives


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axes", [("x", "y"), ("y", "x")])
def test_associative_scan_along_a_dim_split_over_two_axes(
    reverse: bool, axes: tuple[str, str]
) -> None:
    """`jax.lax.associative_scan` halves its operand until 2 and 1 rows are
    left, split over both axes (padded blocks of one row): each uneven dim
    is cut into its blocks at once. Cut axis by axis, row 1 of a 2-row value
    went to device (x=1, y=0) instead of (0, 1), and the scan's last (or,
    reversed, first) row read 0."""
    sharding = NamedSharding(MESH24, P(axes))

    def scan(v: jax.Array) -> jax.Array:
        return jax.lax.associative_scan(jnp.add, v, reverse=reverse, axis=0)

    x = np.arange(1, 65, dtype=np.float32)[:, None] * np.ones((1, 8), np.float32)
    compiled = meshjit.jit(scan, in_shardings=sharding).lower(x).compile()
    got = np.asarray(compiled(jax.device_put(x, sharding)))
    np.testing.assert_array_equal(got, np.asarray(jax.jit(scan)(x)))
