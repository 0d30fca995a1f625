"""meshjit's classes beside jax's functions: `meshjit.device_put` takes
meshjit's shardings and specs as well as jax's; where one of meshjit's
objects reaches jax's device_put, with_sharding_constraint or shard_map
inside a traced program, jax's error gets a note naming meshjit's
counterpart."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import pytest

import meshjit
import meshjit.sharding
from meshjit import Mesh, NamedSharding, P

pytestmark = pytest.mark.devices(8)

MESH = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))


def test_device_put_takes_meshjit_shardings_and_pytree_prefixes() -> None:
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    s = NamedSharding(MESH, P("x", "y"))
    y = meshjit.device_put(x, s)
    assert isinstance(y, jax.Array)
    assert y.sharding.is_equivalent_to(s.to_jax(), 2)
    np.testing.assert_array_equal(np.asarray(y), x)
    tree = meshjit.device_put(
        {"a": x, "b": (x, x)}, {"a": s, "b": NamedSharding(MESH, P(None, "x"))}
    )
    assert tree["b"][1].sharding.is_equivalent_to(
        NamedSharding(MESH, P(None, "x")).to_jax(), 2
    )
    # jax's own sharding, a bare meshjit P under set_mesh, and a device
    assert meshjit.device_put(x, s.to_jax()).sharding == s.to_jax()
    with meshjit.sharding.set_mesh(MESH):
        z = meshjit.device_put(x, P("y"))
    assert z.sharding.is_equivalent_to(NamedSharding(MESH, P("y")).to_jax(), 2)
    one = meshjit.device_put(x, jax.devices()[3])
    assert one.devices() == {jax.devices()[3]}


def _wsc(a: jax.Array) -> jax.Array:
    s = NamedSharding(MESH, P("y", "x"))
    return jax.lax.with_sharding_constraint(a * 2, s)  # type: ignore[arg-type]


def _shard_map(a: jax.Array) -> jax.Array:
    return jax.shard_map(  # type: ignore[arg-type]
        lambda b: b, mesh=MESH, in_specs=P("x"), out_specs=P("x")
    )(a)


def _shard_map_specs(a: jax.Array) -> jax.Array:
    return jax.shard_map(  # type: ignore[arg-type]
        lambda b: b, mesh=MESH.to_jax(), in_specs=P("x"), out_specs=P("x")
    )(a)


def _device_put(a: jax.Array) -> jax.Array:
    return jax.device_put(a, NamedSharding(MESH, P("y")))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fn", "error", "what", "use"),
    [
        (_wsc, TypeError, "NamedSharding", "meshjit.with_sharding_constraint"),
        (_shard_map, TypeError, "Mesh", "meshjit.shard_map"),
        (_shard_map_specs, TypeError, "PartitionSpec", "meshjit.shard_map"),
        (_device_put, ValueError, "NamedSharding", "meshjit.device_put"),
    ],
    ids=["with_sharding_constraint", "shard_map_mesh", "shard_map_specs", "device_put"],
)
def test_jax_function_given_meshjit_object_names_the_counterpart(
    fn: Callable[..., Any], error: type[Exception], what: str, use: str
) -> None:
    x = np.ones((8, 8), np.float32)
    with pytest.raises(error) as info:
        meshjit.jit(fn, in_shardings=NamedSharding(MESH, P("x", "y")))(x)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert (
        f"meshjit: a meshjit {what} reached a jax function, which takes jax's "
        f"classes only: call {use}, which takes both, or pass the object's "
        ".to_jax()"
    ) in notes


def test_other_errors_get_no_note() -> None:
    def bad(a: jax.Array) -> jax.Array:
        return a @ np.ones((3, 3), np.float32)  # shapes do not match

    with pytest.raises(TypeError) as info:
        meshjit.jit(bad)(np.ones((8, 8), np.float32))
    assert not any("meshjit:" in n for n in getattr(info.value, "__notes__", []))


def test_jax_export_takes_a_meshjit_jit_function() -> None:
    """jax.export.export(meshjit.jit(f)) exports what jax.export of jax.jit(f)
    with the same shardings exports (a program whoever loads it partitions);
    it failed with an unexpected-keyword TypeError. AUTO has no jax form and
    is refused with a message that says so."""
    from jax import export

    s = NamedSharding(MESH, P("x", "y"))
    spec = jax.ShapeDtypeStruct((8, 8), np.float32)
    x = jax.device_put(np.arange(64, dtype=np.float32).reshape(8, 8), s.to_jax())

    def double(a: Any) -> Any:
        return a * 2

    made = [
        export.export(jax.jit(double, in_shardings=s.to_jax()))(spec),
        export.export(meshjit.jit(double, in_shardings=s))(spec),
    ]
    assert made[1].mlir_module() == made[0].mlir_module()
    assert made[1].in_shardings_hlo == made[0].in_shardings_hlo
    np.testing.assert_array_equal(np.asarray(made[1].call(x)), np.asarray(x) * 2)
    auto = meshjit.jit(lambda a: a, in_shardings=meshjit.sharding.AUTO(MESH))
    with pytest.raises(meshjit.ShardingError, match="AUTO leaf"):
        export.export(auto)(spec)


def test_jax_export_of_a_meshjit_function_inside_a_trace() -> None:
    """Exported inside another jitted function (its arguments tracers) and
    called there twice (jax's export_test.test_call_twice_exported): meshjit
    asked a tracer whether it was committed (a ConcretizationTypeError)."""
    from jax import export

    x = np.arange(4, dtype=np.float32)

    @meshjit.jit
    def outer(v: Any) -> Any:
        exported = export.export(meshjit.jit(jax.numpy.sin))(v)
        return exported.call(v) + exported.call(v)

    np.testing.assert_allclose(np.asarray(outer(x)), 2 * np.sin(x), rtol=1e-6)
    shapes: list[tuple[int, ...]] = []

    def traces_inside(v: Any) -> Any:
        shapes.append(meshjit.jit(jax.numpy.cos).trace(v).out_info.shape)
        return v

    jax.jit(traces_inside)(x)
    assert shapes == [(4,)]


def test_a_function_exported_with_symbolic_shapes_called_inside() -> None:
    """An exported function with a symbolic dim called inside meshjit.jit on
    concrete arguments: its module holds dynamic shapes (`tensor<?x4xf32>`),
    which meshjit refines as jax does before compiling (the pipeline refused
    it: "expected non-function type"); exporting it still keeps the
    symbolic dim (jax's export_test.test_poly_call_pmap)."""
    from jax import export

    def f(x: Any) -> Any:
        rows = jax.numpy.arange(x.shape[0], dtype=x.dtype).reshape((x.shape[0], 1))
        return x + rows

    (a,) = export.symbolic_shape("a")
    exported = export.export(meshjit.jit(f))(jax.ShapeDtypeStruct((a, 4), np.float32))
    assert "?x4xf32" in str(exported.mlir_module())
    x = np.arange(12, dtype=np.float32).reshape((3, 4))
    np.testing.assert_array_equal(np.asarray(meshjit.jit(exported.call)(x)), f(x))
