"""The `jax.sharding` classes, JAX-exact where JAX defines them, stricter elsewhere.

`NamedSharding`, `SingleDeviceSharding` and `GSPMDSharding` place data exactly as
jax 0.10.2 does (`devices_indices_map`, `shard_shape`, `is_equivalent_to`, ...);
`PositionalSharding` and `PmapSharding`, which jax 0.10.2 removed, behave as they did
in jax 0.4.30. Every class computes placement through one HLO sharding model
(`meshjit.dialects.gspmd_text`), so classes agree with each other by construction.
Bad specs raise `ShardingError` (a ValueError) naming the axis, dim and sizes.
"""

from __future__ import annotations

import abc
import itertools
import math
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

import jax
import numpy as np
from jax.sharding import AxisType

from meshjit.compiler.bridge import DuplicateAxisShardingError
from meshjit.dialects import gspmd_text, sdy_text
from meshjit.dialects.gspmd_text import HloKind, HloSharding
from meshjit.dialects.sharding import AxisRef, DimSharding, MeshModel, TensorSharding
from meshjit.errors import ShardingError
from meshjit.frontend.mesh import Mesh

Device: TypeAlias = Any  # a PJRT device (jax.Device); jax's stubs leave it untyped
Shape: TypeAlias = tuple[int, ...]
Index: TypeAlias = tuple[slice | int, ...]


# ----------------------------------------------------------------------------
# PartitionSpec


class _Unconstrained:
    """`P.UNCONSTRAINED`: the compiler may shard this dim as it likes."""

    _instance: ClassVar[_Unconstrained | None] = None

    def __new__(cls) -> _Unconstrained:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNCONSTRAINED"

    def __reduce__(self) -> str:
        return "UNCONSTRAINED"


UNCONSTRAINED = _Unconstrained()
Partition: TypeAlias = str | tuple[str, ...] | _Unconstrained | None


def _normalize_entry(
    entry: object, position: int, raw: tuple[object, ...]
) -> Partition:
    where = f"entry {position} of P{raw!r}"
    if entry is None or entry is UNCONSTRAINED:
        return entry
    if isinstance(entry, str):
        if not entry:
            raise ShardingError(f"empty axis name in {where}; use None to replicate")
        return entry
    if isinstance(entry, list | tuple):
        names = tuple(entry)
        for name in names:
            if not isinstance(name, str) or not name:
                raise ShardingError(
                    f"mesh axis names are non-empty strings, found {name!r} in "
                    f"{where}; write e.g. P(('x', 'y'))"
                )
        if not names:
            return None
        return names[0] if len(names) == 1 else names
    raise ShardingError(
        f"mesh axis names are strings, found {entry!r} ({type(entry).__name__}) in "
        f"{where}; use an axis name, a tuple of names, None or P.UNCONSTRAINED"
    )


class PartitionSpec:
    """Per tensor dim: None (replicated), an axis name, or a tuple of names.

    Equality is canonical (JAX's is not, jax#15782): trailing `None`s do not count
    and `('x',)` is `'x'`, so `P('x') == P('x', None) == P(('x',))`.
    """

    __slots__ = ("_partitions", "reduced", "unreduced")
    UNCONSTRAINED: ClassVar[_Unconstrained] = UNCONSTRAINED
    _partitions: tuple[Partition, ...]
    # jax's explicit-sharding sets: axes over which the value is a partial sum
    # still to be added up (`unreduced`), or replicated but summed over in its
    # transpose (`reduced`: to the partitioner a replicated value).
    unreduced: frozenset[str]
    reduced: frozenset[str]

    def __init__(
        self,
        *partitions: object,
        unreduced: AbstractSet[str] = frozenset(),
        reduced: AbstractSet[str] = frozenset(),
    ) -> None:
        self._partitions = tuple(
            _normalize_entry(e, i, partitions) for i, e in enumerate(partitions)
        )
        self.unreduced = _axis_set(unreduced, "unreduced", partitions)
        self.reduced = _axis_set(reduced, "reduced", partitions)
        if self.unreduced & self.reduced:
            raise ShardingError(
                f"P{partitions!r}: axes {sorted(self.unreduced & self.reduced)} are "
                "both unreduced and reduced; an axis may be one or the other"
            )
        on_dims = set(self.axis_names())
        for name, found in (("unreduced", self.unreduced), ("reduced", self.reduced)):
            if on_dims & found:
                raise ShardingError(
                    f"P{partitions!r} splits dims over {sorted(on_dims & found)}, "
                    f"which it also lists as {name}; an axis either splits a dim "
                    f"or is {name}"
                )

    @property
    def partitions(self) -> tuple[Partition, ...]:
        return self._partitions

    def _canonical(self) -> tuple[Partition, ...]:
        parts = list(self._partitions)
        while parts and parts[-1] is None:
            parts.pop()
        return tuple(parts)

    def axis_names(self) -> tuple[str, ...]:
        """Every axis the spec names, dim by dim, major to minor."""
        out: list[str] = []
        for entry in self._partitions:
            if isinstance(entry, str):
                out.append(entry)
            elif isinstance(entry, tuple):
                out.extend(entry)
        return tuple(out)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PartitionSpec):
            return NotImplemented
        return (
            self._canonical() == other._canonical()
            and self.unreduced == other.unreduced
            and self.reduced == other.reduced
        )

    def __hash__(self) -> int:
        return hash(("PartitionSpec", self._canonical(), self.unreduced, self.reduced))

    def __len__(self) -> int:
        return len(self._partitions)

    def __iter__(self) -> Iterator[Partition]:
        return iter(self._partitions)

    def __getitem__(self, i: int) -> Partition:
        return self._partitions[i]

    def index(self, value: object) -> int:
        return self._partitions.index(value)

    def count(self, value: object) -> int:
        return self._partitions.count(value)

    def __add__(self, other: object) -> PartitionSpec:
        if isinstance(other, PartitionSpec):
            return PartitionSpec(
                *self._partitions,
                *other._partitions,
                unreduced=self.unreduced | other.unreduced,
                reduced=self.reduced | other.reduced,
            )
        if isinstance(other, tuple):
            return PartitionSpec(
                *self._partitions,
                *other,
                unreduced=self.unreduced,
                reduced=self.reduced,
            )
        return NotImplemented

    def __radd__(self, other: object) -> PartitionSpec:
        if isinstance(other, tuple):
            return PartitionSpec(
                *other,
                *self._partitions,
                unreduced=self.unreduced,
                reduced=self.reduced,
            )
        return NotImplemented

    def __repr__(self) -> str:
        body = ", ".join(repr(p) for p in self._partitions)
        sets = [
            f"{name}={set(found)!r}"
            for name, found in (
                ("unreduced", self.unreduced),
                ("reduced", self.reduced),
            )
            if found
        ]
        if len(self._partitions) == 1 and not sets:
            body += ","
        return f"P({', '.join([body, *sets] if body else sets)})"

    def to_jax(self) -> jax.sharding.PartitionSpec:
        def convert(entry: Partition) -> object:
            return (
                jax.sharding.PartitionSpec.UNCONSTRAINED
                if entry is UNCONSTRAINED
                else entry
            )

        sets = {"unreduced": self.unreduced, "reduced": self.reduced}
        return jax.sharding.PartitionSpec(
            *(convert(p) for p in self._partitions),
            **{k: v for k, v in sets.items() if v},
        )

    @classmethod
    def from_jax(cls, spec: jax.sharding.PartitionSpec) -> PartitionSpec:
        unconstrained = jax.sharding.PartitionSpec.UNCONSTRAINED
        return cls(
            *(UNCONSTRAINED if p is unconstrained else p for p in spec.partitions),
            unreduced=getattr(spec, "unreduced", frozenset()),
            reduced=getattr(spec, "reduced", frozenset()),
        )


def _axis_set(
    names: AbstractSet[str], what: str, partitions: tuple[object, ...]
) -> frozenset[str]:
    if not isinstance(names, AbstractSet):
        raise ShardingError(
            f"P{partitions!r}: `{what}` is a set of mesh axis names, found "
            f"{names!r} ({type(names).__name__}); write e.g. {what}={{'x'}}"
        )
    for name in names:
        if not isinstance(name, str) or not name:
            raise ShardingError(
                f"P{partitions!r}: `{what}` holds mesh axis names, found {name!r}"
            )
    return frozenset(names)


P = PartitionSpec


# ----------------------------------------------------------------------------
# Helpers


def _memory_kind(kind: str | None, device: Device) -> str | None:
    """None becomes the device's default kind (as JAX reports it); others are checked.

    JAX accepts any string here and fails at `device_put`; we fail at construction.
    """
    try:
        default = device.default_memory().kind
        kinds = [m.kind for m in device.addressable_memories()]
    except (AttributeError, RuntimeError, jax.errors.JaxRuntimeError):
        return kind
    if kind is None:
        return str(default)
    if kind not in kinds:
        raise ShardingError(
            f"memory kind {kind!r} is not addressable by {device}: expected one of "
            f"{', '.join(kinds)}"
        )
    return kind


def _shape(global_shape: Sequence[int]) -> Shape:
    return tuple(int(d) for d in global_shape)


# ----------------------------------------------------------------------------
# The base class


class Sharding(abc.ABC):
    """How an array is laid out across devices (the `jax.sharding.Sharding` API)."""

    __slots__ = ()

    @property
    @abc.abstractmethod
    def _device_assignment(self) -> tuple[Device, ...]:
        """The devices in the order tile-assignment entries index them."""

    @abc.abstractmethod
    def _hlo(self, ndim: int) -> HloSharding:
        """This sharding as an HLO sharding for a value of rank `ndim`."""

    @property
    @abc.abstractmethod
    def memory_kind(self) -> str | None: ...

    @abc.abstractmethod
    def with_memory_kind(self, kind: str) -> Sharding: ...

    @property
    @abc.abstractmethod
    def is_fully_replicated(self) -> bool: ...

    @property
    def device_set(self) -> set[Device]:
        return set(self._device_assignment)

    @property
    def num_devices(self) -> int:
        return len(self.device_set)

    @property
    def addressable_devices(self) -> set[Device]:
        here = jax.process_index()
        return {d for d in self.device_set if d.process_index == here}

    @property
    def is_fully_addressable(self) -> bool:
        here = jax.process_index()
        return all(d.process_index == here for d in self._device_assignment)

    def shard_shape(self, global_shape: Sequence[int]) -> Shape:
        shape = _shape(global_shape)
        hlo = self._hlo(len(shape))
        if _jax_replicated(hlo) or hlo.kind is not HloKind.TILED:
            return shape
        try:
            return hlo.shard_shape(shape)
        except ShardingError as err:
            raise type(err)(f"{self!r}: {err}") from None

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict[Device, Index]:
        """Device -> the slices of the global array it holds, for every device."""
        shape = _shape(global_shape)
        self.shard_shape(shape)
        devices = self._device_assignment
        hlo = self._hlo(len(shape))
        if _jax_replicated(hlo):
            whole = (slice(None),) * len(shape)
            return dict.fromkeys(devices, whole)
        indices = hlo.tile_indices(shape, len(devices))
        return dict(zip(devices, indices, strict=True))

    def addressable_devices_indices_map(
        self, global_shape: Sequence[int]
    ) -> dict[Device, Index]:
        here = jax.process_index()
        return {
            d: i
            for d, i in self.devices_indices_map(global_shape).items()
            if d.process_index == here
        }

    def is_equivalent_to(self, other: Sharding, ndim: int) -> bool:
        """Same HLO placement, same memory kind, same device list in order (JAX)."""
        if not isinstance(other, Sharding):
            return False
        if isinstance(other, PmapSharding):
            return other.is_equivalent_to(self, ndim)
        try:
            same = _hlo_equal(self._compared_hlo(ndim), other._compared_hlo(ndim))
        except ShardingError:
            return False
        return (
            same
            and self.memory_kind == other.memory_kind
            and self._device_assignment == other._device_assignment
        )

    def _compared_hlo(self, ndim: int) -> HloSharding:
        """The HLO sharding `is_equivalent_to` compares."""
        return self._hlo(ndim)

    def to_gspmd_text(self, ndim: int) -> str:
        """XLA's sharding text for a rank-`ndim` value (indices into the devices)."""
        return str(self._hlo(ndim))

    def to_gspmd(self, ndim: int) -> GSPMDSharding:
        return GSPMDSharding(
            self._device_assignment, self._hlo(ndim), memory_kind=self.memory_kind
        )

    @abc.abstractmethod
    def to_jax(self) -> Any:
        """The matching `jax.sharding` object (jax's GSPMDSharding where needed)."""


def _jax_replicated(hlo: HloSharding) -> bool:
    # JAX counts one-device shardings (maximal included) as replicated.
    return hlo.is_fully_replicated() or hlo.kind is HloKind.MAXIMAL


def _hlo_equal(a: HloSharding, b: HloSharding) -> bool:
    if _jax_replicated(a) and _jax_replicated(b):
        return True
    return a == b


# ----------------------------------------------------------------------------
# SingleDeviceSharding


class SingleDeviceSharding(Sharding):
    """The whole array on one device."""

    __slots__ = ("_device", "_memory_kind")

    def __init__(self, device: Device, *, memory_kind: str | None = None) -> None:
        if not hasattr(device, "id") or not hasattr(device, "platform"):
            raise ShardingError(
                f"SingleDeviceSharding needs a jax device (jax.devices()[i]), found "
                f"{device!r}"
            )
        self._device = device
        self._memory_kind = _memory_kind(memory_kind, device)

    @property
    def _device_assignment(self) -> tuple[Device, ...]:
        return (self._device,)

    def _hlo(self, ndim: int) -> HloSharding:
        return HloSharding.replicate()

    @property
    def memory_kind(self) -> str | None:
        return self._memory_kind

    def with_memory_kind(self, kind: str) -> SingleDeviceSharding:
        return SingleDeviceSharding(self._device, memory_kind=kind)

    @property
    def is_fully_replicated(self) -> bool:
        return True

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict[Device, Index]:
        return {self._device: (slice(None),) * len(global_shape)}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SingleDeviceSharding):
            return False
        return self._device == other._device and self.memory_kind == other.memory_kind

    def __hash__(self) -> int:
        return hash(("SingleDeviceSharding", self._device, self.memory_kind))

    def __repr__(self) -> str:
        return (
            f"SingleDeviceSharding(device={self._device!r}, "
            f"memory_kind={self.memory_kind})"
        )

    def to_jax(self) -> jax.sharding.SingleDeviceSharding:
        return jax.sharding.SingleDeviceSharding(
            self._device, memory_kind=self.memory_kind
        )


# ----------------------------------------------------------------------------
# NamedSharding


class NamedSharding(Sharding):
    """A mesh and a PartitionSpec: dim i is split over the axes named in spec[i]."""

    __slots__ = ("_cache", "_memory_kind", "_mesh", "_spec")

    def __init__(
        self,
        mesh: Mesh,
        spec: PartitionSpec | Sequence[Partition],
        *,
        memory_kind: str | None = None,
    ) -> None:
        if isinstance(mesh, jax.sharding.Mesh):
            mesh = Mesh.from_jax(mesh)
        if not isinstance(mesh, Mesh):
            raise ShardingError(
                f"NamedSharding needs a meshjit.sharding.Mesh, found {mesh!r}"
            )
        if isinstance(spec, jax.sharding.PartitionSpec):
            spec = PartitionSpec.from_jax(spec)
        elif not isinstance(spec, PartitionSpec):
            if not isinstance(spec, tuple | list):
                raise ShardingError(
                    f"NamedSharding needs a PartitionSpec, found {spec!r}; write "
                    "e.g. P('x', None)"
                )
            spec = PartitionSpec(*spec)
        if mesh.empty:
            raise ShardingError(
                f"NamedSharding with spec {spec!r} got an empty mesh (no devices, "
                "no axes); expected a mesh of at least one device, e.g. "
                "Mesh(jax.devices(), ('x',))"
            )
        _check_spec(mesh, spec)
        self._mesh = mesh
        self._spec = spec
        self._memory_kind = _memory_kind(memory_kind, mesh.flat_devices[0])
        self._cache: dict[int, HloSharding] = {}

    @property
    def mesh(self) -> Mesh:
        return self._mesh

    @property
    def spec(self) -> PartitionSpec:
        return self._spec

    @property
    def _device_assignment(self) -> tuple[Device, ...]:
        return self._mesh.flat_devices

    @property
    def memory_kind(self) -> str | None:
        return self._memory_kind

    def with_memory_kind(self, kind: str) -> NamedSharding:
        return NamedSharding(self._mesh, self._spec, memory_kind=kind)

    @property
    def is_fully_replicated(self) -> bool:
        shape = self._mesh.shape
        return math.prod(shape[n] for n in self._spec.axis_names()) == 1

    @property
    def replicated_axes(self) -> frozenset[str]:
        used = set(self._spec.axis_names())
        return frozenset(n for n in self._mesh.axis_names if n not in used)

    def tensor_sharding(self, ndim: int, mesh_name: str = "mesh") -> TensorSharding:
        """Shardy's sharding of a rank-`ndim` value; dims past the spec are `{}`."""
        if len(self._spec) > ndim:
            raise ShardingError(
                f"spec {self._spec!r} has {len(self._spec)} entries but the array "
                f"has rank {ndim}; expected at most {ndim} entries: drop the extra "
                "entries" + (" (for a scalar the spec is P())" if ndim == 0 else "")
            )
        dims: list[DimSharding] = []
        for entry in self._spec.partitions:
            if entry is UNCONSTRAINED:
                dims.append(DimSharding(closed=False))
            elif entry is None:
                dims.append(DimSharding())
            elif isinstance(entry, str):
                dims.append(DimSharding((AxisRef(entry),)))
            else:
                assert isinstance(entry, tuple)
                dims.append(DimSharding(tuple(AxisRef(n) for n in entry)))
        dims.extend(DimSharding() for _ in range(ndim - len(dims)))
        # `reduced` axes are replicated to the partitioner (jax's tracer
        # handles what they mean for transposes); unreduced ones are partial.
        unreduced = tuple(
            AxisRef(n) for n in self._mesh.axis_names if n in self._spec.unreduced
        )
        return TensorSharding(mesh_name, tuple(dims), unreduced=unreduced)

    def _hlo(self, ndim: int) -> HloSharding:
        cached = self._cache.get(ndim)
        if cached is None:
            sharding = self.tensor_sharding(ndim)
            cached = gspmd_text.hlo_from_tensor_sharding(
                self._mesh.to_model(), sharding
            )
            self._cache[ndim] = cached
        return cached

    def _compared_hlo(self, ndim: int) -> HloSharding:
        # As jax: `None` entries past the rank do not count (P('x', None) on a
        # rank-1 value is P('x')); other entries past it still fail.
        parts = self._spec.partitions
        if len(parts) > ndim and all(p is None for p in parts[ndim:]):
            trimmed = NamedSharding(
                self._mesh, PartitionSpec(*parts[:ndim]), memory_kind=self.memory_kind
            )
            return trimmed._hlo(ndim)
        return self._hlo(ndim)

    def shard_shape(self, global_shape: Sequence[int]) -> Shape:
        shape = _shape(global_shape)
        sharding = self.tensor_sharding(len(shape))
        sharding.validate(self._mesh.to_model(), shape, what=f"an array under {self!r}")
        return sharding.local_shape(shape, self._mesh.to_model())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NamedSharding):
            return False
        return (
            self._mesh == other._mesh
            and self._spec == other._spec
            and self.memory_kind == other.memory_kind
        )

    def __hash__(self) -> int:
        return hash(("NamedSharding", self._mesh, self._spec, self.memory_kind))

    def __repr__(self) -> str:
        return (
            f"NamedSharding(mesh={self._mesh}, spec={self._spec!r}, "
            f"memory_kind={self.memory_kind})"
        )

    # -- conversions ---------------------------------------------------------------

    def to_jax(self) -> jax.sharding.NamedSharding:
        return jax.sharding.NamedSharding(
            self._mesh.to_jax(), self._spec.to_jax(), memory_kind=self.memory_kind
        )

    def to_sdy(
        self,
        ndim: int | None = None,
        mesh_name: str = "mesh",
        *,
        devices: Sequence[Device] | None = None,
    ) -> tuple[str, str]:
        """(`sdy.mesh @mesh = <...>`, `#sdy.sharding<@mesh, [...]>`) as JAX emits.

        The mesh's `device_ids` are positions in `devices` (default
        `jax.devices()`), printed only when not in order, so `from_sdy` with the
        same devices rebuilds this sharding, device order included.
        """
        rank = len(self._spec) if ndim is None else ndim
        pool = tuple(jax.devices() if devices is None else devices)
        position = {d: i for i, d in enumerate(pool)}
        missing = [d for d in self._mesh.flat_devices if d not in position]
        if missing:
            raise ShardingError(
                f"mesh devices {missing} are not in the device list {list(pool)}; "
                "pass the devices the ids should index"
            )
        ids = tuple(position[d] for d in self._mesh.flat_devices)
        model = self._mesh.to_model()
        if sorted(ids) == list(range(len(ids))):
            model = MeshModel(model.axes, ids)
        else:
            raise ShardingError(
                f"the mesh uses devices at positions {list(ids)} of the device "
                "list; Shardy needs positions 0..N-1: pass the mesh's devices as "
                "`devices`"
            )
        mesh_text = sdy_text.print_mesh_op(mesh_name, model)
        return mesh_text, sdy_text.print_sharding(self.tensor_sharding(rank, mesh_name))

    @classmethod
    def from_sdy(
        cls,
        mesh_text: str,
        sharding_text: str,
        *,
        devices: Sequence[Device] | None = None,
        memory_kind: str | None = None,
    ) -> NamedSharding:
        """Inverse of `to_sdy`: mesh device id i is `devices[i]` (jax.devices())."""
        if mesh_text.lstrip().startswith("sdy.mesh"):
            mesh_name, model = sdy_text.parse_mesh_op(mesh_text)
        else:
            mesh_name, model = "", sdy_text.parse_mesh(mesh_text)
        sharding = sdy_text.parse_sharding(sharding_text)
        if mesh_name and sharding.mesh_name != mesh_name:
            raise ShardingError(
                f"the sharding refers to mesh @{sharding.mesh_name} but the mesh "
                f"text defines @{mesh_name}"
            )
        sharding.validate(model)
        pool = tuple(jax.devices() if devices is None else devices)
        if model.is_maximal or not model.axes:
            raise ShardingError(
                f"mesh {model} has no axes; a NamedSharding needs at least one axis "
                "(use SingleDeviceSharding for one device)"
            )
        if max(model.logical_device_ids) >= len(pool):
            raise ShardingError(
                f"mesh {model} needs {model.size} devices but {len(pool)} were given"
            )
        flat = [pool[i] for i in model.logical_device_ids]
        mesh = Mesh(np.array(flat, dtype=object).reshape(model.shape), model.axis_names)
        return cls(mesh, _spec_from_tensor_sharding(sharding), memory_kind=memory_kind)

    @classmethod
    def from_gspmd(
        cls,
        hlo: str | HloSharding,
        mesh: Mesh,
        ndim: int | None = None,
        *,
        memory_kind: str | None = None,
    ) -> NamedSharding:
        """A spec on `mesh` that places data as the HLO sharding does.

        Tile entries index `mesh.flat_devices`. Raises ShardingError when the mesh's
        axes cannot express the tiling.
        """
        parsed = gspmd_text.parse_hlo_sharding(hlo) if isinstance(hlo, str) else hlo
        rank = ndim
        if rank is None:
            rank = parsed.data_rank if parsed.kind is HloKind.TILED else 0
        model = mesh.to_model()
        sharding = gspmd_text.tensor_sharding_from_hlo(parsed, model, "mesh", rank)
        return cls(mesh, _spec_from_tensor_sharding(sharding), memory_kind=memory_kind)


def _check_spec(mesh: Mesh, spec: PartitionSpec) -> None:
    names = ", ".join(repr(n) for n in mesh.axis_names)
    seen: dict[str, int] = {}
    for dim, entry in enumerate(spec.partitions):
        if entry is None or entry is UNCONSTRAINED:
            continue
        for name in (entry,) if isinstance(entry, str) else entry:  # type: ignore[union-attr]
            if name not in mesh.shape:
                raise ShardingError(
                    f"unknown mesh axis {name!r} in entry {dim} of {spec!r}: the mesh "
                    f"has axes ({names}); use one of them or add {name!r} to the mesh"
                )
            if name in seen:
                raise DuplicateAxisShardingError(
                    f"mesh axis {name!r} is used twice in {spec!r} (entries "
                    f"{seen[name]} and {dim}); an axis may split at most one dim: "
                    "remove one"
                )
            seen[name] = dim
    types = dict(zip(mesh.axis_names, mesh.axis_types, strict=True))
    for what, found in (("unreduced", spec.unreduced), ("reduced", spec.reduced)):
        for name in sorted(found):
            if name not in mesh.shape:
                raise ShardingError(
                    f"unknown mesh axis {name!r} in {what}={set(found)!r} of {spec!r}: "
                    f"the mesh has axes ({names}); use one of them or add {name!r} "
                    "to the mesh"
                )
            if types[name] is not AxisType.Explicit:
                raise ShardingError(
                    f"{spec!r} lists mesh axis {name!r} as {what}, but the axis is "
                    f"{types[name].name}; {what} axes must be Explicit axes "
                    "(Mesh(..., axis_types=AxisType.Explicit))"
                )


def _spec_from_tensor_sharding(sharding: TensorSharding) -> PartitionSpec:
    entries: list[object] = []
    for d, dim in enumerate(sharding.dims):
        if any(a.is_sub_axis for a in dim.axes):
            raise ShardingError(
                f"dim {d} of {sharding} uses a sub-axis, which a PartitionSpec cannot "
                "express; split the mesh axis into two axes instead"
            )
        if dim.priority is not None or (not dim.closed and dim.axes):
            raise ShardingError(
                f"dim {d} of {sharding} has a priority or is open with axes; a "
                "PartitionSpec holds closed dims (or an empty open dim, "
                "P.UNCONSTRAINED)"
            )
        names = tuple(a.name for a in dim.axes)
        if not dim.closed:
            entries.append(UNCONSTRAINED)
        elif not names:
            entries.append(None)
        else:
            entries.append(names[0] if len(names) == 1 else names)
    if any(a.is_sub_axis for a in sharding.unreduced):
        raise ShardingError(
            f"{sharding} is unreduced over a sub-axis, which a PartitionSpec cannot "
            "express; split the mesh axis into two axes instead"
        )
    return PartitionSpec(*entries, unreduced={a.name for a in sharding.unreduced})


# ----------------------------------------------------------------------------
# GSPMDSharding


class GSPMDSharding(Sharding):
    """A device assignment plus an HLO sharding whose tiles index it."""

    __slots__ = ("_devices", "_hlo_sharding", "_memory_kind")

    def __init__(
        self,
        devices: Sequence[Device],
        op_sharding: str | HloSharding,
        *,
        memory_kind: str | None = None,
    ) -> None:
        self._devices = tuple(devices)
        if not self._devices:
            raise ShardingError("GSPMDSharding needs at least one device")
        if len(set(self._devices)) != len(self._devices):
            raise ShardingError(
                f"GSPMDSharding devices must be distinct, found {list(self._devices)}"
            )
        hlo = (
            gspmd_text.parse_hlo_sharding(op_sharding)
            if isinstance(op_sharding, str)
            else op_sharding
        )
        if hlo.kind is HloKind.TILED and len(hlo.devices) != len(self._devices):
            raise ShardingError(
                f"HLO sharding {hlo} tiles over {len(hlo.devices)} devices but "
                f"{len(self._devices)} devices were given; give one device per tile "
                "entry"
            )
        if hlo.kind is HloKind.MAXIMAL and hlo.devices[0] >= len(self._devices):
            raise ShardingError(
                f"HLO sharding {hlo} names device {hlo.devices[0]} but only "
                f"{len(self._devices)} devices were given"
            )
        self._hlo_sharding = hlo
        self._memory_kind = _memory_kind(memory_kind, self._devices[0])

    @classmethod
    def get_replicated(
        cls, device_assignment: Sequence[Device], *, memory_kind: str | None = None
    ) -> GSPMDSharding:
        return cls(device_assignment, HloSharding.replicate(), memory_kind=memory_kind)

    @property
    def hlo_sharding(self) -> HloSharding:
        return self._hlo_sharding

    @property
    def _device_assignment(self) -> tuple[Device, ...]:
        return self._devices

    def _hlo(self, ndim: int) -> HloSharding:
        return self._hlo_sharding

    @property
    def memory_kind(self) -> str | None:
        return self._memory_kind

    def with_memory_kind(self, kind: str) -> GSPMDSharding:
        return GSPMDSharding(self._devices, self._hlo_sharding, memory_kind=kind)

    @property
    def is_fully_replicated(self) -> bool:
        return _jax_replicated(self._hlo_sharding)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GSPMDSharding):
            return False
        return (
            _hlo_equal(self._hlo_sharding, other._hlo_sharding)
            and self.memory_kind == other.memory_kind
            and self._devices == other._devices
        )

    def __hash__(self) -> int:
        hlo = None if self.is_fully_replicated else self._hlo_sharding
        return hash(("GSPMDSharding", self._devices, hlo, self.memory_kind))

    def __repr__(self) -> str:
        return f"GSPMDSharding({self._hlo_sharding}, memory_kind={self.memory_kind})"

    def to_jax(self) -> Any:
        from meshjit.compiler import bridge

        return bridge.make_jax_gspmd_sharding(
            self._devices, str(self._hlo_sharding), self.memory_kind
        )

    def to_named(
        self, mesh: Mesh | None = None, ndim: int | None = None
    ) -> NamedSharding:
        """The NamedSharding on `mesh` placing data the same way.

        Without a mesh, one is built from the tiling (axes "a0", "a1", ...).
        """
        if mesh is not None:
            return NamedSharding.from_gspmd(
                self._hlo_sharding, mesh, ndim, memory_kind=self.memory_kind
            )
        hlo = self._hlo_sharding
        rank = (
            ndim
            if ndim is not None
            else (hlo.data_rank if hlo.kind is HloKind.TILED else 0)
        )
        model, sharding = gspmd_text.mesh_and_sharding_from_hlo(
            hlo, rank, len(self._devices)
        )
        if model.is_maximal:
            raise ShardingError(
                f"{self!r} puts the value on one device; use SingleDeviceSharding"
            )
        flat = [self._devices[i] for i in model.logical_device_ids]
        built = Mesh(
            np.array(flat, dtype=object).reshape(model.shape), model.axis_names
        )
        return NamedSharding(
            built, _spec_from_tensor_sharding(sharding), memory_kind=self.memory_kind
        )


# ----------------------------------------------------------------------------
# PositionalSharding (removed from jax; as in jax 0.4.30)


class PositionalSharding(Sharding):
    """Shards dim i of a value over dim i of an N-d device array.

    Each entry holds a set of device positions: `replicate(axis)` merges the sets
    along an axis, so the value is then replicated over those devices.
    """

    __slots__ = ("_devices", "_ids", "_memory_kind", "_shape")

    def __init__(
        self,
        devices: Sequence[Device] | np.ndarray[Any, np.dtype[Any]],
        *,
        memory_kind: str | None = None,
    ) -> None:
        array = np.array(devices, dtype=object)
        if array.size == 0:
            raise ShardingError(
                f"PositionalSharding needs at least one device, found {devices!r}"
            )
        flat = tuple(array.flat)
        if len(set(flat)) != len(flat):
            raise ShardingError(
                f"PositionalSharding devices must be distinct, found {list(flat)}"
            )
        self._devices: tuple[Device, ...] = flat
        self._shape: Shape = tuple(array.shape)
        self._ids: tuple[frozenset[int], ...] = tuple(
            frozenset((i,)) for i in range(len(flat))
        )
        self._memory_kind = _memory_kind(memory_kind, flat[0])

    @classmethod
    def _remake(
        cls,
        devices: tuple[Device, ...],
        shape: Shape,
        ids: tuple[frozenset[int], ...],
        memory_kind: str | None,
    ) -> PositionalSharding:
        out = cls.__new__(cls)
        out._devices = devices
        out._shape = shape
        out._ids = ids
        out._memory_kind = memory_kind
        return out

    @property
    def shape(self) -> Shape:
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d PositionalSharding")
        return self._shape[0]

    def reshape(self, *shape: int | Sequence[int]) -> PositionalSharding:
        dims: list[int] = []
        for s in shape:
            dims.extend([s] if isinstance(s, int) else s)
        total = len(self._ids)
        if dims.count(-1) > 1:
            raise ShardingError(f"reshape{tuple(dims)}: at most one -1")
        if -1 in dims:
            known = math.prod(d for d in dims if d != -1)
            if known == 0 or total % known:
                raise ShardingError(f"cannot reshape {self._shape} into {tuple(dims)}")
            dims[dims.index(-1)] = total // known
        if math.prod(dims) != total:
            raise ShardingError(
                f"cannot reshape a PositionalSharding of shape {self._shape} "
                f"({total} entries) into {tuple(dims)}"
            )
        return self._remake(self._devices, tuple(dims), self._ids, self._memory_kind)

    def transpose(self, *axes: int | Sequence[int]) -> PositionalSharding:
        perm: list[int] = []
        for a in axes:
            perm.extend([a] if isinstance(a, int) else a)
        if not perm:
            perm = list(range(self.ndim))[::-1]
        perm = [p % self.ndim if self.ndim else p for p in perm]
        if sorted(perm) != list(range(self.ndim)):
            raise ShardingError(
                f"transpose axes {tuple(perm)} are not a permutation of "
                f"0..{self.ndim - 1}"
            )
        array = self._id_array().transpose(perm)
        return self._remake(
            self._devices, tuple(array.shape), tuple(array.flat), self._memory_kind
        )

    @property
    def T(self) -> PositionalSharding:
        return self.transpose()

    def replicate(
        self, axis: int | None = None, keepdims: bool = True
    ) -> PositionalSharding:
        """Merge the device sets along `axis` (all axes when None)."""
        array = self._id_array()
        axes = tuple(range(self.ndim)) if axis is None else (axis % max(self.ndim, 1),)
        out_shape = [1 if i in axes else s for i, s in enumerate(self._shape)]
        merged: dict[tuple[int, ...], frozenset[int]] = {}
        for index in itertools.product(*(range(s) for s in self._shape)):
            key = tuple(0 if i in axes else v for i, v in enumerate(index))
            merged[key] = merged.get(key, frozenset()) | array[index]
        keys = list(itertools.product(*(range(s) for s in out_shape)))
        ids = tuple(merged[k] for k in keys)
        shape = tuple(out_shape)
        if not keepdims:
            shape = tuple(s for i, s in enumerate(out_shape) if i not in axes)
        return self._remake(self._devices, shape, ids, self._memory_kind)

    def _id_array(self) -> np.ndarray[Any, np.dtype[Any]]:
        array = np.empty(len(self._ids), dtype=object)
        for i, ids in enumerate(self._ids):
            array[i] = ids
        return array.reshape(self._shape)

    @property
    def _device_assignment(self) -> tuple[Device, ...]:
        return self._devices

    def _hlo(self, ndim: int) -> HloSharding:
        if self.is_fully_replicated:
            return HloSharding.replicate()
        if ndim != self.ndim:
            raise ShardingError(
                f"{self!r} has {self.ndim} dims and applies to values of rank "
                f"{self.ndim}, found rank {ndim}; reshape the sharding to rank {ndim}"
            )
        sizes = {len(s) for s in self._ids}
        if len(sizes) != 1:
            raise ShardingError(
                f"{self!r} mixes device sets of sizes {sorted(sizes)}; every entry "
                "must hold the same number of devices"
            )
        (group,) = sizes
        devices = [i for ids in self._ids for i in sorted(ids)]
        if group == 1:
            return HloSharding.tile(self._shape, devices)
        return HloSharding.tile(
            (*self._shape, group), devices, (gspmd_text.SubgroupType.REPLICATED,)
        )

    @property
    def memory_kind(self) -> str | None:
        return self._memory_kind

    def with_memory_kind(self, kind: str) -> PositionalSharding:
        # jax 0.4.30 dropped the layout here; keep it.
        _memory_kind(kind, self._devices[0])
        return self._remake(self._devices, self._shape, self._ids, kind)

    @property
    def is_fully_replicated(self) -> bool:
        return self._shape == (1,) * self.ndim

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PositionalSharding):
            return False
        return (
            self._shape == other._shape
            and self._ids == other._ids
            and self._devices == other._devices
            and self.memory_kind == other.memory_kind
        )

    def __hash__(self) -> int:
        return hash(("PositionalSharding", self._devices, self.memory_kind))

    def __repr__(self) -> str:
        platform = self._devices[0].platform.upper()
        labels = np.empty(len(self._ids), dtype=object)
        for i, ids in enumerate(self._ids):
            labels[i] = (
                "{"
                + platform
                + " "
                + ", ".join(str(self._devices[p].id) for p in sorted(ids))
                + "}"
            )
        body = np.array2string(
            labels.reshape(self._shape),
            separator=" ",
            formatter={"all": str},
            max_line_width=100,
        )
        return (
            f"PositionalSharding({body}, memory_kind={self.memory_kind}, "
            f"shape={self._shape})"
        )

    def to_jax(self) -> Any:
        """jax has no PositionalSharding any more: its GSPMDSharding for this layout."""
        return self.to_gspmd(self.ndim).to_jax()


# ----------------------------------------------------------------------------
# PmapSharding (removed from jax; as in jax 0.4.30)


@dataclass(frozen=True, slots=True)
class NoSharding:
    """The dim is not split."""


@dataclass(frozen=True, slots=True)
class Chunked:
    """The dim is split into prod(chunks) contiguous blocks."""

    chunks: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Unstacked:
    """The dim (of this size) is removed: device k holds index k of it."""

    size: int


@dataclass(frozen=True, slots=True)
class ShardedAxis:
    """A device-mesh dim enumerating the `axis`-th split of the value."""

    axis: int


@dataclass(frozen=True, slots=True)
class Replicated:
    """A device-mesh dim of `replicas` copies."""

    replicas: int


DimSpec: TypeAlias = NoSharding | Chunked | Unstacked
MeshDim: TypeAlias = ShardedAxis | Replicated


@dataclass(frozen=True, slots=True)
class ShardingSpec:
    """pmap's layout: per array dim how it is split, per mesh dim what it holds."""

    sharding: tuple[DimSpec, ...]
    mesh_mapping: tuple[MeshDim, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "sharding", tuple(self.sharding))
        object.__setattr__(self, "mesh_mapping", tuple(self.mesh_mapping))
        used = sorted(m.axis for m in self.mesh_mapping if isinstance(m, ShardedAxis))
        if used != list(range(len(self._split_sizes()))):
            raise ShardingError(
                f"{self}: each split of the value needs exactly one ShardedAxis; "
                f"found ShardedAxis ids {used} for {len(self._split_sizes())} splits"
            )

    def _split_sizes(self) -> list[int]:
        sizes: list[int] = []
        for s in self.sharding:
            if isinstance(s, Unstacked):
                sizes.append(s.size)
            elif isinstance(s, Chunked):
                sizes.extend(s.chunks)
        return sizes

    @property
    def mesh_shape(self) -> Shape:
        sizes = self._split_sizes()
        return tuple(
            sizes[m.axis] if isinstance(m, ShardedAxis) else m.replicas
            for m in self.mesh_mapping
        )

    def indices(self, shape: Shape) -> tuple[Index, ...]:
        """The index each mesh position (row-major) holds."""
        if len(shape) != len(self.sharding):
            raise ShardingError(
                f"{self} describes rank {len(self.sharding)} values, found shape "
                f"{list(shape)}"
            )
        splits = self._split_sizes()
        out: list[Index] = []
        for position in itertools.product(*(range(s) for s in self.mesh_shape)):
            digit = [0] * len(splits)
            for m, p in zip(self.mesh_mapping, position, strict=True):
                if isinstance(m, ShardedAxis):
                    digit[m.axis] = p
            index: list[slice | int] = []
            k = 0
            for size, s in zip(shape, self.sharding, strict=True):
                if isinstance(s, NoSharding):
                    index.append(slice(None))
                elif isinstance(s, Unstacked):
                    index.append(digit[k])
                    k += 1
                else:
                    block = 0
                    for c in s.chunks:
                        block = block * c + digit[k]
                        k += 1
                    step = size // math.prod(s.chunks)
                    index.append(slice(block * step, (block + 1) * step))
            out.append(tuple(index))
        return tuple(out)

    def to_hlo(self) -> HloSharding:
        """The HLO sharding of a spec without Unstacked dims."""
        if any(isinstance(s, Unstacked) for s in self.sharding):
            raise ShardingError(f"{self} has Unstacked dims, which HLO cannot express")
        names = [f"m{i}" for i in range(len(self.mesh_mapping))]
        model = MeshModel.of(*zip(names, self.mesh_shape, strict=True))
        by_split = {
            m.axis: names[i]
            for i, m in enumerate(self.mesh_mapping)
            if isinstance(m, ShardedAxis)
        }
        dims: list[DimSharding] = []
        k = 0
        for s in self.sharding:
            if isinstance(s, Chunked):
                refs = tuple(AxisRef(by_split[k + j]) for j in range(len(s.chunks)))
                k += len(s.chunks)
                dims.append(DimSharding(refs))
            else:
                dims.append(DimSharding())
        return gspmd_text.hlo_from_tensor_sharding(
            model, TensorSharding("mesh", tuple(dims))
        )

    def __repr__(self) -> str:
        return f"ShardingSpec({self.sharding}, {self.mesh_mapping})"


class PmapSharding(Sharding):
    """The layout `jax.pmap` used: one dim unstacked over the devices."""

    __slots__ = ("_device_array", "_sharding_spec")

    def __init__(
        self,
        devices: Sequence[Device] | np.ndarray[Any, np.dtype[Any]],
        sharding_spec: ShardingSpec,
    ) -> None:
        array = np.array(devices, dtype=object)
        flat = tuple(array.flat)
        if not flat:
            raise ShardingError("PmapSharding needs at least one device")
        if len(set(flat)) != len(flat):
            raise ShardingError(f"PmapSharding devices must be distinct: {list(flat)}")
        if math.prod(sharding_spec.mesh_shape) != len(flat):
            raise ShardingError(
                f"{sharding_spec} spans {math.prod(sharding_spec.mesh_shape)} devices "
                f"but {len(flat)} were given"
            )
        array.flags.writeable = False
        self._device_array = array
        self._sharding_spec = sharding_spec

    @classmethod
    def default(
        cls,
        shape: Sequence[int],
        sharded_dim: int | None = 0,
        devices: Sequence[Device] | None = None,
    ) -> PmapSharding:
        """The placement `jax.pmap` used for an input of `shape`."""
        shape = _shape(shape)
        if sharded_dim is None:
            if devices is None:
                raise ShardingError("One of sharded_dim or devices must be set.")
            return cls(
                np.array(devices, dtype=object),
                ShardingSpec(
                    tuple(NoSharding() for _ in shape), (Replicated(len(devices)),)
                ),
            )
        if not -len(shape) <= sharded_dim < len(shape):
            raise ShardingError(
                f"sharded_dim {sharded_dim} is out of range for shape {list(shape)}"
            )
        sharded_dim %= len(shape)
        n = shape[sharded_dim]
        spec = ShardingSpec(
            tuple(
                Unstacked(n) if i == sharded_dim else NoSharding()
                for i in range(len(shape))
            ),
            (ShardedAxis(0),),
        )
        if devices is None:
            local = jax.local_devices()
            if n > len(local):
                raise ShardingError(
                    f"dim {sharded_dim} of shape {list(shape)} has size {n} but only "
                    f"{len(local)} local devices exist; expected at most {len(local)}"
                )
            chosen = local[:n]
        else:
            chosen = list(devices)
        return cls(np.array(chosen, dtype=object), spec)

    @property
    def devices(self) -> np.ndarray[Any, np.dtype[Any]]:
        return self._device_array

    @property
    def sharding_spec(self) -> ShardingSpec:
        return self._sharding_spec

    @property
    def _device_assignment(self) -> tuple[Device, ...]:
        return tuple(self._device_array.flat)

    def _hlo(self, ndim: int) -> HloSharding:
        return self._sharding_spec.to_hlo()

    @property
    def memory_kind(self) -> str | None:
        return _memory_kind(None, self._device_assignment[0])

    def with_memory_kind(self, kind: str) -> Sharding:
        raise NotImplementedError("pmap does not support memories.")

    @property
    def is_fully_replicated(self) -> bool:
        return not any(
            isinstance(s, Unstacked | Chunked) for s in self._sharding_spec.sharding
        )

    def shard_shape(self, global_shape: Sequence[int]) -> Shape:
        shape = _shape(global_shape)
        if len(shape) != len(self._sharding_spec.sharding):
            raise ShardingError(
                f"{self!r} describes rank {len(self._sharding_spec.sharding)} arrays, "
                f"found shape {list(shape)}"
            )
        for d, s in enumerate(self._sharding_spec.sharding):
            if isinstance(s, NoSharding):
                continue
            want = s.size if isinstance(s, Unstacked) else math.prod(s.chunks)
            if shape[d] != want:
                raise ShardingError(
                    f"The sharded dimension must be equal to the number of devices "
                    f"passed to PmapSharding: dim {d} of shape {list(shape)} has size "
                    f"{shape[d]}, expected {want} (the number of devices is "
                    f"{self._device_array.size})"
                )
            if isinstance(s, Unstacked):
                return shape[:d] + shape[d + 1 :]
            return (*shape[:d], 1, *shape[d + 1 :])
        return shape

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict[Device, Index]:
        shape = _shape(global_shape)
        self.shard_shape(shape)
        indices = self._sharding_spec.indices(shape)
        return dict(zip(self._device_assignment, indices, strict=True))

    def is_equivalent_to(self, other: Sharding, ndim: int) -> bool:
        # As in jax 0.4.30: a pmap layout is only equivalent to an equal one (its
        # shards drop the unstacked dim, so no other class has the same shards).
        return self == other

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PmapSharding):
            return False
        return (
            self._sharding_spec == other._sharding_spec
            and self._device_array.shape == other._device_array.shape
            and self._device_assignment == other._device_assignment
        )

    def __hash__(self) -> int:
        return hash(("PmapSharding", self._device_assignment, self._sharding_spec))

    def __repr__(self) -> str:
        ids = [d.id for d in self._device_assignment]
        return (
            f"PmapSharding(sharding_spec={self._sharding_spec}, device_ids={ids}, "
            f"device_shape={self._device_array.shape})"
        )

    def to_jax(self) -> jax.sharding.NamedSharding:
        """What jax 0.10.2's pmap returns: a NamedSharding over a 1-axis mesh.

        Its shards keep the mapped dim (size 1) instead of dropping it.
        """
        name = "_internal_pmap_axis_name"
        spec = self._sharding_spec
        if len(spec.mesh_mapping) != 1:
            raise ShardingError(f"{self!r} has no single-axis NamedSharding form")
        entries = [
            name if not isinstance(s, NoSharding) else None for s in spec.sharding
        ]
        mesh = jax.sharding.Mesh(
            np.array(self._device_assignment, dtype=object), (name,)
        )
        return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*entries))


# ----------------------------------------------------------------------------
# Conversions from jax


def _concrete(abstract: Any) -> Mesh:
    """The mesh a jax AbstractMesh stands for: the context mesh with its
    axes (`with mesh:`, `jax.set_mesh`), else a stand-in for lowering
    (`Mesh.stand_in`: compiling it needs a device assignment)."""
    from meshjit.compiler import bridge
    from meshjit.frontend.mesh import current_mesh

    context = current_mesh()
    if context is None:
        found = bridge.set_mesh_context()
        context = Mesh.from_jax(found) if found is not None else None
    if (
        context is not None
        and context.axis_names == tuple(abstract.axis_names)
        and context.axis_sizes == tuple(abstract.axis_sizes)
    ):
        return context
    return Mesh.stand_in(abstract)


def from_jax(sharding: Any) -> Sharding:
    """The meshjit sharding for a `jax.sharding` object (or jax's GSPMDSharding)."""
    if isinstance(sharding, jax.sharding.NamedSharding):
        if not isinstance(sharding.mesh, jax.sharding.Mesh):
            return NamedSharding(
                _concrete(sharding.mesh),
                PartitionSpec.from_jax(sharding.spec),
                memory_kind=sharding.memory_kind,
            )
        return NamedSharding(
            Mesh.from_jax(sharding.mesh),
            PartitionSpec.from_jax(sharding.spec),
            memory_kind=sharding.memory_kind,
        )
    if isinstance(sharding, jax.sharding.SingleDeviceSharding):
        (device,) = sharding.device_set
        return SingleDeviceSharding(device, memory_kind=sharding.memory_kind)
    from meshjit.compiler import bridge

    if bridge.is_jax_gspmd_sharding(sharding):
        devices, text, memory_kind = bridge.jax_gspmd_sharding_parts(sharding)
        return GSPMDSharding(devices, text, memory_kind=memory_kind)
    raise ShardingError(
        f"cannot convert {sharding!r} ({type(sharding).__name__}); expected a "
        "jax NamedSharding, SingleDeviceSharding or GSPMDSharding"
    )


def to_jax(sharding: Sharding) -> Any:
    return sharding.to_jax()


class AUTO:
    """An `in_shardings`/`out_shardings` leaf: meshjit chooses the sharding.

    `AUTO(mesh)` (jax 0.4's `jax.sharding.AUTO`, gone from jax 0.10): the
    argument or result gets the layout on `mesh` that the `auto-shard` pass
    finds cheapest, together with every value of the program the user did
    not fix: an integer program over the partitioner's cost model
    (estimated compute and collective time), with the per-device peak of
    live values at most `memory_budget` bytes (an int, or a size such as
    "4GiB"; None: no limit). `time_limit` bounds the solver (seconds; it
    then returns the best layout found, with a warning). `compile()` reports
    the choice in `Compiled.input_shardings`/`output_shardings`; arguments
    that arrive in another layout are moved to it (a warning says so once).
    A donated argument gets the layout of the result that reuses its buffer
    (donate a train step's parameters and optimizer state to keep them in
    one layout from step to step).
    AUTO leaves of one function share one search: give them equal options.
    """

    __slots__ = ("memory_budget", "mesh", "time_limit")

    def __init__(
        self,
        mesh: Mesh | jax.sharding.Mesh,
        *,
        memory_budget: int | float | str | None = None,
        time_limit: float = 30.0,
    ) -> None:
        if isinstance(mesh, jax.sharding.Mesh):
            mesh = Mesh.from_jax(mesh)
        if not isinstance(mesh, Mesh) or mesh.empty:
            raise ShardingError(f"AUTO needs a non-empty mesh, found {mesh!r}")
        if memory_budget is not None:
            from meshjit.passes.auto_shard import parse_bytes

            try:
                parse_bytes(str(memory_budget))
            except ValueError as err:
                raise ShardingError(f"AUTO: {err}") from None
        if not time_limit > 0:
            raise ShardingError(f"AUTO: time_limit must be positive, got {time_limit}")
        self.mesh = mesh
        self.memory_budget = memory_budget
        self.time_limit = float(time_limit)

    def options(self) -> tuple[object, float]:
        return (self.memory_budget, self.time_limit)

    def pass_text(self, cost: str, ties: str = "") -> str:
        """The auto-shard pass with these options, as pipeline text (`ties`:
        its `tie` option, ARG:RESULT pairs)."""
        parts = [f"cost={cost}", f"time-limit={self.time_limit:g}"]
        if self.memory_budget is not None:
            parts.append(f"memory-budget={str(self.memory_budget).replace(' ', '')}")
        if ties:
            parts.append(f"tie={ties}")
        return "auto-shard{" + " ".join(parts) + "}"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, AUTO)
            and self.mesh == other.mesh
            and self.options() == other.options()
        )

    def __hash__(self) -> int:
        return hash((AUTO, self.mesh, self.options()))

    def __repr__(self) -> str:
        extra = ""
        if self.memory_budget is not None:
            extra += f", memory_budget={self.memory_budget!r}"
        if self.time_limit != 30.0:
            extra += f", time_limit={self.time_limit:g}"
        return f"AUTO({self.mesh}{extra})"
