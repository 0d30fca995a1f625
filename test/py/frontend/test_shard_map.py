"""meshjit.shard_map: jax.shard_map (and the older experimental spelling)
over meshjit's or jax's Mesh and PartitionSpec, partitioned by meshjit;
checked against jax on 8 devices, and its errors."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import meshjit
import meshjit.sharding
from meshjit import Mesh, NamedSharding, P, ShardingError

pytestmark = pytest.mark.devices(8)

MESH = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))
JMESH = jax.sharding.Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))


def x8() -> np.ndarray:
    return np.arange(8 * 16, dtype=np.float32).reshape(8, 16)


def run(fn, x: np.ndarray, spec: P, out: P) -> np.ndarray:
    compiled = meshjit.jit(
        fn,
        in_shardings=NamedSharding(MESH, spec),
        out_shardings=NamedSharding(MESH, out),
    )
    return np.asarray(compiled(x))


def test_meshjit_classes_full_manual_psum_matches_jax() -> None:
    def body(b: jax.Array) -> jax.Array:
        return jax.lax.psum(b.sum(0, keepdims=True), ("x", "y"))

    mine = meshjit.shard_map(body, mesh=MESH, in_specs=P("x", "y"), out_specs=P())
    theirs = jax.shard_map(
        body, mesh=JMESH, in_specs=jax.P("x", "y"), out_specs=jax.P()
    )
    x = x8()
    got = run(lambda v: mine(v) * 2, x, P("x", "y"), P())
    want = np.asarray(jax.jit(lambda v: theirs(v) * 2)(x))
    assert got.shape == (1, 4)
    np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(got, 2 * x.reshape(8, 4, 4).sum((0, 1))[None])


def test_partial_manual_with_meshjit_classes_matches_jax() -> None:
    def body(b: jax.Array) -> jax.Array:
        return jax.lax.psum(jnp.tanh(b), "y")

    x = x8()
    mine = meshjit.shard_map(
        body, mesh=MESH, in_specs=P(None, "y"), out_specs=P(), axis_names={"y"}
    )
    theirs = jax.shard_map(
        body, mesh=JMESH, in_specs=jax.P(None, "y"), out_specs=jax.P(), axis_names={"y"}
    )
    got = run(mine, x, P("x", "y"), P("x"))
    want = np.asarray(jax.jit(theirs)(x))
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_older_positional_spelling_with_check_rep_and_auto() -> None:
    def body(b: jax.Array, w: jax.Array) -> jax.Array:
        return b * w

    x, w = x8(), np.arange(16, dtype=np.float32)
    f = meshjit.shard_map(
        body, MESH, (P(None, "y"), P("y")), P(None, "y"), check_rep=False, auto={"x"}
    )
    got = np.asarray(meshjit.jit(f)(x, w))
    np.testing.assert_allclose(got, x * w)


def test_decorator_mesh_from_set_mesh_and_none_specs() -> None:
    @partial(meshjit.shard_map, in_specs=(P("y"), None), out_specs=P("y"))
    def f(b: jax.Array, s: jax.Array) -> jax.Array:
        return b + s

    x, s = x8(), np.float32(3.0)
    with meshjit.sharding.set_mesh(MESH):
        got = np.asarray(meshjit.jit(f)(x, s))
    np.testing.assert_allclose(got, x + 3)


def test_jax_classes_pass_through() -> None:
    f = meshjit.shard_map(
        lambda b: b * 2, mesh=JMESH, in_specs=jax.P("x"), out_specs=jax.P("x")
    )
    np.testing.assert_allclose(np.asarray(meshjit.jit(f)(x8())), x8() * 2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"mesh": "mesh", "in_specs": P("x"), "out_specs": P("x")},
            "mesh must be a meshjit.Mesh or a jax.sharding.Mesh, got str",
        ),
        (
            {"mesh": MESH, "in_specs": (P("x"), P("z")), "out_specs": P("x")},
            r"in_specs\[1\] = P\('z',\) names axes \['z'\], which the mesh "
            r"\(axes \['x', 'y'\]\) does not have",
        ),
        (
            {"mesh": MESH, "in_specs": {"w": "x"}, "out_specs": P()},
            r"in_specs\['w'\] is a str; each leaf",
        ),
        (
            {
                "mesh": MESH,
                "in_specs": P("x"),
                "out_specs": P("x"),
                "axis_names": {"y"},
            },
            r"in_specs = P\('x',\) names axes \['x'\], which the region leaves "
            r"automatic \(manual: \['y'\]\)",
        ),
        (
            {
                "mesh": MESH,
                "in_specs": P("x"),
                "out_specs": P("x"),
                "axis_names": {"q"},
            },
            r"axis_names names \['q'\], which the mesh",
        ),
        (
            {
                "mesh": MESH,
                "in_specs": P(),
                "out_specs": P(),
                "auto": {"x", "y"},
            },
            r"auto lists every mesh axis \(\['x', 'y'\]\); at least one must be manual",
        ),
    ],
    ids=[
        "mesh_type",
        "unknown_axis_path",
        "leaf_type",
        "automatic_axis",
        "unknown_manual",
        "nothing_manual",
    ],
)
def test_errors_name_the_spec_and_axis(kwargs: dict, match: str) -> None:
    with pytest.raises(ShardingError, match=match):
        meshjit.shard_map(lambda b: b, **kwargs)


def test_both_spellings_of_an_option_refused() -> None:
    with pytest.raises(TypeError, match=r"check_rep .* and check_vma given both"):
        meshjit.shard_map(
            lambda b: b,
            mesh=MESH,
            in_specs=P(),
            out_specs=P(),
            check_rep=True,
            check_vma=True,
        )
    with pytest.raises(TypeError, match=r"auto .* and axis_names .* given both"):
        meshjit.shard_map(lambda b: b, MESH, P(), P(), auto={"x"}, axis_names={"y"})
    with pytest.raises(TypeError, match="missing required argument 'out_specs'"):
        meshjit.shard_map(lambda b: b, mesh=MESH, in_specs=P())
