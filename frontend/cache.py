"""The compile cache of a jitted function: traces and executables, and why they missed.

Two levels, as in JAX: a trace is keyed on the call form (static argument values
*and types*, which arguments were passed how), the argument pytree and the
abstract values; an executable additionally on the committed arguments'
shardings, the context mesh and the device. Every miss is explained against the
closest earlier key ("static argument `n`: 2 (int) -> 2.0 (float)") and kept in
`log`; `explain_cache_misses(True)` also logs it to the `meshjit.jit` logger.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from jax.tree_util import PyTreeDef

from meshjit.compiler import bridge
from meshjit.frontend.args import CallForm

LOGGER = logging.getLogger("meshjit.jit")
_EXPLAIN = [False]
_LOG_LIMIT = 64

V = TypeVar("V")


def explain_cache_misses(enabled: bool = True) -> None:
    """Log why every trace or compile cache miss of a meshjit.jit function happened."""
    _EXPLAIN[0] = enabled


@dataclass(frozen=True, slots=True)
class TraceKey:
    form: CallForm
    tree: PyTreeDef
    avals: tuple[tuple[tuple[int, ...], str, bool], ...]
    paths: tuple[str, ...]
    # Bare PartitionSpecs inside the function (with_sharding_constraint)
    # resolve against it: a new context mesh traces again, as in jax.
    context_mesh: Hashable = None
    # jax's tracing configuration (bridge.trace_context(): matmul precision,
    # rank promotion, user contexts): a change traces again, as in jax
    jax_config: Hashable = None


@dataclass(frozen=True, slots=True)
class CompileKey:
    trace: TraceKey
    committed: tuple[Hashable, ...]  # the jax sharding of each committed leaf, or None
    context_mesh: Hashable
    extra: Hashable = None
    default_device: Hashable = None  # jax.default_device, where no input decides


@dataclass(frozen=True, slots=True)
class CacheInfo:
    traces: int
    compiles: int
    hits: int  # calls that found their executable, `fast` among them
    size: int  # executables held
    log: tuple[str, ...]  # why each miss happened, oldest first
    fast: int = 0  # hits that jax's C++ dispatch ran without reaching Python


def _aval_text(aval: tuple[Any, ...]) -> str:
    """`LeafInfo.aval_key()` as text: shape, dtype, weak type, and the
    sharding in the type (explicit sharding mode)."""
    shape, dtype, weak, typed = aval[:4]
    text = f"{dtype}[{','.join(map(str, shape))}]" + (" (weak type)" if weak else "")
    if typed is not None:
        text += f" typed {typed[1]}"
    return text


def trace_differences(old: TraceKey, new: TraceKey) -> list[str]:
    diffs: list[str] = []
    old_static = {name: (t, v) for name, t, v in _statics(old.form)}
    for name, t, v in _statics(new.form):
        if name not in old_static:
            diffs.append(f"static argument `{name}` is new: {v!r} ({t.__name__})")
            continue
        ot, ov = old_static[name]
        if ot is not t or ov != v:
            diffs.append(
                f"static argument `{name}`: {ov!r} ({ot.__name__}) -> {v!r} "
                f"({t.__name__})"
            )
    old_names = [e.name for e in old.form.entries]
    new_names = [e.name for e in new.form.entries]
    if old_names != new_names or old.form.n_pos != new.form.n_pos:
        diffs.append(
            f"the call passes different arguments: ({', '.join(old_names)}) -> "
            f"({', '.join(new_names)})"
        )
    elif old.tree != new.tree:
        diffs.append(f"the argument pytree changed: {old.tree} -> {new.tree}")
    else:
        for path, a, b in zip(new.paths, old.avals, new.avals, strict=True):
            if a != b:
                diffs.append(f"argument `{path}`: {_aval_text(a)} -> {_aval_text(b)}")
    if old.context_mesh != new.context_mesh:
        diffs.append(f"context mesh: {old.context_mesh} -> {new.context_mesh}")
    if old.jax_config != new.jax_config:
        names = bridge.trace_context_changes(old.jax_config, new.jax_config)
        diffs.append("jax's tracing configuration: " + (", ".join(names) or "changed"))
    return diffs


def _statics(form: CallForm) -> list[tuple[str, type, Hashable]]:
    return [s.key() for _, s in form.static_pos] + [s.key() for _, s in form.static_kw]


def compile_differences(old: CompileKey, new: CompileKey) -> list[str]:
    diffs: list[str] = []
    for path, a, b in zip(new.trace.paths, old.committed, new.committed, strict=True):
        if a != b:
            diffs.append(f"argument `{path}` sharding: {_sh(a)} -> {_sh(b)}")
    if old.context_mesh != new.context_mesh:
        diffs.append(f"context mesh: {old.context_mesh} -> {new.context_mesh}")
    if old.extra != new.extra:
        diffs.append(f"options: {old.extra} -> {new.extra}")
    if old.default_device != new.default_device:
        diffs.append(
            f"jax.default_device: {old.default_device} -> {new.default_device}"
        )
    return diffs


def _sh(s: Hashable) -> str:
    return "uncommitted" if s is None else str(s)


class _EveryCache:
    """Every live JitCache, cleared by `jax.clear_caches()` as jax's own
    jit caches are (jax calls `cache_clear`)."""

    def __init__(self) -> None:
        self.caches: weakref.WeakSet[JitCache] = weakref.WeakSet()

    def cache_clear(self) -> None:
        for cache in list(self.caches):
            cache.clear()

    def cache_info(self) -> tuple[int]:
        return (len(self.caches),)

    def cache_keys(self) -> list[str]:
        return [c.fun_name for c in list(self.caches)]


_EVERY = _EveryCache()
bridge.on_clear_caches(_EVERY, "meshjit.jit traces and executables")


class JitCache:
    """The traces and executables of one jitted function.

    Thread safe: one re-entrant lock (a compile traces through the same cache)
    is held while a missing entry is made, so concurrent first calls with one
    key trace and compile once and the others wait for that result.
    """

    def __init__(self, fun_name: str) -> None:
        self.fun_name = fun_name
        self._lock = threading.RLock()
        self._traces: dict[TraceKey, object] = {}
        self._compiled: dict[CompileKey, object] = {}
        self.traces = 0
        self.compiles = 0
        self.hits = 0
        self.log: deque[str] = deque(maxlen=_LOG_LIMIT)
        _EVERY.caches.add(self)

    def clear(self) -> None:
        with self._lock:
            self._traces.clear()
            self._compiled.clear()

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(
                self.traces,
                self.compiles,
                self.hits,
                len(self._compiled),
                tuple(self.log),
            )

    def _miss(self, kind: str, reasons: list[str]) -> None:
        message = f"{kind} cache miss for {self.fun_name}: " + (
            "; ".join(reasons) if reasons else "never seen this function before"
        )
        self.log.append(message)
        if _EXPLAIN[0]:
            LOGGER.warning(message)

    def trace(self, key: TraceKey, make: Callable[[], V]) -> V:
        with self._lock:
            return self._trace(key, make)

    def compiled(self, key: CompileKey, make: Callable[[], V]) -> V:
        with self._lock:
            return self._compile(key, make)

    def _trace(self, key: TraceKey, make: Callable[[], V]) -> V:
        found = self._traces.get(key)
        if found is not None:
            return found  # type: ignore[return-value]
        reasons = _closest(list(self._traces), key, trace_differences)
        value = make()
        self.traces += 1
        self._miss("trace", reasons)
        self._traces[key] = value
        return value

    def _compile(self, key: CompileKey, make: Callable[[], V]) -> V:
        found = self._compiled.get(key)
        if found is not None:
            self.hits += 1
            return found  # type: ignore[return-value]
        same_trace = [k for k in self._compiled if k.trace == key.trace]
        value = make()
        self.compiles += 1
        if same_trace:
            self._miss("compile", _closest(same_trace, key, compile_differences))
        self._compiled[key] = value
        return value


K = TypeVar("K")


def _closest(
    old: list[K], new: K, differences: Callable[[K, K], list[str]]
) -> list[str]:
    if not old:
        return []
    best = min((differences(o, new) for o in old), key=len)
    return best or ["an equal key was evicted"]
