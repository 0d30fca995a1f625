"""`shard_map`: jax.shard_map (and the older jax.experimental.shard_map
spelling) for meshjit's or jax's Mesh and PartitionSpec.

jax.shard_map accepts only jax's classes (a meshjit Mesh is refused with a
TypeError from inside jax); this converts them and checks what jax reports
late or vaguely: the mesh's type, every spec leaf (by its path in the specs),
axis names the mesh lacks or the region does not make manual. The body is
traced by jax; meshjit partitions the `sdy.manual_computation` it lowers to.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from typing import Any

import jax

from meshjit.errors import ShardingError
from meshjit.frontend.mesh import Mesh
from meshjit.frontend.sharding import PartitionSpec

_MISSING: Any = object()
# in_specs omitted: jax's default (inferred from the arguments' types)
_INFER: Any = object()


def shard_map(
    f: Callable[..., Any] | None = None,
    mesh: Mesh | jax.sharding.Mesh | jax.sharding.AbstractMesh | None = None,
    in_specs: Any = _INFER,
    out_specs: Any = _MISSING,
    check_rep: bool | None = None,
    auto: Set[str] | None = None,
    *,
    axis_names: Set[str] | None = None,
    check_vma: bool | None = None,
) -> Any:
    """Maps `f` over the blocks of its arguments, manual over `axis_names`
    (every mesh axis when omitted; the rest stay automatic, partitioned by
    meshjit): `jax.shard_map(f, out_specs=..., in_specs=..., mesh=...,
    axis_names=..., check_vma=...)`, with meshjit's or jax's Mesh and
    PartitionSpec (None for a replicated argument). `mesh` omitted: the mesh
    of `meshjit.set_mesh` / `jax.set_mesh`. The older positional spelling
    of `jax.experimental.shard_map.shard_map(f, mesh, in_specs, out_specs,
    check_rep=True, auto=frozenset())` works too (`check_rep` is
    `check_vma`; `auto` the axes left automatic). Without `f`, a decorator."""
    if out_specs is _MISSING:
        raise TypeError("shard_map() missing required argument 'out_specs'")
    if check_rep is not None and check_vma is not None:
        raise TypeError(
            "shard_map: check_rep (the older name) and check_vma given both; "
            "pass check_vma"
        )
    check = check_vma if check_vma is not None else check_rep
    jmesh = _jax_mesh(mesh)
    names = tuple(jmesh.axis_names) if jmesh is not None else None
    if auto is not None and axis_names is not None:
        raise TypeError(
            "shard_map: auto (the axes left automatic, the older spelling) and "
            "axis_names (the manual ones) given both; pass axis_names"
        )
    manual: frozenset[str] = frozenset()
    if auto is not None:
        if names is None:
            raise ShardingError("shard_map: auto needs a mesh (none given or set)")
        _check_axes(set(auto), names, "auto")
        manual = frozenset(names) - frozenset(auto)
        if not manual:
            raise ShardingError(
                f"shard_map: auto lists every mesh axis ({list(names)}); at "
                "least one must be manual"
            )
    elif axis_names is not None:
        if names is not None:
            _check_axes(set(axis_names), names, "axis_names")
        manual = frozenset(axis_names)
    allowed = manual or (frozenset(names) if names is not None else None)
    options: dict[str, Any] = {}
    if in_specs is not _INFER:
        options["in_specs"] = _jax_specs(in_specs, "in_specs", names, allowed)
    options["out_specs"] = _jax_specs(out_specs, "out_specs", names, allowed)
    options["check_vma"] = True if check is None else bool(check)
    if jmesh is not None:
        options["mesh"] = jmesh
    if manual:
        options["axis_names"] = manual
    if f is None:
        return lambda g: jax.shard_map(g, **options)
    if not callable(f):
        raise TypeError(f"shard_map: f must be callable, got {type(f).__name__}")
    return jax.shard_map(f, **options)


def _jax_mesh(mesh: object) -> Any:
    if mesh is None:
        return None
    if isinstance(mesh, Mesh):
        return mesh.to_jax()
    if isinstance(mesh, jax.sharding.Mesh | jax.sharding.AbstractMesh):
        return mesh
    raise ShardingError(
        "shard_map: mesh must be a meshjit.Mesh or a jax.sharding.Mesh, got "
        f"{type(mesh).__name__}"
    )


def _check_axes(axes: set[str], names: tuple[str, ...], what: str) -> None:
    unknown = sorted(str(a) for a in axes - set(names))
    if unknown:
        raise ShardingError(
            f"shard_map: {what} names {unknown}, which the mesh (axes "
            f"{list(names)}) does not have"
        )


def _is_spec(x: object) -> bool:
    return x is None or isinstance(x, PartitionSpec | jax.sharding.PartitionSpec)


def _jax_specs(
    specs: Any,
    what: str,
    names: tuple[str, ...] | None,
    manual: frozenset[str] | None,
) -> Any:
    """`specs` with every leaf a jax PartitionSpec (None kept), checked."""

    def convert(path: Any, leaf: object) -> object:
        where = f"{what}{jax.tree_util.keystr(path)}"
        if leaf is None:
            return None
        if isinstance(leaf, PartitionSpec):
            spec = leaf
        elif isinstance(leaf, jax.sharding.PartitionSpec):
            spec = PartitionSpec.from_jax(leaf)
        else:
            raise ShardingError(
                f"shard_map: {where} is a {type(leaf).__name__}; each leaf of "
                "the specs must be a PartitionSpec (or None: replicated)"
            )
        used = set(spec.axis_names())
        if names is not None:
            unknown = sorted(used - set(names))
            if unknown:
                raise ShardingError(
                    f"shard_map: {where} = {spec!r} names axes {unknown}, which "
                    f"the mesh (axes {list(names)}) does not have"
                )
        if manual is not None:
            free = sorted(used - manual)
            if free:
                raise ShardingError(
                    f"shard_map: {where} = {spec!r} names axes {free}, which "
                    f"the region leaves automatic (manual: {sorted(manual)}); "
                    "a spec names manual axes only"
                )
        return spec.to_jax()

    return jax.tree_util.tree_map_with_path(convert, specs, is_leaf=_is_spec)
