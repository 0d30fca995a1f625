"""The traced module's meshes: jax 0.11 declares the mesh a second time for a
shard_map (`@mesh_0`, the same axes and devices); that is one mesh, not two.
A mesh that renames or resizes the same devices (`use_abstract_mesh(
mesh.abstract_mesh.update(...))` inside a function) is a view of the first:
its shardings are spelled on the first mesh's axes or sub-axes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, reshard
from jax.sharding import PartitionSpec as P

import meshjit
from meshjit.compiler import bridge
from meshjit.compiler.ir import print_module
from meshjit.dialects.sharding import AxisRef, MeshModel, view_axes
from meshjit.errors import ShardingError
from meshjit.frontend.trace import attach_shardings, merge_mesh_views, traced_mesh

TWO_NAMES = """
sdy.mesh @mesh = <["x"=8]>
sdy.mesh @mesh_0 = <["x"=8]>
func.func public @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{"x"}]> : tensor<8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh_0, [{}]> : tensor<8xf32>
  return %1 : tensor<8xf32>
}
"""


def test_one_mesh_under_two_names_is_one_mesh() -> None:
    found = traced_mesh(TWO_NAMES)
    assert found is not None
    name, model = found
    assert name == "mesh"
    assert model.size == 8
    text, module = attach_shardings(TWO_NAMES, name, model, [None], [None])
    assert "mesh_0" not in text
    assert text.count("sdy.mesh @") == 1
    assert "sharding_constraint %0 <@mesh, [{}]>" in text
    # renamed in the module itself, which a compile takes without a parse
    assert module is not None
    assert module.operation.verify()
    assert print_module(module, debug_info=True) == text


@pytest.mark.parametrize("form", ["placed", "placed_and_scalar", "unplaced"])
def test_a_compile_makes_no_mlir_context_of_its_own(
    form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """jax's module names meshjit's mesh (`@mesh`: an argument placed on it),
    and `@empty_mesh` too (a Python scalar beside it), or no mesh (nothing
    placed): the compile takes jax's module, renamed where it must be, and
    creates no MLIR context besides the one jax lowers in (a context, a print
    and a parse were 3-4 ms of every first call whose arguments are placed)."""
    made = []
    jax_mlir = bridge._jax_mlir  # jax's lowering and meshjit's contexts
    original = jax_mlir.make_ir_context

    def counted() -> object:
        made.append(1)
        return original()

    monkeypatch.setattr(jax_mlir, "make_ir_context", counted)
    split = jax.NamedSharding(jax.make_mesh((8,), ("x",)), P("x"))
    data = np.arange(32.0, dtype=np.float32).reshape(8, 4)
    x = data if form == "unplaced" else jax.device_put(data, split)
    args = (x, 3.0) if form == "placed_and_scalar" else (x,)

    def f(a: jax.Array, b: float = 3.0) -> jax.Array:
        return jnp.sin(a) * b + a.sum()

    traced = meshjit.jit(f, out_shardings=split).trace(*args).lower()
    expected = {
        "placed": ["@mesh "],
        "placed_and_scalar": ["@mesh ", "@empty_mesh "],
        "unplaced": [],
    }
    text = traced.as_text("traced")
    assert [m for m in ("@mesh ", "@empty_mesh ") if m in text] == expected[form]
    made.clear()
    out = meshjit.jit(f, out_shardings=split)(*args)
    np.testing.assert_allclose(out, np.sin(data) * 3.0 + data.sum(), rtol=1e-6)
    assert len(made) == 1  # jax's lowering


def test_two_different_meshes_are_still_refused() -> None:
    other = TWO_NAMES.replace(
        '@mesh_0 = <["x"=8]>',
        '@mesh_0 = <["y"=8], device_ids=[7, 6, 5, 4, 3, 2, 1, 0]>',
    )
    assert merge_mesh_views(other) == other  # other devices: not a view
    with pytest.raises(ShardingError, match="several meshes"):
        traced_mesh(other)


def test_view_axes() -> None:
    x2y2 = MeshModel.of(("x", 2), ("y", 2))
    assert view_axes(MeshModel.of(("a", 4), ("b", 1)), x2y2) == {
        "a": (AxisRef("x"), AxisRef("y")),
        "b": (),
    }
    assert view_axes(MeshModel.of(("a", 2), ("b", 3)), MeshModel.of(("x", 6))) == {
        "a": (AxisRef("x", 1, 2),),
        "b": (AxisRef("x", 2, 3),),
    }
    # an axis that straddles two axes unevenly, other devices, another size
    assert (
        view_axes(MeshModel.of(("a", 3), ("b", 2)), MeshModel.of(("x", 2), ("y", 3)))
        is None
    )
    reordered = MeshModel.of(("a", 4), device_ids=(3, 2, 1, 0))
    assert view_axes(reordered, MeshModel.of(("x", 4))) is None
    assert view_axes(MeshModel.of(("a", 8)), x2y2) is None


def test_view_shardings_are_spelled_on_the_first_mesh() -> None:
    text = """
sdy.mesh @mesh = <["x"=4]>
sdy.mesh @mesh_0 = <["a"=2, "b"=2]>
func.func public @main(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %0 = sdy.sharding_constraint %arg0 <@mesh_0, [{"b"}, {"a"}]> : tensor<8x4xf32>
  %1 = sdy.sharding_constraint %0 <@mesh_0, [{"a", "b"}, {}]> : tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}
"""
    merged = merge_mesh_views(text)
    assert "mesh_0" not in merged
    assert '<@mesh, [{"x":(2)2}, {"x":(1)2}]>' in merged
    assert '<@mesh, [{"x"}, {}]>' in merged  # adjacent sub-axes: the whole axis


def _renamed(auto: bool, back: bool) -> tuple[object, object]:
    """A function that switches to the same 4 devices as ('a'=4, 'b'=1)
    inside, under jax.jit and meshjit.jit: (jax's output, meshjit's)."""
    types = (AxisType.Auto if auto else AxisType.Explicit,) * 2
    mesh = jax.make_mesh(
        (2, 2), ("x", "y"), axis_types=types, devices=jax.devices()[:4]
    )
    data = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    outs = []
    with jax.set_mesh(mesh):
        view = mesh.abstract_mesh.update(axis_sizes=(4, 1), axis_names=("a", "b"))

        def f(x: jax.Array) -> jax.Array:
            x = jnp.sin(x)
            with jax.sharding.use_abstract_mesh(view):
                if auto:
                    x = meshjit.with_sharding_constraint(x, P(("a", "b"), None))
                else:
                    x = reshard(x, P(("a", "b"), None))
                out = x * 2
            return reshard(out, P("y", None)) if back else out

        arr = jax.device_put(data, P("x", "y"))
        for jit in (jax.jit, meshjit.jit):
            out = jit(f)(arr)
            np.testing.assert_allclose(out, np.sin(data) * 2, rtol=1e-6)
            outs.append(out.sharding)
    return outs[0], outs[1]


@pytest.mark.devices(8)
@pytest.mark.parametrize(
    ("auto", "back"), [(False, False), (True, False), (False, True)]
)
def test_renamed_mesh_inside_a_function_as_jax(auto: bool, back: bool) -> None:
    theirs, ours = _renamed(auto, back)
    assert ours.spec == theirs.spec
    assert ours.mesh.axis_names == theirs.mesh.axis_names
    assert ours.mesh.axis_types == theirs.mesh.axis_types
