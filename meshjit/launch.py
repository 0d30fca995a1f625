"""python -m meshjit.launch -n N [--devices-per-process K] script.py ARGS

Runs N copies of a Python program on this machine as the N processes of one
`jax.distributed` job: each gets the coordinator's address, its process id and
the process count in its environment (`meshjit.distributed.initialize()` reads
them), and K CPU devices (`JAX_PLATFORMS=cpu`, also where a GPU is present).
Every line a process prints comes out prefixed with `[pI]`, on the launcher's
stdout or stderr as the process wrote it. The launcher exits with the first
failing process's status (the others are stopped after `--grace` seconds), or
124 when the job runs past `--timeout`, so a hung collective cannot hang the
caller.

On a cluster, start the processes with its own tools (SLURM `srun`, `mpirun`,
a Kubernetes job): `meshjit.distributed.initialize()` then calls
`jax.distributed.initialize()`, which detects those environments; meshjit needs
nothing more.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO

# The environment the launcher gives each process (read by
# meshjit.distributed.initialize).
COORDINATOR = "MESHJIT_COORDINATOR_ADDRESS"
NUM_PROCESSES = "MESHJIT_NUM_PROCESSES"
PROCESS_ID = "MESHJIT_PROCESS_ID"
_COUNT_FLAG = re.compile(r"--xla_force_host_platform_device_count=\S*")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def process_env(
    base: dict[str, str], process: int, processes: int, devices: int, address: str
) -> dict[str, str]:
    """`base` with process `process`'s settings."""
    env = dict(base)
    env[COORDINATOR] = address
    env[NUM_PROCESSES] = str(processes)
    env[PROCESS_ID] = str(process)
    flags = _COUNT_FLAG.sub("", env.get("XLA_FLAGS", "")).strip()
    count = f"--xla_force_host_platform_device_count={devices}"
    env["XLA_FLAGS"] = f"{flags} {count}".strip()
    # CPU devices even on a machine with a GPU (one GPU cannot be every
    # process's device; jax would pick it over the CPU devices).
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _pump(stream: IO[str], out: IO[str], prefix: str, lock: threading.Lock) -> None:
    for line in stream:
        with lock:
            out.write(prefix + line if line.endswith("\n") else prefix + line + "\n")
            out.flush()


def _stop(procs: Sequence[subprocess.Popen[str]]) -> None:
    """SIGTERM every running process's group, then SIGKILL what is left."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def launch(
    command: Sequence[str],
    processes: int,
    devices: int = 1,
    timeout: float = 600.0,
    grace: float = 10.0,
    port: int | None = None,
) -> int:
    """Runs `command` as `processes` processes; returns the job's exit status."""
    address = f"127.0.0.1:{port or free_port()}"
    lock = threading.Lock()
    procs: list[subprocess.Popen[str]] = []
    pumps = []
    for i in range(processes):
        proc = subprocess.Popen(
            list(command),
            env=process_env(dict(os.environ), i, processes, devices, address),
            # Separate pipes: a line the program prints is never cut by what
            # C++ code (gloo, XLA logs) writes to the other stream meanwhile.
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own group: stopping it stops its children
        )
        procs.append(proc)
        for stream, out in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr)):
            assert stream is not None
            pump = threading.Thread(target=_pump, args=(stream, out, f"[p{i}] ", lock))
            pump.start()
            pumps.append(pump)

    def say(text: str) -> None:
        with lock:
            print(f"meshjit.launch: {text}", file=sys.stderr, flush=True)

    status = 0
    start = time.monotonic()
    failed_at: float | None = None
    try:
        while any(p.poll() is None for p in procs):
            now = time.monotonic()
            if status == 0:
                for i, p in enumerate(procs):
                    code = p.poll()
                    if code:
                        status = code if code > 0 else 128 - code
                        failed_at = now
                        say(
                            f"process {i} exited with status {code}; stopping the "
                            f"others in {grace:g} s unless they end first"
                        )
                        break
            if failed_at is not None and now - failed_at > grace:
                say("stopping the processes still running")
                break
            if now - start > timeout:
                running = [i for i, p in enumerate(procs) if p.poll() is None]
                say(
                    f"timed out after {timeout:g} s; processes {running} still "
                    "running (a hung collective?): stopping them"
                )
                status = 124
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        status = 130
    finally:
        _stop(procs)
        for pump in pumps:
            pump.join()
        for p in procs:
            for stream in (p.stdout, p.stderr):
                if stream is not None:
                    stream.close()
    if status == 0:
        for i, p in enumerate(procs):
            if p.returncode:
                say(f"process {i} exited with status {p.returncode}")
                code = p.returncode
                status = code if code > 0 else 128 - code
                break
    return status


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m meshjit.launch",
        description=(
            "Run a Python program as N local processes of one jax.distributed job "
            "(CPU devices, gloo collectives). The program calls "
            "meshjit.distributed.initialize() before using jax."
        ),
    )
    parser.add_argument("-n", "--processes", type=int, required=True)
    parser.add_argument(
        "--devices-per-process",
        type=int,
        default=1,
        metavar="K",
        help="CPU devices each process has (default 1)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="stop every process after this many seconds, exit 124 (default 600)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=10.0,
        help="after one process fails, seconds the others get to end (default 10)",
    )
    parser.add_argument(
        "--port", type=int, help="coordinator port (default: a free one)"
    )
    parser.add_argument(
        "-m", dest="module", help="run a module (python -m MODULE) instead of a script"
    )
    parser.add_argument("script", nargs="?", help="the program (a .py file)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    args = parser.parse_args(argv)
    if args.processes < 1 or args.devices_per_process < 1:
        parser.error("-n and --devices-per-process must be at least 1")
    if args.module:
        rest = [args.script, *args.args] if args.script else list(args.args)
        command = [sys.executable, "-m", args.module, *rest]
    elif args.script:
        command = [sys.executable, args.script, *args.args]
    else:
        parser.error("give a script (or -m MODULE) to run")
    return launch(
        command,
        args.processes,
        args.devices_per_process,
        args.timeout,
        args.grace,
        args.port,
    )


if __name__ == "__main__":
    raise SystemExit(main())
