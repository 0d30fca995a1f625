"""meshjit's classes beside jax's functions.

meshjit's `Mesh`, `PartitionSpec` and shardings are its own classes; jax's
functions (`jax.device_put`, `jax.lax.with_sharding_constraint`,
`jax.shard_map`) take only jax's and refuse them with an error that does
not say what to use instead. `device_put` here takes either; and where a
meshjit object reaches a jax function while meshjit traces a program, the
error gets a note naming meshjit's counterpart (`note_meshjit_objects`).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import jax

from meshjit.frontend.mesh import Mesh
from meshjit.frontend.sharding import PartitionSpec, Sharding


def _to_jax(leaf: object) -> object:
    if isinstance(leaf, Sharding | Mesh | PartitionSpec):
        return leaf.to_jax()
    return leaf


def _is_leaf(x: object) -> bool:
    return x is None or isinstance(
        x, Sharding | PartitionSpec | jax.sharding.Sharding | jax.sharding.PartitionSpec
    )


def device_put(
    x: Any,
    device: Any = None,
    *,
    src: Any = None,
    donate: Any = False,
    may_alias: Any = None,
) -> Any:
    """`jax.device_put` for meshjit's shardings and PartitionSpecs as well as
    jax's (and devices, `Format`s, memory spaces), alone or as a pytree
    prefix of `x`: meshjit's are converted to jax's (a bare PartitionSpec
    resolves against `jax.set_mesh`'s mesh, as in jax). Returns jax Arrays."""
    target = jax.tree_util.tree_map(_to_jax, device, is_leaf=_is_leaf)
    source = jax.tree_util.tree_map(_to_jax, src, is_leaf=_is_leaf)
    return jax.device_put(x, target, src=source, donate=donate, may_alias=may_alias)


# jax function (as its frames name it) -> meshjit's counterpart
_COUNTERPARTS = (
    ("with_sharding_constraint", "meshjit.with_sharding_constraint"),
    ("shard_map", "meshjit.shard_map"),
    ("device_put", "meshjit.device_put"),
)
_FRAMES = 40  # the innermost frames searched


def note_meshjit_objects(err: BaseException) -> None:
    """Where a jax function raised `err` holding one of meshjit's Mesh,
    PartitionSpec or sharding objects (jax's take only their own), adds a
    note naming the meshjit function that takes them, or `.to_jax()`. Reads
    the innermost frames of jax's own modules; nothing if none holds one."""
    frames: list[Any] = []
    tb: TracebackType | None = err.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames[-_FRAMES:]):
        if not _module(frame).startswith("jax"):
            continue
        found = _meshjit_object(frame.f_locals.values())
        if found is None:
            continue
        # the jax function called from outside jax: the outermost jax frame
        # (past the wrapper jax puts around its API functions)
        called = next(
            (
                f"{_module(f)}.{f.f_code.co_name}"
                for f in frames
                if _module(f).startswith("jax") and _module(f) != _WRAPPER
            ),
            "",
        )
        use = next(
            (alt for jax_name, alt in _COUNTERPARTS if jax_name in called),
            "meshjit's function of that name",
        )
        err.add_note(
            f"meshjit: a meshjit {type(found).__name__} reached a jax function, "
            f"which takes jax's classes only: call {use}, which takes both, or "
            "pass the object's .to_jax()"
        )
        return


_WRAPPER = "jax._src.traceback_util"


def _module(frame: Any) -> str:
    return str(frame.f_globals.get("__name__", ""))


def _meshjit_object(values: Any, depth: int = 0) -> object | None:
    for v in values:
        if isinstance(v, Mesh | PartitionSpec | Sharding):
            return v
        if depth < 2 and isinstance(v, tuple | list):
            found = _meshjit_object(v, depth + 1)
            if found is not None:
                return found
        if depth < 2 and isinstance(v, dict):
            found = _meshjit_object(v.values(), depth + 1)
            if found is not None:
                return found
    return None
