"""Differential tests: meshjit.sharding against jax.sharding 0.10.2 on random layouts.

Random meshes (1-3 axes, shuffled device orders, subsets of the 8 devices), random
specs and divisible shapes; every query must give exactly what jax gives.
"""

from __future__ import annotations

import random
from typing import Any

import jax
import numpy as np
import pytest

from meshjit.compiler import bridge
from meshjit.sharding import (
    UNCONSTRAINED,
    GSPMDSharding,
    Mesh,
    NamedSharding,
    P,
    SingleDeviceSharding,
    from_jax,
)

pytestmark = pytest.mark.devices(8)

AXIS_SIZES = [1, 2, 2, 4, 8]


def jax_p(*entries: Any) -> Any:
    """jax.P, whose constructor jax leaves untyped."""
    return jax.P(*entries)  # type: ignore[no-untyped-call]


def random_mesh(rng: random.Random) -> tuple[Mesh, jax.sharding.Mesh]:
    count = rng.randint(1, 3)
    sizes: list[int] = []
    for _ in range(count):
        room = 8 // int(np.prod(sizes, dtype=int))
        sizes.append(rng.choice([s for s in AXIS_SIZES if s <= room]))
    total = int(np.prod(sizes, dtype=int))
    devices = rng.sample(jax.devices(), total)
    names = rng.sample(["x", "y", "z", "data", "model"], count)
    array = np.array(devices, dtype=object).reshape(sizes)
    return Mesh(array, names), jax.sharding.Mesh(array, names)


def random_spec(rng: random.Random, mesh: Mesh, rank: int) -> tuple[Any, ...]:
    free = list(mesh.axis_names)
    rng.shuffle(free)
    entries: list[Any] = []
    for _ in range(rng.randint(0, rank)):
        roll = rng.random()
        if roll < 0.3 or not free:
            entries.append(None)
        elif roll < 0.75:
            entries.append(free.pop())
        else:
            take = rng.randint(1, min(2, len(free)))
            entries.append(tuple(free.pop() for _ in range(take)))
    return tuple(entries)


def random_shape(
    rng: random.Random, mesh: Mesh, spec: tuple[Any, ...], rank: int
) -> tuple[int, ...]:
    shape = []
    for d in range(rank):
        entry = spec[d] if d < len(spec) else None
        names = () if entry is None else (entry,) if isinstance(entry, str) else entry
        ways = int(np.prod([mesh.shape[n] for n in names], dtype=int))
        shape.append(ways * rng.randint(1, 3))
    return tuple(shape)


def compare(ours: Any, theirs: Any, shape: tuple[int, ...]) -> None:
    assert ours.devices_indices_map(shape) == theirs.devices_indices_map(shape)
    assert ours.addressable_devices_indices_map(
        shape
    ) == theirs.addressable_devices_indices_map(shape)
    assert ours.shard_shape(shape) == theirs.shard_shape(shape)
    assert ours.is_fully_replicated == theirs.is_fully_replicated
    assert ours.num_devices == theirs.num_devices
    assert ours.device_set == theirs.device_set
    assert ours.addressable_devices == theirs.addressable_devices
    assert ours.is_fully_addressable == theirs.is_fully_addressable
    assert ours.memory_kind == theirs.memory_kind


def make_cases(seed: int, count: int) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        mesh, jmesh = random_mesh(rng)
        rank = rng.randint(0, 3)
        spec = random_spec(rng, mesh, rank)
        shape = random_shape(rng, mesh, spec, rank)
        cases.append((mesh, jmesh, spec, shape))
    return cases


CASES = make_cases(seed=2024, count=400)


def test_named_sharding_matches_jax() -> None:
    for mesh, jmesh, spec, shape in CASES:
        ours = NamedSharding(mesh, P(*spec))
        theirs = jax.sharding.NamedSharding(jmesh, jax_p(*spec))
        compare(ours, theirs, shape)
        # The HLO form is XLA's text for jax's own conversion.
        want = str(theirs._to_xla_hlo_sharding(len(shape)))
        assert ours.to_gspmd_text(len(shape)) == want


def test_gspmd_sharding_matches_jax() -> None:
    for mesh, _, spec, shape in CASES[:200]:
        text = NamedSharding(mesh, P(*spec)).to_gspmd_text(len(shape))
        devices = mesh.flat_devices
        ours = GSPMDSharding(devices, text)
        theirs = bridge.make_jax_gspmd_sharding(devices, text, None)
        compare(ours, theirs, shape)


def test_unconstrained_dims_match_jax() -> None:
    rng = random.Random(5)
    for _ in range(50):
        mesh, jmesh = random_mesh(rng)
        spec = list(random_spec(rng, mesh, 3))
        spec.append(None)
        spec[rng.randrange(len(spec))] = UNCONSTRAINED
        jspec = [jax.P.UNCONSTRAINED if e is UNCONSTRAINED else e for e in spec]
        shape = random_shape(
            rng,
            mesh,
            tuple(e if e is not UNCONSTRAINED else None for e in spec),
            len(spec),
        )
        compare(
            NamedSharding(mesh, P(*spec)),
            jax.sharding.NamedSharding(jmesh, jax_p(*jspec)),
            shape,
        )


def test_single_device_sharding_matches_jax() -> None:
    for device in jax.devices():
        for shape in [(), (3,), (4, 6), (2, 1, 5)]:
            compare(
                SingleDeviceSharding(device),
                jax.sharding.SingleDeviceSharding(device),
                shape,
            )


def _pairs(seed: int, count: int) -> list[tuple[Any, Any, Any, Any, int]]:
    """Pairs of shardings, biased towards sharing devices so True cases are common."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        mesh, jmesh = random_mesh(rng)
        rank = rng.randint(0, 3)
        spec_a = random_spec(rng, mesh, rank)
        roll = rng.random()
        if roll < 0.35:
            # Same mesh, another spec (or the same one with trailing Nones).
            other, jother = mesh, jmesh
            spec_b = random_spec(rng, mesh, rank) if rng.random() < 0.5 else spec_a
            spec_b = spec_b + (None,) * (rank - len(spec_b))
        elif roll < 0.7:
            # The same devices in the same order, reshaped into other axes.
            flat = list(mesh.flat_devices)
            sizes = [len(flat)]
            if len(flat) >= 4 and rng.random() < 0.7:
                sizes = [2, len(flat) // 2]
            names = rng.sample(["p", "q"], len(sizes))
            array = np.array(flat, dtype=object).reshape(sizes)
            other, jother = Mesh(array, names), jax.sharding.Mesh(array, names)
            spec_b = random_spec(rng, other, rank)
        else:
            other, jother = random_mesh(rng)
            spec_b = random_spec(rng, other, rank)
        a = NamedSharding(mesh, P(*spec_a))
        ja = jax.sharding.NamedSharding(jmesh, jax_p(*spec_a))
        b = NamedSharding(other, P(*spec_b))
        jb = jax.sharding.NamedSharding(jother, jax_p(*spec_b))
        pairs.append((a, ja, b, jb, rank))
    return pairs


def test_is_equivalent_to_matches_jax() -> None:
    outcomes = []
    for a, ja, b, jb, rank in _pairs(seed=99, count=400):
        want = ja.is_equivalent_to(jb, rank)
        assert a.is_equivalent_to(b, rank) == want
        assert b.is_equivalent_to(a, rank) == jb.is_equivalent_to(ja, rank)
        outcomes.append(want)
    # The generator must exercise both answers.
    assert 40 < sum(outcomes) < len(outcomes) - 40


def test_is_equivalent_to_across_classes_matches_jax() -> None:
    for a, ja, _, _, rank in _pairs(seed=3, count=150):
        text = a.to_gspmd_text(rank)
        ours = GSPMDSharding(a.mesh.flat_devices, text)
        theirs = bridge.make_jax_gspmd_sharding(a.mesh.flat_devices, text, None)
        assert ours.is_equivalent_to(a, rank) == theirs.is_equivalent_to(ja, rank)
        device = a.mesh.flat_devices[0]
        single = SingleDeviceSharding(device)
        jsingle = jax.sharding.SingleDeviceSharding(device)
        assert single.is_equivalent_to(a, rank) == jsingle.is_equivalent_to(ja, rank)
        assert a.is_equivalent_to(single, rank) == ja.is_equivalent_to(jsingle, rank)


@pytest.mark.parametrize("index", range(0, 400, 40))
def test_round_trip_through_jax(index: int) -> None:
    mesh, _, spec, shape = CASES[index]
    ours = NamedSharding(mesh, P(*spec))
    back = from_jax(ours.to_jax())
    assert back == ours
    assert hash(back) == hash(ours)
    gspmd = ours.to_gspmd(len(shape))
    assert from_jax(gspmd.to_jax()) == gspmd
