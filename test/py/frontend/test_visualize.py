"""visualize_sharding: any rank, no `rich`, a string that says who holds what."""

from __future__ import annotations

import io
from typing import Any

import jax
import numpy as np
import pytest

from meshjit.sharding import (
    Mesh,
    NamedSharding,
    P,
    PmapSharding,
    SingleDeviceSharding,
    render_sharding,
    visualize_array_sharding,
    visualize_sharding,
)

pytestmark = pytest.mark.devices(8)

DEVICES = jax.devices()
MESH = Mesh(np.array(DEVICES).reshape(2, 4), ("x", "y"))


def jax_p(*entries: Any) -> Any:
    """jax.P, whose constructor jax leaves untyped."""
    return jax.P(*entries)  # type: ignore[no-untyped-call]


def test_two_dims_grid() -> None:
    text = render_sharding((8, 8), NamedSharding(MESH, P("x", "y")))
    lines = text.splitlines()
    assert lines[1].split() == ["0:2", "2:4", "4:6", "6:8"]
    assert lines[3] == "0:4 │ CPU 0 │ CPU 1 │ CPU 2 │ CPU 3 │"
    assert lines[5] == "4:8 │ CPU 4 │ CPU 5 │ CPU 6 │ CPU 7 │"


def test_replicated_devices_share_a_cell() -> None:
    text = render_sharding((8,), NamedSharding(MESH, P("y")))
    assert "│ CPU 0,4 │ CPU 1,5 │ CPU 2,6 │ CPU 3,7 │" in text


def test_three_dims_get_one_grid_per_leading_block() -> None:
    text = render_sharding((4, 2, 8), NamedSharding(MESH, P("x", None, "y")))
    assert "[0:2, :, :]" in text
    assert "[2:4, :, :]" in text
    assert text.count("┌") == 2
    assert "CPU 7" in text.split("[2:4, :, :]")[1]
    assert "CPU 7" not in text.split("[2:4, :, :]")[0]


def test_rank_zero_and_four() -> None:
    scalar = render_sharding((), NamedSharding(MESH, P()))
    assert "CPU 0,1,2,3,4,5,6,7" in scalar
    four = render_sharding((2, 2, 4, 4), NamedSharding(MESH, P("x", None, None, "y")))
    assert four.count("┌") == 2
    assert "[0:1, :, :, :]" in four


def test_uneven_unstacked_pmap() -> None:
    text = render_sharding((8, 2), PmapSharding.default((8, 2)))
    assert "0:1" in text
    assert "7:8" in text


def test_prints_and_returns() -> None:
    out = io.StringIO()
    text = visualize_sharding((4,), SingleDeviceSharding(DEVICES[2]), file=out)
    assert out.getvalue() == text + "\n"
    assert "CPU 2" in text


def test_jax_array_and_jax_sharding() -> None:
    sharding = jax.sharding.NamedSharding(MESH.to_jax(), jax_p("x"))
    array = jax.device_put(np.zeros((4, 4, 4), np.float32), sharding)
    out = io.StringIO()
    text = visualize_array_sharding(array, file=out)
    assert "[0:2, :, :]" in text
    assert "[2:4, :, :]" in text


def test_bad_shape_raises_the_sharding_error() -> None:
    from meshjit.sharding import ShardingError

    with pytest.raises(ShardingError, match="not divisible"):
        render_sharding((3,), NamedSharding(MESH, P("x")))
