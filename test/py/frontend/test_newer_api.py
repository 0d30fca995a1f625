"""The sharding API of current jax, through meshjit, on every supported jax:
`jax.set_mesh` (and meshjit's `set_mesh`/`use_mesh` for meshjit meshes),
`jax.make_mesh` with `AxisType.Explicit`/`Auto`, `jax.sharding.reshard`,
`P.UNCONSTRAINED`. Meshes span every device there is, so this runs on one
device (a GPU) as well as on eight."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit
from meshjit.sharding import set_mesh, use_mesh

N = jax.device_count()
X = np.arange(8 * N * 4, dtype=np.float32).reshape(8 * N, 4)


def _f(x: jax.Array) -> jax.Array:
    return jnp.sin(x) * 2.0 + x.sum(0)


def test_bare_spec_under_jax_set_mesh() -> None:
    mesh = jax.make_mesh((N,), ("x",), axis_types=(AxisType.Auto,))
    with jax.set_mesh(mesh):
        out = meshjit.jit(_f, in_shardings=P("x"), out_shardings=P("x"))(X)
    np.testing.assert_allclose(out, jax.jit(_f)(X), rtol=1e-6)
    assert out.sharding == NamedSharding(mesh, P("x"))


def test_meshjit_mesh_with_set_mesh_and_use_mesh() -> None:
    mesh = meshjit.Mesh(np.array(jax.devices()), ("x",))
    want = jax.jit(_f)(X)
    with set_mesh(mesh):
        assert jax.sharding.get_mesh() == mesh.to_jax()
        out = meshjit.jit(_f, in_shardings=P("x"))(X)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    with use_mesh(mesh):
        out = meshjit.jit(_f, in_shardings=P("x"))(X)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    assert jax.sharding.get_mesh().empty  # restored on exit


def test_use_mesh_sets_nothing_until_entered() -> None:
    mesh = meshjit.Mesh(np.array(jax.devices()), ("x",))
    manager = use_mesh(mesh)
    assert jax.sharding.get_mesh().empty
    with manager:
        assert jax.sharding.get_mesh() == mesh.to_jax()


def test_explicit_mesh_types_values_and_reshard() -> None:
    mesh = jax.make_mesh((N,), ("x",), axis_types=(AxisType.Explicit,))

    def g(x: jax.Array) -> jax.Array:
        y = jnp.tanh(x) * 2.0  # typed f32[8N@x,4]
        return jax.sharding.reshard(y, P(None, None)) @ x.T

    x = jax.device_put(X, NamedSharding(mesh, P("x")))
    with jax.set_mesh(mesh):
        out = meshjit.jit(g)(x)
        want = jax.jit(g)(x)
    np.testing.assert_allclose(out, want, rtol=1e-5)
    assert out.sharding.spec == want.sharding.spec
    assert jax.typeof(out).sharding.spec == jax.typeof(want).sharding.spec


def test_unconstrained_dim_in_with_sharding_constraint() -> None:
    mesh = jax.make_mesh((N,), ("x",), axis_types=(AxisType.Auto,))
    spec = P("x", P.UNCONSTRAINED)

    def h(x: jax.Array) -> jax.Array:
        return meshjit.with_sharding_constraint(x * 3.0, NamedSharding(mesh, spec))

    out = meshjit.jit(h)(X)
    np.testing.assert_allclose(out, X * 3.0)


def test_unconstrained_in_in_shardings_is_refused_as_jax_does() -> None:
    mesh = jax.make_mesh((N,), ("x",), axis_types=(AxisType.Auto,))
    bad = NamedSharding(mesh, P(P.UNCONSTRAINED))
    with pytest.raises(ValueError, match="UNCONSTRAINED"):
        meshjit.jit(_f, in_shardings=bad)(X)
