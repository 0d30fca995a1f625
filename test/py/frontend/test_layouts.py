"""Memory layouts (`jax.experimental.layout`): an argument whose buffers are
laid out otherwise than the executable takes them is read correctly.

A `jax.device_put(x, Format(Layout(major_to_minor=...), s))` array holds its
bytes in another order than the default row-major; an executable reading
them as row-major computes on transposed data. jax.jit compiles a program
for such an argument's layout; meshjit copies the argument into the
executable's layout (and keeps such calls on its Python path, which checks
every call).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest
from jax.experimental.layout import Format, Layout
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit

pytestmark = pytest.mark.devices(8)

MESH = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)


def _custom(x: np.ndarray, spec: P, major_to_minor: tuple[int, ...]) -> jax.Array:
    s = NamedSharding(MESH, spec)
    arr = jax.device_put(x, Format(Layout(major_to_minor=major_to_minor), s))
    assert arr.format.layout.major_to_minor == major_to_minor
    return arr


@pytest.mark.parametrize(
    ("shape", "spec", "order"),
    [((8, 8), P("x", "y"), (1, 0)), ((4, 8, 6), P(None, "y"), (2, 0, 1))],
)
def test_an_argument_in_another_layout_is_read_correctly(
    shape: tuple[int, ...], spec: P, order: tuple[int, ...]
) -> None:
    host = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    custom = _custom(host, spec, order)
    plain = jax.device_put(host, NamedSharding(MESH, spec))

    def f(a: Any, b: Any) -> Any:
        return a * 2 + b.sum()

    fn = meshjit.jit(f)
    # the custom layout first, again (no cached fast call may skip the
    # copy), then the default one, then the custom one after it
    for a in (custom, custom, plain, custom):
        got = fn(a, plain)
        np.testing.assert_array_equal(np.asarray(got), host * 2 + host.sum())
        assert got.sharding.is_equivalent_to(NamedSharding(MESH, spec), len(shape))
    compiled = meshjit.jit(f).lower(plain, plain).compile()
    np.testing.assert_array_equal(
        np.asarray(compiled(custom, custom)), host * 2 + host.sum()
    )


def test_with_ordered_effects_too() -> None:
    """A program with ordered effects (token arguments: PJRT does not say
    its parameter layouts) takes each argument in its default layout."""
    host = np.arange(64, dtype=np.float32).reshape(8, 8)
    seen: list[float] = []

    def f(a: Any) -> Any:
        jax.debug.callback(lambda v: seen.append(float(v)), a[0, 1], ordered=True)
        return a * 2

    one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    a = jax.device_put(host, Format(Layout(major_to_minor=(1, 0)), one))
    assert a.format.layout.major_to_minor == (1, 0)
    got = meshjit.jit(f)(a)
    np.testing.assert_array_equal(np.asarray(got), host * 2)
    assert seen == [1.0]
