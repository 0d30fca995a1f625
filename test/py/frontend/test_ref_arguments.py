"""Mutable arrays (`jax.new_ref`) passed as arguments, against jax.jit on 8
CPU devices: the function reads and writes them, their new values are
written back after the call, a sharded one keeps its layout, and what jax
refuses (one array passed twice, passed and closed over, returned) is
refused with the argument's path; a donated one is kept, with jax's warning."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit

pytestmark = pytest.mark.devices(8)

MESH = jax.sharding.Mesh(np.array(jax.devices()[:8]), ("x",))
ROW = NamedSharding(MESH, P("x"))


def _accumulate(acc: Any, x: jax.Array) -> jax.Array:
    acc["total"][...] = acc["total"][...] + x.sum(0)
    acc["count"][...] = acc["count"][...] + 1
    return x * acc["count"][...]


def _run(jit: Any) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    acc = {"total": jax.new_ref(jnp.zeros(4)), "count": jax.new_ref(jnp.int32(0))}
    step = jit(_accumulate)
    outs = [np.asarray(step(acc, jnp.full((16, 4), float(i)))) for i in range(3)]
    return outs, np.asarray(acc["total"][...]), np.asarray(acc["count"][...])


def test_ref_arguments_are_read_and_written_back_as_under_jax_jit() -> None:
    ours, theirs = _run(meshjit.jit), _run(jax.jit)
    for a, b in zip(ours[0], theirs[0], strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ours[1], theirs[1])
    np.testing.assert_array_equal(ours[1], [48.0] * 4)  # 16 * (0 + 1 + 2)
    assert int(ours[2]) == int(theirs[2]) == 3


def test_a_sharded_ref_keeps_its_layout_and_calls_reuse_the_executable() -> None:
    def step(r: Any, x: jax.Array) -> jax.Array:
        r[...] = r[...] * 2 + x
        return r[...].sum()

    f = meshjit.jit(step)
    ref = jax.new_ref(jax.device_put(jnp.arange(16.0), ROW))
    other = jax.new_ref(jax.device_put(jnp.ones(16), ROW))
    x = jax.device_put(jnp.ones(16), ROW)
    assert float(f(ref, x)) == 2 * 120 + 16
    assert float(f(other, x)) == 2 * 16 + 16  # another ref: its own value
    np.testing.assert_array_equal(ref[...], np.arange(16) * 2 + 1)
    np.testing.assert_array_equal(other[...], np.full(16, 3.0))
    assert ref[...].sharding == ROW
    assert other[...].sharding == ROW
    assert f.cache_info().compiles == 1


def test_in_shardings_lay_out_the_program_and_the_ref_stays_as_it_is() -> None:
    def step(r: Any, x: jax.Array) -> jax.Array:
        r[...] = r[...] + x
        return x * 2

    ref = jax.new_ref(jax.device_put(jnp.zeros(16), ROW))
    f = meshjit.jit(step, in_shardings=(ROW, ROW), out_shardings=ROW)
    out = f(ref, jax.device_put(jnp.arange(16.0), ROW))
    np.testing.assert_array_equal(out, np.arange(16) * 2)
    np.testing.assert_array_equal(ref[...], np.arange(16))
    assert ref[...].sharding == ROW


def test_lower_and_compile_take_refs() -> None:
    def step(r: Any, x: jax.Array) -> jax.Array:
        r[...] = r[...] + x
        return r[...] * 2

    ref = jax.new_ref(jnp.ones(8))
    compiled = meshjit.jit(step).lower(ref, jnp.ones(8)).compile()
    np.testing.assert_array_equal(compiled(ref, jnp.ones(8)), np.full(8, 4.0))
    np.testing.assert_array_equal(ref[...], np.full(8, 2.0))
    with pytest.raises(meshjit.JitArgumentError, match=r"`r`.*mutable array"):
        compiled(jnp.ones(8), jnp.ones(8))


def test_lower_takes_a_shape_dtype_struct_marked_is_ref() -> None:
    """jax's test_sharded_aot_mutable_sds: `ShapeDtypeStruct(...,
    is_ref=True)` lowers for a mutable array (it was traced as a plain array,
    and the in-place update refused)."""

    def step(r: Any) -> None:
        r[...] += 1.0
        r[0] += 1
        r[1] += 5

    sds = jax.ShapeDtypeStruct((16,), np.float32, sharding=ROW, is_ref=True)
    compiled = meshjit.jit(step).lower(sds).compile()
    ref = jax.new_ref(jax.device_put(jnp.arange(16.0), ROW))
    compiled(ref)
    want = np.arange(16.0) + 1
    want[0] += 1
    want[1] += 5
    np.testing.assert_array_equal(ref[...], want)
    assert ref[...].sharding == ROW
    with pytest.raises(meshjit.JitArgumentError, match=r"`r`.*mutable array"):
        compiled(jax.device_put(jnp.arange(16.0), ROW))


def test_a_ref_read_only_and_one_written_inside_grad() -> None:
    def step(scale: Any, seen: Any, x: jax.Array) -> jax.Array:
        def loss(x: jax.Array) -> jax.Array:
            return (x * scale[...]).sum()

        seen[...] = seen[...] + x.sum()
        return jax.grad(loss)(x)

    def run(jit: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        scale, seen = jax.new_ref(jnp.arange(16.0)), jax.new_ref(jnp.float32(0))
        out = jit(step)(scale, seen, jnp.ones(16))
        return np.asarray(out), np.asarray(scale[...]), np.asarray(seen[...])

    for a, b in zip(run(meshjit.jit), run(jax.jit), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_donated_ref_is_not_donated_and_says_so_as_jax_does() -> None:
    ref = jax.new_ref(jnp.arange(8.0))
    f = meshjit.jit(lambda a: a[...] * 2, donate_argnums=0)
    with pytest.warns(UserWarning, match=r"not usable.*`a` .a mutable array"):
        out = f(ref)
    np.testing.assert_array_equal(out, np.arange(8) * 2)
    np.testing.assert_array_equal(ref[...], np.arange(8))  # still readable


@pytest.mark.parametrize("case", ["twice", "closed_over", "returned"])
def test_what_jax_refuses_is_refused_with_the_argument_path(case: str) -> None:
    ref = jax.new_ref(jnp.arange(8.0))
    if case == "twice":
        f = meshjit.jit(lambda a, b: a[...] + b[...])
        with pytest.raises(meshjit.JitArgumentError, match=r"`a`.*`b`"):
            f(ref, ref)
    elif case == "closed_over":

        def g(a: Any) -> jax.Array:
            ref[...] = ref[...] + 1
            return a[...]

        with pytest.raises(meshjit.JitArgumentError, match=r"`a`.*closes over"):
            meshjit.jit(g)(ref)
    else:
        with pytest.raises(meshjit.JitArgumentError, match="cannot be returned"):
            meshjit.jit(lambda a: a)(ref)


@pytest.mark.parametrize("passed", [True, False], ids=["argument", "closed_over"])
def test_a_ref_of_prng_keys_is_split_and_written_back_as_keys(passed: bool) -> None:
    """A mutable array of typed PRNG keys (a generator's state): its key data
    is what the program takes and returns; the array holds keys again."""

    def run(jit: Any) -> tuple[list[np.ndarray], np.ndarray]:
        state = jax.new_ref(jax.random.key(0))

        def draw(r: Any, x: jax.Array) -> jax.Array:
            key, sub = jax.random.split(r[...])
            r[...] = key
            return x + jax.random.normal(sub, (8,))

        if passed:
            f = jit(draw)
            outs = [np.asarray(f(state, jnp.zeros(8))) for _ in range(2)]
        else:
            g = jit(lambda x: draw(state, x))
            outs = [np.asarray(g(jnp.zeros(8))) for _ in range(2)]
        return outs, np.asarray(jax.random.key_data(state[...]))

    (ours, our_key), (theirs, their_key) = run(meshjit.jit), run(jax.jit)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(our_key, their_key)
