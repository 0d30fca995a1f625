"""Hostile input to meshjit.jit: a clear exception or the right answer, never between.

Data that is legal but awkward (NaN/inf, zero-size dims, 0-d arrays, narrow and
complex dtypes, donated buffers) must give what the unsharded jax.jit run gives,
with the requested output sharding; arguments and shardings that are wrong must
raise meshjit's errors naming the argument (its key path), the dim or the axis.
"""

from __future__ import annotations

import warnings
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

MESH = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))


def ns(*spec: Any) -> NamedSharding:
    return NamedSharding(MESH, P(*spec))


def unsharded(fn: Callable[..., Any], *args: Any) -> list[np.ndarray[Any, Any]]:
    one = jax.devices()[0]
    outs = jax.jit(fn)(*[jax.device_put(a, one) for a in args])
    return [np.asarray(o) for o in jax.tree.leaves(outs)]


def same(got: Any, want: list[np.ndarray[Any, Any]]) -> None:
    leaves = jax.tree.leaves(got)
    assert len(leaves) == len(want)
    for g, w in zip(leaves, want, strict=True):
        assert isinstance(g, jax.Array)
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        np.testing.assert_array_equal(np.asarray(g), w)  # NaN == NaN here


# Legal but awkward data ---------------------------------------------------------

SPECIALS = np.array([np.nan, np.inf, -np.inf, 1.0, -0.0, 0.0, 3.0, -2.0], np.float32)


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("sum", lambda a: a.sum(axis=0)),
        ("max", lambda a: a.max(axis=1)),  # XLA's all-reduce max drops NaN
        ("min_all", lambda a: a.min()),
        ("argmax", lambda a: jnp.argmax(a, axis=0)),
        ("scale", lambda a: a * 2.0 - 1.0),
        ("dot", lambda a: a @ a.T),
        ("transpose", lambda a: a.T),
    ],
)
def test_nan_and_inf_propagate_as_unsharded(name: str, fn: Callable[..., Any]) -> None:
    x = np.stack([np.roll(SPECIALS, k) for k in range(8)])  # every row has both
    got = meshjit.jit(fn, in_shardings=ns("x", "y"))(x)
    same(got, unsharded(fn, x))


@pytest.mark.parametrize("dtype", [np.float32, jnp.bfloat16, np.float16])
@pytest.mark.parametrize("combiner", ["max", "min"])
@pytest.mark.parametrize(
    "out_spec", [("x",), ("x", "y")], ids=["all-reduce", "scatter"]
)
def test_float_extremum_across_devices_keeps_every_value(
    dtype: Any, combiner: str, out_spec: tuple[str, ...]
) -> None:
    """max/min over a split dim reduce integer keys ordered as the floats are:
    negative values, -inf, -0.0, +inf and NaN come back as unsharded (rows
    without NaN too, so the key order itself is checked)."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((8, 32)) * 100).astype(np.float32)
    x[0] = -np.abs(x[0])  # a row of negatives only
    x[1, 3], x[2, 30], x[3, 9] = -np.inf, np.inf, np.nan
    x[4, :] = -0.0
    x[5, 17], x[6, 4] = np.nan, -np.inf
    x = x.astype(dtype)

    def fn(a: jax.Array) -> jax.Array:
        return a.max(axis=1) if combiner == "max" else a.min(axis=1)

    f = meshjit.jit(fn, in_shardings=ns("x", "y"), out_shardings=ns(out_spec))
    got = f(x)
    (want,) = unsharded(fn, x)
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    # as f32: numpy's NaN == NaN in assert_array_equal skips bfloat16
    got32, want32 = np.asarray(got, np.float32), np.asarray(want, np.float32)
    np.testing.assert_array_equal(got32, want32)
    assert np.isnan(got32).sum() == 2  # rows 3 and 5 hold a NaN
    finite = np.isfinite(got32)
    assert (np.signbit(got32) == np.signbit(want32))[finite].all()  # -0.0 too


ZERO_CASES = [
    ("sum", lambda a: a.sum(axis=0), (0, 8), P("x", "y"), False),
    ("sum", lambda a: a.sum(axis=0), (0,), P(("x", "y")), True),
    ("mul", lambda a: a * 2.0, (0,), P("x"), False),
    pytest.param("mul", lambda a: a * 2.0, (0,), P("x"), True, id="gather"),
    pytest.param(
        "concat",
        lambda a: jnp.concatenate([a, a], axis=0),
        (0,),
        P("x"),
        False,
        id="concat",
    ),
    pytest.param("mul", lambda a: a * 2.0, (0, 8), P("x", "y"), False, id="out"),
]


@pytest.mark.parametrize(("name", "fn", "shape", "spec", "replicated_out"), ZERO_CASES)
def test_zero_size_dims(
    name: str,
    fn: Callable[..., Any],
    shape: tuple[int, ...],
    spec: P,
    replicated_out: bool,
) -> None:
    x = np.zeros(shape, np.float32)
    options = {"out_shardings": ns()} if replicated_out else {}
    got = meshjit.jit(fn, in_shardings=NamedSharding(MESH, spec), **options)(x)
    same(got, unsharded(fn, x))


def test_zero_d_arrays_in_and_out() -> None:
    def fn(s: jax.Array, v: jax.Array) -> Any:
        return s * 2.0, (v * s).sum(), s

    s, v = np.float32(1.5), np.arange(8, dtype=np.float32)
    f = meshjit.jit(fn, in_shardings=(ns(), ns("x")), out_shardings=(ns(), ns(), ns()))
    got = f(s, v)
    same(got, unsharded(fn, s, v))
    assert all(o.sharding.is_fully_replicated for o in got)


def test_zero_d_array_with_a_sharded_spec_is_an_error() -> None:
    f = meshjit.jit(lambda s: s * 2.0, in_shardings=ns("x"))
    with pytest.raises(meshjit.ShardingError, match=r"`s` \(f32\[\]\).*rank 0"):
        f(np.float32(1.0))


DTYPES = [
    np.int8,
    np.uint8,
    np.int32,
    np.uint32,
    np.bool_,
    jnp.bfloat16,
    np.float16,
    np.complex64,
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_dtypes_move_and_reduce_bitwise(dtype: Any) -> None:
    """Small integer values keep every sum exact, so any order is bitwise equal."""

    def fn(a: jax.Array) -> Any:
        total = a.any(axis=0) if a.dtype == np.bool_ else a.sum(axis=0)
        outs = [a.T, total, jnp.flip(a, 0), jnp.concatenate([a, a], 1)]
        if not jnp.iscomplexobj(a):  # complex numbers have no max
            outs.append(a.max(axis=1))
        return tuple(outs)

    x = (np.arange(8 * 16).reshape(8, 16) % 5).astype(dtype)
    if dtype == np.complex64:
        x = (x + 1j * x[::-1]).astype(np.complex64)
    f = meshjit.jit(fn, in_shardings=ns("x", "y"), out_shardings=ns("y"))
    got = f(x)
    same(got, unsharded(fn, x))
    assert all(o.sharding.is_equivalent_to(ns("y"), o.ndim) for o in got)


def test_float16_math_within_tolerance() -> None:
    fn = lambda a, b: jnp.tanh(a @ b)  # noqa: E731
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (8, 16)).astype(np.float16)
    b = rng.uniform(-1, 1, (16, 8)).astype(np.float16) / 16
    got = meshjit.jit(fn, in_shardings=(ns("x", "y"), ns("y")))(a, b)
    (want,) = unsharded(fn, a, b)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got, np.float32), want, atol=2e-3)


# Donation -----------------------------------------------------------------------


def test_donated_argument_reused_is_an_error_not_a_wrong_answer() -> None:
    f = meshjit.jit(
        lambda a: a * 2.0, in_shardings=ns("x"), out_shardings=ns("x"), donate_argnums=0
    )
    a = jax.device_put(np.ones((8, 4), np.float32), ns("x"))
    np.testing.assert_array_equal(np.asarray(f(a)), 2.0)
    assert a.is_deleted()
    with pytest.raises(meshjit.ShardingError, match=r"`a`.*donated.*deleted"):
        f(a)


def test_same_array_donated_and_passed_again_is_an_error() -> None:
    f = meshjit.jit(
        lambda a, b: a * b,
        in_shardings=ns("x"),
        out_shardings=ns("x"),
        donate_argnums=0,
    )
    a = jax.device_put(np.ones((8, 4), np.float32), ns("x"))
    with pytest.raises(meshjit.ShardingError, match="donated argument `a` and as `b`"):
        f(a, a)
    assert not a.is_deleted()


def test_unusable_donation_warns_and_keeps_the_value() -> None:
    """With out_shardings given (jax warns then too); with outputs left to
    propagation on several devices jax hands XLA every donation and says
    nothing of those unused, and so does meshjit."""
    replicated = NamedSharding(MESH, P())
    f = meshjit.jit(
        lambda a: a.sum(),
        in_shardings=ns("x"),
        out_shardings=replicated,
        donate_argnums=0,
    )
    a = jax.device_put(np.ones((8, 4), np.float32), ns("x"))
    with pytest.warns(UserWarning, match="donated buffers were not usable"):
        assert float(f(a)) == 32.0
    np.testing.assert_array_equal(np.asarray(a), 1.0)
    g = meshjit.jit(lambda a: a.sum(), in_shardings=ns("x"), donate_argnums=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(g(a)) == 32.0
    np.testing.assert_array_equal(np.asarray(a), 1.0)


def test_donation_reuses_a_block_of_the_same_size() -> None:
    """As jax: a donated buffer is reused by a result of the same dtype whose
    per-device block is as large, whatever its shape."""
    y = jax.device_put(np.arange(32.0).reshape(32, 1), ns("x"))
    f = meshjit.jit(lambda v: v.reshape(32), out_shardings=ns("x"), donate_argnums=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = f(y)
    assert y.is_deleted()
    np.testing.assert_array_equal(np.asarray(out), np.arange(32.0))


# Wrong calls: meshjit's errors, naming what is wrong ----------------------------

X = np.ones((8, 4), np.float32)


def test_wrong_number_of_in_shardings() -> None:
    f = meshjit.jit(lambda a, b: a + b, in_shardings=(ns("x"),))
    with pytest.raises(meshjit.ShardingError, match=r"length 1.*2 dynamic arguments"):
        f(X, X)


def test_in_shardings_structure_mismatch_names_the_key_path() -> None:
    f = meshjit.jit(
        lambda d: d["a"] + d["b"], in_shardings=({"a": ns("x"), "c": ns()},)
    )
    with pytest.raises(meshjit.ShardingError, match=r"key path d.*\['a', 'c'\]"):
        f({"a": X, "b": X})


def test_out_shardings_structure_mismatch() -> None:
    f = meshjit.jit(lambda a: (a, a), out_shardings=(ns(), ns(), ns()))
    with pytest.raises(meshjit.ShardingError, match=r"out_shardings.*length 3"):
        f(X)


def test_non_divisible_dim_names_the_key_path_dim_and_axis() -> None:
    f = meshjit.jit(lambda d: d["w"] * 2.0, in_shardings=({"w": ns("y")},))
    with pytest.raises(
        meshjit.ShardingError, match=r"dim 0 of `d\['w'\]`.*\"y\" \(size 4\).*6"
    ):
        f({"w": np.ones((6, 4), np.float32)})


def test_non_divisible_out_sharding_names_the_result() -> None:
    f = meshjit.jit(lambda a: a * 2.0, out_shardings=ns("y"))
    with pytest.raises(meshjit.ShardingError, match=r"`result`.*not divisible by 4"):
        f(np.ones((6,), np.float32))


def test_unknown_axis() -> None:
    mesh = meshjit.Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))
    with pytest.raises(ValueError, match="q"):
        meshjit.jit(lambda a: a, in_shardings=meshjit.NamedSharding(mesh, P("q")))(X)
    f = meshjit.pjit(lambda a: a, in_shardings=P("q"))
    with mesh, pytest.raises(meshjit.ShardingError, match=r"\bq\b"):
        f(X)


def test_unhashable_static_argument() -> None:
    f = meshjit.jit(lambda a, n: a * len(n), static_argnums=1)
    with pytest.raises(
        meshjit.JitArgumentError, match=r"static argument `n`.*hashable"
    ):
        f(X, [1, 2])


@pytest.mark.parametrize("value", ["hello", object(), {1, 2}])
def test_non_array_argument_that_is_not_static(value: object) -> None:
    f = meshjit.jit(lambda a, n: a)
    with pytest.raises(meshjit.JitArgumentError, match=r"argument `n`.*static"):
        f(X, value)


def test_errors_leave_the_function_usable() -> None:
    """A rejected call does not poison the cache: the next good call works."""
    f = meshjit.jit(lambda a: a * 2.0, in_shardings=ns("y"))
    with pytest.raises(meshjit.ShardingError):
        f(np.ones((6, 4), np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(np.asarray(f(X)), 2.0)
    assert f.cache_info().compiles == 1


# Devices: sub-meshes, shuffled device orders, arguments elsewhere ---------------

LOW = Mesh(np.array(jax.devices()[:4]), ("x",))
HIGH = Mesh(np.array(jax.devices()[4:8]), ("x",))
SHUFFLED = Mesh(
    np.array(jax.devices()[:8])[[3, 1, 7, 0, 5, 2, 6, 4]].reshape(2, 4), ("x", "y")
)


def test_mesh_on_the_upper_half_of_the_devices() -> None:
    fn = lambda a: (a * 2.0).T  # noqa: E731
    f = meshjit.jit(
        fn,
        in_shardings=NamedSharding(HIGH, P("x")),
        out_shardings=NamedSharding(HIGH, P(None, "x")),
    )
    got = f(X * np.arange(4, dtype=np.float32))
    same(got, unsharded(fn, X * np.arange(4, dtype=np.float32)))
    assert got.sharding.device_set == set(jax.devices()[4:8])


def test_argument_committed_to_a_shuffled_mesh() -> None:
    fn = lambda a: (a @ a.T).sum(axis=1)  # noqa: E731
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    got = meshjit.jit(fn)(jax.device_put(x, NamedSharding(SHUFFLED, P("x", "y"))))
    same(got, unsharded(fn, x))


def test_argument_on_other_devices_than_in_shardings() -> None:
    f = meshjit.jit(lambda a: a * 2.0, in_shardings=NamedSharding(LOW, P("x")))
    with pytest.raises(meshjit.ShardingError, match=r"`a`.*committed"):
        f(jax.device_put(X, NamedSharding(HIGH, P("x"))))


def test_out_shardings_on_other_devices() -> None:
    f = meshjit.jit(
        lambda a: a * 2.0,
        in_shardings=NamedSharding(LOW, P("x")),
        out_shardings=NamedSharding(HIGH, P("x")),
    )
    with pytest.raises(meshjit.ShardingError, match=r"incompatible devices.*\[4, 5"):
        f(X)


def test_constraint_on_other_devices_is_an_error_not_ignored() -> None:
    """Same axis names and sizes, other devices: it used to be silently dropped
    (fixed in frontend/resolve.py)."""

    def fn(a: jax.Array) -> jax.Array:
        return meshjit.with_sharding_constraint(a, NamedSharding(HIGH, P("x")))

    f = meshjit.jit(fn, in_shardings=NamedSharding(LOW, P("x")))
    with pytest.raises(meshjit.ShardingError, match=r"constraint.*\[4, 5, 6, 7\]"):
        f(X)


def test_degenerate_outputs_and_arguments() -> None:
    assert meshjit.jit(lambda a: None)(X) is None
    assert meshjit.jit(lambda a: ())(X) == ()
    got = meshjit.jit(
        lambda: jnp.ones(8), out_shardings=NamedSharding(SHUFFLED, P("x"))
    )()
    np.testing.assert_array_equal(np.asarray(got), 1.0)
    deep = np.zeros((2,) + (1,) * 20, np.float32)
    same(
        meshjit.jit(lambda a: a + 1.0, in_shardings=NamedSharding(SHUFFLED, P("x")))(
            deep
        ),
        [deep + 1.0],
    )
