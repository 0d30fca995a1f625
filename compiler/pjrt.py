"""Compile a partitioned module with PJRT and run it on sharded jax.Arrays."""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from meshjit.compiler import bridge
from meshjit.compiler.processes import Program, check_same_program, sync_timeout
from meshjit.dialects.sharding import MeshModel
from meshjit.errors import ShardingError


def devices_by_position(mesh: MeshModel, devices: Sequence[Any]) -> tuple[Any, ...]:
    """The device at each row-major mesh position (partition i runs there).

    A mesh device id is a position in `devices` (as in the modules JAX emits,
    where ids index the device assignment), not a PJRT `device.id`.
    """
    order = mesh.logical_device_ids
    missing = [i for i in order if not 0 <= i < len(devices)]
    if missing:
        raise ShardingError(
            f"mesh needs device id {missing[0]}, but only {len(devices)} devices "
            "were given (ids index the device list)"
        )
    return tuple(devices[i] for i in order)


def jax_mesh(mesh: MeshModel, devices: Sequence[Any]) -> jax.sharding.Mesh:
    placed = np.array(devices_by_position(mesh, devices), dtype=object)
    return jax.sharding.Mesh(placed.reshape(mesh.shape), mesh.axis_names)


def jax_sharding(
    mesh: MeshModel, devices: Sequence[Any], layout: Sequence[Sequence[Any]]
) -> jax.sharding.NamedSharding:
    """NamedSharding for a layout of whole axes (sub-axes have no jax spelling)."""
    spec = []
    for axes in layout:
        names = []
        for axis in axes:
            if getattr(axis, "size", None) is not None:
                raise ShardingError(
                    f"sub-axis {axis} has no jax.sharding spelling; cannot return it"
                )
            names.append(axis.name)
        spec.append(
            None if not names else names[0] if len(names) == 1 else tuple(names)
        )
    pspec = jax.sharding.PartitionSpec(*spec)
    return jax.sharding.NamedSharding(jax_mesh(mesh, devices), pspec)


@dataclass(frozen=True, slots=True)
class OutputSpec:
    shape: tuple[int, ...] | None  # None: a token
    layout: tuple[tuple[Any, ...], ...]


def _assemble(
    out: OutputSpec, sharding: jax.sharding.NamedSharding, pieces: list[jax.Array]
) -> jax.Array:
    """One global jax.Array from the per-device pieces. A zero-size output has
    no data, and XLA hands its pieces back unsharded: it is rebuilt empty."""
    if out.shape is None:  # a token
        return bridge.token_of(pieces)  # type: ignore[no-any-return]
    if math.prod(out.shape) == 0:
        empty = np.zeros(out.shape, dtype=pieces[0].dtype)
        placed: jax.Array = jax.device_put(empty, sharding)
        return placed
    return jax.make_array_from_single_device_arrays(out.shape, sharding, pieces)


class PartitionedExecutable:
    """A compiled per-device program and how to assemble its outputs."""

    def __init__(
        self,
        text: str,
        mesh: MeshModel,
        outputs: Sequence[OutputSpec],
        devices: Sequence[Any],
        compiler_options: Mapping[str, Any] | None = None,
        loaded: Any = None,
        effects: bridge.Effects | None = None,
        program: Any = None,
        replicas: bool = False,
    ) -> None:
        """Compiles `text` for `devices`, or wraps `loaded` (an executable
        compiled from it before, deserialized). `program`: the form of the
        same program XLA compiles instead of `text` (an `ir.Module`: all-to-alls
        in XLA's tuple form, `compiler/tuple_all_to_all.py`; with `replicas`,
        the replica form, `compiler/replicas.py`). `effects`: what the
        program's side effects need (host callbacks, ordered-effect tokens,
        which are @main's first arguments and results and not among
        `outputs`)."""
        self.mesh = mesh
        self.devices = devices_by_position(mesh, devices)
        self.outputs = tuple(outputs)
        self.effects = effects
        self.executable = (
            loaded
            if loaded is not None
            else bridge.compile_spmd(
                text if program is None else program,
                self.devices,
                compiler_options,
                effects.host_callbacks if effects is not None else (),
                replicas=replicas,
            )
        )
        self.out_shardings = tuple(
            jax_sharding(mesh, self.devices, o.layout) for o in self.outputs
        )
        self._text = text
        # Several processes: the others' programs are compared at the first run.
        owners = sorted({d.process_index for d in self.devices})
        self._owners = len(owners)
        self._unchecked = owners if len(owners) > 1 else None
        self._check_lock = threading.Lock()
        self.name = "main"
        self.arguments: tuple[str, ...] = ()

    @functools.cached_property
    def argument_layouts(self) -> tuple[Any, ...] | None:
        """The per-device memory layout (PJRT's) the executable takes each
        argument in, after the ordered-effect tokens; None where PJRT does
        not say (a program with tokens: each argument is then taken in the
        default layout of its per-device shape)."""
        return self._layouts(self.executable.get_parameter_layouts)

    @functools.cached_property
    def result_layouts(self) -> tuple[Any, ...] | None:
        """The per-device memory layout (PJRT's) of each result, after the
        ordered-effect tokens; None where PJRT does not say."""
        return self._layouts(self.executable.get_output_layouts)

    def _layouts(self, read: Any) -> tuple[Any, ...] | None:
        tokens = len(self.effects.ordered) if self.effects is not None else 0
        try:
            return tuple(read()[tokens:])
        except jax.errors.JaxRuntimeError:
            return None

    @property
    def spans_processes(self) -> bool:
        """Whether its devices belong to more than one process."""
        return self._owners > 1

    def describe(self, name: str, arguments: Sequence[str]) -> None:
        """How a process mismatch names this program and its arguments."""
        self.name = name
        self.arguments = tuple(arguments)

    def __call__(self, *args: jax.Array) -> list[jax.Array]:
        if self._unchecked is not None:
            self._check_processes()
        if self.effects is not None:
            pieces = bridge.run_with_effects(
                self.executable, self.devices, list(args), self.effects
            )
        else:
            results = self.executable.execute_sharded(list(args))
            pieces = results.disassemble_into_single_device_arrays()
        return [
            _assemble(o, s, list(p))
            for o, s, p in zip(self.outputs, self.out_shardings, pieces, strict=True)
        ]

    def _check_processes(self) -> None:
        with self._check_lock:
            participants = self._unchecked
            if participants is None:
                return
            program = Program(self.name, self._text, self.arguments)
            check_same_program(program, participants, sync_timeout())
            self._unchecked = None

    def hlo_text(self) -> str:
        return str(self.executable.hlo_modules()[0].to_string())
