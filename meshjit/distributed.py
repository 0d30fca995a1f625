"""Several processes, one program: `jax.distributed` set up for meshjit.

Every process runs the same Python program; the mesh holds the devices of all
of them, arguments are global `jax.Array`s and each compiled program runs on
all devices at once (gloo collectives between processes on CPU, NCCL on GPUs).
`initialize()` starts `jax.distributed` from what `python -m meshjit.launch`
puts in the environment, or, on a cluster, lets jax detect SLURM, Open MPI or
Kubernetes. Before a compiled program first runs across processes, meshjit
checks that every process compiled the same program (see
`compiler/processes.py`): a process that traced something else gets a clear
error instead of a hang in a collective.
"""

from __future__ import annotations

import os
from typing import Any

import jax

from meshjit.compiler.processes import SYNC_TIMEOUT, sync_timeout
from meshjit.launch import COORDINATOR, NUM_PROCESSES, PROCESS_ID


def initialize(**kwargs: Any) -> None:
    """`jax.distributed.initialize(**kwargs)` once per process, with the
    coordinator, process count and process id from `python -m meshjit.launch`
    when it started this process. A second call does nothing."""
    if jax.distributed.is_initialized():
        return
    env = os.environ
    if COORDINATOR in env:
        kwargs.setdefault("coordinator_address", env[COORDINATOR])
        kwargs.setdefault("num_processes", int(env[NUM_PROCESSES]))
        kwargs.setdefault("process_id", int(env[PROCESS_ID]))
    jax.distributed.initialize(**kwargs)


__all__ = ["SYNC_TIMEOUT", "initialize", "sync_timeout"]
