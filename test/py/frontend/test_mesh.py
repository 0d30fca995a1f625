"""Mesh: JAX's attributes and reprs, stricter validation, the `with mesh:` stack."""

from __future__ import annotations

import collections
import threading

import jax
import numpy as np
import pytest
from jax.sharding import AxisType

from meshjit.dialects.sharding import MeshAxis, MeshModel
from meshjit.sharding import Mesh, ShardingError, current_mesh

pytestmark = pytest.mark.devices(8)

DEVICES = jax.devices()


def grid() -> np.ndarray:
    return np.array(DEVICES).reshape(2, 4)


def test_attributes_match_jax() -> None:
    ours = Mesh(grid(), ("x", "y"))
    theirs = jax.sharding.Mesh(grid(), ("x", "y"))
    assert ours.shape == theirs.shape == collections.OrderedDict(x=2, y=4)
    assert ours.size == theirs.size == 8
    assert ours.axis_names == theirs.axis_names
    assert ours.axis_sizes == theirs.axis_sizes
    assert ours.axis_types == theirs.axis_types
    assert ours.shape_tuple == theirs.shape_tuple
    assert (ours.device_ids == theirs.device_ids).all()
    assert ours.local_devices == theirs.local_devices
    assert ours.is_multi_process == theirs.is_multi_process
    assert ours.empty == theirs.empty
    assert repr(ours) == repr(theirs)
    assert str(ours) == str(theirs)
    assert not ours.devices.flags.writeable


def test_single_name_and_list_of_devices() -> None:
    mesh = Mesh(DEVICES, "x")
    assert mesh.axis_names == ("x",)
    assert mesh.shape == {"x": 8}


def test_empty_mesh_matches_jax() -> None:
    ours = Mesh(np.empty((), dtype=object), ())
    theirs = jax.sharding.Mesh(np.empty((), dtype=object), ())
    assert ours.empty
    assert theirs.empty
    assert ours.size == theirs.size == 0
    assert repr(ours) == repr(theirs)


def test_value_equality_and_hash() -> None:
    a = Mesh(grid(), ("x", "y"))
    assert a == Mesh(grid(), ("x", "y"))
    assert hash(a) == hash(Mesh(grid(), ("x", "y")))
    assert a != Mesh(grid(), ("y", "x"))
    assert a != Mesh(grid()[::-1], ("x", "y"))
    assert a != Mesh(grid(), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)


def test_round_trip_through_jax() -> None:
    ours = Mesh(grid()[:, ::-1], ("x", "y"), (AxisType.Explicit, AxisType.Auto))
    assert Mesh.from_jax(ours.to_jax()) == ours


def test_to_model() -> None:
    model = Mesh(grid()[::-1], ("x", "y")).to_model()
    # Device order lives in the device assignment; the model uses positions.
    assert model == MeshModel((MeshAxis("x", 2), MeshAxis("y", 4)))


@pytest.mark.parametrize(
    ("devices", "names", "pattern"),
    [
        (grid(), ("x", "x"), r"duplicate mesh axis name 'x'"),
        (
            grid(),
            ("x",),
            r"the device array has 2 dims \(shape \(2, 4\)\) but "
            r"axis_names=\('x',\) names 1 axes",
        ),
        (np.array(DEVICES), (None,), r"names must be non-empty strings, found None"),
        (np.array([DEVICES[0], DEVICES[0]]), ("x",), r"device .* appears 2 times"),
        (np.array([1, 2]), ("x",), r"must be jax devices.*found 1 of type int"),
    ],
)
def test_validation_jax_lacks(
    devices: np.ndarray, names: tuple[object, ...], pattern: str
) -> None:
    with pytest.raises(ShardingError, match=pattern):
        Mesh(devices, names)  # type: ignore[arg-type]


def test_axis_types_validation() -> None:
    with pytest.raises(ShardingError, match=r"gives 1 types for 2 axes"):
        Mesh(grid(), ("x", "y"), (AxisType.Auto,))
    with pytest.raises(ShardingError, match=r"must be jax.sharding.AxisType values"):
        Mesh(grid(), ("x", "y"), ("Explicit", "Auto"))  # type: ignore[arg-type]


def test_context_stack_nests_and_is_per_thread() -> None:
    outer = Mesh(grid(), ("x", "y"))
    inner = Mesh(np.array(DEVICES), ("i",))
    assert current_mesh() is None
    with outer:
        assert current_mesh() is outer
        with inner as entered:
            assert entered is inner
            assert current_mesh() is inner
            seen: list[object] = []
            thread = threading.Thread(target=lambda: seen.append(current_mesh()))
            thread.start()
            thread.join()
            assert seen == [None]
        assert current_mesh() is outer
    assert current_mesh() is None


def test_context_pops_on_error() -> None:
    mesh = Mesh(grid(), ("x", "y"))
    with pytest.raises(RuntimeError), mesh:
        raise RuntimeError("boom")
    assert current_mesh() is None
