"""meshjit.jit against jax.jit on whole programs with the same shardings.

For an MLP, a transformer block, a conv net and an FSDP training step, both
compile the same function with the same in/out shardings on 8 CPU devices;
results must agree (rtol 1e-4) and so must the output shardings: those asked
for, and those left to propagation where the test says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import meshjit
from meshjit import Mesh, NamedSharding, P

pytestmark = pytest.mark.devices(8)

DEVICES = jax.devices()[:8]
MESH = Mesh(np.array(DEVICES).reshape(2, 4), ("data", "model"))


def sh(*spec: Any) -> NamedSharding:
    return NamedSharding(MESH, P(*spec))


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return (
        np.random.default_rng(seed + sum(shape))
        .standard_normal(shape)
        .astype(np.float32)
    )


def mlp(x: jax.Array, w1: jax.Array, w2: jax.Array) -> jax.Array:
    return jax.nn.gelu(x @ w1) @ w2


def layer_norm(x: jax.Array) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5)


def transformer_block(x: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
    b, s, d = x.shape
    heads = 2
    h = layer_norm(x)
    q = (h @ p["wq"]).reshape(b, s, heads, d // heads)
    k = (h @ p["wk"]).reshape(b, s, heads, d // heads)
    v = (h @ p["wv"]).reshape(b, s, heads, d // heads)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // heads)
    attn = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, -1), v)
    x = x + attn.reshape(b, s, d) @ p["wo"]
    return x + jax.nn.relu(layer_norm(x) @ p["w1"]) @ p["w2"]


def conv_net(x: jax.Array, k1: jax.Array, w: jax.Array) -> jax.Array:
    y = jax.lax.conv_general_dilated(
        x, k1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    y = jax.nn.relu(y)
    return y.mean(axis=(1, 2)) @ w


def fsdp_step(
    params: dict[str, jax.Array], x: jax.Array, y: jax.Array
) -> tuple[dict[str, jax.Array], jax.Array]:
    def loss(p: dict[str, jax.Array]) -> jax.Array:
        return ((jnp.tanh(x @ p["w1"]) @ p["w2"] - y) ** 2).mean()

    value, grads = jax.value_and_grad(loss)(params)
    return jax.tree.map(lambda a, g: a - 0.1 * g, params, grads), value


PARAMS = {k: rand(16, 16, seed=i) * 0.3 for i, k in enumerate(["wq", "wk", "wv", "wo"])}
PARAMS |= {"w1": rand(16, 32, seed=5) * 0.3, "w2": rand(32, 16, seed=6) * 0.3}
FSDP = {"w1": rand(16, 32, seed=7) * 0.3, "w2": rand(32, 4, seed=8) * 0.3}

CASES: list[tuple[str, Callable[..., Any], tuple[Any, ...], Any, Any]] = [
    (
        "mlp",
        mlp,
        (rand(16, 32), rand(32, 64), rand(64, 8)),
        (sh("data", None), sh(None, "model"), sh("model", None)),
        sh("data", None),
    ),
    (
        "transformer_block",
        transformer_block,
        (rand(4, 8, 16), PARAMS),
        (sh("data"), sh()),
        sh("data"),
    ),
    (
        "conv_net",
        conv_net,
        (rand(8, 6, 6, 4), rand(3, 3, 4, 8), rand(8, 4)),
        (sh("data"), sh(), sh()),
        sh("data"),
    ),
    (
        "fsdp_step",
        fsdp_step,
        (FSDP, rand(8, 16), rand(8, 4)),
        ({"w1": sh("model"), "w2": sh("model")}, sh("data"), sh("data")),
        ({"w1": sh("model"), "w2": sh("model")}, sh()),
    ),
]


def to_jax(tree: Any) -> Any:
    return jax.tree.map(
        lambda s: s.to_jax(), tree, is_leaf=lambda s: isinstance(s, NamedSharding)
    )


def specs(tree: Any) -> list[tuple[Any, ...]]:
    out = []
    for a in jax.tree.leaves(tree):
        parts = list(a.sharding.spec)
        while parts and parts[-1] is None:
            parts.pop()
        out.append(tuple(parts))
    return out


@pytest.mark.parametrize(
    ("fn", "args", "ins", "outs"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_same_results_and_output_shardings_as_jax(
    fn: Callable[..., Any], args: tuple[Any, ...], ins: Any, outs: Any
) -> None:
    got = meshjit.jit(fn, in_shardings=ins, out_shardings=outs)(*args)
    want = jax.jit(fn, in_shardings=to_jax(ins), out_shardings=to_jax(outs))(*args)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
        assert g.sharding == w.sharding
    assert specs(got) == specs(want)


def test_propagated_output_sharding_matches_jax() -> None:
    # No out_shardings: both propagate from the inputs.
    ins = (sh("data", None), sh(None, "model"), sh("model", None))
    args = CASES[0][2]
    got = meshjit.jit(mlp, in_shardings=ins)(*args)
    want = jax.jit(mlp, in_shardings=to_jax(ins))(*args)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert got.sharding == want.sharding


def _schedule(step: jax.Array) -> Any:
    lr = jax.lax.fori_loop(0, 3, lambda i, c: c * 0.5, 0.1)  # weak f32
    return (
        lr,
        step + 1,
        jnp.float32(2.0) * 3,
        {"n": jax.lax.fori_loop(0, 5, lambda i, c: c + 1, 0)},
    )


@pytest.mark.parametrize("sharded", [False, True], ids=["one_device", "sharded"])
def test_weakly_typed_results_stay_weak_as_under_jax_jit(sharded: bool) -> None:
    """A result of Python scalars (a learning rate, a loop counter) is
    weakly typed under jax.jit, so `bf16 * lr` stays bf16; meshjit's
    results carry the same weak types, on the first call and through the
    C++ dispatch after it, and strong ones stay strong."""
    step = jnp.int32(7)
    want = jax.tree.leaves(jax.jit(_schedule)(step))
    options = {"out_shardings": sh()} if sharded else {}
    f = meshjit.jit(_schedule, **options)
    for _ in range(3):  # the first call and the repeated ones
        got = jax.tree.leaves(f(step))
        assert [g.weak_type for g in got] == [w.weak_type for w in want]
        assert [g.dtype for g in got] == [w.dtype for w in want]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert [w.weak_type for w in want] == [True, False, False, True]
    params = jnp.ones(4, jnp.bfloat16)
    assert (params - got[0] * params).dtype == jnp.bfloat16


def test_float0_results_are_numpy_float0_arrays_as_under_jax_jit() -> None:
    """`jax.grad(..., allow_int=True)` gives an integer input a float0
    tangent; jax.jit returns it as a numpy float0 array, and so does
    meshjit (not the bool buffer the program computes), on every call."""

    def f(x: jax.Array, y: jax.Array) -> Any:
        return jax.grad(lambda a, b: (a * 2).sum(), argnums=(0, 1), allow_int=True)(
            x, y
        )

    x, y = np.ones((8,), np.float32), np.ones((8,), np.int32)
    want = jax.jit(f)(x, y)
    compiled = meshjit.jit(f)
    for _ in range(3):  # the first call and the repeated ones
        got = compiled(x, y)
        assert got[1].dtype == jax.dtypes.float0 == want[1].dtype
        assert got[1].shape == (8,)
        np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))


def test_a_jitted_function_called_in_another_trace_is_traced_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """jax's test_inner_jit_function_retracing: a jitted layer called ten
    times inside another jitted function is traced once (it was traced at
    every call), and the residuals jax's saved_residuals lists name it."""
    counts = {"inner": 0, "outer": 0}

    @meshjit.jit
    def inner(state: Any) -> Any:
        counts["inner"] += 1
        return 2 * state

    @meshjit.jit
    def outer(x: Any) -> Any:
        counts["outer"] += 1
        old = x
        for _ in range(10):
            x = inner(x)
        return x + old

    state = jnp.arange(5, dtype=jnp.uint32)
    np.testing.assert_array_equal(outer(state), np.arange(5) * 1025)
    np.testing.assert_array_equal(outer(state), np.arange(5) * 1025)
    assert counts == {"inner": 1, "outer": 1}

    @meshjit.jit
    def f(x: Any) -> Any:
        return jnp.sin(x) * x

    capsys.readouterr()
    from jax.ad_checkpoint import print_saved_residuals

    print_saved_residuals(lambda x: f(x) * 2, 3.0)
    assert "output of jitted function 'f'" in capsys.readouterr().out


def test_jax_tracing_configuration_changes_trace_again() -> None:
    """jax's api_test test_dot_precision_forces_retrace and
    test_user_trace_context_hooks: a setting that changes what a function
    traces to (matmul precision, a user context) traces it again; the
    executable of the old setting was reused."""
    traces = {"f": 0, "g": 0}

    @meshjit.jit
    def f(x: Any) -> Any:
        traces["f"] += 1
        return jnp.dot(x, x)

    x = jnp.ones((2, 2))
    f(x)
    f(x)
    with jax.default_matmul_precision("tensorfloat32"):
        f(x)
    assert traces["f"] == 2
    assert "jax_default_matmul_precision" in f.cache_info().log[-1]

    mine = jax.make_user_context()

    @meshjit.jit
    def g(x: Any) -> Any:
        traces["g"] += 1
        return x

    g(1.0)
    with mine(2):
        g(1.0)
    with mine(3):
        g(1.0)
        with mine(4):
            g(1.0)
    assert traces["g"] == 4


def test_a_leaked_tracer_is_reported_as_jax_reports_it() -> None:
    """jax's test_escaped_tracer_omnistaging: a function that uses a tracer
    an earlier trace leaked (a side effect stored it) raises jax's
    UnexpectedTracerError, not an IndexError from meshjit's lowering (or
    nothing at all)."""
    leaked: list[Any] = []

    @meshjit.jit
    def f() -> None:
        leaked.append(jnp.add(1, 1))

    f()

    def use(x: Any) -> Any:
        return jnp.add(leaked[0], x)

    def scanned() -> None:
        def body(c: Any, _: Any) -> tuple[Any, None]:
            jnp.add(leaked[0], 1)
            return c, None

        jax.lax.scan(body, None, None, length=2)

    for fun, args in ((use, (1.0,)), (scanned, ())):
        for jit in (jax.jit, meshjit.jit):
            with pytest.raises(jax.errors.UnexpectedTracerError, match="created on"):
                jit(fun)(*args)


def test_eval_shape_gives_the_out_shardings_as_jax() -> None:
    """jit(...).eval_shape: an output whose sharding out_shardings gives
    carries it (jax's test_eval_shape_out_shardings); others carry none."""
    one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    row = jax.sharding.NamedSharding(mesh, jax.P("x"))
    cases: list[tuple[Any, Any]] = [
        (lambda x: x * 2, one),
        (lambda x: (x * 2, x.sum()), (row, None)),
    ]
    for fun, out in cases:
        want = jax.jit(fun, out_shardings=out).eval_shape(np.arange(8.0))
        got = meshjit.jit(fun, out_shardings=out).eval_shape(np.arange(8.0))
        assert got == want


def test_out_shardings_memory_kinds_are_where_results_land() -> None:
    """out_shardings in another memory (pinned_host): the results are there,
    as under jax.jit (meshjit reported and returned them in device memory),
    on every call, and Compiled.output_shardings says so."""
    mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    s = jax.sharding.NamedSharding(mesh, jax.P("x"))
    host = s.with_memory_kind("pinned_host")
    x = jax.device_put(np.arange(16.0), s)

    def f(a: Any) -> Any:
        return a * 2, a + 1

    for jit in (jax.jit, meshjit.jit):
        g = jit(f, out_shardings=(host, s))
        for _ in range(3):
            outs = g(x)
            assert [o.sharding.memory_kind for o in outs] == ["pinned_host", "device"]
        assert g.lower(x).compile().output_shardings[0] == host
        np.testing.assert_array_equal(
            np.asarray(jax.device_put(outs[0], s)), np.arange(16.0) * 2
        )
