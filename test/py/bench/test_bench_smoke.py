"""The benchmark runs from the command line; no timing is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]


def _bench(out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--only",
            "long_while",
            "--steps",
            "2",
            "--no-scaling",
            "--no-first-call",
            "--no-multiprocess",
            "--out",
            str(out),
            *flags,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


@pytest.mark.devices(8)
def test_quick_bench_runs_one_workload(tmp_path: Path) -> None:
    out = tmp_path / "results.md"
    proc = _bench(out)
    rows = [
        line for line in proc.stdout.splitlines() if line.startswith("| long_while")
    ]
    assert len(rows) == 2  # both layouts measured
    assert not any("error:" in row for row in rows), rows
    assert "rows that failed: none" in proc.stdout
    lines = proc.stdout.splitlines()
    overhead = [line for line in lines if " leaves: meshjit " in line]
    assert len(overhead) == 4, proc.stdout[-2000:]  # 1, 8, 64 and 512 leaves
    report = out.read_text()
    assert report.startswith("# meshjit benchmark results")
    assert "| long_while | dp8 | 8 |" in report


def test_one_device_bench_runs_every_mesh_on_one_device(tmp_path: Path) -> None:
    """`--one-device` (the GPU rows: one device of the default platform)
    keeps each layout's axis names at size 1: nothing to communicate."""
    out = tmp_path / "results.md"
    proc = _bench(out, "--one-device")
    rows = [
        line for line in proc.stdout.splitlines() if line.startswith("| long_while")
    ]
    assert len(rows) == 2, proc.stdout[-2000:]
    assert all("| - | - | = (0 / 0 B) |" in row for row in rows), rows
    assert "rows that failed: none" in proc.stdout
    assert "small arrays on one device" in proc.stdout
    report = out.read_text()
    assert "--one-device --out" in report
    assert "every mesh on one device" in report


@pytest.mark.devices(8)
def test_the_multiprocess_bench_runs_both_jobs() -> None:
    from bench import multiprocess

    found = multiprocess.lines(steps=1, workloads=(("mlp_train_dp_tp", 1),))
    assert len(found) == 2, found
    assert "1 x 8 devices: meshjit " in found[0], found
    assert "2 x 4 devices: meshjit " in found[1], found


def test_xla_replica_group_spellings() -> None:
    """Every spelling XLA prints for replica groups gives the group size (a
    permuted mesh's `device_ids=(...)` once hid whole all-reduces)."""
    from bench.measure import _group_size, xla_collectives

    lines = {
        "replica_groups={{0,1,2,3},{4,5,6,7}}": 4,
        "replica_groups=[2,4]<=[8]": 4,
        "replica_groups=mesh['a'=2,'b'=4] {'b'}": 4,
        "replica_groups=mesh['axis_0'=4,'axis_1'=1,'axis_2'=2], "
        "device_ids=([2,4]T(1,0)) {'axis_0'}": 4,
    }
    for groups, size in lines.items():
        assert _group_size(f"%r = f32[8] all-reduce(%a), {groups}, x=1") == size
    text = (
        "  %ar = f32[4,16,128]{2,1,0} all-reduce(%s), channel_id=4, "
        "replica_groups=mesh['axis_0'=4,'axis_1'=1,'axis_2'=2], "
        "device_ids=([2,4]T(1,0)) {'axis_0'}, use_global_device_ids=true\n"
    )
    assert xla_collectives(text) == ({"all-reduce": 1}, 2 * 32768 * 3 // 4)
