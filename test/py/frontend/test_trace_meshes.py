"""The traced module's meshes: jax 0.11 declares the mesh a second time for a
shard_map (`@mesh_0`, the same axes and devices); that is one mesh, not two."""

from __future__ import annotations

import pytest

from meshjit.errors import ShardingError
from meshjit.frontend.trace import attach_shardings, traced_mesh

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
    text = attach_shardings(TWO_NAMES, name, model, [None], [None])
    assert "mesh_0" not in text
    assert text.count('"sdy.mesh"') == 1
    assert "#sdy.sharding<@mesh, [{}]>" in text


def test_two_different_meshes_are_still_refused() -> None:
    other = TWO_NAMES.replace('@mesh_0 = <["x"=8]>', '@mesh_0 = <["y"=8]>')
    with pytest.raises(ShardingError, match="several meshes"):
        traced_mesh(other)
