"""The propagation algorithm on hand-built problems (no MLIR)."""

from __future__ import annotations

import pytest

from meshjit.dialects.rules import FactorKind, ShardingRule
from meshjit.passes.propagation.core import (
    BOTH,
    FORWARD,
    Options,
    POp,
    Problem,
    Sh,
    Strategy,
    compatible_major_axes,
    identity_rule,
    project,
    propagate,
    unproject,
)

X = ("x", 1, 2)
Y = ("y", 1, 4)
MESHES = {"m": {"x": 2, "y": 4}}


def sh(*dims: tuple[tuple[str, int, int], ...], closed: bool = False) -> Sh:
    return Sh("m", tuple(dims), (closed,) * len(dims))


def _problem(shapes: list[tuple[int, ...]]) -> Problem:
    p = Problem(dict(MESHES), [], [], [])
    for s in shapes:
        p.add_value(s)
    return p


def _op(
    name: str,
    operands: tuple[int, ...],
    results: tuple[int, ...],
    rule: ShardingRule,
    **kw: object,
) -> POp:
    return POp(name, operands, results, rule, stage0=BOTH, **kw)  # type: ignore[arg-type]


DOT = ShardingRule(
    sizes=(8, 32, 16),
    operands=(((0,), (2,)), ((2,), (1,))),
    results=(((0,), (1,)),),
    kinds=(FactorKind.PASS_THROUGH, FactorKind.PASS_THROUGH, FactorKind.REDUCTION),
)


def test_projection_round_trips() -> None:
    s = sh((X,), (Y,))
    tp = project(s, ((0,), (1,)), (8, 16))
    assert tp.fs[0].axes == [X]
    assert unproject(tp, ((0,), (1,)), (8, 16), "m") == s


def test_projection_splits_axis_over_compound_factor() -> None:
    # dim of size 32 = factors (2, 16); axis y=4 splits into y:(1)2 and y:(2)2
    tp = project(sh((Y,)), ((0, 1),), (2, 16))
    assert tp.fs[0].axes == [("y", 1, 2)]
    assert tp.fs[1].axes == [("y", 2, 2)]


def test_compatible_axes_stop_at_conflict() -> None:
    a = project(sh((X,)), ((0,),), (8,))
    b = project(sh((Y,)), ((0,),), (8,))
    assert compatible_major_axes([a, b], [], 0, BOTH) == []
    c = project(sh((X, Y)), ((0,),), (8,))
    assert compatible_major_axes([a, c], [], 0, BOTH) == [X, Y]


def test_elementwise_forward_and_closed_dims() -> None:
    p = _problem([(8, 16), (8, 16), (8, 16)])
    p.values[0] = sh((X,), (Y,), closed=True)
    p.values[1] = sh((), (), closed=True)
    p.ops.append(
        _op("stablehlo.add", (0, 1), (2,), identity_rule((8, 16), 2), elementwise=True)
    )
    p.defs[2] = 0
    state, prov = propagate(p)
    assert state[2] == sh((X,), (Y,))
    assert state[1] == sh((), (), closed=True)  # closed: nothing added
    assert any(s.value == 2 and s.direction == "forward" for s in prov.steps)


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [(Strategy.AGGRESSIVE, sh((), (X,))), (Strategy.BASIC, None)],
)
def test_dot_conflict(strategy: Strategy, expected: Sh | None) -> None:
    # lhs [x, -], rhs [-, x]: basic keeps nothing; aggressive keeps the axis of
    # the larger tensor (rhs 16x32 > lhs 8x16).
    p = _problem([(8, 16), (16, 32), (8, 32)])
    p.values[0] = sh((X,), ())
    p.values[1] = sh((), (X,))
    p.ops.append(_op("stablehlo.dot_general", (0, 1), (2,), DOT))
    p.defs[2] = 0
    state, prov = propagate(p, Options(strategy=strategy))
    assert state[2] == expected
    assert prov.conflicts


def test_reduction_factor_not_on_result() -> None:
    rule = ShardingRule(
        sizes=(8, 16),
        operands=(((0,), (1,)),),
        results=(((0,),),),
        kinds=(FactorKind.PASS_THROUGH, FactorKind.REDUCTION),
    )
    p = _problem([(8, 16), (8,)])
    p.values[0] = sh((X,), (Y,))
    p.ops.append(_op("stablehlo.reduce", (0,), (1,), rule))
    p.defs[1] = 0
    state, _ = propagate(p)
    assert state[1] == sh((X,))


def test_user_priority_p0_before_p1() -> None:
    p = _problem([(8,), (8,), (8,)])
    p.values[0] = Sh("m", ((),), (True,), (X,))  # p1 dim starts empty, x replicated
    p.user[0] = sh((X,), closed=True)
    p.priorities[0] = {0: 1}
    p.values[1] = sh((Y,))
    p.ops.append(
        _op("stablehlo.add", (0, 1), (2,), identity_rule((8,), 2), elementwise=True)
    )
    p.defs[2] = 0
    state, _ = propagate(p)
    assert state[2] == sh((Y,))
    assert state[0] == sh((X,), closed=True)


def test_barrier_blocks_backward() -> None:
    p = _problem([(8,), (8,)])
    p.values[1] = sh((X,))
    p.ops.append(
        _op(
            "sdy.propagation_barrier",
            (0,),
            (1,),
            identity_rule((8,), 1),
            kind=__import__(
                "meshjit.passes.propagation.core", fromlist=["OpKind"]
            ).OpKind.BARRIER,
            barrier=FORWARD,
        )
    )
    p.defs[1] = 0
    state, _ = propagate(p)
    assert state[0] is None


def test_groups_stay_equal() -> None:
    p = _problem([(8,), (8,), (8,)])
    p.values[0] = sh((X,))
    p.ops.append(
        _op("stablehlo.negate", (0,), (1,), identity_rule((8,), 1), elementwise=True)
    )
    p.defs[1] = 0
    p.groups.append([1, 2])
    state, _ = propagate(p)
    assert state[2] == state[1] == sh((X,))


def _chain(n: int) -> Problem:
    p = _problem([(8, 16)] * (n + 1))
    p.values[0] = sh((X,), (Y,))
    rule = identity_rule((8, 16), 1)
    for i in range(n):
        p.ops.append(_op("stablehlo.negate", (i,), (i + 1,), rule, elementwise=True))
        p.defs[i + 1] = i
    return p


def _visits(n: int) -> int:
    p = _chain(n)
    state, prov = propagate(p, record=False)
    assert state[n] == sh((X,), (Y,))
    return prov.visits


def test_linear_work_on_a_deep_chain() -> None:
    """The work (ops taken off the worklist) grows linearly with the chain and
    stays a small multiple of its length; no timing here (the bench measures
    time against module size: `python -m bench`, the scaling section)."""
    small, large = _visits(5_000), _visits(20_000)
    assert large <= 4 * small + 100
    assert large <= 12 * 20_000


def test_multi_use_op_waits_for_the_second_stage() -> None:
    # a [y] (closed), s = subtract(a, a) uses `a` twice, n = negate(s), and
    # the result n is [x, y]. Shardy's first stage only runs pass-through ops
    # whose operands have one use, so the negate sends [x, y] back to s first.
    p = _problem([(64,), (64,), (64,)])
    p.values[0] = sh((Y,), closed=True)
    p.values[2] = sh((X, Y))
    p.ops.append(
        _op(
            "stablehlo.subtract",
            (0, 0),
            (1,),
            identity_rule((64,), 2),
            elementwise=True,
            multi_use=True,
        )
    )
    p.ops.append(
        _op("stablehlo.negate", (1,), (2,), identity_rule((64,), 1), elementwise=True)
    )
    p.defs[1], p.defs[2] = 0, 1
    state, _ = propagate(p)
    assert state[1] == sh((X, Y))
    # without the use count the subtract goes first and forwards [y]
    p.ops[0] = _op(
        "stablehlo.subtract", (0, 0), (1,), identity_rule((64,), 2), elementwise=True
    )
    state, _ = propagate(p)
    assert state[1] == sh((Y,))


def test_broadcast_forward_only_in_the_last_stage() -> None:
    # b = broadcast(a [x]) and b also feeds c = negate(b) whose result is [y]:
    # backward through the negate (stage 0) wins over broadcast forward.
    rule = ShardingRule(sizes=(8, 16), operands=(((0,),),), results=(((1,), (0,)),))
    p = _problem([(8,), (16, 8), (16, 8)])
    p.values[0] = sh((X,))
    p.values[2] = sh((Y,), ())
    p.ops.append(POp("stablehlo.broadcast_in_dim", (0,), (1,), rule, broadcast=True))
    p.ops.append(
        _op("stablehlo.negate", (1,), (2,), identity_rule((16, 8), 1), elementwise=True)
    )
    p.defs[1], p.defs[2] = 0, 1
    state, prov = propagate(p)
    assert state[1] == sh((Y,), (X,))
    stages = [s.stage for s in prov.steps if s.value == 1]
    assert stages[-1] == "op-priority 4 (all ops)"
