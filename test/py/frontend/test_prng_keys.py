"""Typed PRNG key arrays (`jax.random.key`) as arguments and results.

A key array `key<fry>[n]` is `tensor<nx2xui32>` in the module: meshjit shards
its key data with the key dims' sharding (the data dims replicated), passes
the data to the executable and wraps the results back into keys. Each case
runs under jax.jit and meshjit.jit on 8 CPU devices and must agree exactly.
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

MESH = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))


def data_of(x: jax.Array) -> np.ndarray:
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(x))
    return np.asarray(x)


def both(make: Callable[[Callable[..., Any]], Any]) -> tuple[list[Any], list[Any]]:
    return jax.tree.leaves(make(jax.jit)), jax.tree.leaves(make(meshjit.jit))


def assert_same(theirs: list[Any], ours: list[Any]) -> None:
    assert len(theirs) == len(ours)
    for t, o in zip(theirs, ours, strict=True):
        assert o.dtype == t.dtype
        assert o.shape == t.shape
        np.testing.assert_array_equal(data_of(o), data_of(t))
        assert o.sharding.is_equivalent_to(t.sharding, o.ndim)


@pytest.mark.parametrize("impl", ["threefry2x32", "rbg"])
def test_key_argument_and_result(impl: str) -> None:
    key = jax.random.key(7, impl=impl)

    def f(k: jax.Array) -> tuple[jax.Array, jax.Array]:
        a, b = jax.random.split(k)
        return jax.random.normal(a, (4, 8)), b

    theirs, ours = both(lambda jit: jit(f)(key))
    assert_same(theirs, ours)
    assert str(ours[1].dtype) == str(key.dtype)


def test_sharded_keys_with_in_and_out_shardings() -> None:
    keys = jax.random.split(jax.random.key(0), 8)
    s = NamedSharding(MESH, P(("data", "model")))

    def f(ks: jax.Array) -> tuple[jax.Array, jax.Array]:
        fresh = jax.vmap(lambda k: jax.random.fold_in(k, 3))(ks)
        return jax.vmap(lambda k: jax.random.uniform(k, (5,)))(ks), fresh

    theirs, ours = both(
        lambda jit: jit(f, in_shardings=s.to_jax(), out_shardings=s.to_jax())(keys)
    )
    assert_same(theirs, ours)
    assert ours[1].sharding.spec == jax.P(("data", "model"))


def test_keys_in_a_train_state_pytree_with_donation() -> None:
    state = {"w": jnp.ones((8, 4)), "rng": jax.random.key(1)}

    def step(st: dict[str, jax.Array]) -> dict[str, jax.Array]:
        rng, sub = jax.random.split(st["rng"])
        noise = jax.random.normal(sub, st["w"].shape)
        return {"w": st["w"] + 0.1 * noise, "rng": rng}

    theirs = jax.jit(step)(state)
    ours = meshjit.jit(step, donate_argnums=0)(
        jax.tree.map(lambda a: a.copy() if hasattr(a, "copy") else a, state)
    )
    assert_same(jax.tree.leaves(theirs), jax.tree.leaves(ours))
    # a second step from the returned state (a key result fed back in)
    again = meshjit.jit(step)(ours)
    assert_same(jax.tree.leaves(jax.jit(step)(theirs)), jax.tree.leaves(again))


def test_lower_on_a_key_shape_dtype_struct() -> None:
    key = jax.random.key(3)
    sds = jax.ShapeDtypeStruct((), key.dtype)
    lowered = meshjit.jit(lambda k: jax.random.split(k, 2)).lower(sds)
    assert lowered.out_info.dtype == key.dtype
    assert "tensor<2xui32>" in lowered.as_text()
    compiled = lowered.compile()
    assert_same(
        [jax.jit(lambda k: jax.random.split(k, 2))(key)],
        [compiled(key)],
    )


def test_calling_with_a_key_of_another_impl_is_refused() -> None:
    f = meshjit.jit(lambda k: jax.random.normal(k, (2,))).lower(jax.random.key(0))
    compiled = f.compile()
    with pytest.raises(TypeError, match="key<rbg>"):
        compiled(jax.random.key(0, impl="rbg"))


def test_random_values_over_a_split_array_are_made_per_block() -> None:
    """Counter-based random bits on a 2-D split result: each device makes its
    own block from local counters (no global-size computation), and the
    values are jax's."""
    mesh = Mesh(np.array(jax.devices()[:6]).reshape(2, 3), ("x", "y"))
    key = jax.random.key(0)

    def f(k: jax.Array) -> jax.Array:
        return jax.random.uniform(k, (8, 18))

    compiled = meshjit.jit(f, out_shardings=NamedSharding(mesh, P("x", "y")))
    compiled = compiled.lower(key).compile()
    text = compiled.as_text()
    assert "[4,6]" in text
    assert "[8,18]" not in text
    np.testing.assert_array_equal(
        np.asarray(compiled(key)), np.asarray(jax.jit(f)(key))
    )
