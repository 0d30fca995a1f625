"""The reshard planner (dialects/reshard.py) on plain data: which collectives
take a layout to another, and the bytes each device sends."""

from __future__ import annotations

from meshjit.dialects.reshard import (
    AllGather,
    AllReduce,
    AllToAll,
    LocalSlice,
    ReduceScatter,
    plan_reshard,
    reshard_bytes,
)
from meshjit.dialects.sharding import AxisRef, MeshAxis, MeshModel

MESH = MeshModel((MeshAxis("x", 4), MeshAxis("y", 2)))
X, Y = AxisRef("x"), AxisRef("y")


def test_axes_added_by_the_target_are_cut_before_a_gather() -> None:
    """[{}, {}, {y}] -> [{}, {x}, {}]: cutting x first gathers a quarter of
    what gathering y first and cutting after would."""
    src, dst, shape = ((), (), (Y,)), ((), (X,), ()), (2, 12, 6)
    steps = plan_reshard(src, dst, shape, MESH)
    assert steps == [LocalSlice(((), (X,), ())), AllGather(2, (Y,))]
    assert reshard_bytes(src, dst, shape, 4, MESH) == 2 * 3 * 3 * 4


def test_a_partial_sum_is_cut_before_it_is_reduced() -> None:
    """Partial over y, target [{x}, {}]: the all-reduce sums a quarter."""
    steps = plan_reshard(((), ()), ((X,), ()), (8, 8), MESH, partial=(Y,))
    assert steps == [LocalSlice(((X,), ())), AllReduce((Y,))]
    # reduced over y and split over x: the cut, then a reduce-scatter
    steps = plan_reshard(((), ()), ((X, Y), ()), (8, 8), MESH, partial=(Y,))
    assert steps == [LocalSlice(((X,), ())), ReduceScatter(0, (Y,))]


def test_an_axis_in_use_is_not_cut_early() -> None:
    """x moves from dim 0 to dim 1 (an all-to-all); y, which dim 1 wants
    after x, is cut only once x is in place."""
    steps = plan_reshard(((X,), ()), ((), (X, Y)), (8, 8), MESH)
    assert steps == [AllToAll((X,), 1, 0), LocalSlice(((), (Y,)))]


def test_a_free_axis_before_a_moved_one_lets_the_move_be_an_all_to_all() -> None:
    """Target [{}, {y, x}] from [{x}, {}]: y cut first, then x moves by
    all-to-all to follow it (not gathered and cut again)."""
    steps = plan_reshard(((X,), ()), ((), (Y, X)), (8, 8), MESH)
    assert steps == [LocalSlice(((), (Y,))), AllToAll((X,), 1, 0)]


def test_all_to_alls_go_before_gathers() -> None:
    """[{}, {x}, {y}, {}] -> [{}, {}, {x}, {y}]: y moves to dim 3 first,
    which lets x move into dim 2 after it; dim by dim, x (dim 1) found dim 2
    still holding y and was gathered, then cut again (fuzz long 24: 3,072
    against 1,920 B per device for the program)."""
    src, dst, shape = ((), (X,), (Y,), ()), ((), (), (X,), (Y,)), (2, 8, 8, 16)
    steps = plan_reshard(src, dst, shape, MESH)
    assert steps == [AllToAll((Y,), 3, 2), AllToAll((X,), 2, 1)]
    assert (
        reshard_bytes(src, dst, shape, 4, MESH)
        == (2 * 2 * 4 * 16 * 4) // 2 + (2 * 2 * 8 * 8 * 4) * 3 // 4
    )


def test_an_axis_leaves_a_dim_by_its_minor_part_only() -> None:
    """[{x}] -> [{x:(1)2}] (x=4): only the minor x:(2)2 leaves, by a gather
    over 2 devices or an all-to-all into the dim that wants it; before, all
    of x was gathered and the major half cut again (a patch embedding on a
    split height: 86,016 against 12,288 B per device)."""
    hi, lo = AxisRef("x", 1, 2), AxisRef("x", 2, 2)
    src, shape = ((X,), ()), (8, 8)
    assert plan_reshard(src, ((hi,), ()), shape, MESH) == [AllGather(0, (lo,))]
    assert reshard_bytes(src, ((hi,), ()), shape, 4, MESH) == 2 * 8 * 4
    assert plan_reshard(src, ((hi,), (lo,)), shape, MESH) == [AllToAll((lo,), 1, 0)]
    # and back: the minor part moves in after the major one
    assert plan_reshard(((hi,), (lo,)), src, shape, MESH) == [AllToAll((lo,), 0, 1)]
    assert plan_reshard(((hi,), ()), src, shape, MESH) == [LocalSlice(((lo,), ()))]
    # gathered whole: one gather of x, spelled as the axis again
    assert plan_reshard(((hi, lo), ()), ((), ()), shape, MESH) == [AllGather(0, (X,))]


def test_a_dim_split_unevenly_is_cut_at_once() -> None:
    """[{}, {y}] -> [{x, y}, {}] with 2 rows over 8 devices: padded blocks
    of one row, row 1 on device (x=0, y=1). Cutting x early (it is free) and
    y after its gather put row 1 on (x=1, y=0): a jax.lax.associative_scan
    along a dim split over ("x", "y") read zeros for its last row (found by
    a probe)."""
    src, dst, shape = ((), (Y,)), ((X, Y), ()), (2, 4)
    steps = plan_reshard(src, dst, shape, MESH)
    assert steps == [AllGather(1, (Y,)), LocalSlice(((X, Y), ()))]
    # an even dim still takes its free axis first (then y moves over)
    steps = plan_reshard(src, dst, (8, 4), MESH)
    assert steps == [LocalSlice(((X,), ())), AllToAll((Y,), 0, 1)]
