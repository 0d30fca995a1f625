"""The traced module reaches the first lowering as a copy of jax's module (no
print and parse of its text); later lowerings of the same trace parse the
text. Both give the same sharded module, and jax's module is not changed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit
from meshjit.compiler.ir import make_context, parse_module
from meshjit.frontend.trace import copy_module

pytestmark = pytest.mark.devices(8)


MESH = Mesh(np.array(jax.devices()[:8]), ("x",))


def _step(w: jax.Array, x: jax.Array) -> jax.Array:
    y = jax.lax.with_sharding_constraint(jnp.tanh(x @ w), NamedSharding(MESH, P("x")))
    return y.sum(axis=1)


def test_first_lowering_copies_later_ones_parse_the_same_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mesh = MESH
    w = np.ones((16, 16), np.float32)
    x = np.arange(64 * 16, dtype=np.float32).reshape(64, 16) / 1000
    f = meshjit.jit(
        _step, in_shardings=(NamedSharding(mesh, P()), NamedSharding(mesh, P("x")))
    )
    import meshjit.frontend.trace as trace

    copies: list[bool] = []
    take = trace.TracedText.take_copy

    def counted(self: trace.TracedText) -> object:
        got = take(self)
        copies.append(got is not None)
        return got

    monkeypatch.setattr(trace.TracedText, "take_copy", counted)
    first = f.lower(w, x)  # the trace's first lowering: a copy of jax's module
    second = f.lower(w, x)  # the same trace (cached): its text, parsed
    assert copies == [True, False]
    sharded = first.as_text(debug_info=True)
    assert sharded == second.as_text(debug_info=True)
    assert 'sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>' in sharded
    # the traced text has no shardings of ours: the copy, not jax's module,
    # took them
    traced = first.as_text("traced", debug_info=True)
    assert 'sdy.mesh @mesh = <["x"=8]>' in traced
    assert "sdy.sharding = " not in traced
    placed = jax.device_put(x, NamedSharding(mesh, P("x")))
    for lowered in (first, second):
        got = np.asarray(lowered.compile()(w, placed))
        np.testing.assert_allclose(got, np.tanh(x @ w).sum(axis=1), rtol=1e-5)


def test_copy_module_keeps_attributes_locations_and_ops() -> None:
    text = (
        "module @jit_f attributes {mhlo.num_partitions = 8 : i32} {\n"
        "  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
        '    %0 = stablehlo.negate %arg0 : tensor<4xf32> loc("f.py":3:8)\n'
        "    return %0 : tensor<4xf32>\n"
        "  }\n"
        "}\n"
    )
    module = parse_module(text, make_context())
    copy = copy_module(module)
    assert copy.context is module.context
    shown = copy.operation.get_asm(enable_debug_info=True)
    assert shown == module.operation.get_asm(enable_debug_info=True)
    assert '"f.py":3:8' in shown
    assert "mhlo.num_partitions = 8" in shown
    copy.body.operations[0].operation.erase()  # the copy is its own
    assert "func.func" in str(module)
