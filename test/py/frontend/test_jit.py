"""meshjit.jit / pjit end to end: each parameter, the cache and each AOT stage.

Functions are small and compiled once per module where possible; numerics are
compared with numpy or jax.jit on one device.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import meshjit
from meshjit import Mesh, NamedSharding, P

pytestmark = pytest.mark.devices(8)

DEVICES = jax.devices()[:8]
MESH8 = Mesh(np.array(DEVICES), ("x",))
MESH24 = Mesh(np.array(DEVICES).reshape(2, 4), ("x", "y"))


def ns(mesh: Mesh, *spec: Any) -> NamedSharding:
    return NamedSharding(mesh, P(*spec))


def spec_of(a: jax.Array) -> tuple[Any, ...]:
    """The array's PartitionSpec with trailing Nones dropped."""
    parts = list(a.sharding.spec)  # type: ignore[attr-defined]
    while parts and parts[-1] is None:
        parts.pop()
    return tuple(parts)


def mlp(x: jax.Array, w1: jax.Array, w2: jax.Array) -> jax.Array:
    return jax.nn.relu(x @ w1) @ w2


RNG = np.random.default_rng(0)
X = RNG.standard_normal((16, 32), dtype=np.float32)
W1 = RNG.standard_normal((32, 64), dtype=np.float32)
W2 = RNG.standard_normal((64, 8), dtype=np.float32)
MLP = meshjit.jit(
    mlp,
    in_shardings=(ns(MESH24, "x", None), ns(MESH24, None, "y"), ns(MESH24, "y", None)),
    out_shardings=ns(MESH24, "x", None),
)


def test_mlp_in_out_shardings_numerics_and_output_sharding() -> None:
    out = MLP(X, W1, W2)
    np.testing.assert_allclose(out, mlp(X, W1, W2), rtol=1e-4, atol=1e-4)
    assert isinstance(out, jax.Array)
    assert spec_of(out) == ("x",)
    assert out.sharding.mesh.shape == {"x": 2, "y": 4}  # type: ignore[attr-defined]


def test_cache_counts_traces_compiles_and_hits() -> None:
    f = meshjit.jit(lambda a: a * 2, in_shardings=ns(MESH8, "x"))
    a8 = np.arange(8, dtype=np.float32)
    f(a8)
    f(a8 + 1)
    f(np.arange(16, dtype=np.float32))
    info = f.cache_info()
    assert (info.traces, info.compiles, info.hits) == (2, 2, 1)
    assert "argument `a`: float32[8] -> float32[16]" in info.log[-1]
    f.clear_cache()
    f(a8)
    assert f.cache_info().traces == 3


def test_static_arg_type_is_part_of_the_key_and_explained(
    caplog: pytest.LogCaptureFixture,
) -> None:
    f = meshjit.jit(lambda x, n: x * n, static_argnums=1)
    x = jnp.arange(4.0)
    meshjit.explain_cache_misses(True)
    try:
        with caplog.at_level(logging.WARNING, logger="meshjit.jit"):
            f(x, 2)
            f(x, 2.0)
            f(x, 2)
    finally:
        meshjit.explain_cache_misses(False)
    assert f.cache_info().traces == 2
    assert "static argument `n`: 2 (int) -> 2.0 (float)" in caplog.text


def test_new_committed_sharding_recompiles_without_retrace() -> None:
    f = meshjit.jit(lambda a: a + 1)
    a = np.arange(8, dtype=np.float32)
    out1 = f(jax.device_put(a, ns(MESH8, "x").to_jax()))
    out2 = f(jax.device_put(a, ns(MESH8).to_jax()))
    info = f.cache_info()
    assert (info.traces, info.compiles) == (1, 2)
    assert "argument `a` sharding" in info.log[-1]
    assert spec_of(out1) == ("x",)  # in_shardings=None: follows the committed arg
    assert spec_of(out2) == ()


def test_prefix_broadcast_over_dict_and_list_arguments() -> None:
    def f(params: dict[str, jax.Array], xs: list[jax.Array]) -> jax.Array:
        return params["w"].sum() + params["b"].sum() + xs[0].sum() + xs[1].sum()

    g = meshjit.jit(f, in_shardings=[ns(MESH8, "x"), [ns(MESH8), ns(MESH8, "x")]])
    params = {"w": np.ones(8, np.float32), "b": np.ones(16, np.float32)}
    xs = [np.ones(4, np.float32), np.ones(8, np.float32)]
    assert float(g(params, xs)) == 36.0
    in_sh, _ = g.lower(params, xs).compile().input_shardings
    assert in_sh[0]["b"].spec == jax.P("x")
    assert in_sh[1][0].spec == jax.P()


def test_out_shardings_prefix_over_dict_output() -> None:
    f = meshjit.jit(
        lambda a: {"s": a * 2, "t": a + 1},
        in_shardings=ns(MESH8),
        out_shardings={"s": ns(MESH8, "x"), "t": None},
    )
    out = f(np.arange(8, dtype=np.float32))
    assert spec_of(out["s"]) == ("x",)
    np.testing.assert_array_equal(out["t"], np.arange(8) + 1)


def test_jax_shardings_are_accepted_and_mixed() -> None:
    f = meshjit.jit(
        lambda a, b: a @ b,
        in_shardings=(ns(MESH24, "x", None).to_jax(), ns(MESH24)),
        out_shardings=jax.sharding.NamedSharding(MESH24.to_jax(), jax.P("x", "y")),
    )
    out = f(X[:, :8], W2[:8])
    np.testing.assert_allclose(out, X[:, :8] @ W2[:8], rtol=1e-5, atol=1e-5)
    assert spec_of(out) == ("x", "y")


def test_uncommitted_inputs_numpy_and_python_scalars() -> None:
    f = meshjit.jit(lambda a, s: a * s, in_shardings=(ns(MESH8, "x"), ns(MESH8)))
    out = f(jnp.arange(8.0), 3.0)
    np.testing.assert_array_equal(out, np.arange(8.0) * 3)
    assert out.dtype == jnp.float32


def test_with_sharding_constraint_becomes_sdy_constraint_and_is_honoured() -> None:
    def f(a: jax.Array) -> jax.Array:
        return meshjit.with_sharding_constraint(a * 2, ns(MESH8, "x")) + 1

    g = meshjit.jit(f)
    lowered = g.lower(jnp.arange(16.0))
    assert "sdy.sharding_constraint" in lowered.as_text()
    out = g(jnp.arange(16.0))
    assert spec_of(out) == ("x",)  # propagated from the constraint
    np.testing.assert_array_equal(out, np.arange(16.0) * 2 + 1)


def test_with_sharding_constraint_bare_spec_under_mesh_and_none_leaf() -> None:
    def f(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
        return meshjit.with_sharding_constraint((a, b), (P("x"), None))

    with MESH8:
        out = meshjit.jit(f)(jnp.arange(8.0), jnp.arange(8.0))
    assert spec_of(out[0]) == ("x",)


def test_aot_stages_text_and_compiled_properties() -> None:
    lowered = MLP.lower(
        jax.ShapeDtypeStruct((16, 32), jnp.float32),
        jax.ShapeDtypeStruct((32, 64), jnp.float32),
        jax.ShapeDtypeStruct((64, 8), jnp.float32),
    )
    traced = lowered.as_text("traced")
    assert "sdy.sharding" not in traced
    assert "dot_general" in traced
    sharded = lowered.as_text()
    assert 'sdy.mesh @mesh = <["x"=2, "y"=4]>' in sharded
    assert '#sdy.sharding<@mesh, [{}, {"y"}]>' in sharded
    propagated = lowered.as_text(stage="propagated")
    assert "sdy.sharding_per_value" in propagated or propagated.count("sdy") > 5
    partitioned = lowered.as_text(stage="partitioned")
    assert "sdy.manual_computation" in partitioned
    assert "all_reduce" in partitioned
    compiled = lowered.compile()
    hlo = compiled.as_text()
    assert "HloModule" in hlo
    assert "all-reduce" in hlo
    assert compiled.output_shardings.spec == jax.P("x", None)
    assert compiled.input_shardings[0][1].spec == jax.P(None, "y")
    assert compiled.cost_analysis()["flops"] > 0
    assert compiled.memory_analysis().argument_size_in_bytes > 0
    assert [c.kind for c in compiled.partition_report.collectives] == ["all-reduce"]
    out = compiled(X, W1, W2)
    np.testing.assert_allclose(out, mlp(X, W1, W2), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="unknown stage"):
        lowered.as_text(stage="bogus")
    with pytest.raises(ValueError, match="unknown dialect: 'bogus'"):
        lowered.as_text(dialect="bogus")


def test_trace_and_eval_shape() -> None:
    traced = MLP.trace(X, W1, W2)
    assert traced.out_info.shape == (16, 8)
    assert "stablehlo.dot_general" in traced.as_text()
    assert MLP.eval_shape(X, W1, W2).shape == (16, 8)
    assert traced.lower().compile().output_shardings.spec == jax.P("x", None)


def test_static_argnames_seed_example_g_x_n() -> None:
    # The seed page's example: a Python loop bound by a static argument.
    def g(x: jax.Array, n: int) -> jax.Array:
        i = 0
        while i < n:
            i += 1
        return x + i

    g_jit = meshjit.jit(g, static_argnames=["n"])
    assert float(g_jit(10, 20)) == 30.0
    assert float(g_jit(10, n=20)) == 30.0  # by name too: argnums inferred
    assert g_jit.cache_info().traces == 2  # positional vs keyword call forms


def test_decorator_factory_form() -> None:
    @meshjit.jit(static_argnames="n")
    def power(x: jax.Array, n: int) -> jax.Array:
        return x**n

    assert float(power(2.0, n=3)) == 8.0
    assert isinstance(power, meshjit.JitFunction)


def test_selu_seed_example() -> None:
    def selu(x: jax.Array, alpha: float = 1.67, lmbda: float = 1.05) -> jax.Array:
        return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)

    selu_jit = meshjit.jit(selu)
    x = jnp.arange(5.0)
    np.testing.assert_allclose(selu_jit(x), selu(x), rtol=1e-6)


def test_donation_reuses_buffer_and_marks_it_deleted() -> None:
    f = meshjit.jit(lambda a, b: a + b, donate_argnums=0, in_shardings=ns(MESH8, "x"))
    a = jax.device_put(np.arange(8, dtype=np.float32), ns(MESH8, "x").to_jax())
    b = jax.device_put(np.ones(8, dtype=np.float32), ns(MESH8, "x").to_jax())
    out = f(a, b)
    assert a.is_deleted()
    assert not b.is_deleted()
    np.testing.assert_array_equal(out, np.arange(8) + 1)
    compiled = f.lower(out, b).compile()
    assert "tf.aliasing_output = 0" in compiled.as_text("partitioned")
    assert compiled.memory_analysis().alias_size_in_bytes == 4


def test_donate_argnames_and_unusable_donation_warns() -> None:
    f = meshjit.jit(lambda a, b: a.sum() + b.sum(), donate_argnames="b")
    with pytest.warns(UserWarning, match=r"not usable: f32\[8\] `b` \(no output"):
        f(jnp.ones(8), jnp.ones(8))


def test_keyword_arguments_with_in_shardings_by_parameter() -> None:
    # jax#17400: JAX refuses kwargs with in_shardings; meshjit matches by name.
    def f(x: jax.Array, w: jax.Array) -> jax.Array:
        return x @ w

    g = meshjit.jit(f, in_shardings=(ns(MESH8, "x"), ns(MESH8)))
    out = g(X[:8, :8], w=W2[:8])
    assert spec_of(out) == ("x",)
    h = meshjit.jit(f, in_shardings={"w": ns(MESH8, None, "x")})
    out = h(w=W2[:8], x=X[:8, :8])
    assert spec_of(out) == (None, "x")
    np.testing.assert_allclose(out, X[:8, :8] @ W2[:8], rtol=1e-5, atol=1e-5)


def test_keep_unused() -> None:
    def f(a: jax.Array, unused: jax.Array) -> jax.Array:
        return a + 1

    pruned = meshjit.jit(f).lower(jnp.ones(8), jnp.ones(4)).as_text()
    kept = meshjit.jit(f, keep_unused=True).lower(jnp.ones(8), jnp.ones(4)).as_text()
    assert "tensor<4xf32>" not in pruned
    assert "tensor<4xf32>" in kept
    np.testing.assert_array_equal(meshjit.jit(f)(jnp.ones(8), jnp.ones(4)), 2.0)


def test_device_and_backend_place_on_one_device() -> None:
    f = meshjit.jit(lambda a: a * 2, device=DEVICES[2])
    a = jax.device_put(jnp.arange(4.0), DEVICES[5])
    out = f(a)
    assert out.sharding == jax.sharding.SingleDeviceSharding(DEVICES[2])
    np.testing.assert_array_equal(out, np.arange(4.0) * 2)
    g = meshjit.jit(lambda a: a + 1, backend="cpu")
    assert g(jnp.ones(2)).sharding.device_set == {jax.devices("cpu")[0]}


def test_no_shardings_runs_on_the_default_device() -> None:
    out = meshjit.jit(lambda a: a + 1)(np.ones(3, np.float32))
    assert out.sharding == jax.sharding.SingleDeviceSharding(jax.devices()[0])


def test_inline_splices_body_into_an_enclosing_trace() -> None:
    inner = meshjit.jit(lambda a: a * 3.0, inline=True)
    nested = meshjit.jit(lambda a: a * 3.0)
    jaxpr_inline = str(jax.make_jaxpr(lambda a: inner(a) + 1)(1.0))
    jaxpr_nested = str(jax.make_jaxpr(lambda a: nested(a) + 1)(1.0))
    assert "jit[" not in jaxpr_inline
    assert "mul" in jaxpr_inline
    assert "jit[" in jaxpr_nested
    assert float(meshjit.jit(lambda a: inner(a) + 1)(2.0)) == 7.0


def test_compiler_options_reach_xla() -> None:
    f = meshjit.jit(
        lambda a: a + 1, compiler_options={"xla_cpu_enable_fast_math": True}
    )
    np.testing.assert_array_equal(f(jnp.ones(2)), 2.0)
    bad = meshjit.jit(lambda a: a + 1, compiler_options={"xla_no_such_flag": 1})
    with pytest.raises(jax.errors.JaxRuntimeError, match="xla_no_such_flag"):
        bad(jnp.ones(2))


def test_abstracted_axes_is_rejected_by_name() -> None:
    with pytest.raises(NotImplementedError, match="abstracted_axes"):
        meshjit.jit(lambda a: a, abstracted_axes=("n",))


# pjit and the mesh context ------------------------------------------------------


def test_pjit_convolve_seed_example() -> None:
    # The seed pjit page's example, with 8 CPU devices instead of 8 TPU cores.
    from meshjit.sharding import Mesh as SMesh

    devices = DEVICES
    mesh = SMesh(np.array(devices), ("devices",))
    f = meshjit.pjit(
        lambda x: jnp.convolve(x, jnp.asarray([0.5, 1.0, 0.5]), mode="same"),
        in_shardings=None,
        out_shardings=P("devices"),
    )
    with mesh:
        out = f(jnp.arange(8 * 5))
    expected = np.convolve(np.arange(40.0), [0.5, 1.0, 0.5], mode="same")
    np.testing.assert_allclose(out, expected)
    assert spec_of(out) == ("devices",)
    assert out.sharding.shard_shape((40,)) == (5,)


def test_pjit_none_means_replicated_under_mesh_and_mesh_is_per_call_site() -> None:
    f = meshjit.pjit(lambda a: a * 2, in_shardings=None, out_shardings=P("x"))
    with MESH8:
        out8 = f(jnp.arange(8.0))
    other = Mesh(np.array(DEVICES[::-1]), ("x",))
    with other:
        out_other = f(jnp.arange(8.0))
    assert out8.sharding.mesh.devices.tolist() == DEVICES  # type: ignore[attr-defined]
    assert out_other.sharding.mesh.devices.tolist() == DEVICES[::-1]  # type: ignore[attr-defined]
    # A new context mesh traces again (bare specs inside resolve against it),
    # as in jax, whose trace context holds the mesh context.
    assert f.cache_info().traces == 2
    assert f.cache_info().compiles == 2
    sharded = jax.device_put(np.arange(8.0, dtype=np.float32), ns(MESH8, "x").to_jax())
    with MESH8, pytest.raises(meshjit.ShardingError, match="pjit: the sharding of"):
        f(sharded)  # None = replicated, so a committed P('x') argument mismatches


def test_wrappers_of_one_function_share_traces_and_executables() -> None:
    """`pjit(f, ...)` made again per call does not trace again (jax's caches
    are keyed by function and options); other options are another cache."""
    traced = []

    def f(a: jax.Array) -> jax.Array:
        traced.append(1)
        return a * 2

    with MESH8:
        for _ in range(3):
            meshjit.pjit(f, in_shardings=P("x"))(jnp.arange(8.0))
        assert len(traced) == 1
        meshjit.pjit(f, in_shardings=P())(jnp.arange(8.0))
    assert len(traced) == 2


def test_uncommitted_array_on_several_devices_is_refused() -> None:
    # jax has no public way to make one; its own test builds it like this.
    from jax._src import array as jax_array

    sharding = jax.sharding.NamedSharding(
        jax.sharding.Mesh(np.array(DEVICES[:2]), ("x",)), jax.sharding.PartitionSpec()
    )
    arr = jax_array.ArrayImpl(
        jax.core.ShapedArray((8,), np.int32),
        sharding,
        [jax.device_put(np.arange(8, dtype=np.int32), d) for d in DEVICES[:2]],
        committed=False,
    )
    with pytest.raises(NotImplementedError, match="uncommitted Array sharded"):
        meshjit.jit(lambda a: a)(arr)


def test_jit_bare_partition_spec_uses_the_mesh_in_context() -> None:
    f = meshjit.jit(lambda a: a + 1, in_shardings=P("x"), out_shardings=P())
    with MESH8:
        out = f(jnp.arange(8.0))
    assert spec_of(out) == ()
    assert f.lower  # AOT under the same mesh:
    with MESH8:
        text = f.lower(jnp.arange(8.0)).as_text()
    assert '[{"x"}]' in text


# explain -------------------------------------------------------------------------


def test_explain_gives_provenance_and_collectives() -> None:
    explanation = meshjit.explain(MLP, X, W1, W2)
    rec = explanation.record("(`w1`)")
    assert rec.sharding == '<@mesh, [{}, {"y"}]>'
    assert any("user sharding" in line for line in str(explanation).splitlines())
    assert [c.kind for c in explanation.collectives] == ["all-reduce"]
    assert "test_jit.py" in explanation.collectives_text
    assert explanation.output_shardings.spec == jax.P("x", None)


def test_explain_on_a_plain_function() -> None:
    def f(a: jax.Array) -> jax.Array:
        return meshjit.with_sharding_constraint(a, ns(MESH8, "x")).sum()

    explanation = meshjit.explain(f, jnp.ones(16))
    assert [c.kind for c in explanation.collectives] == ["all-reduce"]


def test_no_warnings_on_a_clean_call() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MLP(X, W1, W2)


# as jax 0.10.2 (issue 18) --------------------------------------------------------


def test_trailing_none_past_the_rank_is_equivalent_as_in_jax() -> None:
    a, b = NamedSharding(MESH8, P("x")), NamedSharding(MESH8, P("x", None))
    assert a.is_equivalent_to(b, 1)
    assert b.is_equivalent_to(a, 1)
    jax_mesh = jax.sharding.Mesh(np.array(DEVICES), ("x",))
    ja = jax.sharding.NamedSharding(jax_mesh, jax.P("x"))
    jb = jax.sharding.NamedSharding(jax_mesh, jax.P("x", None))
    assert ja.is_equivalent_to(jb, 1)  # the reference
    assert not NamedSharding(MESH8, P(None, "x")).is_equivalent_to(a, 1)


def test_with_sharding_constraint_takes_a_single_device_sharding() -> None:
    one = jax.sharding.SingleDeviceSharding(DEVICES[2])

    def fn(a: jax.Array) -> jax.Array:
        return meshjit.with_sharding_constraint(a * 2.0, one)

    out = meshjit.jit(fn)(jnp.ones(4))
    assert out.sharding == one
    np.testing.assert_array_equal(out, 2.0)
    spread = meshjit.jit(fn, in_shardings=NamedSharding(MESH8, P("x")))
    with pytest.raises(meshjit.ShardingError, match="one mesh"):
        spread(jnp.ones(8))


def test_outputs_are_uncommitted_when_nothing_chose_the_device() -> None:
    """As jax: uncommitted inputs and no shardings give uncommitted outputs
    (later calls may move them); anything that picks devices commits them."""
    f = meshjit.pjit(lambda a: a * 2.0)
    for _ in range(2):  # the Python path, then jax's C++ dispatch
        out = f(jnp.arange(8.0))
        assert not out.committed
    assert f.cache_info().fast == 1
    placed = jax.device_put(jnp.arange(8.0), DEVICES[1])
    assert f(placed).committed
    assert meshjit.jit(lambda a: a, in_shardings=NamedSharding(MESH8, P()))(
        jnp.arange(8.0)
    ).committed


def test_pjit_under_a_jax_mesh_context_runs_on_the_mesh() -> None:
    jax_mesh = jax.sharding.Mesh(np.array(DEVICES).reshape(2, 4), ("x", "y"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with jax_mesh:
            out = meshjit.pjit(jnp.sin)(jnp.arange(8.0))
    assert out.sharding == jax.sharding.NamedSharding(jax_mesh, jax.P())
    assert out.committed
    np.testing.assert_allclose(out, np.sin(np.arange(8.0)), rtol=1e-6)


def test_jit_of_a_transformed_jit_compiles_the_transformed_function() -> None:
    """jax.grad and jax.vmap functools.wraps their argument: meshjit.jit of
    such a wrapper around another meshjit.jit must compile the wrapper (it
    once took the inner function's state with the wrapper's __dict__)."""

    def cube_sum(x: jax.Array) -> jax.Array:
        return jnp.sum(x**3)

    x = jnp.arange(4.0)
    grad = meshjit.jit(jax.grad(meshjit.jit(cube_sum)))(x)
    np.testing.assert_allclose(np.asarray(grad), 3 * np.arange(4.0) ** 2)
    rows = meshjit.jit(jax.vmap(meshjit.jit(cube_sum)))(jnp.ones((3, 2)))
    np.testing.assert_allclose(np.asarray(rows), [2.0, 2.0, 2.0])
    wrapped = meshjit.jit(cube_sum)
    assert wrapped.__wrapped__ is cube_sum
    assert wrapped.__name__ == "cube_sum"
    # the function's own public attributes, as jax.jit's wrapper has them
    # (test_jit_wrapped_attributes), never over the wrapper's methods
    cube_sum.some_value = 4  # type: ignore[attr-defined]
    cube_sum.lower = "not the method"  # type: ignore[attr-defined]
    again = meshjit.jit(cube_sum)
    assert again.some_value == 4  # type: ignore[attr-defined]
    assert callable(again.lower)


def test_constraint_on_an_abstract_mesh() -> None:
    """As jax: a NamedSharding on an AbstractMesh (axes, no devices) in
    with_sharding_constraint applies to the computation's own mesh inside a
    jitted function, and to the array's devices outside one."""
    mesh = jax.sharding.Mesh(np.array(DEVICES[:4]).reshape(2, 2), ("x", "y"))
    data = np.arange(16.0).reshape(8, 2)
    arr = jax.device_put(data, jax.NamedSharding(mesh, jax.P("x", "y")))
    abstract = jax.NamedSharding(mesh.abstract_mesh, jax.P("x"))

    def f(x: jax.Array) -> jax.Array:
        return meshjit.with_sharding_constraint(x, abstract) * 2

    for out in (meshjit.jit(f)(arr), f(arr)):
        np.testing.assert_array_equal(np.asarray(out), data * 2)
        assert out.sharding == jax.NamedSharding(mesh, jax.P("x"))
    with pytest.raises(meshjit.ShardingError, match="AbstractMesh"):
        f(data)


def test_committed_argument_avals_carry_their_auto_mesh() -> None:
    """As jax: inside the function an argument committed to a mesh of Auto
    axes has that AbstractMesh in its aval (the spec names no axis); with a
    constraint on that mesh inside, the program runs as before."""
    auto = jax.make_mesh(
        (4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2
    )
    arr = jax.device_put(
        np.arange(16.0).reshape(8, 2),
        jax.sharding.NamedSharding(auto, jax.sharding.PartitionSpec("x")),
    )
    seen = []

    def f(x: jax.Array) -> jax.Array:
        seen.append(x.aval.sharding)
        return x * 2

    out = meshjit.jit(f)(arr)
    np.testing.assert_array_equal(np.asarray(out), np.arange(16.0).reshape(8, 2) * 2)
    assert seen[0].mesh == auto.abstract_mesh
    assert seen[0].spec == jax.sharding.PartitionSpec(None, None)

    def g(x: jax.Array) -> jax.Array:
        y = meshjit.with_sharding_constraint(
            x * 2, jax.sharding.NamedSharding(auto, jax.sharding.PartitionSpec("y"))
        )
        return y + 1

    out = meshjit.jit(g)(arr)
    np.testing.assert_array_equal(
        np.asarray(out), np.arange(16.0).reshape(8, 2) * 2 + 1
    )
