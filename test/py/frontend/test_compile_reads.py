"""A compile walks the traced module's body once: propagation, the donation
aliases and the partitioner share one graph (frontend/stages.py `_compile`),
and the answer is the same as through the staged texts."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import meshjit
from meshjit import Mesh, NamedSharding, P
from meshjit.compiler import graph

pytestmark = pytest.mark.devices(8)

MESH = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))


def step(w: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    loss, g = jax.value_and_grad(lambda w: jnp.sum(jnp.tanh(x @ w) ** 2))(w)
    return w - 0.1 * g, loss


def _jit() -> meshjit.jit:
    w_sh = NamedSharding(MESH, P(None, "y"))
    x_sh = NamedSharding(MESH, P("x", None))
    return meshjit.jit(
        step,
        in_shardings=(w_sh, x_sh),
        out_shardings=(w_sh, NamedSharding(MESH, P())),
        donate_argnums=0,
    )


def test_one_walk_per_compile_with_donation() -> None:
    w = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    lowered = _jit().lower(w, x)
    before = graph.walks()
    compiled = lowered.compile()
    assert graph.walks() - before == 1
    # The alias was set on the shared graph: the donated weight's buffer is
    # the updated weight's.
    assert "tf.aliasing_output = 0 : i32" in compiled.as_text("partitioned")
    got_w, got_loss = compiled(jnp.asarray(w), jnp.asarray(x))
    want_w, want_loss = jax.jit(step)(w, x)
    np.testing.assert_allclose(
        np.asarray(got_w), np.asarray(want_w), rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(float(got_loss), float(want_loss), rtol=1e-5)


def test_compile_after_as_text_propagated_gives_the_same_program() -> None:
    w = np.ones((16, 32), np.float32)
    x = np.ones((8, 16), np.float32)
    direct = _jit().lower(w, x).compile().as_text("partitioned")
    staged = _jit().lower(w, x)
    staged.as_text("propagated")  # the staged-text path then compiles
    assert staged.compile().as_text("partitioned") == direct


def test_partitioned_text_carries_the_donation_alias() -> None:
    w = np.ones((16, 32), np.float32)
    x = np.ones((8, 16), np.float32)
    text = _jit().lower(w, x).as_text("partitioned")
    assert "tf.aliasing_output = 0 : i32" in text
    assert text == _jit().lower(w, x).compile().as_text("partitioned")


def test_the_first_compile_takes_the_module_lowering_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No second parse of the sharded text: `lower` keeps the module it
    printed for the first compile; a second compile parses the text."""
    from meshjit.frontend import stages

    parsed: list[str] = []
    real = stages.parse_module

    def counting(text: str, *args: object) -> object:
        if not text.startswith("module @partitioned"):  # the program's own
            parsed.append(text)
        return real(text, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(stages, "parse_module", counting)
    w = np.ones((16, 32), np.float32)
    x = np.ones((8, 16), np.float32)
    lowered = _jit().lower(w, x)
    first = lowered.compile().as_text("partitioned")
    assert parsed == []
    second = lowered.compile().as_text("partitioned")
    assert len(parsed) == 1
    assert second == first


@jax.jit
def _layer(w: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.tanh(x @ w)  # a private function of the module, called twice


def _two_layers(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.sum(_layer(w1, x) + _layer(w2, x))


def test_a_function_called_twice_alike_is_written_in_place() -> None:
    """Calls of one function that propagation gives the same shardings merge
    into one copy, the function itself: it is written where it is and the
    compile still walks the module once; the program is the one the staged
    texts (which re-read the module after each pass) give."""
    w_sh = NamedSharding(MESH, P(None, "y"))
    x_sh = NamedSharding(MESH, P("x", None))
    jitted = meshjit.jit(
        _two_layers,
        in_shardings=(w_sh, w_sh, x_sh),
        out_shardings=NamedSharding(MESH, P()),
    )
    rng = np.random.default_rng(0)
    w1, w2 = (rng.standard_normal((16, 16)).astype(np.float32) for _ in range(2))
    x = rng.standard_normal((8, 16)).astype(np.float32)
    lowered = jitted.lower(w1, w2, x)
    assert lowered.as_text().count("call @_layer(") == 2
    before = graph.walks()
    compiled = lowered.compile()
    assert graph.walks() - before == 1
    staged = jitted.lower(w1, w2, x)
    staged.as_text("propagated")
    assert staged.compile().as_text("partitioned") == compiled.as_text("partitioned")
    got = compiled(jnp.asarray(w1), jnp.asarray(w2), jnp.asarray(x))
    np.testing.assert_allclose(float(got), float(_two_layers(w1, w2, x)), rtol=1e-5)


def test_partitioned_text_keeps_its_locations_after_a_compile() -> None:
    # The compile keeps its partitioned text without locations; asked for
    # with debug info afterwards, the text has them, as before the compile.
    w = np.ones((16, 32), np.float32)
    x = np.ones((8, 16), np.float32)
    fresh = _jit().lower(w, x)
    want = fresh.as_text("partitioned", debug_info=True)
    compiled_first = _jit().lower(w, x)
    compiled_first.compile()
    got = compiled_first.as_text("partitioned", debug_info=True)
    assert "loc(" in got
    assert got == want
    plain = compiled_first.as_text("partitioned")
    assert "loc(" not in plain
    assert plain == fresh.as_text("partitioned")
