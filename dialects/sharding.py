"""Shardy's mesh and tensor-sharding model in plain Python.

A mesh is an ordered list of named axes (major to minor) plus an optional device-id
order; a tensor sharding names, per tensor dim, the mesh axes (or sub-axes) that split
it, major to minor. This module knows nothing about MLIR or jax: the frontend builds
these objects, the passes read them, and `sdy_text`/`gspmd_text` print and parse them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from meshjit.errors import IndivisibleDimError, ShardingError

Shape = tuple[int, ...]


def _quote(name: str) -> str:
    return f'"{name}"'


@dataclass(frozen=True, slots=True)
class MeshAxis:
    """One named mesh axis, e.g. `"x"=4`."""

    name: str
    size: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ShardingError(
                f"mesh axis names must be non-empty strings, found {self.name!r}; "
                "name the axis, e.g. MeshAxis('x', 4)"
            )
        if isinstance(self.size, bool) or not isinstance(self.size, int):
            raise ShardingError(
                f"mesh axis {_quote(self.name)} must have an int size, found "
                f"{self.size!r}"
            )
        if self.size < 1:
            raise ShardingError(
                f"mesh axis {_quote(self.name)} must have size >= 1, found size "
                f"{self.size}; use a positive size (1 means the axis is trivial)"
            )

    # Written out, as AxisRef's: meshes key the partitioner's caches, and the
    # methods dataclasses generates are interpreted even when this module is
    # compiled.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MeshAxis):
            return NotImplemented
        return self.name == other.name and self.size == other.size

    def __hash__(self) -> int:
        return hash((self.name, self.size))


@dataclass(frozen=True, slots=True)
class MeshModel:
    """A device mesh: axes major to minor, and the device id at each mesh position.

    `device_ids=None` is the iota order 0..N-1; an explicit iota order is normalised
    to None so that equal meshes compare equal and print as MLIR prints them. A
    maximal mesh (the whole value on one device) has no axes and one device id.
    """

    axes: tuple[MeshAxis, ...]
    device_ids: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        axes = tuple(self.axes)
        object.__setattr__(self, "axes", axes)
        seen: set[str] = set()
        for axis in axes:
            if not isinstance(axis, MeshAxis):
                raise ShardingError(f"mesh axes must be MeshAxis, found {axis!r}")
            if axis.name in seen:
                raise ShardingError(
                    f"duplicate mesh axis name {_quote(axis.name)} in mesh "
                    f"{self._axes_text()}; each axis needs its own name"
                )
            seen.add(axis.name)
        if self.device_ids is None:
            return
        ids = tuple(self.device_ids)
        object.__setattr__(self, "device_ids", ids)
        if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ids):
            raise ShardingError(
                f"device ids must be non-negative ints, found {list(ids)}"
            )
        if not axes:
            if len(ids) != 1:
                raise ShardingError(
                    "a mesh without axes takes exactly one device id (a maximal "
                    f"mesh), found device_ids={list(ids)}; give one id, e.g. "
                    "device_ids=(3,)"
                )
            return
        size = self.size
        if len(ids) != size:
            raise ShardingError(
                f"mesh {self._axes_text()} has {size} positions but "
                f"device_ids lists {len(ids)} ids; give exactly {size} ids"
            )
        if sorted(ids) != list(range(size)):
            raise ShardingError(
                f"device_ids of mesh {self._axes_text()} must be a permutation of "
                f"0..{size - 1}, found {list(ids)}"
            )
        if ids == tuple(range(size)):
            object.__setattr__(self, "device_ids", None)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MeshModel):
            return NotImplemented
        return self.axes == other.axes and self.device_ids == other.device_ids

    def __hash__(self) -> int:
        return hash((self.axes, self.device_ids))

    @classmethod
    def of(
        cls, *axes: tuple[str, int], device_ids: Iterable[int] | None = None
    ) -> MeshModel:
        """`MeshModel.of(("x", 2), ("y", 4))`."""
        ids = None if device_ids is None else tuple(device_ids)
        return cls(tuple(MeshAxis(n, s) for n, s in axes), ids)

    @classmethod
    def maximal(cls, device_id: int) -> MeshModel:
        """The mesh `<[], device_ids=[device_id]>`: everything on one device."""
        return cls((), (device_id,))

    def _axes_text(self) -> str:
        return "[" + ", ".join(f"{_quote(a.name)}={a.size}" for a in self.axes) + "]"

    @property
    def size(self) -> int:
        """Number of devices (1 for a mesh without axes)."""
        return math.prod(a.size for a in self.axes)

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    @property
    def shape(self) -> Shape:
        return tuple(a.size for a in self.axes)

    @property
    def is_maximal(self) -> bool:
        return not self.axes and self.device_ids is not None

    @property
    def logical_device_ids(self) -> tuple[int, ...]:
        """The device id at each mesh position, row-major over the axes."""
        if self.device_ids is not None:
            return self.device_ids
        return tuple(range(self.size))

    def has_axis(self, name: str) -> bool:
        return any(a.name == name for a in self.axes)

    def axis_size(self, name: str) -> int:
        for axis in self.axes:
            if axis.name == name:
                return axis.size
        raise ShardingError(
            f"unknown mesh axis {_quote(name)}: the mesh has axes "
            f"({', '.join(_quote(n) for n in self.axis_names)}); use one of them"
        )

    def __str__(self) -> str:
        from meshjit.dialects.sdy_text import print_mesh

        return print_mesh(self)


@dataclass(frozen=True, slots=True)
class AxisRef:
    """A mesh axis, or a sub-axis of it: `"x":(2)2` is `AxisRef("x", 2, 2)`.

    A sub-axis splits axis `name` (size n) as (pre_size, size, n // (pre_size*size))
    major to minor and takes the middle part. `size=None` is the whole axis.
    """

    name: str
    pre_size: int = 1
    size: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ShardingError(
                f"axis names must be non-empty strings, found {self.name!r}"
            )
        if self.size is None:
            if self.pre_size != 1:
                raise ShardingError(
                    f"axis {_quote(self.name)} has pre_size {self.pre_size} but no "
                    "size; a sub-axis needs both, e.g. AxisRef('x', 2, 2)"
                )
            return
        if self.pre_size < 1 or self.size < 1:
            raise ShardingError(f"sub-axis {self} needs pre_size >= 1 and size >= 1")

    def __hash__(self) -> int:
        # Written out: the partitioner keys its caches by layouts (tuples of
        # these), and the method dataclasses generates is interpreted even
        # when this module is compiled (about 1M calls on a 100k-op module).
        return hash((self.name, self.pre_size, self.size))

    @property
    def is_sub_axis(self) -> bool:
        return self.size is not None

    def full_size(self, mesh: MeshModel) -> int:
        """The number of devices this axis (or sub-axis) spans on `mesh`."""
        if self.size is not None:
            return self.size
        return mesh.axis_size(self.name)

    def range_on(self, mesh: MeshModel) -> tuple[int, int]:
        """[pre_size, pre_size * size): the multiplicative span inside its axis."""
        return self.pre_size, self.pre_size * self.full_size(mesh)

    def overlaps(self, other: AxisRef, mesh: MeshModel) -> bool:
        if self.name != other.name:
            return False
        lo1, hi1 = self.range_on(mesh)
        lo2, hi2 = other.range_on(mesh)
        return lo1 < hi2 and lo2 < hi1

    def __str__(self) -> str:
        from meshjit.dialects.sdy_text import print_axis_ref

        return print_axis_ref(self)


@dataclass(frozen=True, slots=True)
class DimSharding:
    """How one tensor dim is split: axes major to minor; open dims may grow."""

    axes: tuple[AxisRef, ...] = ()
    closed: bool = True
    priority: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "axes", tuple(self.axes))
        if self.priority is not None and self.priority < 0:
            raise ShardingError(
                f"dim priorities are >= 0 (p0 is the highest), found {self.priority}"
            )

    def size_on(self, mesh: MeshModel) -> int:
        """How many ways the dim is split on `mesh` (product of its axis sizes)."""
        return math.prod(a.full_size(mesh) for a in self.axes)

    def __str__(self) -> str:
        from meshjit.dialects.sdy_text import print_dim_sharding

        return print_dim_sharding(self)


@dataclass(frozen=True, slots=True)
class TensorSharding:
    """`#sdy.sharding<@mesh, [{"x"}, {"y", ?}], replicated={"z"}>` as data."""

    mesh_name: str
    dims: tuple[DimSharding, ...]
    replicated: tuple[AxisRef, ...] = ()
    unreduced: tuple[AxisRef, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", tuple(self.dims))
        object.__setattr__(self, "replicated", tuple(self.replicated))
        object.__setattr__(self, "unreduced", tuple(self.unreduced))

    @classmethod
    def replicated_on(cls, mesh_name: str, rank: int) -> TensorSharding:
        """Closed and empty on every dim: the value is whole on every device."""
        return cls(mesh_name, tuple(DimSharding() for _ in range(rank)))

    @property
    def rank(self) -> int:
        return len(self.dims)

    def dim_axes(self) -> Iterator[tuple[int, AxisRef]]:
        for d, dim in enumerate(self.dims):
            for axis in dim.axes:
                yield d, axis

    def all_axes(self) -> tuple[AxisRef, ...]:
        """Every axis the sharding names: dims first, then replicated, unreduced."""
        return tuple(a for _, a in self.dim_axes()) + self.replicated + self.unreduced

    def dim_size(self, dim: int, mesh: MeshModel) -> int:
        """How many ways tensor dim `dim` is split on `mesh`."""
        return self.dims[dim].size_on(mesh)

    def num_shards(self, mesh: MeshModel) -> int:
        return math.prod(d.size_on(mesh) for d in self.dims)

    def is_fully_replicated(self, mesh: MeshModel | None = None) -> bool:
        """True when every device holds the whole value.

        Without a mesh this asks whether any dim names an axis; with one it also
        counts axes of size 1 as not splitting anything (as JAX does).
        """
        if mesh is None:
            return not any(d.axes for d in self.dims) and not self.unreduced
        if self.unreduced and math.prod(a.full_size(mesh) for a in self.unreduced) > 1:
            return False
        return self.num_shards(mesh) == 1

    def local_shape(
        self, global_shape: Shape, mesh: MeshModel, *, allow_padding: bool = False
    ) -> Shape:
        """The shard shape each device holds.

        Non-divisible dims raise unless `allow_padding`, which rounds up (the shard
        of the padded value, as Shardy's partitioner pads).
        """
        self.validate(mesh, global_shape, allow_uneven=allow_padding)
        out = []
        for size, dim in zip(global_shape, self.dims, strict=True):
            ways = dim.size_on(mesh)
            out.append(-(-size // ways))
        return tuple(out)

    def validate(
        self,
        mesh: MeshModel,
        shape: Shape | None = None,
        *,
        allow_uneven: bool = False,
        what: str = "value",
    ) -> None:
        """Raise ShardingError when the sharding cannot apply to `mesh` (and shape).

        Checks: every axis is on the mesh, sub-axes fit their axis, no axis is used
        twice (sub-axes included), the rank matches, and each split dim divides.
        `what` names the value in messages (an argument path, `%3`, ...).
        """
        self._check_axes(mesh, what)
        if shape is None:
            return
        shape = tuple(shape)
        if len(shape) != self.rank:
            raise ShardingError(
                f"rank mismatch for {what}: the sharding has {self.rank} dims but "
                f"the shape {list(shape)} has rank {len(shape)}; give one dim "
                "sharding per tensor dim"
            )
        if allow_uneven:
            return
        for d, (size, dim) in enumerate(zip(shape, self.dims, strict=True)):
            ways = dim.size_on(mesh)
            if size % ways == 0:
                continue
            sizes = " * ".join(f"{a} (size {a.full_size(mesh)})" for a in dim.axes)
            raise IndivisibleDimError(
                f"cannot shard dim {d} of {what} (shape {list(shape)}) over mesh "
                f"axes {sizes} = {ways}: dim {d} has size {size}, which is not "
                f"divisible by {ways}; expected a multiple of {ways}. Pad dim {d} "
                "or use fewer axes on it"
            )

    def _check_axes(self, mesh: MeshModel, what: str) -> None:
        names = ", ".join(_quote(n) for n in mesh.axis_names) or "none"
        used: list[tuple[str, AxisRef]] = []
        places = [(f"dim {d}", a) for d, a in self.dim_axes()]
        places += [("replicated", a) for a in self.replicated]
        places += [("unreduced", a) for a in self.unreduced]
        for place, axis in places:
            if not mesh.has_axis(axis.name):
                raise ShardingError(
                    f"unknown mesh axis {_quote(axis.name)} in {place} of {what}: "
                    f"the mesh has axes ({names}); use one of them or add "
                    f"{_quote(axis.name)} to the mesh"
                )
            if axis.is_sub_axis:
                _check_sub_axis(axis, mesh.axis_size(axis.name), what)
            for other_place, other in used:
                if axis.overlaps(other, mesh):
                    raise ShardingError(
                        f"mesh axis {_quote(axis.name)} is used twice in {what}: "
                        f"{other} in {other_place} and {axis} in {place}; each mesh "
                        "axis may split at most one dim, so remove one of them"
                    )
            used.append((place, axis))

    def __str__(self) -> str:
        from meshjit.dialects.sdy_text import print_sharding

        return print_sharding(self)


def _check_sub_axis(axis: AxisRef, full: int, what: str) -> None:
    assert axis.size is not None
    if axis.size < 2:
        raise ShardingError(
            f"sub-axis {axis} in {what} has size {axis.size}; sub-axes need size > 1"
        )
    span = axis.pre_size * axis.size
    if full % span != 0 or (span == full and axis.pre_size == 1):
        raise ShardingError(
            f"sub-axis {axis} in {what} does not fit mesh axis {_quote(axis.name)} "
            f"(size {full}): pre_size * size = {span} must divide {full} and the "
            f"sub-axis must be smaller than the whole axis; use "
            f"{_quote(axis.name)} itself or a smaller sub-axis"
        )


def view_axes(
    view: MeshModel, base: MeshModel
) -> dict[str, tuple[AxisRef, ...]] | None:
    """`view` as another spelling of `base`'s devices (jax's
    `use_abstract_mesh(mesh.update(axis_sizes=..., axis_names=...))` inside a
    function): each view axis as the `base` axes or sub-axes it covers, major
    to minor (a size-1 axis covers none). Both meshes lay the same device ids
    out row-major, so a view axis is a run of the mixed-radix digits of a
    device's position. None when `view` is not such a spelling (other
    devices, or an axis that straddles base axes unevenly)."""
    if view.size != base.size or view.logical_device_ids != base.logical_device_ids:
        return None

    def spans(mesh: MeshModel) -> list[tuple[MeshAxis, int]]:
        out, stride = [], mesh.size
        for axis in mesh.axes:
            stride //= axis.size
            out.append((axis, stride))
        return out

    found: dict[str, tuple[AxisRef, ...]] = {}
    for axis, stride in spans(view):
        lo, hi = stride, stride * axis.size
        refs: list[AxisRef] = []
        for b, b_stride in spans(base):
            b_lo, b_hi = b_stride, b_stride * b.size
            low, high = max(lo, b_lo), min(hi, b_hi)
            if low >= high:
                continue
            if low % b_lo or b_hi % high or high % low:
                return None
            size = high // low
            refs.append(
                AxisRef(b.name)
                if size == b.size
                else AxisRef(b.name, pre_size=b_hi // high, size=size)
            )
        if math.prod(r.size or base.axis_size(r.name) for r in refs) != axis.size:
            return None
        found[axis.name] = tuple(refs)
    return found
