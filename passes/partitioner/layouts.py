"""Layouts (per dim, the mesh axes that split it) and factor shardings: the
pure arithmetic the handlers share. Nothing here writes IR."""

from __future__ import annotations

from collections.abc import Sequence

from meshjit.dialects.reshard import DimAxes, Layout, merge_axes
from meshjit.dialects.rules import ShardingRule
from meshjit.dialects.sdy_text import print_string
from meshjit.dialects.sharding import AxisRef, MeshModel, TensorSharding


def span(axes: Sequence[AxisRef], mesh: MeshModel) -> int:
    """Devices the axes span together (product of their sizes). Computed,
    not cached: a cache keyed by the mesh hashed it on every call, in the
    method dataclasses generates (interpreted even when compiled), several
    times the cost of the product."""
    n = 1
    for a in axes:
        n *= a.full_size(mesh)
    return n


def replicated(rank: int) -> Layout:
    if rank < len(_REPLICATED):
        return _REPLICATED[rank]
    return tuple(() for _ in range(rank))


_REPLICATED: tuple[Layout, ...] = tuple(tuple(() for _ in range(r)) for r in range(9))


def local_shape(
    shape: Sequence[int], layout: Layout, mesh: MeshModel
) -> tuple[int, ...]:
    """Each device's block: ceil(size / ways) along a split dim (a dim its
    axes do not divide is padded at the end; the padding holds garbage until
    an op that reads it masks it)."""
    return tuple(
        -(-n // span(axes, mesh)) for n, axes in zip(shape, layout, strict=True)
    )


def local_blocks(
    tensors: Sequence[tuple[Sequence[int] | None, int]],
    layouts: Sequence[Layout | None],
    mesh: MeshModel,
) -> list[tuple[tuple[int, ...], int] | None]:
    """Each (shape, itemsize)'s per-device block under its layout, with its
    itemsize (what `cost.Efficiency.scale` reads); None where the shape or
    the layout is."""
    return [
        None if shape is None or lay is None else (local_shape(shape, lay, mesh), size)
        for (shape, size), lay in zip(tensors, layouts, strict=True)
    ]


def uneven_dims(shape: Sequence[int], layout: Layout, mesh: MeshModel) -> list[int]:
    """Dims whose axes do not divide them (their last blocks are padded)."""
    return [
        d
        for d, (n, axes) in enumerate(zip(shape, layout, strict=True))
        if n % span(axes, mesh)
    ]


def axis_text(axis: AxisRef) -> str:
    text = print_string(axis.name)
    return text if axis.size is None else f"{text}:({axis.pre_size}){axis.size}"


def axes_text(axes: Sequence[AxisRef]) -> str:
    return ",".join(axis_text(a) for a in axes)


def layout_text(layout: Layout) -> str:
    dims = ["{" + ", ".join(axis_text(a) for a in axes) + "}" for axes in layout]
    return "[" + ", ".join(dims) + "]"


def layout_of(sharding: TensorSharding, mesh: MeshModel) -> Layout:
    """The sharding's dim axes, less axes of size 1 (they split nothing:
    Shardy's import removes them before partitioning too)."""
    return tuple(
        tuple(a for a in d.axes if a.full_size(mesh) != 1) for d in sharding.dims
    )


def unreduced_of(sharding: TensorSharding, mesh: MeshModel) -> DimAxes:
    """The axes the sharding leaves unreduced (jax's `unreduced=`: each device
    holds a partial sum over them), less axes of size 1."""
    return tuple(a for a in sharding.unreduced if a.full_size(mesh) != 1)


def project(
    tensor: Sequence[tuple[int, ...]], factors: Sequence[DimAxes], mesh: MeshModel
) -> Layout:
    """A tensor's layout from its factors' axes; consecutive sub-axes that
    factors split an axis into are merged back (`"y":(1)2, "y":(2)2` is "y"),
    so that the same layout always has the same spelling."""
    return tuple(
        merge_axes(tuple(a for f in dims for a in factors[f]), mesh) for dims in tensor
    )


def split_to_factors(
    tensor: Sequence[tuple[int, ...]],
    layout: Layout,
    rule: ShardingRule,
    mesh: MeshModel,
    uneven: frozenset[int] = frozenset(),
) -> dict[int, list[AxisRef]]:
    """A tensor's dim axes assigned to the dim's factors, major factor first; an
    axis that does not fit whole into the current factor ends the assignment
    (factors in `uneven` take axes that do not divide them)."""
    out: dict[int, list[AxisRef]] = {}
    for dim_factors, axes in zip(tensor, layout, strict=False):
        pending = list(axes)
        for f in dim_factors:
            chosen: list[AxisRef] = []
            while pending and (
                f in uneven or rule.sizes[f] % span([*chosen, pending[0]], mesh) == 0
            ):
                chosen.append(pending.pop(0))
            out[f] = chosen
            if span(chosen, mesh) != rule.sizes[f]:
                break
    return out


def keep_compound_dims_valid(
    rule: ShardingRule, factors: list[list[AxisRef]], mesh: MeshModel
) -> None:
    """In a dim of several factors, a factor after one that is not fully split
    must stay unsplit (its blocks would not be contiguous). Clearing a factor
    can make another dim invalid, so this runs to a fixed point."""
    changed = True
    while changed:
        changed = False
        for tensor in (*rule.operands, *rule.results):
            for dim_factors in tensor:
                whole = True
                for f in dim_factors:
                    if not whole and factors[f]:
                        factors[f] = []
                        changed = True
                    elif span(factors[f], mesh) != rule.sizes[f]:
                        whole = False


def is_elementwise(rule: ShardingRule) -> bool:
    """Every tensor of full rank maps dim d to factor d, one factor per dim."""
    tensors = [*rule.operands, *rule.results]
    rank = max((len(t) for t in tensors), default=0)
    for t in tensors:
        if len(t) == 0:
            continue
        if len(t) != rank or any(dims != (d,) for d, dims in enumerate(t)):
            return False
    return True
