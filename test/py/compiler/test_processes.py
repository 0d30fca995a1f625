"""The check that every process runs the same program, on a stand-in for
jax.distributed's key-value store (threads play the processes)."""

from __future__ import annotations

import threading

import pytest

from meshjit.compiler.processes import KeyValue, Program, check_same_program
from meshjit.errors import ProcessMismatchError


class Store(KeyValue):
    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.changed = threading.Condition()

    def set(self, key: str, value: str) -> None:
        with self.changed:
            assert key not in self.values, f"{key} set twice"
            self.values[key] = value
            self.changed.notify_all()

    def get(self, key: str, timeout: float) -> str | None:
        with self.changed:
            self.changed.wait_for(lambda: key in self.values, timeout)
            return self.values.get(key)


TEXT = "func.func @main(%arg0: tensor<4xf32>) {\n  %0 = stablehlo.add %arg0, %arg0\n}"


def run(programs: dict[int, Program], timeout: float = 10.0) -> dict[int, str]:
    """Each process's outcome: "ok" or its error's text."""
    store = Store()
    outcome: dict[int, str] = {}

    def one(p: int) -> None:
        try:
            check_same_program(
                programs[p], sorted(programs), timeout, store, me=p, run=0
            )
            outcome[p] = "ok"
        except ProcessMismatchError as err:
            outcome[p] = str(err)

    threads = [threading.Thread(target=one, args=(p,)) for p in programs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcome


def test_the_same_program_everywhere_runs() -> None:
    same = Program("f", TEXT, ("`a`: f32[32] P('x',)",))
    assert run({0: same, 1: same, 2: same}) == {0: "ok", 1: "ok", 2: "ok"}


def test_a_different_argument_is_named_on_every_process() -> None:
    a = Program("f", TEXT, ("`a`: f32[32] P('x',)",))
    b = Program("f", TEXT, ("`a`: f32[64] P('x',)",))
    out = run({0: a, 1: a, 2: b})
    groups = "processes [0, 1] compiled program A; processes [2] compiled program B"
    for p in (0, 1, 2):
        assert groups in out[p]
    assert "process 0: argument `a`: f32[32] P('x',)" in out[0]
    assert "process 2: argument `a`: f32[64] P('x',)" in out[0]
    assert "differs from process 0's" in out[2]


def test_a_different_op_is_named() -> None:
    a = Program("f", TEXT, ())
    b = Program("f", TEXT.replace("add", "multiply"), ())
    out = run({0: a, 1: b})
    assert "process 0: op: %0 = stablehlo.add %arg0, %arg0" in out[0]
    assert "process 1: op: %0 = stablehlo.multiply %arg0, %arg0" in out[0]


def test_a_missing_process_is_named_after_the_timeout() -> None:
    store = Store()
    with pytest.raises(
        ProcessMismatchError, match=r"processes \[1, 2\] did not arrive"
    ):
        check_same_program(Program("f", TEXT, ()), [0, 1, 2], 0.2, store, me=0)
