"""Several processes, one program: meshjit on jax.distributed (loopback, gloo).

Each test starts a job with `python -m meshjit.launch` running `worker.py`
(see there for what each process checks) and reads what the processes printed
and saved.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

WORKER = Path(__file__).with_name("worker.py")
TOP = Path(__file__).resolve().parents[3]


def launch(
    processes: int, devices: int, *args: str, timeout: float = 240, **env: str
) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "meshjit.launch",
        "-n",
        str(processes),
        "--devices-per-process",
        str(devices),
        "--timeout",
        str(timeout),
        "--grace",
        "20",
        str(WORKER),
        *args,
    ]
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=TOP,
        env={**os.environ, **env},
        timeout=timeout + 60,
        check=False,
    )


def said(output: str, process: int, text: str) -> bool:
    """Whether process `process` printed `text`: on one of its `[pI]` lines,
    not necessarily at the start (gloo prints its connection messages from
    other threads in pieces, which may land inside a line)."""
    prefix = f"[p{process}] "
    return any(line.startswith(prefix) and text in line for line in output.splitlines())


def test_one_two_and_four_processes_compute_the_same(tmp_path: Path) -> None:
    """jit, pjit under jax's and meshjit's mesh contexts, a sharding
    constraint, donation, AOT, explain and host-local inputs on a 2x4 mesh
    spread over 1 x 8, 2 x 4 and 4 x 2 devices: each job checks itself against
    jax.jit, and all three agree."""
    results = {}
    for n, k in ((1, 8), (2, 4), (4, 2)):
        out = tmp_path / f"run{n}"
        done = launch(n, k, str(out), "all")
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        for p in range(n):
            assert said(done.stdout, p, f"OK process {p} of {n}"), done.stdout[-4000:]
            with np.load(f"{out}-p{p}.npz") as saved:
                results[n, p] = dict(saved)
    reference = results[1, 0]
    assert set(reference) >= {"loss", "g1", "g2", "pjit", "wsc", "sgd", "aot"}
    for (n, p), found in results.items():
        assert found.keys() == reference.keys()
        for name, value in found.items():
            np.testing.assert_allclose(
                value, reference[name], rtol=2e-5, atol=1e-6, err_msg=f"{name} {n}:{p}"
            )


def test_processes_that_trace_different_programs_get_an_error_not_a_hang() -> None:
    done = launch(2, 4, "-", "mismatch", timeout=120)
    errors = done.stderr  # the processes' tracebacks
    assert done.returncode == 1, errors[-4000:]
    for p, other in ((0, 1), (1, 0)):
        assert said(
            errors,
            p,
            "meshjit.errors.ProcessMismatchError: the processes compiled ",
        ), errors[-4000:]
        shape = f"f32[16,{32 if p == 0 else 16}]"
        assert said(errors, p, f"  process {p}: argument `a`: {shape}"), errors
        assert said(errors, p, f"  process {other}: argument `a`"), errors
    assert "processes [0] compiled program A; processes [1] compiled program B" in (
        errors
    )


def test_a_dead_process_costs_the_others_the_sync_timeout_at_most() -> None:
    done = launch(2, 4, "-", "dies", MESHJIT_SYNC_TIMEOUT="4", timeout=120)
    assert done.returncode != 0
    assert said(
        done.stdout,
        0,
        "ProcessMismatchError: process 0 stopped before the first run of "
        "`<lambda>` (its program run #0 across processes): processes [1] did not "
        "arrive within 4 s",
    ), done.stdout[-4000:]


@pytest.mark.parametrize(
    ("code", "status"), [("import sys; sys.exit(0)", 0), ("import sys; sys.exit(7)", 7)]
)
def test_launcher_exit_status_is_the_first_failure(code: str, status: int) -> None:
    from meshjit.launch import launch as run

    assert run([sys.executable, "-c", code], 2, timeout=60) == status


def test_launcher_prefixes_lines_and_sets_the_environment(
    capfd: pytest.CaptureFixture[str],
) -> None:
    from meshjit.launch import launch as run

    code = (
        "import os; print(os.environ['MESHJIT_PROCESS_ID'], "
        "os.environ['MESHJIT_NUM_PROCESSES'], os.environ['XLA_FLAGS'].split()[-1], "
        "os.environ['JAX_PLATFORMS'])"
    )
    assert run([sys.executable, "-c", code], 3, devices=2, timeout=60) == 0
    out = capfd.readouterr().out.splitlines()
    flag = "--xla_force_host_platform_device_count=2"
    assert sorted(out) == [f"[p{i}] {i} 3 {flag} cpu" for i in range(3)]


def test_launcher_stops_a_hung_job() -> None:
    from meshjit.launch import launch as run

    code = "import time; time.sleep(60)"
    assert run([sys.executable, "-c", code], 2, timeout=1.5) == 124


def test_the_readme_runs_the_demo_on_two_processes() -> None:
    readme = (TOP / "README.md").read_text()
    command = ".venv/bin/python -m meshjit.launch -n 2 --devices-per-process 4 -m "
    assert f"```sh\n{command}meshjit.demo\n```" in readme
    done = subprocess.run(
        [sys.executable, *command.split()[1:], "meshjit.demo"],
        capture_output=True,
        text=True,
        cwd=TOP,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    out = done.stdout
    for p in (0, 1):
        assert said(out, p, f"process {p} of 2: 4 of the result's 8 blocks here"), out
    assert said(out, 0, "== collectives inserted by meshjit's partitioner =="), out
    assert said(out, 0, "pjit convolve:"), out
