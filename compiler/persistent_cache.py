"""A persistent compilation cache: partitioned modules and PJRT executables on disk.

Opt-in, as JAX's `jax_compilation_cache_dir` is: `meshjit.set_cache_dir(path)`
or the environment variable `MESHJIT_CACHE_DIR`. An entry holds what a compile
produced from one sharded module: the partitioned module, the partition report,
the donation decisions and PJRT's serialized executable. Its key hashes
everything the result depends on: the sharded module text (source locations
included: they are in the report), which arguments are donated, the partition
pipeline and the cost model it loads, the devices in mesh order, XLA options
and flags, and the versions of meshjit (a hash of its source), jax, jaxlib
and the PJRT plugin. A hit in a new process skips propagation, partitioning
and XLA's compile.

Safe with several processes: an entry is written to a temporary file in the
same folder and renamed into place (atomic), so a reader sees a whole entry or
none. Nothing read is trusted: an entry starts with a magic line and a SHA-256
of the rest, and its header repeats the full key; a corrupt, truncated or
foreign entry (or one PJRT cannot load) is ignored with a `UserWarning` and
compiled afresh. The payload is JSON and PJRT's bytes: no pickle. The
checksum catches damage, not malice: as with JAX's cache, whoever can write
the folder can hand PJRT an executable, so keep it writable only by you.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from meshjit.compiler import bridge
from meshjit.compiler.diagnostics import SourceLoc
from meshjit.passes.partitioner.combine import Combined
from meshjit.passes.partitioner.report import (
    Collective,
    Decision,
    PartitionReport,
    Remark,
)

ENV = "MESHJIT_CACHE_DIR"
MAGIC = b"MESHJIT-COMPILATION-CACHE\n"
FORMAT = 1
SUFFIX = ".meshjit"

_dir: list[str | None] = [None]  # set_cache_dir's value; None: MESHJIT_CACHE_DIR
_lock = threading.Lock()


def set_cache_dir(path: str | os.PathLike[str] | None) -> None:
    """Use `path` as meshjit's persistent compilation cache (created if
    missing); None turns it off again (then `MESHJIT_CACHE_DIR` decides)."""
    _dir[0] = None if path is None else os.fspath(path)


def cache_dir() -> str | None:
    return _dir[0] if _dir[0] is not None else (os.environ.get(ENV) or None)


@dataclass(slots=True)
class Stats:
    """What the persistent cache did in this process."""

    hits: int = 0
    misses: int = 0
    writes: int = 0
    rejected: list[str] = field(default_factory=list)  # why entries were ignored


STATS = Stats()


def stats() -> Stats:
    return STATS


@dataclass(frozen=True, slots=True)
class Entry:
    partitioned: str
    report: PartitionReport
    aliases: dict[int, int]
    unusable: list[str]
    executable: bytes


# --- the key --------------------------------------------------------------------

_SOURCE_HASH: list[str] = []


def _meshjit_version() -> str:
    """A hash of meshjit's own source: any change to the compiler is a new key."""
    if not _SOURCE_HASH:
        from meshjit import native

        _SOURCE_HASH.append(native.source_hash())
    return _SOURCE_HASH[0]


def _cost_file(pipeline: str) -> str:
    """The contents of a calibration file the pipeline's cost model loads."""
    marker = "cost="
    if marker not in pipeline:
        return ""
    spec = pipeline.split(marker, 1)[1].split("}", 1)[0].split(" ", 1)[0]
    if os.path.isfile(spec):
        with open(spec, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    return ""


def make_key(
    sharded: str,
    donated: Sequence[bool],
    kept: Sequence[int],
    pipeline: str,
    devices: Sequence[Any],
    compiler_options: Mapping[str, Any] | None,
) -> str:
    import jax

    parts = {
        "format": FORMAT,
        "meshjit": _meshjit_version(),
        "jax": jax.__version__,
        "jaxlib": bridge.jaxlib_version(),
        "platform": bridge.platform_version(),
        "devices": [
            [d.id, d.platform, d.device_kind, d.process_index] for d in devices
        ],
        "pipeline": pipeline,
        "cost_file": _cost_file(pipeline),
        "options": sorted(
            (str(k), repr(v)) for k, v in (compiler_options or {}).items()
        ),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "donated": [bool(d) for d in donated],
        "kept": list(kept),
        "module": hashlib.sha256(sharded.encode()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


# --- reading and writing --------------------------------------------------------


def _loc(loc: SourceLoc) -> list[Any]:
    return [loc.file, loc.line, loc.col, loc.name]


def _collectives_json(found: list[Collective]) -> list[list[Any]]:
    return [
        [
            c.kind,
            list(c.axes),
            c.bytes_per_device,
            c.op,
            _loc(c.loc),
            c.reason,
            c.seconds,
            c.site,
        ]
        for c in found
    ]


def _report_json(report: PartitionReport) -> dict[str, Any]:
    return {
        "collectives": _collectives_json(report.collectives),
        "remarks": [[_loc(r.loc), r.message, r.site] for r in report.remarks],
        "decisions": [
            [d.op, _loc(d.loc), d.chosen, d.seconds, d.other, d.other_seconds]
            for d in report.decisions
        ],
        "combined": [[g.kind, g.count, g.bytes] for g in report.combined],
        "own": _collectives_json(report.own),
    }


def _report_from(data: Mapping[str, Any]) -> PartitionReport:
    def loc(v: list[Any]) -> SourceLoc:
        return SourceLoc(str(v[0]), int(v[1]), int(v[2]), str(v[3]))

    def collectives(rows: list[list[Any]]) -> list[Collective]:
        # (entries written before the HTML report's site was kept have 7 fields)
        return [
            Collective(
                str(k),
                tuple(map(str, a)),
                int(b),
                str(o),
                loc(lc),
                str(r),
                float(s),
                int(site[0]) if site else -1,
            )
            for k, a, b, o, lc, r, s, *site in rows
        ]

    return PartitionReport(
        collectives(data["collectives"]),
        [
            Remark(loc(lc), str(m), int(site[0]) if site else -1)
            for lc, m, *site in data["remarks"]
        ],
        [
            Decision(str(o), loc(lc), str(c), float(s), str(ot), float(os_))
            for o, lc, c, s, ot, os_ in data["decisions"]
        ],
        [Combined(str(k), int(n), int(b)) for k, n, b in data["combined"]],
        collectives(data.get("own", [])),
    )


def _path(folder: str, key: str) -> str:
    return os.path.join(folder, key + SUFFIX)


def _reject(path: str, why: str) -> None:
    message = f"meshjit: ignoring compilation cache entry {path}: {why}"
    with _lock:
        STATS.rejected.append(message)
    warnings.warn(message, UserWarning, stacklevel=4)


def reject(key: str, why: str) -> None:
    """An entry that read well but could not be used (PJRT refused it)."""
    folder = cache_dir()
    _reject(_path(folder or "", key), why)
    with _lock:
        STATS.hits -= 1
        STATS.misses += 1


def load(key: str) -> Entry | None:
    """The entry for `key`, or None (a miss, or an entry not to be trusted)."""
    folder = cache_dir()
    if folder is None:
        return None
    path = _path(folder, key)
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except FileNotFoundError:
        with _lock:
            STATS.misses += 1
        return None
    except OSError as err:
        _reject(path, f"unreadable ({err})")
        return None
    entry = _decode(blob, key, path)
    with _lock:
        if entry is None:
            STATS.misses += 1
        else:
            STATS.hits += 1
    return entry


def _decode(blob: bytes, key: str, path: str) -> Entry | None:
    head = len(MAGIC) + 4 + 32
    if len(blob) < head or not blob.startswith(MAGIC):
        _reject(path, "not a meshjit cache entry")
        return None
    (fmt,) = struct.unpack("<I", blob[len(MAGIC) : len(MAGIC) + 4])
    if fmt != FORMAT:
        _reject(path, f"format {fmt}, this meshjit reads {FORMAT}")
        return None
    digest, payload = blob[len(MAGIC) + 4 : head], blob[head:]
    if hashlib.sha256(payload).digest() != digest:
        _reject(path, "its checksum does not match (corrupt or truncated)")
        return None
    try:
        (size,) = struct.unpack("<Q", payload[:8])
        header = json.loads(payload[8 : 8 + size].decode())
        if header.get("key") != key:
            _reject(path, "it was written for another key")
            return None
        return Entry(
            str(header["partitioned"]),
            _report_from(header["report"]),
            {int(a): int(r) for a, r in header["aliases"]},
            [str(u) for u in header["unusable"]],
            payload[8 + size :],
        )
    except (ValueError, KeyError, TypeError, struct.error) as err:
        _reject(path, f"its header does not parse ({type(err).__name__}: {err})")
        return None


def store(key: str, entry: Entry) -> None:
    """Writes the entry (atomically); a cache that cannot be written warns once
    per call and the compile goes on."""
    folder = cache_dir()
    if folder is None:
        return
    header = {
        "key": key,
        "partitioned": entry.partitioned,
        "report": _report_json(entry.report),
        "aliases": sorted(entry.aliases.items()),
        "unusable": entry.unusable,
    }
    encoded = json.dumps(header).encode()
    payload = struct.pack("<Q", len(encoded)) + encoded + entry.executable
    blob = (
        MAGIC + struct.pack("<I", FORMAT) + hashlib.sha256(payload).digest() + payload
    )
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=key[:16] + ".", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.chmod(tmp, 0o644)
            os.replace(tmp, _path(folder, key))
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as err:
        warnings.warn(
            f"meshjit: cannot write the compilation cache in {folder}: {err}",
            UserWarning,
            stacklevel=3,
        )
        return
    with _lock:
        STATS.writes += 1
