"""Every error meshjit.jit raises names what the user wrote (JAX_BEHAVIOUR §3).

Each test matches the key words: the API name the user called, the argument's
key path, the dim, its size and the mesh axes.
"""

from __future__ import annotations

import os
import traceback
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import meshjit
from meshjit import Mesh, NamedSharding, P, ShardingError

DEVICES = jax.devices()[:8]
MESH8 = Mesh(np.array(DEVICES), ("x",))
MESH4 = Mesh(np.array(DEVICES[:4]), ("x",))
SX = NamedSharding(MESH8, P("x"))
SR = NamedSharding(MESH8, P())


def two(a: jax.Array, b: jax.Array) -> jax.Array:
    return a + b


def test_wrong_number_of_in_shardings_says_static_args_are_excluded() -> None:
    f = meshjit.jit(
        lambda a, n, b: a * n + b, in_shardings=(SX, SX, SX), static_argnums=1
    )
    with pytest.raises(
        ShardingError,
        match=r"jit in_shardings is a tuple of length 3 but the call has 2 dynamic "
        r"arguments \(a, b\); static arguments \(n\) are not counted",
    ):
        f(jnp.ones(8), 2, jnp.ones(8))


def test_structure_mismatch_shows_the_key_path() -> None:
    f = meshjit.jit(lambda p: p["a"] + p["b"], in_shardings=({"a": SX, "c": SX},))
    with pytest.raises(ShardingError, match=r"different keys at key path p: .*'c'"):
        f({"a": jnp.ones(8), "b": jnp.ones(8)})
    g = meshjit.jit(lambda p: p[1][0], in_shardings=((SX, (SX, SX)),))
    with pytest.raises(ShardingError, match=r"different lengths at key path p\[1\]"):
        g((jnp.ones(8), (jnp.ones(8),)))


def test_out_shardings_list_for_tuple_output_names_result() -> None:
    f = meshjit.jit(lambda a: (a, a), out_shardings=[SX, SX])
    with pytest.raises(
        ShardingError, match=r"different types at key path result: .*list.*tuple"
    ):
        f(jnp.ones(8))


@pytest.mark.devices(8)
def test_non_divisible_dim_names_the_argument_key_path_dim_size_and_axis() -> None:
    # jax#27808: JAX's IndivisibleError does not say which argument.
    f = meshjit.jit(lambda p: p["w"].sum(), in_shardings=({"w": SX},))
    with pytest.raises(
        ShardingError,
        match=r"jit in_shardings: cannot shard dim 0 of `p\['w'\]` \(f32\[6\]\).*"
        r'"x" \(size 8\).*size 6, which is not divisible by 8',
    ):
        f({"w": jnp.ones(6)})


@pytest.mark.devices(8)
def test_non_divisible_output_names_the_output() -> None:
    f = meshjit.jit(lambda a: a[:6], out_shardings=SX)
    with pytest.raises(
        ShardingError, match=r"out_shardings: cannot shard dim 0 of `result`"
    ):
        f(jnp.ones(8))


def test_unknown_axis_in_bare_spec_names_the_argument() -> None:
    f = meshjit.jit(lambda a: a, in_shardings=P("z"))
    with (
        MESH8,
        pytest.raises(
            ShardingError, match=r"in_shardings for `a`: unknown mesh axis 'z'"
        ),
    ):
        f(jnp.ones(8))


def test_rank_mismatch_names_the_argument() -> None:
    f = meshjit.jit(lambda a: a, in_shardings=NamedSharding(MESH8, P("x", None)))
    with pytest.raises(ShardingError, match=r"`a`.*rank 1"):
        f(jnp.ones(8))


def test_bare_spec_without_mesh_says_how_to_fix() -> None:
    f = meshjit.jit(lambda a: a, in_shardings=P("x"))
    with pytest.raises(ShardingError, match=r"bare PartitionSpec.*`with mesh:`"):
        f(jnp.ones(8))


def test_unconstrained_is_rejected_at_the_boundary() -> None:
    """When jit is called, as jax does (jax's P.UNCONSTRAINED too)."""
    with pytest.raises(ShardingError, match=r"P\.UNCONSTRAINED is not allowed"):
        meshjit.jit(lambda a: a, out_shardings=NamedSharding(MESH8, P(P.UNCONSTRAINED)))
    jax_mesh = MESH8.to_jax()
    spec = jax.P(jax.P.UNCONSTRAINED, None)
    with pytest.raises(ValueError, match="Unconstrained dims are not allowed"):
        meshjit.jit(lambda a: a, in_shardings=jax.NamedSharding(jax_mesh, spec))


def test_unhashable_static_arg() -> None:
    f = meshjit.jit(lambda a, n: a, static_argnums=1)
    with pytest.raises(meshjit.JitArgumentError, match=r"`n` must be hashable.*list"):
        f(jnp.ones(8), [1, 2])
    with pytest.raises(TypeError):  # also a TypeError, as in JAX
        f(jnp.ones(8), {"a": 1})


def test_non_array_argument_not_marked_static() -> None:
    f = meshjit.jit(lambda a, s: a)
    with pytest.raises(
        meshjit.JitArgumentError,
        match=r"argument `s` of <lambda> is a str \('hello'\).*static_argnums",
    ):
        f(jnp.ones(8), "hello")


def test_donated_buffer_reused_names_the_argument() -> None:
    f = meshjit.jit(lambda a: a * 2, donate_argnums=0)
    a = jnp.ones(8)
    f(a)
    with pytest.raises(ShardingError, match=r"argument `a` .*donated to an earlier"):
        f(a)


def test_same_buffer_donated_and_passed_again_in_one_call() -> None:
    f = meshjit.jit(lambda a, b: (a + b, b), donate_argnums=0)
    a = jax.device_put(jnp.ones(8), DEVICES[0])
    with pytest.raises(ShardingError, match=r"donated argument `a` and as `b`"):
        f(a, a)
    with pytest.raises(RuntimeError):  # the class jax raises (test_double_donation)
        f(a, a)


@pytest.mark.devices(8)
def test_committed_argument_with_other_sharding_is_named() -> None:
    f = meshjit.jit(lambda a: a, in_shardings=SR)
    sharded = jax.device_put(np.arange(8.0, dtype=np.float32), SX.to_jax())
    with pytest.raises(
        ShardingError,
        match=r"jit: the sharding of argument `a` \(f32\[8\]\) does not match "
        r"in_shardings.*P\('x',\).*P\(\)",
    ):
        f(sharded)


@pytest.mark.devices(8)
def test_permuted_device_order_shows_device_ids() -> None:
    reversed_mesh = Mesh(np.array(DEVICES[::-1]), ("x",))
    f = meshjit.jit(lambda a: a, in_shardings=SX)
    arg = jax.device_put(
        np.arange(8.0, dtype=np.float32), NamedSharding(reversed_mesh, P("x")).to_jax()
    )
    with pytest.raises(ShardingError, match=r"device order.*\[7, 6, 5"):
        f(arg)


@pytest.mark.devices(8)
def test_incompatible_devices_between_in_and_out_shardings() -> None:
    f = meshjit.jit(
        lambda a: a, in_shardings=SX, out_shardings=NamedSharding(MESH4, P())
    )
    with pytest.raises(ShardingError, match=r"incompatible devices.*`result`"):
        f(jnp.ones(8))


@pytest.mark.devices(8)
def test_uneven_constraint_is_padded_and_stays_split() -> None:
    # jax#26946: JAX pads and then silently replicates; meshjit keeps the
    # padded blocks split (a sum over them is one all-reduce, no gather).
    f = meshjit.jit(lambda a: meshjit.with_sharding_constraint(a * 2, SX).sum())
    x = jnp.arange(6, dtype=jnp.float32)
    assert float(f(x)) == 30.0
    compiled = f.lower(x).compile()
    assert set(compiled.partition_report.counts()) == {"all-reduce"}


def test_constraint_bare_spec_without_mesh() -> None:
    f = meshjit.jit(lambda a: meshjit.with_sharding_constraint(a, P("x")))
    with pytest.raises(ShardingError, match=r"`x` got a bare PartitionSpec"):
        f(jnp.ones(8))


def test_kwargs_dict_with_unknown_parameter() -> None:
    f = meshjit.jit(two, in_shardings={"c": SX})
    with pytest.raises(ShardingError, match=r"names parameters \['c'\]"):
        f(jnp.ones(8), b=jnp.ones(8))


def test_static_argnums_out_of_range_and_unknown_names() -> None:
    with pytest.raises(ShardingError, match=r"static_argnums=\(3,\).*only accepts 2"):
        meshjit.jit(two, static_argnums=3)
    with pytest.raises(ShardingError, match=r"static_argnames names \['zzz'\]"):
        meshjit.jit(two, static_argnames="zzz")
    with pytest.raises(ShardingError, match=r"cannot intersect; \['b'\]"):
        meshjit.jit(two, static_argnames="b", donate_argnames="b")


def test_device_with_shardings_or_backend() -> None:
    with pytest.raises(ShardingError, match="in_shardings should not be specified"):
        meshjit.jit(two, device=DEVICES[0], in_shardings=SX)
    with pytest.raises(ShardingError, match="both a device and a backend"):
        meshjit.jit(two, device=DEVICES[0], backend="cpu")


def test_non_callable() -> None:
    with pytest.raises(TypeError, match="Expected a callable value, got 3"):
        meshjit.jit(3)  # type: ignore[call-overload]


def test_a_static_argument_whose_eq_raises() -> None:
    """As jax (test_cpp_jit_raises_on_non_hashable_static_argnum): a static
    argument that hashes but cannot be compared is refused with a message
    that says so (its __eq__'s own error escaped from the cache lookup)."""

    class HashableWithoutEq:
        def __hash__(self) -> int:
            return 1

        def __eq__(self, other: object) -> bool:
            raise NotImplementedError("no comparison")

    f = meshjit.jit(lambda x, y: x + 3, static_argnums=[1])
    assert f(1, 1) == 4
    with pytest.raises(ValueError, match=r"comparable using __eq__.*`y`"):
        f(1, HashableWithoutEq())


def test_what_jax_refuses_when_jit_is_applied() -> None:
    """As jax.jit (api_test's test_jit_of_generator,
    test_staticmethod_is_not_supported, test_jit_argnames_validation,
    test_donate_argnames_signature_fail): refused at jit(...), not at a call."""

    def gen(x: Any) -> Any:
        yield x

    with pytest.raises(TypeError, match="Expected a function, got a generator"):
        meshjit.jit(gen)
    with pytest.raises(TypeError, match="staticmethod arguments are not supported"):
        meshjit.jit(staticmethod(two))  # type: ignore[call-overload]

    def h(a: Any, /, b: Any, c: Any, *args: Any, **kwargs: Any) -> None: ...

    for names in [("b", "c"), ("b", "c", "not_defined"), ("kwargs",)]:
        meshjit.jit(h, static_argnames=names)  # **kwargs takes any other name
        meshjit.jit(h, donate_argnames=names)
    for names in [("a", "c"), ("args", "c")]:  # positional-only, *args
        with pytest.raises(ShardingError, match=f"names \\['{names[0]}'\\]"):
            meshjit.jit(h, static_argnames=names)
        with pytest.raises(ValueError, match=f"names \\['{names[0]}'\\]"):
            meshjit.jit(h, donate_argnames=names)

    class NoSignature:
        @property
        def __signature__(self) -> Any:
            raise TypeError("no signature")

        def __call__(self, *args: Any) -> None:
            return None

    with pytest.raises(ValueError, match="Pass donate_argnums instead"):
        meshjit.jit(NoSignature(), donate_argnames="a")


def test_pjit_errors_say_pjit() -> None:
    f = meshjit.pjit(lambda a, b: a, in_shardings=(SX,))
    with pytest.raises(ShardingError, match=r"^pjit in_shardings is a tuple"):
        f(jnp.ones(8), jnp.ones(8))


def test_compiled_rejects_other_shapes_and_static_args_passed_again() -> None:
    compiled = meshjit.jit(lambda a, n: a * n, static_argnums=1).lower(jnp.ones(8), 2)
    run = compiled.compile()
    np.testing.assert_array_equal(run(jnp.ones(8)), 2.0)
    with pytest.raises(
        meshjit.JitArgumentError, match=r"`a` was compiled for f32\[8\].*f32\[4\]"
    ):
        run(jnp.ones(4))
    with pytest.raises(meshjit.JitArgumentError, match="not passed again"):
        run(jnp.ones(8), 2)


@pytest.mark.devices(8)
def test_compiled_rejects_committed_argument_with_other_sharding() -> None:
    run = meshjit.jit(lambda a: a, in_shardings=SX).lower(jnp.ones(8)).compile()
    replicated = jax.device_put(jnp.ones(8), SR.to_jax())
    with pytest.raises(ShardingError, match=r"`a` \(f32\[8\]\) is committed to"):
        run(replicated)


@pytest.mark.devices(8)
def test_error_traceback_keeps_user_frames_and_drops_meshjit_frames() -> None:
    f = meshjit.jit(lambda a: a, in_shardings=SX)
    try:
        f(jnp.ones(6))
    except ShardingError as err:
        files = [fr.filename for fr in traceback.extract_tb(err.__traceback__)]
    else:
        pytest.fail("no error")
    assert any(name.endswith("test_jit_errors.py") for name in files)
    root = os.path.dirname(
        os.path.dirname(os.path.abspath(meshjit.jit.__code__.co_filename))
    )
    folders = tuple(
        os.path.join(root, d) + os.sep for d in ("frontend", "passes", "compiler")
    )
    internal = [n for n in files if os.path.abspath(n).startswith(folders)]
    # Only the frame that re-raises remains (resolve, trace, passes are gone).
    assert internal == [files[-1]]
    assert files[-1].endswith("jit.py")


def test_missing_positional_argument_is_a_type_error() -> None:
    f: Any = meshjit.jit(two)
    with pytest.raises(TypeError, match="missing a required argument: 'b'"):
        f(jnp.ones(8))


def test_compiler_options_on_a_nested_jit_are_refused() -> None:
    """XLA compiles the outer function as one program: the inner options
    would be ignored, so (as jax) they are an error; at top level, and under
    an eager transformation, they apply."""
    inner = meshjit.jit(
        lambda x: x * 2, compiler_options={"xla_cpu_enable_fast_math": True}
    )
    np.testing.assert_allclose(np.asarray(inner(jnp.arange(4.0))), [0, 2, 4, 6])
    grad = jax.grad(lambda x: inner(x).sum())(jnp.arange(4.0))
    np.testing.assert_allclose(np.asarray(grad), [2, 2, 2, 2])
    with pytest.raises(ValueError, match="can only be passed to top-level"):
        meshjit.jit(lambda x: inner(x + 2))(jnp.arange(4.0))


@pytest.mark.devices(8)
def test_pjit_under_a_mesh_refuses_arguments_on_other_devices() -> None:
    """As jax: pjit under `with mesh:` runs on the mesh's devices; an argument
    committed elsewhere is an error rather than a silent move."""
    small = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"))
    arg = jax.device_put(
        np.ones((8, 2), np.float32), NamedSharding(small, P("x", "y")).to_jax()
    )
    with (
        MESH8,
        pytest.raises(ValueError, match=r"incompatible devices.*\[0, 1, 2, 3\]"),
    ):
        meshjit.pjit(lambda x: x)(arg)
    with MESH8:
        out = meshjit.pjit(lambda x: x * 2)(np.ones((8, 2), np.float32))
    np.testing.assert_allclose(np.asarray(out), 2.0)


@pytest.mark.devices(8)
def test_errors_subclass_the_exceptions_jax_raises() -> None:
    """Code that catches jax's IndivisibleError or DuplicateSpecError keeps
    working with meshjit (the messages are meshjit's)."""
    from meshjit.compiler import bridge

    mesh = Mesh(np.array(jax.devices()[:2]), ("x",))
    f = meshjit.jit(lambda x: x, in_shardings=NamedSharding(mesh, P("x")))
    with pytest.raises(bridge._jax_indivisible(), match=r"dim 0 of `x`"):
        f(jnp.ones((3, 2)))
    with pytest.raises(bridge._jax_duplicate_spec(), match="used twice"):
        NamedSharding(mesh, P("x", "x"))
    with pytest.raises(ShardingError):
        NamedSharding(mesh, P("x", "x"))


def test_a_bare_spec_without_a_mesh_is_a_runtime_error_as_in_jax() -> None:
    with pytest.raises(RuntimeError, match="needs a mesh"):
        meshjit.pjit(lambda x: x, in_shardings=P("x"))(jnp.arange(4))
    with pytest.raises(meshjit.MissingMeshError, match="needs a mesh"):
        meshjit.jit(lambda x: meshjit.with_sharding_constraint(x, P("x")))(
            jnp.arange(4)
        )


def test_an_extended_dtype_other_than_a_key_is_refused_clearly() -> None:
    """A user-made extended dtype (jax's private ExtendedDType, as jax's
    dtypes_test makes one): refused naming the result or argument, not a
    numpy TypeError from inside meshjit ("Cannot interpret ... as a data
    type")."""
    import dataclasses

    from jax._src import core, dtypes

    class foo(dtypes.extended):
        pass

    class FooTyRules:
        allow_conversion: bool = True

        @staticmethod
        def physical_element_aval(_: Any) -> Any:
            return core.ShapedArray((), np.dtype("float32"))

    @dataclasses.dataclass(frozen=True)
    class FooTy(dtypes.ExtendedDType):  # type: ignore[misc]
        name: str = "foo"
        _rules: type = FooTyRules
        type: type = foo

    def to_foo(x: Any) -> Any:
        return jax.lax.convert_element_type(x, FooTy())

    with pytest.raises(
        meshjit.JitArgumentError, match=r"the result of to_foo has the extended"
    ):
        meshjit.jit(to_foo)(jnp.arange(3.0))
