"""Before a program first runs across processes: do they all run the same one?

With several processes (`jax.distributed`), every process must run the same
partitioned program at the same point; a process that traced another shape or
took another branch makes the others wait forever in a collective (JAX hangs).
So before a program's first run on devices of more than one process, each
process publishes a digest of its partitioned module in the distributed
key-value store under the number of that run (the Nth program this process
runs across processes) and reads the others'. Equal digests: run. Different:
every process raises, naming which processes ran which program and the first
argument or op where its own differs. A process that does not arrive within
the timeout (it died, or runs fewer programs) is named too, so a lost process
costs the others at most that long (`MESHJIT_SYNC_TIMEOUT`, default 120 s)
instead of a hang.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax

from meshjit.compiler import bridge
from meshjit.errors import ProcessMismatchError

_LOCK = threading.Lock()
_RUNS = itertools.count()
_PREFIX = "meshjit/program"
# Seconds a process waits for the others at a program's first run before it
# raises (MESHJIT_SYNC_TIMEOUT overrides it).
SYNC_TIMEOUT = 120.0


def sync_timeout() -> float:
    """Seconds to wait for the other processes at a program's first run."""
    text = os.environ.get("MESHJIT_SYNC_TIMEOUT", "")
    try:
        return float(text) if text else SYNC_TIMEOUT
    except ValueError:
        return SYNC_TIMEOUT


@dataclass(frozen=True, slots=True)
class Program:
    """What a process compares: the partitioned module and how its arguments
    were described to the user."""

    name: str  # the function's name
    text: str  # the partitioned module
    arguments: tuple[str, ...]  # "`x`: f32[8,8] P('x', None)", one per argument

    def lines(self) -> list[str]:
        """The program as lines to compare: its arguments, then its module's
        lines (the first that differs names the difference)."""
        out = [f"argument {a}" for a in self.arguments]
        out.extend(
            f"op: {line.strip()}" for line in self.text.splitlines() if line.strip()
        )
        return out

    def digest(self) -> str:
        h = hashlib.sha256()
        for line in self.lines():
            h.update(line.encode())
            h.update(b"\n")
        return h.hexdigest()


def first_difference(mine: Sequence[str], theirs: Sequence[str]) -> tuple[str, str]:
    """The first line where two programs' lines differ (a missing line is
    shown as "nothing")."""
    for a, b in itertools.zip_longest(mine, theirs, fillvalue="nothing"):
        if a != b:
            return a, b
    return "nothing", "nothing"


def _describe(groups: dict[str, list[int]]) -> str:
    parts = [f"processes {ps}" for ps in sorted(groups.values())]
    return "; ".join(
        f"{p} compiled program {chr(ord('A') + i)}" for i, p in enumerate(parts)
    )


class KeyValue:
    """The distributed key-value store (`jax.distributed`'s client) as the
    check uses it; tests substitute a dictionary."""

    def __init__(self, client: object) -> None:
        self._client = client

    def set(self, key: str, value: str) -> None:
        client: Any = self._client
        client.key_value_set(key, value)

    def get(self, key: str, timeout: float) -> str | None:
        """The value, or None if nobody set it within `timeout` seconds."""
        client: Any = self._client
        try:
            value: str = client.blocking_key_value_get(key, max(1, int(timeout * 1000)))
        except Exception as err:  # jaxlib's XlaRuntimeError: DEADLINE_EXCEEDED
            if "DEADLINE_EXCEEDED" in str(err) or "deadline" in str(err).lower():
                return None
            raise
        return value


def check_same_program(
    program: Program,
    participants: Sequence[int],
    timeout: float,
    store: KeyValue | None = None,
    me: int | None = None,
    run: int | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Raises ProcessMismatchError unless every process in `participants` runs
    `program` at this, its next program run across processes (or run number
    `run`; `store` and `me` stand in for jax.distributed's in tests)."""
    if store is None:
        store = KeyValue(bridge.distributed_client())
    if me is None:
        me = jax.process_index()
    if run is None:
        with _LOCK:
            run = next(_RUNS)
    base = f"{_PREFIX}/{run}"
    digest = program.digest()
    store.set(f"{base}/{me}", digest)
    digests: dict[int, str] = {me: digest}
    deadline = clock() + timeout
    missing = []
    for p in participants:
        if p != me:
            found = store.get(f"{base}/{p}", max(0.001, deadline - clock()))
            if found is None:
                missing.append(p)
            else:
                digests[p] = found
    if missing:
        raise ProcessMismatchError(
            f"process {me} stopped before the first run of `{program.name}` (its "
            f"program run #{run} across processes): processes {missing} did not "
            f"arrive within {timeout:g} s (they died, are still busy, or ran "
            "fewer programs across processes; MESHJIT_SYNC_TIMEOUT sets the "
            "wait). Running on would hang in the program's first collective"
        )
    if len(set(digests.values())) == 1:
        return
    groups: dict[str, list[int]] = {}
    for p in sorted(digests):
        groups.setdefault(digests[p], []).append(p)
    other = min(p for p, d in digests.items() if d != digest)
    store.set(f"{base}/{me}/lines", "\n".join(program.lines()))
    theirs = store.get(f"{base}/{other}/lines", max(1.0, deadline - clock()))
    if theirs is None:
        detail = f"process {other} did not send its program to compare"
    else:
        a, b = first_difference(program.lines(), theirs.split("\n"))
        detail = (
            f"this process's program first differs from process {other}'s at\n"
            f"  process {me}: {a}\n  process {other}: {b}"
        )
    raise ProcessMismatchError(
        f"the processes compiled different programs for the first run of "
        f"`{program.name}` (program run #{run} across processes): "
        f"{_describe(groups)}; {detail}\nEvery process must call the function "
        "with arguments of the same shapes, dtypes and shardings and trace the "
        "same code; running on would hang in a collective"
    )
