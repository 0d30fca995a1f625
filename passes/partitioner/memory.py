"""Per-device memory under a limit (`partition{memory-limit=512MiB}`).

The partitioner's time-based choices that hold more memory than the plain
layouts ask for are the ones that gather a whole dim where pieces would do:
a windowed op's all-gather instead of a halo exchange (`windows.py`), data
movement run whole on gathered copies. Under a limit each such choice is
taken only when the copies it makes keep the live values under the limit at
every op they are alive at; otherwise the pieces are exchanged, with a
remark that says what the faster way would have cost in memory.

What is counted is what auto-shard counts (`autoshard/build.py`): the
per-device blocks of the entry function's values, each live from the op
that makes it to its last use (arguments all along, results to the end),
at the granularity of the entry function's ops (an op with regions is one
point; its inner temporaries are not counted). XLA fuses many of these
values away, so the estimate is an upper bound of what the program holds
between ops. A gathered copy is held while its op runs and, when later ops
reuse it (a reshard is made once per value and layout), until the last of
them; where holding it that long would break the limit, it is let go and
made again for the later op (the all-gather is repeated). Other reshards
(those the layouts ask for outright, not choices) are not counted. The
estimated peak passes the limit only where a copy let go is made again for
an op that needs it whole; the final remark then says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from meshjit.compiler.diagnostics import SourceLoc
from meshjit.compiler.graph import Graph, Node
from meshjit.passes.partitioner.builder import itemsize

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
}


def parse_bytes(text: str, option: str = "memory-limit") -> float | None:
    """`"512MiB"`, `"2GB"`, `"1e9"` -> bytes; `""` -> None (no limit).
    `option` names the option in errors."""
    text = text.strip()
    if not text:
        return None
    m = re.fullmatch(r"([0-9.eE+]+)\s*([a-zA-Z]*)", text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise ValueError(
            f"{option} {text!r} is not a size; write bytes, optionally with "
            "a unit: 512MiB, 2GB, 1e9"
        )
    try:
        value = float(m.group(1)) * _UNITS[unit]
    except ValueError:
        raise ValueError(f"{option} {text!r} is not a number") from None
    if value <= 0:
        raise ValueError(f"{option} must be positive, got {text!r}")
    return value


def fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


def uses(graph: Graph, node: Node) -> list[int]:
    """Values `node` reads, its regions' reads of outer values included."""
    out = list(node.operands)
    for region in node.regions:
        for block in region:
            for nid in block.nodes:
                out.extend(uses(graph, graph.node(nid)))
    return out


class MemoryWatch:
    """Bytes live per device at each op of the entry function's body, and
    the copies the partitioner's choices add to them."""

    def __init__(
        self,
        limit: float,
        live: list[float],
        where: list[SourceLoc],
        pos: dict[int, int],
        last: dict[int, int],
    ) -> None:
        self.limit = limit
        self.live = live  # per point: bytes of values and held copies
        self.where = where  # per point: the op there (the last: the results)
        self.pos = pos  # node id of the body -> its point
        self.last = last  # value id -> the last point it is used at
        # a held copy's key -> (first point, last point, bytes)
        self.held: dict[object, tuple[int, int, float]] = {}

    @classmethod
    def of_body(
        cls,
        graph: Graph,
        args: Sequence[int],
        nodes: Sequence[int],
        returned: Iterable[int],
        block_bytes: dict[int, int],
        limit: float,
    ) -> MemoryWatch:
        """`block_bytes`: per value id of the body, its per-device bytes."""
        order = [graph.node(n) for n in nodes]
        end = len(order)
        pos = {n.id: t for t, n in enumerate(order)}
        first: dict[int, int] = {a: 0 for a in args}
        last: dict[int, int] = {a: end for a in args}
        for t, node in enumerate(order):
            for r in node.results:
                first[r] = last[r] = t
            for used in uses(graph, node):
                if used in last:
                    last[used] = max(last[used], t)
        for vid in returned:
            if vid in last:
                last[vid] = end
        delta = [0.0] * (end + 2)
        for vid, t0 in first.items():
            nbytes = block_bytes.get(vid, 0)
            if nbytes:
                delta[t0] += nbytes
                delta[last[vid] + 1] -= nbytes
        live, running = [], 0.0
        for t in range(end + 1):
            running += delta[t]
            live.append(running)
        where = [n.loc for n in order]
        where.append(order[-1].loc if order else SourceLoc("<module>", 1, 1))
        return cls(limit, live, where, pos, last)

    def peak(self) -> tuple[float, SourceLoc]:
        t = max(range(len(self.live)), key=lambda i: self.live[i])
        return self.live[t], self.where[t]

    def _span(self, site: int, vid: int | None) -> tuple[int, int]:
        start = self.pos.get(site, len(self.live) - 1)
        end = start if vid is None else max(start, self.last.get(vid, start))
        return start, end

    def room(self, site: int, nbytes: float) -> tuple[bool, float, SourceLoc]:
        """Whether a copy of `nbytes` held while the op at `site` (a node id
        of the body) runs keeps the live values under the limit there; with
        the live bytes it would make and where."""
        start, _ = self._span(site, None)
        total = self.live[start] + nbytes
        return total <= self.limit, total, self.where[start]

    def hold(self, site: int, nbytes: float, key: object = None) -> None:
        """Counts a copy of `nbytes` made at `site`; `key`: its reshard cache
        key, when later ops may reuse it (`reuse` extends its life)."""
        start, _ = self._span(site, None)
        self.live[start] += nbytes
        if key is not None:
            self.held[key] = (start, start, nbytes)

    def reuse(self, key: object, site: int) -> bool:
        """Whether the op at `site` may read a held copy again (it then lives
        until then); False when keeping it that long would break the limit:
        the copy dies after its last use so far, and the caller makes it
        again here (counted as a new copy at `site`)."""
        found = self.held.get(key)
        if found is None:
            return True
        start, end, nbytes = found
        now = self.pos.get(site, len(self.live) - 1)
        gap = range(end + 1, now + 1)
        if gap and max(self.live[t] for t in gap) + nbytes > self.limit:
            self.live[now] += nbytes
            self.held[key] = (now, now, nbytes)
            return False
        for t in gap:
            self.live[t] += nbytes
        self.held[key] = (start, max(end, now), nbytes)
        return True


def value_bytes(shape: Sequence[int] | None, dtype: str, local: Sequence[int]) -> int:
    """Per-device bytes of a value whose block has shape `local` (0 for
    values without a shape: tokens, tuples)."""
    if shape is None or not dtype:
        return 0
    n = itemsize(dtype)
    for d in local:
        n *= max(d, 0)
    return n
