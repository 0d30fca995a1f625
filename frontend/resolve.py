"""From what the user gave to one mesh and one closed sharding per array.

Inputs are the broadcast in/out_shardings leaves (meshjit or jax shardings,
bare PartitionSpecs, None, UNSPECIFIED), the shardings of committed arguments,
the context mesh and the meshes `with_sharding_constraint` used. The result, a
`Placement`, names one mesh (meshjit compiles a function for one mesh) and gives
every argument a sharding on it and every output a sharding or None (let
propagation decide). Every error names the argument or output by key path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from meshjit.compiler.bridge import IndivisibleShardingError
from meshjit.dialects.sharding import MeshModel, view_axes
from meshjit.errors import IndivisibleDimError, MissingMeshError, ShardingError
from meshjit.frontend.args import UNSPECIFIED
from meshjit.frontend.mesh import Mesh, current_mesh
from meshjit.frontend.sharding import (
    AUTO,
    GSPMDSharding,
    NamedSharding,
    PartitionSpec,
    Sharding,
    SingleDeviceSharding,
    from_jax,
)
from meshjit.frontend.trace import LeafInfo

SINGLE_DEVICE_AXIS = "_device"


@dataclass(frozen=True, slots=True)
class Placement:
    """One mesh, a closed sharding per argument leaf, a sharding or None per output."""

    mesh: Mesh
    single_device: bool  # no mesh was asked for: outputs are SingleDeviceSharding
    inputs: tuple[NamedSharding, ...]
    outputs: tuple[NamedSharding | None, ...]
    # Nothing chose the device (no committed argument, sharding, device= or
    # constraint): outputs are uncommitted, as jax's are.
    uncommitted: bool = False
    # Per argument leaf, the sharding its in_shardings entry or its own
    # committed sharding gave, as jax spells it; None where neither did.
    specified: tuple[Any, ...] = ()
    # AUTO leaves: the auto-shard pass chooses these arguments' shardings
    # (`inputs` holds a replicated placeholder for them; AUTO outputs are
    # None, open, like unspecified ones); `auto` is the AUTO leaf whose
    # options the search runs with, None without any.
    auto_inputs: tuple[bool, ...] = ()
    auto: AUTO | None = None
    # jit(device=...) / backend=: the computation runs on that device and
    # committed arguments are moved there (as jax does).
    pinned: bool = False


@dataclass(frozen=True, slots=True)
class Request:
    """Everything placement depends on, for one call or one `lower`."""

    api: str
    pjit: bool
    context_mesh: Mesh | None
    device: Any  # a jax device for jit(device=...) / backend, else None
    in_specs: tuple[object, ...]  # one broadcast in_shardings leaf per argument leaf
    committed: tuple[Sharding | None, ...]  # the argument's own sharding, if committed
    out_specs: tuple[object, ...]  # one broadcast out_shardings leaf per output leaf
    constraint_meshes: tuple[Mesh, ...]
    traced_mesh: MeshModel | None  # the sdy.mesh JAX emitted for constraints


def single_device_mesh(device: Any) -> Mesh:
    return Mesh(np.array([device], dtype=object), (SINGLE_DEVICE_AXIS,))


def _bare_spec(spec: object) -> PartitionSpec | None:
    if isinstance(spec, PartitionSpec):
        return spec
    if isinstance(spec, jax.sharding.PartitionSpec):
        return PartitionSpec.from_jax(spec)
    return None


def normalize_spec(
    spec: object, req: Request, what: str, leaf: LeafInfo
) -> Sharding | None:
    """A meshjit Sharding, or None for "unspecified" (jit infers or propagates)."""
    if spec is UNSPECIFIED:
        return None
    if spec is None:
        if req.pjit and req.context_mesh is not None:
            return NamedSharding(req.context_mesh, PartitionSpec())
        return None
    bare = _bare_spec(spec)
    if bare is not None:
        if req.context_mesh is None:
            raise MissingMeshError(
                f"{req.api} {what} for `{leaf.path}` is a bare PartitionSpec "
                f"{bare!r}, which needs a mesh: call the function inside `with "
                f"mesh:` or pass NamedSharding(mesh, {bare!r})"
            )
        try:
            spec = NamedSharding(req.context_mesh, bare)
        except ShardingError as err:
            raise type(err)(f"{req.api} {what} for `{leaf.path}`: {err}") from None
    if isinstance(spec, jax.sharding.Sharding):
        try:
            spec = from_jax(spec)
        except ShardingError as err:
            raise type(err)(f"{req.api} {what} for `{leaf.path}`: {err}") from None
    assert isinstance(spec, Sharding)
    # P.UNCONSTRAINED was refused when jit was called (jit._refuse_unconstrained).
    return spec


def _as_named(s: Sharding, ndim: int) -> NamedSharding | None:
    """The sharding as a NamedSharding on its own mesh (None for one device)."""
    if isinstance(s, NamedSharding):
        return s
    if isinstance(s, SingleDeviceSharding) or s.num_devices == 1:
        return None
    gspmd = s if isinstance(s, GSPMDSharding) else s.to_gspmd(ndim)
    return gspmd.to_named(ndim=ndim)


def _ids(devices: Sequence[Any]) -> list[int]:
    return [int(d.id) for d in devices]


def _onto(
    s: Sharding, mesh: Mesh, leaf: LeafInfo, what: str, api: str
) -> NamedSharding:
    """`s` expressed on `mesh`; an error when it lives on other devices."""
    if isinstance(s, NamedSharding) and s.mesh == mesh:
        return s
    mine = set(mesh.flat_devices)
    if s.device_set != mine:
        raise ShardingError(
            f"{api}: incompatible devices: {what} `{leaf.path}` is on devices with ids "
            f"{sorted(_ids(list(s.device_set)))} but the computation runs on the "
            f"mesh {mesh} with device ids {mesh.describe_devices()}; put every "
            "argument and sharding on the same devices"
        )
    try:
        return NamedSharding.from_gspmd(s.to_gspmd_text(leaf.ndim), mesh, leaf.ndim)
    except ShardingError as err:
        raise type(err)(
            f"{api}: {what} `{leaf.path}` uses {s!r}, which cannot be written on the "
            f"computation's mesh {mesh}: {err}"
        ) from None


def _pick_mesh(
    req: Request,
    ins: Sequence[Sharding | None],
    outs: Sequence[Sharding | None],
    in_leaves: Sequence[LeafInfo],
    out_leaves: Sequence[LeafInfo],
) -> tuple[Mesh, bool]:
    if req.device is not None:
        return single_device_mesh(req.device), True
    candidates: list[tuple[Sharding, int, str]] = []
    candidates += [
        (s, leaf.ndim, f"in_shardings for `{leaf.path}`")
        for s, leaf in zip(ins, in_leaves, strict=True)
        if s is not None
    ]
    candidates += [
        (s, leaf.ndim, f"out_shardings for `{leaf.path}`")
        for s, leaf in zip(outs, out_leaves, strict=True)
        if s is not None
    ]
    candidates += [
        (s, leaf.ndim, f"argument `{leaf.path}`")
        for s, leaf in zip(req.committed, in_leaves, strict=True)
        if s is not None
    ]
    for s, ndim, _ in candidates:
        named = _as_named(s, ndim)
        if named is not None:
            return named.mesh, False
    if req.constraint_meshes:
        mesh = req.constraint_meshes[0]
        # with_sharding_constraint(x, SingleDeviceSharding(d)): one device.
        return mesh, mesh.axis_names == (SINGLE_DEVICE_AXIS,)
    if req.traced_mesh is not None:
        model = req.traced_mesh
        if req.context_mesh is not None and req.context_mesh.to_model() == model:
            # the mesh of `jax.set_mesh` (with its axis types), whose
            # shardings jax's tracer wrote into the module
            return req.context_mesh, False
        pool = jax.devices()
        flat = [pool[i] for i in model.logical_device_ids]
        devices = np.array(flat, dtype=object).reshape(model.shape)
        return Mesh(devices, model.axis_names), False
    singles: dict[Any, str] = {}
    for s, _, label in candidates:
        singles.setdefault(next(iter(s.device_set)), label)
    if len(singles) > 1:
        shown = ", ".join(f"{label} on device {d.id}" for d, label in singles.items())
        raise ShardingError(
            f"{req.api}: incompatible devices for the computation: {shown}; move the "
            "arguments to one device (jax.device_put) or give in_shardings"
        )
    if singles:
        return single_device_mesh(next(iter(singles))), True
    if req.pjit and req.context_mesh is not None:
        # pjit under `with mesh:`: the computation runs on the context mesh
        # (unspecified inputs replicated over it), as in jax.
        return req.context_mesh, False
    return single_device_mesh(default_device()), True


def default_device() -> Any:
    """Where a computation with no committed argument runs, as in jax: the
    `jax.default_device` setting, else this process's first local device (with
    several processes, jax.devices()[0] may belong to another one)."""
    chosen = jax.config.jax_default_device  # type: ignore[attr-defined]
    if isinstance(chosen, jax.Device):
        return chosen
    return jax.local_devices()[0]


def check_fits(s: NamedSharding, leaf: LeafInfo, what: str, api: str) -> None:
    """Rank and divisibility of a boundary sharding (jax#27808: name the value)."""
    try:
        sharding = s.tensor_sharding(leaf.ndim)
    except ShardingError as err:
        raise type(err)(
            f"{api} {what} for `{leaf.path}` ({leaf.describe()}): {err}"
        ) from None
    try:
        sharding.validate(
            s.mesh.to_model(), leaf.shape, what=f"`{leaf.path}` ({leaf.describe()})"
        )
    except ShardingError as err:
        # jax raises its IndivisibleError here: meshjit's error subclasses it
        cls = (
            IndivisibleShardingError
            if isinstance(err, IndivisibleDimError)
            else type(err)
        )
        raise cls(f"{api} {what}: {err}") from None


def _device_text(s: Sharding) -> str:
    if isinstance(s, NamedSharding):
        return f" (mesh device ids {s.mesh.describe_devices()})"
    return f" (device ids {_ids(list(s._device_assignment))})"


def _one_auto(req: Request) -> AUTO | None:
    """The AUTO leaf the search runs with; every AUTO leaf must agree."""
    autos = [s for s in (*req.in_specs, *req.out_specs) if isinstance(s, AUTO)]
    if not autos:
        return None
    first = autos[0]
    for other in autos[1:]:
        if other.options() != first.options():
            raise ShardingError(
                f"{req.api}: AUTO leaves of one function share one search, but "
                f"they are given different options: {first!r} and {other!r}; give "
                "every AUTO leaf the same memory_budget and time_limit"
            )
    if req.device is not None:
        raise ShardingError(
            f"{req.api}: AUTO shardings choose a layout on a mesh; they cannot be "
            "combined with device= or backend="
        )
    return first


def _spec_or_auto(
    s: object, req: Request, what: str, leaf: LeafInfo
) -> Sharding | None:
    """`normalize_spec`, with AUTO as a replicated sharding on its mesh (the
    mesh the computation runs on; the search replaces the layout)."""
    if isinstance(s, AUTO):
        return NamedSharding(s.mesh, PartitionSpec())
    return normalize_spec(s, req, what, leaf)


def resolve(
    req: Request, in_leaves: Sequence[LeafInfo], out_leaves: Sequence[LeafInfo]
) -> Placement:
    auto = _one_auto(req)
    auto_in = tuple(isinstance(s, AUTO) for s in req.in_specs)
    auto_out = tuple(isinstance(s, AUTO) for s in req.out_specs)
    for is_auto, leaf in zip(auto_in, in_leaves, strict=True):
        if is_auto and leaf.key_shape:
            raise NotImplementedError(
                f"{req.api}: AUTO in_shardings for the PRNG key `{leaf.path}`: "
                "meshjit does not auto-shard typed keys yet; give the key a "
                "sharding"
            )
    ins = [
        _spec_or_auto(s, req, "in_shardings", leaf)
        for s, leaf in zip(req.in_specs, in_leaves, strict=True)
    ]
    outs = [
        _spec_or_auto(s, req, "out_shardings", leaf)
        for s, leaf in zip(req.out_specs, out_leaves, strict=True)
    ]
    if req.device is not None and current_mesh() is not None:
        raise ShardingError(
            f"{req.api}: Mesh context manager should not be used with jit when "
            "backend or device is also specified as an argument to jit: the "
            "`with mesh:` block places the computation on the mesh, device=/"
            "backend= on one device; drop one of the two"
        )
    if req.pjit and req.context_mesh is not None and req.device is None:
        _check_context_devices(req, in_leaves)
    mesh, single = _pick_mesh(req, ins, outs, in_leaves, out_leaves)
    for spec in (*req.in_specs, *req.out_specs):
        if isinstance(spec, AUTO) and (
            spec.mesh.to_model() != mesh.to_model()
            or _ids(spec.mesh.flat_devices) != _ids(mesh.flat_devices)
        ):
            raise ShardingError(
                f"{req.api}: AUTO chooses layouts on its mesh {spec.mesh} (device "
                f"ids {spec.mesh.describe_devices()}), but the computation runs on "
                f"{mesh} (device ids {mesh.describe_devices()}); use one mesh for "
                "AUTO and the other shardings"
            )
    if (
        req.traced_mesh is not None
        and (
            req.traced_mesh.axis_names != mesh.axis_names
            or req.traced_mesh.shape != tuple(mesh.axis_sizes)
        )
        # the same devices renamed or resized (`use_abstract_mesh` inside
        # the function): its shardings are spelled on the mesh
        and view_axes(req.traced_mesh, mesh.to_model()) is None
    ):
        raise ShardingError(
            f"{req.api}: with_sharding_constraint inside the function uses the mesh "
            f"{req.traced_mesh} but the arguments and shardings are on {mesh}; "
            "meshjit compiles a function for one mesh: use the same mesh for both"
        )
    for used in req.constraint_meshes:
        if not single and _ids(used.flat_devices) != _ids(mesh.flat_devices):
            raise ShardingError(
                f"{req.api}: incompatible devices: with_sharding_constraint inside "
                f"the function uses the mesh {used} with device ids "
                f"{used.describe_devices()} but the computation runs on the mesh "
                f"{mesh} with device ids {mesh.describe_devices()}; meshjit "
                "compiles a function for one mesh: use the same mesh for both"
            )
    placed_in: list[NamedSharding] = []
    specified: list[Any] = []
    for spec, own, leaf, is_auto in zip(
        ins, req.committed, in_leaves, auto_in, strict=True
    ):
        given = None
        if is_auto:  # a placeholder until the search chose the layout
            target = NamedSharding(mesh, PartitionSpec())
        elif spec is not None:
            target = _onto(spec, mesh, leaf, "in_shardings for argument", req.api)
            check_fits(target, leaf, "in_shardings", req.api)
            if own is not None and req.device is None:
                _check_committed(req, own, target, leaf)
            given = target
        elif own is not None and req.device is None:
            target = _onto(own, mesh, leaf, "argument", req.api)
            given = target
        else:
            target = NamedSharding(mesh, PartitionSpec())
        placed_in.append(target)
        specified.append(None if given is None else given.to_jax())
    placed_out: list[NamedSharding | None] = []
    for spec, leaf, is_auto in zip(outs, out_leaves, auto_out, strict=True):
        if spec is None or is_auto:
            placed_out.append(None)
            continue
        target = _onto(spec, mesh, leaf, "out_shardings for output", req.api)
        check_fits(target, leaf, "out_shardings", req.api)
        placed_out.append(target)
    uncommitted = (
        single
        and req.device is None
        and not req.constraint_meshes
        and all(c is None for c in req.committed)
        and all(x is None for x in (*ins, *outs))
    )
    return Placement(
        mesh,
        single,
        tuple(placed_in),
        tuple(placed_out),
        uncommitted,
        tuple(specified),
        auto_in,
        auto,
        req.device is not None,
    )


def _check_context_devices(req: Request, in_leaves: Sequence[LeafInfo]) -> None:
    """pjit under a mesh context runs on that mesh's devices, as in jax: an
    argument committed to other devices is an error, not a silent move."""
    assert req.context_mesh is not None
    want = sorted(d.id for d in req.context_mesh.flat_devices)
    for own, leaf in zip(req.committed, in_leaves, strict=True):
        if own is None:
            continue
        have = sorted(d.id for d in own.device_set)
        if have != want:
            raise ShardingError(
                f"{req.api}: incompatible devices: argument `{leaf.path}` "
                f"({leaf.describe()}) is committed to devices with ids {have} but "
                f"the context mesh {req.context_mesh} has device ids {want}; "
                "jax.device_put the argument onto the mesh, or call the function "
                "outside the mesh context"
            )


def _check_committed(
    req: Request, own: Sharding, target: NamedSharding, leaf: LeafInfo
) -> None:
    if own.is_equivalent_to(target, leaf.ndim):
        return
    ids = ""
    if repr(own) == repr(target):
        ids = f"; the two differ in device order: argument{_device_text(own)}, "
        ids += f"required{_device_text(target)}"
    raise ShardingError(
        f"{req.api}: the sharding of argument `{leaf.path}` ({leaf.describe()}) does "
        f"not match in_shardings: the argument is committed to {own!r} but "
        f"in_shardings asks for {target!r}{ids}. Move the argument first "
        f"(jax.device_put({leaf.path.split('[')[0]}, sharding)) or change "
        "in_shardings"
    )
