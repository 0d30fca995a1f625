"""The per-call fast path: jax's C++ dispatch in front of meshjit's Python call.

A jitted function's first call with a given argument signature runs meshjit's
Python path (bind, check, trace, compile, place, run) and hands the C++
dispatcher what it needs to repeat that call without Python: the executable,
which flat arguments it keeps, each kept argument's target sharding and the
outputs' avals, shardings and pytree. Later calls with the same signature
(pytree, static values and types, shapes, dtypes, committed shardings, jax's
jit-keyed configs) do one flatten, one sharding check per leaf and one
execute in C++, as `jax.jit` does. Anything else goes to the Python path, so
every argument error stays the Python path's clear message: a signature the
Python path refused is never cached, and calls the C++ path cannot take (a
deleted or donated argument, a donated buffer passed twice, jax.disable_jit())
run the Python path, which says what is wrong.

jax's C++ dispatch flattens positional arguments, then keyword arguments
sorted by name, and hands the executable the kept leaves in that order;
meshjit's leaves follow the signature. The kept-argument mask is given in
jax's order (`stages.cpp_leaf_order`); a keyword call whose kept arguments
jax would order differently from the signature (`f(w, b)` called as
`f(w=..., b=...)`) stays on the Python path (~0.27 ms a call against
~0.01 ms: meshjit's leaves in jax's order would let it run in C++).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from meshjit.compiler import bridge

# (outputs, fastpath data or None) for one call's (args, kwargs)
SlowCall = Callable[[Sequence[Any], Mapping[str, Any]], tuple[Any, Any]]


class _Raised(threading.local):
    error: BaseException | None = None


_RAISED = _Raised()
_ARRAY = bridge.ARRAY_TYPE
_is_deleted = _ARRAY.is_deleted
_leaves = jax.tree_util.tree_leaves


def _weak_callable(fn: SlowCall) -> SlowCall:
    """`fn` without a strong reference to the object of a bound method."""
    if not hasattr(fn, "__self__"):
        return fn
    ref = weakref.WeakMethod(fn)

    def call(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, Any]:
        found = ref()
        if found is None:
            raise ReferenceError("the jitted function is gone")
        return found(args, kwargs)

    return call


def _cache_miss(owner: weakref.ref[Dispatcher]) -> Callable[..., tuple[Any, Any, bool]]:
    """The C++ dispatcher's callback for a call it has not cached."""

    def cache_miss(*args: Any, **kwargs: Any) -> tuple[Any, Any, bool]:
        dispatcher = owner()
        if dispatcher is None:
            raise ReferenceError("the jitted function is gone")
        dispatcher.slow_calls += 1
        try:
            outs, data = dispatcher._slow(args, kwargs)
        except BaseException as err:
            _RAISED.error = err
            raise
        return outs, data, False

    return cache_miss


class Dispatcher:
    """One C++ dispatcher and the Python call path behind it."""

    __slots__ = ("__weakref__", "_cpp", "_donates", "_slow", "calls", "slow_calls")

    def __init__(
        self,
        name: str,
        slow: SlowCall,
        static_argnums: tuple[int, ...] = (),
        static_argnames: tuple[str, ...] = (),
        donates: bool = False,
    ) -> None:
        # Weak: the jitted function owns its dispatcher, and the C++
        # dispatcher holds the cache-miss callback; strong references back
        # would make cycles, which keep a function's closed-over arrays (and
        # their device memory) alive after the last reference to the jitted
        # function goes, until Python's cycle collector runs.
        self._slow = _weak_callable(slow)
        self._donates = donates
        self._cpp = bridge.cpp_dispatcher(
            name, _cache_miss(weakref.ref(self)), static_argnums, static_argnames
        )
        self.calls = 0
        self.slow_calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # pytest: show the user's frames
        self.calls += 1
        # jaxlib 0.10.2 crashes the process (a segmentation fault, for jax.jit
        # too) when an argument's buffer was deleted or donated, or when a
        # buffer is donated and passed again: such calls take the Python path.
        leaves = _leaves((args, kwargs) if kwargs else args)
        try:  # every leaf a jax array (the usual call): the check runs in C
            deleted = any(map(_is_deleted, leaves))
        except TypeError:  # a leaf of another type
            deleted = any(type(x) is _ARRAY and x.is_deleted() for x in leaves)
        if deleted:
            return self._python(args, kwargs)
        if self._donates:
            arrays = [id(x) for x in leaves if type(x) is _ARRAY]
            if len(set(arrays)) != len(arrays):
                return self._python(args, kwargs)
        try:
            return self._cpp(*args, **kwargs)
        except Exception as err:
            if _RAISED.error is err:
                _RAISED.error = None
                raise
            # The C++ path refused the call before running it (under
            # jax.disable_jit(), for one): the Python path runs it or says why.
            return self._python(args, kwargs)

    def _python(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.slow_calls += 1
        outs, _ = self._slow(args, kwargs)
        return outs

    @property
    def fast_calls(self) -> int:
        return self.calls - self.slow_calls

    def clear(self) -> None:
        self._cpp._clear_cache()
