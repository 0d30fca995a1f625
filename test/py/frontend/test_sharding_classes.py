"""The sharding classes: cross-class equivalence, round trips, old classes, errors."""

from __future__ import annotations

import random

import jax
import numpy as np
import pytest

import meshjit
from meshjit.sharding import (
    UNCONSTRAINED,
    Chunked,
    GSPMDSharding,
    Mesh,
    NamedSharding,
    NoSharding,
    P,
    PartitionSpec,
    PmapSharding,
    PositionalSharding,
    Replicated,
    ShardedAxis,
    ShardingError,
    ShardingSpec,
    SingleDeviceSharding,
    Unstacked,
    from_jax,
)

DEVICES = jax.devices()


def mesh2() -> Mesh:
    return Mesh(np.array(DEVICES).reshape(2, 4), ("x", "y"))


# -- PartitionSpec -------------------------------------------------------------


@pytest.mark.devices(8)
def test_partition_spec_canonical_equality() -> None:
    assert P("x") == P("x", None) == P(("x",)) == P(["x"], None, None)
    assert hash(P("x")) == hash(P("x", None))
    assert P() == P(None) == P(())
    assert P("x", "y") != P("y", "x")
    assert P(("x", "y")) != P("x", "y")
    assert P("x") != ("x",)
    assert NamedSharding(mesh2(), P("x")) == NamedSharding(mesh2(), P("x", None))


def test_partition_spec_unreduced_and_reduced_sets() -> None:
    """jax's explicit-mode sets: part of equality, repr and the jax round
    trip; an axis is on a dim, unreduced or reduced, never two of these."""
    spec = P("x", None, unreduced={"y"})
    assert spec == P("x", unreduced=frozenset({"y"})) != P("x")
    assert hash(spec) == hash(P("x", unreduced={"y"}))
    assert repr(spec) == "P('x', None, unreduced={'y'})"
    # jax 0.11 adds the reduction to its repr (`, unreduced_kind=sum)`)
    assert repr(spec.to_jax()).startswith(repr(spec)[:-1])
    assert repr(P(reduced={"x"})) == repr(jax.P(reduced={"x"}))
    assert PartitionSpec.from_jax(spec.to_jax()) == spec
    assert (P("x", reduced={"z"}) + P("y")).reduced == {"z"}
    with pytest.raises(ShardingError, match="both unreduced and reduced"):
        P(unreduced={"x"}, reduced={"x"})
    with pytest.raises(ShardingError, match="splits dims over \\['x'\\]"):
        P("x", unreduced={"x"})
    with pytest.raises(ShardingError, match="set of mesh axis names"):
        P(unreduced="x")  # type: ignore[arg-type]


@pytest.mark.devices(8)
def test_unreduced_axes_must_be_explicit_mesh_axes() -> None:
    auto = mesh2()
    with pytest.raises(ShardingError, match=r"lists mesh axis 'y' as unreduced.*Auto"):
        NamedSharding(auto, P("x", unreduced={"y"}))
    with pytest.raises(ShardingError, match="unknown mesh axis 'z' in reduced"):
        NamedSharding(auto, P(reduced={"z"}))
    explicit = Mesh(
        np.array(DEVICES).reshape(2, 4),
        ("x", "y"),
        axis_types=(jax.sharding.AxisType.Explicit,) * 2,
    )
    named = NamedSharding(explicit, P("x", unreduced={"y"}))
    assert named.tensor_sharding(2).unreduced[0].name == "y"
    assert named.to_jax() == jax.sharding.NamedSharding(
        explicit.to_jax(), jax.P("x", unreduced={"y"})
    )


def test_partition_spec_sequence_api() -> None:
    spec = P("x", None, ("y", "z"))
    assert len(spec) == 3
    assert list(spec) == ["x", None, ("y", "z")]
    assert spec[2] == ("y", "z")
    assert spec.index(None) == 1
    assert spec.count("x") == 1
    assert P("x") + P("y") == P("x", "y")
    assert P("x") + ("y",) == P("x", "y")  # noqa: RUF005 (testing P.__add__)
    assert ("y",) + P("x") == P("y", "x")  # noqa: RUF005 (testing P.__radd__)
    assert repr(P("x")) == "P('x',)"
    assert repr(P(("x", "y"), None)) == "P(('x', 'y'), None)"
    assert repr(P(UNCONSTRAINED)) == "P(UNCONSTRAINED,)"
    assert P.UNCONSTRAINED is UNCONSTRAINED
    assert meshjit.P is meshjit.PartitionSpec is PartitionSpec


@pytest.mark.parametrize(
    ("entries", "pattern"),
    [
        ((0, 1), r"axis names are strings, found 0 \(int\) in entry 0"),
        ((("x", 1),), r"non-empty strings, found 1 in entry 0"),
        (("",), r"empty axis name in entry 0"),
    ],
)
def test_partition_spec_rejects_non_names(
    entries: tuple[object, ...], pattern: str
) -> None:
    with pytest.raises(ShardingError, match=pattern):
        P(*entries)


# -- NamedSharding errors ------------------------------------------------------


@pytest.mark.devices(8)
@pytest.mark.parametrize(
    ("spec", "shape", "pattern"),
    [
        (
            P("z"),
            None,
            r"unknown mesh axis 'z' in entry 0 of P\('z',\): the mesh has "
            r"axes \('x', 'y'\)",
        ),
        (
            P("x", "x"),
            None,
            r"mesh axis 'x' is used twice in P\('x', 'x'\) \(entries 0 "
            r"and 1\)",
        ),
        (P(("x", "x")), None, r"'x' is used twice"),
        (P("x", None), (8,), r"has 2 entries but the array has rank 1"),
        (P("x"), (), r"rank 0.*for a scalar the spec is P\(\)"),
        (
            P(("x", "y")),
            (12, 3),
            r"cannot shard dim 0 of .*\(shape \[12, 3\]\) over mesh "
            r'axes "x" \(size 2\) \* "y" \(size 4\) = 8: dim 0 has size 12, which '
            r"is not divisible by 8",
        ),
    ],
)
def test_named_sharding_errors(
    spec: PartitionSpec, shape: tuple[int, ...] | None, pattern: str
) -> None:
    def build_and_apply() -> None:
        sharding = NamedSharding(mesh2(), spec)
        if shape is not None:
            sharding.shard_shape(shape)

    with pytest.raises(ShardingError, match=pattern):
        build_and_apply()


@pytest.mark.devices(8)
def test_named_sharding_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown mesh axis"):
        NamedSharding(mesh2(), P("w"))


def test_empty_mesh_is_rejected() -> None:
    empty = Mesh(np.empty((), dtype=object), ())
    assert empty.empty
    with pytest.raises(
        ShardingError, match=r"got an empty mesh.*expected a mesh of at"
    ):
        NamedSharding(empty, P())


@pytest.mark.devices(8)
def test_tuple_spec_and_bad_spec() -> None:
    assert NamedSharding(mesh2(), ("x", None)).spec == P("x")
    with pytest.raises(ShardingError, match=r"needs a PartitionSpec, found 'x'"):
        NamedSharding(mesh2(), "x")


@pytest.mark.devices(8)
def test_memory_kind_is_canonical_and_checked() -> None:
    sharding = NamedSharding(mesh2(), P("x"))
    assert sharding.memory_kind == "device"
    host = sharding.with_memory_kind("pinned_host")
    assert host.memory_kind == "pinned_host"
    assert host != sharding
    assert not host.is_equivalent_to(sharding, 1)
    with pytest.raises(ShardingError, match=r"memory kind 'bogus' is not addressable"):
        sharding.with_memory_kind("bogus")


@pytest.mark.devices(8)
def test_repr_matches_jax() -> None:
    ours = NamedSharding(mesh2(), P("x", "y"))
    assert repr(ours) == repr(ours.to_jax())
    single = SingleDeviceSharding(DEVICES[3])
    assert repr(single) == repr(single.to_jax())
    assert repr(GSPMDSharding.get_replicated(DEVICES)) == (
        "GSPMDSharding({replicated}, memory_kind=device)"
    )


# -- cross-class equivalence ----------------------------------------------------------


@pytest.mark.devices(8)
def test_same_layout_in_every_class() -> None:
    named = NamedSharding(mesh2(), P("x", "y"))
    positional = PositionalSharding(DEVICES).reshape(2, 4)
    gspmd = GSPMDSharding(DEVICES, "{devices=[2,4]<=[8]}")
    for a in (named, positional, gspmd):
        for b in (named, positional, gspmd):
            assert a.is_equivalent_to(b, 2)
            assert a.devices_indices_map((4, 8)) == b.devices_indices_map((4, 8))
    assert named != positional  # equality stays within a class, as in JAX
    # Same devices, another layout.
    assert not positional.T.reshape(2, 4).is_equivalent_to(named, 2)


@pytest.mark.devices(8)
def test_partially_replicated_layout_in_every_class() -> None:
    named = NamedSharding(mesh2(), P("y"))
    positional = PositionalSharding(DEVICES).reshape(2, 4).replicate(0).reshape(4)
    gspmd = GSPMDSharding(DEVICES, named.to_gspmd_text(1))
    assert str(positional.replicate(0)) != ""  # repr works on merged sets
    for a, b in [(named, positional), (positional, gspmd), (gspmd, named)]:
        assert a.is_equivalent_to(b, 1)
        assert a.devices_indices_map((8,)) == b.devices_indices_map((8,))
        assert a.shard_shape((8,)) == b.shard_shape((8,)) == (2,)


@pytest.mark.devices(8)
def test_replicated_layout_in_every_class() -> None:
    one = Mesh(np.array(DEVICES[2:3]), ("x",))
    named = NamedSharding(one, P("x"))
    single = SingleDeviceSharding(DEVICES[2])
    positional = PositionalSharding([DEVICES[2]])
    gspmd = GSPMDSharding.get_replicated([DEVICES[2]])
    shardings = [named, single, positional, gspmd]
    for a in shardings:
        assert a.is_fully_replicated
        for b in shardings:
            assert a.is_equivalent_to(b, 1)
    assert not single.is_equivalent_to(SingleDeviceSharding(DEVICES[3]), 1)


@pytest.mark.devices(8)
def test_device_order_matters_as_in_jax() -> None:
    forward = Mesh(np.array(DEVICES), ("x",))
    backward = Mesh(np.array(DEVICES[::-1]), ("x",))
    a, b = NamedSharding(forward, P()), NamedSharding(backward, P())
    assert not a.is_equivalent_to(b, 1)
    assert not a.to_jax().is_equivalent_to(b.to_jax(), 1)
    assert a.device_set == b.device_set


@pytest.mark.devices(8)
def test_pmap_sharding_equivalence_is_equality() -> None:
    pmap = PmapSharding.default((8, 3))
    named = NamedSharding(Mesh(np.array(DEVICES), ("i",)), P("i"))
    assert pmap.is_equivalent_to(PmapSharding.default((8, 3)), 2)
    assert not pmap.is_equivalent_to(named, 2)
    assert not named.is_equivalent_to(pmap, 2)


# -- PositionalSharding --------------------------------------------------------


@pytest.mark.devices(8)
def test_positional_reshape_transpose_replicate() -> None:
    base = PositionalSharding(DEVICES)
    assert base.shape == (8,)
    grid = base.reshape(2, 4)
    assert grid.shape == (2, 4)
    assert grid.ndim == 2
    assert grid.reshape((4, -1)).shape == (4, 2)
    assert grid.T.shape == (4, 2)
    assert grid.transpose(1, 0) == grid.T
    merged = grid.replicate(1)
    assert merged.shape == (2, 1)
    assert grid.replicate(1, keepdims=False).shape == (2,)
    assert grid.replicate().is_fully_replicated
    assert merged.devices_indices_map((4, 6))[DEVICES[5]] == (slice(2, 4), slice(None))
    assert merged.shard_shape((4, 6)) == (2, 6)
    assert "{CPU 0, 1, 2, 3}" in repr(merged)
    with pytest.raises(ShardingError, match=r"cannot reshape .* into \(3, 3\)"):
        grid.reshape(3, 3)
    with pytest.raises(
        ShardingError, match=r"applies to values of rank 2, found rank 1"
    ):
        grid.devices_indices_map((8,))


@pytest.mark.devices(8)
def test_positional_sharding_with_memory_kind_keeps_layout() -> None:
    grid = PositionalSharding(DEVICES).reshape(2, 4)
    host = grid.with_memory_kind("pinned_host")
    assert host.shape == (2, 4)
    assert host.memory_kind == "pinned_host"


# -- PmapSharding --------------------------------------------------------------


@pytest.mark.devices(8)
def test_pmap_default() -> None:
    pmap = PmapSharding.default((8, 3))
    assert pmap.sharding_spec == ShardingSpec(
        (Unstacked(8), NoSharding()), (ShardedAxis(0),)
    )
    assert list(pmap.devices) == DEVICES
    assert pmap.shard_shape((8, 3)) == (3,)
    assert pmap.devices_indices_map((8, 3))[DEVICES[5]] == (5, slice(None))
    assert not pmap.is_fully_replicated
    assert pmap.num_devices == 8
    with pytest.raises(
        ShardingError,
        match=r"dim 0 of shape \[4, 3\] has size 4, "
        r"expected 8",
    ):
        pmap.shard_shape((4, 3))


@pytest.mark.devices(8)
def test_pmap_default_other_dim_and_replicated() -> None:
    pmap = PmapSharding.default((3, 4), sharded_dim=1, devices=DEVICES[4:])
    assert pmap.shard_shape((3, 4)) == (3,)
    assert pmap.devices_indices_map((3, 4))[DEVICES[6]] == (slice(None), 2)
    replicated = PmapSharding.default((3, 4), sharded_dim=None, devices=DEVICES[:2])
    assert replicated.is_fully_replicated
    assert replicated.devices_indices_map((3, 4))[DEVICES[1]] == (slice(None),) * 2
    with pytest.raises(ShardingError, match=r"One of sharded_dim or devices"):
        PmapSharding.default((3,), sharded_dim=None)


@pytest.mark.devices(8)
def test_pmap_chunked_spec_matches_named() -> None:
    spec = ShardingSpec((Chunked((2,)), NoSharding()), (Replicated(2), ShardedAxis(0)))
    pmap = PmapSharding(np.array(DEVICES[:4]).reshape(2, 2), spec)
    # Mesh dim 0 replicates, mesh dim 1 splits array dim 0.
    named = NamedSharding(Mesh(np.array(DEVICES[:4]).reshape(2, 2), ("r", "s")), P("s"))
    # As in jax 0.4.30, a Chunked dim must have exactly one row per chunk.
    assert pmap.devices_indices_map((2, 5)) == named.devices_indices_map((2, 5))
    assert pmap.shard_shape((2, 5)) == (1, 5)
    assert pmap.is_equivalent_to(pmap, 2)


@pytest.mark.devices(8)
def test_pmap_to_jax_is_what_jax_pmap_returns() -> None:
    array = jax.pmap(lambda v: v)(np.zeros((8, 2), np.float32))
    ours = PmapSharding.default((8, 2)).to_jax()
    assert ours.is_equivalent_to(array.sharding, 2)


# -- round trips ---------------------------------------------------------------


def _random_named(rng: random.Random) -> tuple[NamedSharding, int]:
    devices = rng.sample(DEVICES, 8)
    shape = rng.choice([(8,), (2, 4), (4, 2), (2, 2, 2)])
    names = rng.sample(["x", "y", "z"], len(shape))
    mesh = Mesh(np.array(devices).reshape(shape), names)
    free = list(names)
    rng.shuffle(free)
    rank = rng.randint(0, 3)
    entries: list[object] = []
    for _ in range(rank):
        if free and rng.random() < 0.6:
            take = rng.randint(1, min(2, len(free)))
            picked = tuple(free.pop() for _ in range(take))
            entries.append(picked[0] if take == 1 else picked)
        else:
            entries.append(None)
    return NamedSharding(mesh, P(*entries)), rank


@pytest.mark.devices(8)
def test_round_trips_are_identity() -> None:
    rng = random.Random(17)
    for _ in range(150):
        named, rank = _random_named(rng)
        # Shardy text (device order carried in device_ids).
        mesh_text, sharding_text = named.to_sdy(rank)
        assert NamedSharding.from_sdy(mesh_text, sharding_text) == named
        # GSPMD text, read back onto the same mesh.
        text = named.to_gspmd_text(rank)
        assert NamedSharding.from_gspmd(text, named.mesh, rank) == named
        gspmd = GSPMDSharding(named.mesh.flat_devices, text)
        assert (
            GSPMDSharding(named.mesh.flat_devices, gspmd.to_gspmd_text(rank)) == gspmd
        )
        assert gspmd.to_named(named.mesh, rank) == named
        # Through jax.
        assert from_jax(named.to_jax()) == named
        assert from_jax(gspmd.to_jax()) == gspmd


@pytest.mark.devices(8)
def test_to_sdy_text() -> None:
    devices = [DEVICES[i] for i in (1, 0, 3, 2)]
    named = NamedSharding(Mesh(np.array(devices).reshape(2, 2), ("x", "y")), P("y"))
    mesh_text, sharding_text = named.to_sdy(2)
    assert mesh_text == 'sdy.mesh @mesh = <["x"=2, "y"=2], device_ids=[1, 0, 3, 2]>'
    assert sharding_text == '#sdy.sharding<@mesh, [{"y"}, {}]>'
    unconstrained = NamedSharding(mesh2(), P(UNCONSTRAINED, "x"))
    assert unconstrained.to_sdy()[1] == '#sdy.sharding<@mesh, [{?}, {"x"}]>'
    assert NamedSharding.from_sdy(*unconstrained.to_sdy()) == unconstrained


@pytest.mark.devices(8)
def test_from_sdy_errors() -> None:
    with pytest.raises(ShardingError, match=r"refers to mesh @other"):
        NamedSharding.from_sdy(
            'sdy.mesh @mesh = <["x"=8]>', '#sdy.sharding<@other, [{"x"}]>'
        )
    with pytest.raises(ShardingError, match=r'unknown mesh axis "q"'):
        NamedSharding.from_sdy(
            'sdy.mesh @mesh = <["x"=8]>', '#sdy.sharding<@mesh, [{"q"}]>'
        )
    with pytest.raises(ShardingError, match=r"sub-axis"):
        NamedSharding.from_sdy(
            'sdy.mesh @mesh = <["x"=8]>', '#sdy.sharding<@mesh, [{"x":(1)2}]>'
        )


@pytest.mark.devices(8)
def test_gspmd_to_named_without_a_mesh() -> None:
    gspmd = GSPMDSharding(
        DEVICES, "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"
    )
    named = gspmd.to_named()
    assert named.is_equivalent_to(gspmd, 2)
    assert named.devices_indices_map((8, 2)) == gspmd.devices_indices_map((8, 2))


@pytest.mark.devices(8)
def test_gspmd_errors() -> None:
    with pytest.raises(ShardingError, match=r"tiles over 8 devices but 4 devices"):
        GSPMDSharding(DEVICES[:4], "{devices=[2,4]<=[8]}")
    with pytest.raises(ShardingError, match=r"cannot parse HLO sharding at column"):
        GSPMDSharding(DEVICES, "{devices=[2,4]<=[8]")
    with pytest.raises(ShardingError, match=r"cannot be written on mesh"):
        GSPMDSharding(DEVICES, "{devices=[8]0,2,4,6,1,3,5,7}").to_named(
            Mesh(np.array(DEVICES[::-1]), ("x",))
        )


def test_from_jax_rejects_other_objects() -> None:
    with pytest.raises(ShardingError, match=r"cannot convert 'x'"):
        from_jax("x")


@pytest.mark.devices(8)
def test_shardings_are_hashable_keys() -> None:
    table = {
        NamedSharding(mesh2(), P("x")): 1,
        SingleDeviceSharding(DEVICES[0]): 2,
        GSPMDSharding.get_replicated(DEVICES): 3,
        PositionalSharding(DEVICES): 4,
        PmapSharding.default((8,)): 5,
    }
    assert table[NamedSharding(mesh2(), P("x", None))] == 1
    assert table[SingleDeviceSharding(DEVICES[0])] == 2
    assert table[GSPMDSharding(DEVICES, "{replicated}")] == 3
    assert table[PositionalSharding(DEVICES)] == 4
    assert table[PmapSharding.default((8,))] == 5
