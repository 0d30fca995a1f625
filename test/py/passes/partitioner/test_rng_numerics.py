"""`rng_bit_generator` with its bits split: generated whole on the
replicated state and each device's block cut out (XLA fuses the cut into the
generator), bit-identical to jax.jit on one device, the bits and the new
state, with no collective and no remark. 8 CPU devices."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit

pytestmark = pytest.mark.devices(8)

MESHES = {
    "8": Mesh(np.array(jax.devices()[:8]), ("x",)),
    "2x4": Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y")),
}
ALGORITHMS = {
    "three_fry": lax.RandomAlgorithm.RNG_THREE_FRY,
    "philox": lax.RandomAlgorithm.RNG_PHILOX,
    "default": lax.RandomAlgorithm.RNG_DEFAULT,
}
KEY = np.array([0x12345678, 0x9ABCDEF0, 0xFFFFFFF0, 7], np.uint32)


def generator(
    shape: tuple[int, ...], dtype: Any, algorithm: str
) -> Callable[[jax.Array], tuple[jax.Array, jax.Array]]:
    def f(key: jax.Array) -> tuple[jax.Array, jax.Array]:
        return lax.rng_bit_generator(
            key, shape, dtype=dtype, algorithm=ALGORITHMS[algorithm]
        )

    return f


def check(fn: Callable[..., Any], mesh: str, spec: P, *args: Any) -> meshjit.Compiled:
    """`fn` with its last result laid out as `spec`, against jax.jit on one
    device, bit for bit."""
    m = MESHES[mesh]
    outs = (NamedSharding(m, P()), NamedSharding(m, spec))
    compiled = meshjit.jit(fn, out_shardings=outs).lower(*args).compile()
    got = compiled(*args)
    want = jax.jit(fn)(*[jax.device_put(a, jax.devices()[0]) for a in args])
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    return compiled


def generated(compiled: meshjit.Compiled) -> list[str]:
    """The bits' types of the partitioned module's rng_bit_generators."""
    pattern = r"rng_bit_generator .*-> \(tensor<2xui64>, (tensor<[^>]*>)\)"
    return re.findall(pattern, compiled.as_text("partitioned"))


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("dtype", [jnp.uint8, jnp.uint32])
@pytest.mark.parametrize(
    ("mesh", "spec"),
    [
        ("8", P("x")),
        ("2x4", P(("y", "x"))),
        ("2x4", P(None, "y")),
        ("2x4", P("x", "y")),
    ],
)
def test_the_block_is_cut_from_the_whole_output(
    algorithm: str, dtype: Any, mesh: str, spec: P
) -> None:
    compiled = check(generator((64, 16), dtype, algorithm), mesh, spec, KEY)
    name = np.dtype(dtype).name.replace("uint", "ui")
    assert generated(compiled) == [f"tensor<64x16x{name}>"]
    assert "dynamic_slice" in compiled.as_text("partitioned")
    assert not compiled.partition_report.collectives
    assert not compiled.partition_report.remarks


def test_jax_rbg_keys_draw_split_normals() -> None:
    """jax's `rbg` PRNG: `jax.random.normal` on a split batch, and the next
    key (from the generator's state), as jax.jit draws them."""

    def draw(data: jax.Array) -> tuple[jax.Array, jax.Array]:
        key = jax.random.wrap_key_data(data, impl="rbg")
        nxt, sub = jax.random.split(key)
        return jax.random.key_data(nxt), jax.random.normal(sub, (256, 32))

    data = jax.random.key_data(jax.random.key(3, impl="rbg"))
    compiled = check(draw, "8", P("x"), data)
    assert "tensor<256x32xui32>" in generated(compiled)
    assert not compiled.partition_report.collectives
