"""`python -m bench.kernels`: kernels counted from XLA's dump, per side."""

from __future__ import annotations

from pathlib import Path

from bench import kernels


def test_count_in_takes_the_last_compiled_module(tmp_path: Path) -> None:
    # the warm-up's modules first (module_0000, _0001), the program's last
    for name in (
        "module_0000.jit_tiny.add_fusion.ir-no-opt.ll",
        "module_0001.partitioned.add_fusion.ir-no-opt.ll",
        "module_0001.partitioned.sin_fusion.ir-no-opt.ll",
        "module_0001.partitioned.dot_fusion.ir-no-opt.ll",
        "module_0003.partitioned.add_fusion.ir-no-opt.ll",
        "module_0003.partitioned.multiply_fusion.1.ir-no-opt.ll",
        "module_0003.partitioned.multiply_fusion.1.ir-with-opt.ll",
        "module_0003.partitioned.obj-file.multiply_fusion.1.o",
    ):
        (tmp_path / name).write_text("")
    assert kernels.count_in(tmp_path) == 2


def test_count_in_without_a_dump_is_minus_one(tmp_path: Path) -> None:
    assert kernels.count_in(tmp_path) == -1


def test_a_workload_compiles_the_same_kernels_on_both_sides() -> None:
    # data parallel, no collectives: meshjit's program is jax.jit's
    rows = list(kernels.rows(["long_while"]))
    assert len(rows) == 2
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[:2] == ["long_while", "dp8"]
    assert int(cells[2]) > 0
    assert cells[2] == cells[3]
    assert cells[4] == "+0"
