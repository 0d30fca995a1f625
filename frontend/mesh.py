"""`Mesh`: an N-d array of PJRT devices with named axes, and the mesh context.

Behaves like `jax.sharding.Mesh` (same attributes, reprs and `with mesh:` use) but
validates what JAX accepts silently: duplicate axis names, duplicate devices,
`None` names and a device array whose rank differs from the number of names.
`with mesh:` pushes onto a thread-local stack that `pjit` and
`with_sharding_constraint` read through `current_mesh()`, as they read jax's
own `with jax.sharding.Mesh(...):`.
"""

from __future__ import annotations

import collections
import contextlib
import math
import threading
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any

import jax
import numpy as np
from jax.sharding import AxisType

from meshjit.compiler.bridge import legacy_context_mesh
from meshjit.dialects.sharding import MeshAxis, MeshModel
from meshjit.errors import ShardingError

Device = jax.Device


class _MeshStack(threading.local):
    def __init__(self) -> None:
        self.meshes: list[Mesh] = []


_STACK = _MeshStack()


_FROM_JAX: dict[jax.sharding.Mesh, Mesh] = {}


def current_mesh() -> Mesh | None:
    """The innermost mesh entered with `with mesh:` on this thread, if any: a
    meshjit Mesh first, else a `jax.sharding.Mesh` entered with jax's own
    (deprecated) `with mesh:`, which jax's pjit and with_sharding_constraint
    read too."""
    if _STACK.meshes:
        return _STACK.meshes[-1]
    found = legacy_context_mesh()
    if found is None:
        return None
    mesh = _FROM_JAX.get(found)
    if mesh is None:
        mesh = _FROM_JAX.setdefault(found, Mesh.from_jax(found))
    return mesh


class Mesh:
    """Devices laid out in an N-d array whose axes have names.

    `Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))`.
    """

    __slots__ = ("_axis_names", "_axis_types", "_devices", "_hash", "_stand_in")

    _devices: np.ndarray[Any, np.dtype[Any]]
    _axis_names: tuple[str, ...]
    _axis_types: tuple[AxisType, ...]
    _hash: int
    # A jax AbstractMesh lowered on: this process's first devices stand in
    # for the ones `Lowered.compile(device_assignment=...)` will name.
    _stand_in: bool

    def __init__(
        self,
        devices: np.ndarray[Any, np.dtype[Any]] | Sequence[Any],
        axis_names: str | Sequence[str],
        axis_types: AxisType | Sequence[AxisType] | None = None,
    ) -> None:
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        array = np.array(devices, dtype=object)
        for name in names:
            if isinstance(name, str) and name:
                continue
            raise ShardingError(
                f"mesh axis names must be non-empty strings, found {name!r} in "
                f"axis_names={names}; name every axis, e.g. ('x', 'y')"
            )
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise ShardingError(
                f"duplicate mesh axis name {dup!r} in axis_names={names}; each "
                "axis needs its own name (JAX accepts this and then merges the "
                "axes silently)"
            )
        if array.ndim != len(names):
            raise ShardingError(
                f"the device array has {array.ndim} dims (shape {array.shape}) but "
                f"axis_names={names} names {len(names)} axes; expected one name "
                "per dim: reshape the devices or change the names"
            )
        # A 0-d array with no names is the empty mesh (JAX's default context).
        flat = tuple(array.flat) if array.ndim else ()
        for device in flat:
            if not hasattr(device, "id") or not hasattr(device, "platform"):
                raise ShardingError(
                    f"mesh devices must be jax devices (jax.devices()), found "
                    f"{device!r} of type {type(device).__name__}"
                )
        if len(set(flat)) != len(flat):
            dup = next(d for d in flat if flat.count(d) > 1)
            raise ShardingError(
                f"device {dup} appears {flat.count(dup)} times in the mesh; "
                "expected each device once: use distinct devices"
            )
        types = self._check_axis_types(names, axis_types)
        array.flags.writeable = False
        self._devices = array
        self._axis_names = names
        self._axis_types = types
        self._stand_in = False
        self._hash = hash((names, types, array.shape, flat))

    @classmethod
    def stand_in(cls, abstract: Any) -> Mesh:
        """A mesh for lowering on a jax `AbstractMesh` (axes, no devices):
        the first devices of this process, in its shape, marked so that
        compiling needs a device assignment (`Lowered.compile`); for one
        device, the default device (as jax)."""
        size = math.prod(abstract.axis_sizes)
        pool = jax.devices()
        if size > len(pool):
            raise ShardingError(
                f"{abstract} has {size} devices but this process sees "
                f"{len(pool)}: meshjit lowers an AbstractMesh on as many devices "
                "as it has (the partitioned program is the same for any)"
            )
        devices = np.array(pool[:size], dtype=object).reshape(abstract.axis_sizes)
        mesh = cls(devices, abstract.axis_names, abstract.axis_types)
        if size == 1:
            return mesh  # as jax: one device is the default device
        mesh._stand_in = True
        mesh._hash = hash((mesh._hash, "stand-in"))
        return mesh

    @property
    def is_stand_in(self) -> bool:
        """Made for an AbstractMesh: its devices are not the program's yet."""
        return self._stand_in

    def with_devices(self, devices: Sequence[Any]) -> Mesh:
        """This mesh's axes over `devices` (row-major): a stand-in made concrete."""
        array = np.array(list(devices), dtype=object).reshape(self._devices.shape)
        return Mesh(array, self._axis_names, self._axis_types)

    @staticmethod
    def _check_axis_types(
        names: tuple[str, ...], axis_types: AxisType | Sequence[AxisType] | None
    ) -> tuple[AxisType, ...]:
        if axis_types is None:
            return (AxisType.Auto,) * len(names)
        types = (axis_types,) if isinstance(axis_types, AxisType) else tuple(axis_types)
        if len(types) != len(names):
            raise ShardingError(
                f"axis_types={types} gives {len(types)} types for "
                f"{len(names)} axes {names}; give one per axis"
            )
        bad = [t for t in types if not isinstance(t, AxisType)]
        if bad:
            raise ShardingError(
                f"axis_types must be jax.sharding.AxisType values, found {bad!r}"
            )
        return types

    # -- attributes as in jax.sharding.Mesh -------------------------------------

    @property
    def devices(self) -> np.ndarray[Any, np.dtype[Any]]:
        return self._devices

    @property
    def axis_names(self) -> tuple[str, ...]:
        return self._axis_names

    @property
    def axis_types(self) -> tuple[AxisType, ...]:
        return self._axis_types

    @property
    def shape(self) -> collections.OrderedDict[str, int]:
        return collections.OrderedDict(
            zip(self._axis_names, self._devices.shape, strict=True)
        )

    @property
    def shape_tuple(self) -> tuple[tuple[str, int], ...]:
        return tuple(zip(self._axis_names, self._devices.shape, strict=True))

    @property
    def axis_sizes(self) -> tuple[int, ...]:
        return tuple(self._devices.shape)

    @property
    def size(self) -> int:
        return 0 if self.empty else math.prod(self._devices.shape)

    @property
    def empty(self) -> bool:
        return self._devices.ndim == 0

    @property
    def device_ids(self) -> np.ndarray[Any, np.dtype[Any]]:
        ids = np.empty(self._devices.shape, dtype=int)
        for index, device in np.ndenumerate(self._devices):
            ids[index] = device.id
        return ids

    @property
    def flat_devices(self) -> tuple[Any, ...]:
        """The devices row-major: the device assignment of shardings on this mesh."""
        return () if self.empty else tuple(self._devices.flat)

    @property
    def local_devices(self) -> list[Any]:
        here = jax.process_index()
        return [d for d in self.flat_devices if d.process_index == here]

    @property
    def is_multi_process(self) -> bool:
        return len({d.process_index for d in self.flat_devices}) > 1

    # -- conversions -------------------------------------------------------------

    def to_model(self) -> MeshModel:
        """Shardy's mesh: the axes, with iota device ids (positions in the mesh)."""
        return MeshModel(
            tuple(
                MeshAxis(n, s)
                for n, s in zip(self._axis_names, self._devices.shape, strict=True)
            )
        )

    def to_jax(self) -> jax.sharding.Mesh:
        return jax.sharding.Mesh(self._devices, self._axis_names, self._axis_types)

    @classmethod
    def from_jax(cls, mesh: jax.sharding.Mesh) -> Mesh:
        return cls(np.asarray(mesh.devices), mesh.axis_names, mesh.axis_types)

    # -- context manager -----------------------------------------------------------

    def __enter__(self) -> Mesh:
        _STACK.meshes.append(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not _STACK.meshes or _STACK.meshes[-1] is not self:
            raise ShardingError(
                "`with mesh:` blocks must nest: this mesh is not the innermost one"
            )
        _STACK.meshes.pop()

    # -- value semantics -------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mesh):
            return NotImplemented
        if self is other:
            return True
        return (
            self._axis_names == other._axis_names
            and self._axis_types == other._axis_types
            and self._devices.shape == other._devices.shape
            and self.flat_devices == other.flat_devices
            and self._stand_in == other._stand_in
        )

    def __hash__(self) -> int:
        return self._hash

    def __iter__(self) -> Iterator[str]:
        return iter(self._axis_names)

    def _types_text(self) -> str:
        return "(" + ", ".join(t.name for t in self._axis_types) + ")"

    def __repr__(self) -> str:
        if self.empty:
            return "Mesh(axis_sizes=(), axis_names=())"
        return (
            f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self._axis_names}, "
            f"axis_types={self._types_text()})"
        )

    def __str__(self) -> str:
        if self.empty:
            return "Mesh()"
        sizes = ", ".join(f"{n!r}: {s}" for n, s in self.shape_tuple)
        return f"Mesh({sizes}, axis_types={self._types_text()})"

    def describe_devices(self) -> str:
        """Device ids in mesh order, e.g. `[[0, 1], [2, 3]]`: what reprs hide."""
        return str(self.device_ids.tolist())


def set_mesh(mesh: Mesh | jax.sharding.Mesh) -> Any:
    """`jax.set_mesh` for a meshjit or a jax Mesh: the mesh that bare
    PartitionSpecs in `jit`, `device_put`, `shard_map` and `reshard` use, and
    the one explicit sharding mode types values with. Sets it at once (a
    global setter) and returns a context manager that restores the previous
    one, as jax's does; inside a jitted function it raises jax's ValueError."""
    return jax.set_mesh(mesh.to_jax() if isinstance(mesh, Mesh) else mesh)


@contextlib.contextmanager
def use_mesh(mesh: Mesh | jax.sharding.Mesh) -> Iterator[None]:
    """`jax.sharding.use_mesh` as jax 0.5-0.6 had it (removed since): a
    context manager only, with `jax.set_mesh`'s meaning inside the block."""
    with set_mesh(mesh):
        yield
