"""Sharding groups (jax.experimental.shard_alike) through meshjit.jit: the
members come out with one sharding and the values of the unsharded run."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit

# Public in jax 0.10, gone from jax 0.11's public API.
shard_alike = pytest.importorskip(
    "jax.experimental.shard_alike", reason="this jax has no public shard_alike"
).shard_alike


@pytest.mark.devices(8)
@pytest.mark.parametrize("specs", [(P("x"), P("x")), (P("x"), P("y")), (P(), P("y"))])
@pytest.mark.parametrize("direct", [False, True])
def test_shard_alike_members_share_a_sharding(
    specs: tuple[P, P], direct: bool, recwarn: pytest.WarningsRecorder
) -> None:
    """`direct`: the group's members are the arguments themselves, which
    start with the in_shardings: differing ones are a conflict (a warning
    and open constraints, as Shardy does)."""
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))

    def f(a, b):  # type: ignore[no-untyped-def]
        if direct:
            a2, b2 = shard_alike(a, b)
            return a2 * 2, b2 + 1
        return shard_alike(a * 2, b + 1)

    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    b = a.T.copy()
    ins = tuple(NamedSharding(mesh, s) for s in specs)
    compiled = meshjit.jit(f, in_shardings=ins).lower(a, b).compile()
    got = compiled(*[jax.device_put(x, s) for x, s in zip((a, b), ins, strict=True)])
    np.testing.assert_array_equal(np.asarray(got[0]), a * 2)
    np.testing.assert_array_equal(np.asarray(got[1]), b + 1)
    conflict = [w for w in recwarn if "sharding groups of groupID" in str(w.message)]
    assert len(conflict) == (1 if direct and specs[0] != specs[1] else 0)
    want = jax.jit(f, in_shardings=ins)(a, b)
    for g, w in zip(got, want, strict=True):
        assert g.sharding.is_equivalent_to(w.sharding, 2), (g.sharding, w.sharding)


@pytest.mark.devices(8)
@pytest.mark.parametrize("uses", [1, 2])
def test_shard_alike_with_a_constant_expression(uses: int) -> None:
    """A constant expression (an iota, reshaped) grouped with a sharded
    argument takes the argument's sharding, also where it is returned; with
    two uses each use's copy stays in the group (jax's
    test_arange_shard_alike_jit: the result came back replicated)."""
    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"))
    s = NamedSharding(mesh, P("x", "y"))
    x = jax.device_put(np.arange(16, dtype=np.int32).reshape(8, 2) * 3, s)

    def f(x, y):  # type: ignore[no-untyped-def]
        c = jax.numpy.arange(16, dtype=np.int32).reshape(8, 2)
        _, c = shard_alike(x, c)
        return (c,) if uses == 1 else (y + c, c * 2)

    y = np.ones((8, 2), np.int32)
    got = meshjit.jit(f)(x, y)
    want = jax.jit(f)(x, y)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        assert w.sharding.is_equivalent_to(s, 2)
        assert g.sharding.is_equivalent_to(w.sharding, 2), (g.sharding, w.sharding)
