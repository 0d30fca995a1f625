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


def _both(make: Any) -> list[Any]:
    return [make(jax.jit), make(meshjit.jit)]


def test_format_auto_layouts_are_chosen_and_reported_as_jax_does() -> None:
    """in/out_shardings=Format(Layout.AUTO): XLA chooses the layouts;
    `input_formats`/`output_formats` say which (a transpose's result in the
    transposed layout, no copy), the same as under jax.jit."""
    host = np.arange(32, dtype=np.int32).reshape(4, 4, 2)
    s = NamedSharding(MESH, P("x", "y"))
    sds = jax.ShapeDtypeStruct(host.shape, host.dtype, sharding=s)

    def f(x: Any) -> Any:
        return x.T

    plain = _both(lambda jit: jit(f).lower(sds).compile())
    auto = _both(
        lambda jit: (
            jit(f, in_shardings=Format(Layout.AUTO), out_shardings=Format(Layout.AUTO))
            .lower(sds)
            .compile()
        )
    )
    for theirs, ours in (plain, auto):
        assert ours.input_formats == theirs.input_formats
        assert ours.output_formats == theirs.output_formats
    assert plain[1].output_formats.layout.major_to_minor == (0, 1, 2)
    assert auto[1].output_formats.layout.major_to_minor == (2, 1, 0)
    arr = jax.device_put(host, s)
    for compiled in (plain[1], auto[1]):
        out = compiled(arr)
        np.testing.assert_array_equal(np.asarray(out), host.T)
        assert out.format == compiled.output_formats
    # an argument put in the compiled input format, and the output fed back
    again = jax.device_put(host, auto[1].input_formats[0][0])
    np.testing.assert_array_equal(np.asarray(auto[1](again)), host.T)


def test_format_concrete_layouts_in_jit_as_jax() -> None:
    """A concrete input layout: committed arrays in it are taken as they are,
    committed arrays in another are refused (as jax), uncommitted ones are
    put in it; an AUTO output of a transpose comes back transposed."""
    host = np.arange(16 * 128, dtype=np.int32).reshape(16, 128)
    s = NamedSharding(MESH, P("x", "y"))
    arr = jax.device_put(host, s)  # the default layout, (0, 1)

    def f(x: Any) -> Any:
        return x.T

    outs = _both(
        lambda jit: jit(
            f,
            in_shardings=Format(Layout(major_to_minor=(0, 1)), s),
            out_shardings=Format(Layout.AUTO),
        )(arr)
    )
    for out in outs:
        np.testing.assert_array_equal(np.asarray(out), host.T)
        assert out.format.layout.major_to_minor == (1, 0)
    for jit in (jax.jit, meshjit.jit):
        g = jit(f, in_shardings=Format(Layout(major_to_minor=(1, 0)), s))
        with pytest.raises(ValueError, match="Layout passed to jit does not match"):
            g(arr)
    one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    h = meshjit.jit(
        lambda x: x + 1, in_shardings=Format(Layout(major_to_minor=(1, 0)), one)
    )
    uncommitted = jax.numpy.arange(8 * 128).reshape(8, 128)
    np.testing.assert_array_equal(
        np.asarray(h(uncommitted)), np.arange(8 * 128).reshape(8, 128) + 1
    )


def test_layout_errors_are_clear() -> None:
    s = NamedSharding(MESH, P("x"))
    with pytest.raises(ValueError, match="rank of the value should match"):
        meshjit.jit(
            lambda x: x * 2, in_shardings=Format(Layout(major_to_minor=(0, 1, 2)), s)
        )(np.arange(8))
    with pytest.raises(ValueError, match="does not accept device-local layouts"):
        meshjit.jit(lambda x: x, in_shardings=Layout.AUTO)
    with pytest.raises(ValueError, match=r"output layout\*\* to \*\*Layout.AUTO"):
        meshjit.jit(
            lambda x: x * 2, donate_argnums=0, in_shardings=Format(Layout.AUTO)
        )(jax.numpy.arange(8))
    with pytest.raises(ValueError, match=r"a memory layout .* is not supported"):
        meshjit.jit(
            lambda x: meshjit.with_sharding_constraint(
                x, Format(Layout(major_to_minor=(0,)), s)
            )
        )(np.arange(8.0))
    # a Format with no layout is its sharding
    out = meshjit.jit(
        lambda x: meshjit.with_sharding_constraint(x * 2, Format(None, s))
    )(np.arange(8.0))
    np.testing.assert_array_equal(np.asarray(out), np.arange(8.0) * 2)


def test_donation_with_an_auto_output_layout_as_jax() -> None:
    """As jax (test_layout_donation_auto): with the output's sharding left to
    propagation on several devices the donation goes to XLA unpaired, and an
    AUTO output layout beside a default input layout is fine; on one device
    (the pair decided before compiling) it is refused with jax's hint."""
    s = NamedSharding(MESH, P("x", "y"))
    host = np.arange(128 * 16, dtype=np.int32).reshape(128, 16)
    for jit in (jax.jit, meshjit.jit):
        arr = jax.device_put(host, s)
        out = jit(lambda x: x * x, out_shardings=Format(Layout.AUTO), donate_argnums=0)(
            arr
        )
        np.testing.assert_array_equal(np.asarray(out), host * host)
        assert arr.is_deleted()
        g = jit(lambda x: x * x, out_shardings=Format(Layout.AUTO), donate_argnums=0)
        with pytest.raises(ValueError, match=r"input layout\*\* to \*\*Layout.AUTO"):
            g(jax.numpy.arange(8))
