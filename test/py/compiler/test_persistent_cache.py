"""The persistent compilation cache (compiler/persistent_cache.py): a hit skips
the compile and gives the same program, any change to the key misses, and a
corrupt, foreign or unloadable entry is ignored with a warning, never trusted.

Source locations are part of the key (the report names them), and JAX records
the caller's line: a test compiles the same function twice from one line."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import meshjit
from meshjit import Mesh, NamedSharding, P
from meshjit.compiler import persistent_cache

DEVICES = jax.devices()[:8]
MESH8 = Mesh(np.array(DEVICES), ("x",))
X = np.arange(128, dtype=np.float32).reshape(16, 8)
W = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)


def fn(x: jax.Array, w: jax.Array) -> jax.Array:
    # full f32 products: a GPU's default (TF32) would miss the tolerance
    return np.float32(2.0) * jnp.matmul(x, w, precision=jax.lax.Precision.HIGHEST)


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Path]:
    before = persistent_cache.stats()
    persistent_cache.STATS = persistent_cache.Stats()
    meshjit.set_cache_dir(tmp_path)
    try:
        yield tmp_path
    finally:
        meshjit.set_cache_dir(None)
        persistent_cache.STATS = before


def compiled(**kw: Any) -> Any:
    shardings = kw.pop("in_shardings", (NamedSharding(MESH8, P("x")), None))
    return meshjit.jit(fn, in_shardings=shardings, **kw).lower(X, W).compile()


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.meshjit"))


def test_a_hit_gives_the_same_program_report_and_answer(cache: Path) -> None:
    first, second = (compiled() for _ in range(2))
    assert persistent_cache.stats().writes == 1
    assert len(entries(cache)) == 1
    stats = persistent_cache.stats()
    assert (stats.hits, stats.misses) == (1, 1)
    assert second.as_text("partitioned") == first.as_text("partitioned")
    assert second.partition_report.counts() == first.partition_report.counts()
    assert second.partition_report.collectives == first.partition_report.collectives
    np.testing.assert_allclose(second(X, W), fn(X, W), rtol=1e-5, atol=1e-4)
    assert second.output_shardings == first.output_shardings


@pytest.mark.devices(8)
def test_a_hit_keeps_a_shard_map_bodys_own_collectives(cache: Path) -> None:
    """The report's list of a shard_map body's own collectives (its psum here)
    comes back from a hit as the compile wrote it."""

    # shard_map takes jax's own Mesh and PartitionSpec
    mesh, spec = (
        jax.sharding.Mesh(np.array(DEVICES), ("x",)),
        jax.sharding.PartitionSpec,
    )

    def g(x: jax.Array) -> jax.Array:
        body = jax.shard_map(
            lambda b: jax.lax.psum(b, "x"),
            mesh=mesh,
            in_specs=spec("x"),
            out_specs=spec(),
        )
        return body(x) + 1

    def once() -> Any:
        sharding = jax.sharding.NamedSharding(mesh, spec("x"))
        return meshjit.jit(g, in_shardings=sharding).lower(X).compile()

    first, second = once(), once()
    assert persistent_cache.stats().hits == 1
    assert [c.kind for c in first.partition_report.own] == ["all-reduce"]
    assert second.partition_report.own == first.partition_report.own


@pytest.mark.devices(8)
def test_auto_shardings_come_back_from_a_hit(cache: Path) -> None:
    """AUTO leaves: the chosen layouts are read from the cached partitioned
    program; the search's options are part of the key."""
    auto = meshjit.sharding.AUTO(MESH8)
    first, second = (compiled(in_shardings=auto) for _ in range(2))
    assert (persistent_cache.stats().hits, first.auto_shard is not None) == (1, True)
    assert second.auto_shard is None  # the search did not run again
    assert second.input_shardings == first.input_shardings
    np.testing.assert_allclose(second(X, W), fn(X, W), rtol=1e-5, atol=1e-4)
    budget = meshjit.sharding.AUTO(MESH8, memory_budget="1GiB")
    compiled(in_shardings=budget)
    assert persistent_cache.stats().misses == 2


def test_any_change_to_the_key_misses(cache: Path) -> None:
    reversed_mesh = Mesh(np.array(DEVICES[::-1]), ("x",))
    variants: list[tuple[dict[str, Any], dict[str, str]]] = [
        ({}, {}),
        ({"in_shardings": (NamedSharding(MESH8, P(None, "x")), None)}, {}),
        ({"compiler_options": {"xla_cpu_enable_fast_math": False}}, {}),
        ({"donate_argnums": 0}, {}),
        ({"in_shardings": (NamedSharding(reversed_mesh, P("x")), None)}, {}),
        ({}, {"MESHJIT_COST": "cpu" if DEVICES[0].platform == "gpu" else "gpu"}),
    ]
    if len(DEVICES) == 1:  # reversing one device changes nothing
        del variants[4]
    variants.append(({}, {}))  # the first again: a hit
    for kw, env in variants:
        os.environ.update(env)
        try:
            compiled(**kw)
        finally:
            for name in env:
                del os.environ[name]
    stats = persistent_cache.stats()
    distinct = len(variants) - 1
    assert (stats.hits, stats.misses, stats.writes) == (1, distinct, distinct)
    assert len(entries(cache)) == distinct


def _compile_each(actions: list[Any]) -> list[Any]:
    """Runs each action, then compiles (always from this one line, so that
    every compile has the same source locations, hence the same key)."""
    out = []
    for action in actions:
        with action() if action else contextlib.nullcontext():
            out.append(compiled())
    return out


def test_a_corrupt_entry_is_ignored_with_a_warning_and_rewritten(cache: Path) -> None:
    def corrupt() -> Any:
        (entry,) = entries(cache)
        blob = bytearray(entry.read_bytes())
        blob[len(blob) // 2] ^= 0xFF
        entry.write_bytes(bytes(blob))
        return pytest.warns(UserWarning, match="checksum does not match")

    got = _compile_each([None, corrupt, None])
    np.testing.assert_allclose(got[1](X, W), fn(X, W), rtol=1e-5, atol=1e-4)
    stats = persistent_cache.stats()
    assert stats.writes == 2  # rewritten whole after the corrupt one
    assert stats.hits == 1  # the rewritten entry
    assert len(stats.rejected) == 1


def test_truncated_and_foreign_entries_are_ignored(cache: Path) -> None:
    ours: list[Path] = []

    def truncate() -> Any:
        ours.extend(entries(cache))  # the one entry the first compile wrote
        ours[0].write_bytes(ours[0].read_bytes()[:100])
        return pytest.warns(UserWarning, match="checksum does not match")

    def garbage() -> Any:
        ours[0].write_bytes(b"not a cache entry at all")
        return pytest.warns(UserWarning, match="not a meshjit cache entry")

    def foreign() -> Any:
        # an intact entry of another function, renamed to this key
        other = meshjit.jit(lambda x, w: x @ w - x, in_shardings=(None, None))
        other.lower(X, W).compile()
        (found,) = (p for p in entries(cache) if p != ours[0])
        ours[0].write_bytes(found.read_bytes())
        return pytest.warns(UserWarning, match="written for another key")

    got = _compile_each([None, truncate, garbage, foreign])
    for c in got:
        np.testing.assert_allclose(c(X, W), fn(X, W), rtol=1e-5, atol=1e-4)
    assert len(persistent_cache.stats().rejected) == 3


def test_an_entry_pjrt_cannot_load_is_compiled_afresh(cache: Path) -> None:
    def spoil() -> Any:
        (entry,) = entries(cache)
        key = entry.name[: -len(persistent_cache.SUFFIX)]
        found = persistent_cache.load(key)
        assert found is not None
        persistent_cache.store(
            key,
            persistent_cache.Entry(
                found.partitioned, found.report, found.aliases, found.unusable, b"junk"
            ),
        )
        return pytest.warns(UserWarning, match="ignoring compilation cache entry")

    got = _compile_each([None, spoil])
    np.testing.assert_allclose(got[1](X, W), fn(X, W), rtol=1e-5, atol=1e-4)


def test_the_cache_is_off_unless_asked(tmp_path: Path) -> None:
    meshjit.set_cache_dir(None)
    os.environ.pop(persistent_cache.ENV, None)
    before = persistent_cache.stats().writes
    compiled()
    assert persistent_cache.stats().writes == before


_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    import jax, numpy as np, meshjit
    from meshjit.compiler import persistent_cache
    mesh = meshjit.Mesh(np.array(jax.devices()[:8]), ("x",))
    x = np.arange(128, dtype=np.float32).reshape(16, 8)
    split = meshjit.NamedSharding(mesh, meshjit.P("x"))
    f = meshjit.jit(lambda x: (x @ x.T).sum(0), in_shardings=split)
    got = np.asarray(f(x))
    assert np.allclose(got, (x @ x.T).sum(0)), got
    s = persistent_cache.stats()
    print(s.hits, s.misses, s.writes, len(s.rejected))
    """
)


def _run(cache: Path, n: int) -> list[str]:
    env = dict(os.environ, MESHJIT_CACHE_DIR=str(cache))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SCRIPT],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr
        out.append(stdout.strip())
    return out


def test_processes_share_the_cache_and_may_write_it_at_once(tmp_path: Path) -> None:
    """Two processes compile the same function at the same time (each misses
    and writes the entry, or the later one already finds it: the rename is
    atomic, so none reads half an entry); a third process hits."""
    together = _run(tmp_path, 2)
    assert sorted(together) in (["0 1 1 0", "0 1 1 0"], ["0 1 1 0", "1 0 0 0"])
    assert len(entries(tmp_path)) == 1
    assert not list(tmp_path.glob("*.tmp"))
    assert _run(tmp_path, 1) == ["1 0 0 0"]
