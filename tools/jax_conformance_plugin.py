"""pytest plugin: run jax's own test modules with meshjit's jit swapped in.

Loaded by `tools/jax_conformance.py` (`-p jax_conformance_plugin`, with this
folder on `PYTHONPATH`). After collection, every collected test module's
globals see meshjit where they see jax's entry points:

- `jax` -> a stand-in module that is jax except `jax.jit` (meshjit.jit),
  `jax.lax` (see below) and `jax.experimental.pjit`;
- `jit` -> meshjit.jit, `pjit` -> meshjit.pjit;
- `lax` / `jax.lax` -> jax.lax except `with_sharding_constraint`;
- `with_sharding_constraint` -> meshjit.with_sharding_constraint.

jax's sharding classes (`Mesh`, `NamedSharding`, `PartitionSpec`, ...) are kept,
as are decorators a module applied at import time (before the swap) and jax's
own internals, which hold their own references.
"""

from __future__ import annotations

import types
from typing import Any

import jax
import jax.experimental
import jax.experimental.pjit
import pytest

import meshjit


class _Standin(types.ModuleType):
    """A module that forwards every attribute it does not define to `target`."""

    def __init__(self, name: str, target: types.ModuleType, **overrides: Any) -> None:
        super().__init__(name)
        self.__dict__["_target"] = target
        self.__dict__.update(overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_target"], name)


def _standins() -> dict[str, Any]:
    lax = _Standin(
        "jax.lax",
        jax.lax,
        with_sharding_constraint=meshjit.with_sharding_constraint,
    )
    pjit_module = _Standin(
        "jax.experimental.pjit", jax.experimental.pjit, pjit=meshjit.pjit
    )
    experimental = _Standin("jax.experimental", jax.experimental, pjit=pjit_module)
    standin = _Standin("jax", jax, jit=meshjit.jit, lax=lax, experimental=experimental)
    return {
        "jax": standin,
        "lax": lax,
        "jit": meshjit.jit,
        "pjit": meshjit.pjit,
        "with_sharding_constraint": meshjit.with_sharding_constraint,
    }


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    swaps = _standins()
    seen: set[int] = set()
    for item in items:
        module = getattr(item, "module", None)
        if module is None or id(module) in seen:
            continue
        seen.add(id(module))
        for name, value in swaps.items():
            if name in vars(module):
                setattr(module, name, value)
