"""stablehlo.dot (the op before dot_general; other frontends still write it)
runs on local blocks like dot_general: a split contraction makes partial
sums, summed over its axes, and the answers are the unsharded ones."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from meshjit.compiler.spmd import compile_module

pytestmark = pytest.mark.devices(8)

TEXT = """
sdy.mesh @mesh = <["x"=2, "y"=4]>
func.func @main(
    %a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>},
    %b: tensor<16x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>},
    %v: tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}]>})
    -> (tensor<8x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>},
        tensor<8xf32>, tensor<f32>) {
  %0 = stablehlo.dot %a, %b : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %1 = stablehlo.dot %a, %v : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8xf32>
  %2 = stablehlo.dot %v, %v : (tensor<16xf32>, tensor<16xf32>) -> tensor<f32>
  return %0, %1, %2 : tensor<8x12xf32>, tensor<8xf32>, tensor<f32>
}
"""


def test_legacy_dot_contracts_split_dims_locally() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((16, 12)).astype(np.float32)
    v = rng.standard_normal(16).astype(np.float32)
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))
    compiled = compile_module(TEXT, jax.devices()[:8], "propagate,partition")
    placed = [
        jax.device_put(x, NamedSharding(mesh, s))
        for x, s in ((a, P("x", "y")), (b, P("y")), (v, P("y")))
    ]
    got = [np.asarray(o) for o in compiled.executable(*placed)]
    for out, want in zip(got, (a @ b, a @ v, v @ v), strict=True):
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    # Nothing gathered: the split contraction's partial sums are summed.
    report = compiled.diagnostics.payloads["partition"]
    kinds = {c.kind for c in report.collectives}
    assert kinds == {"all-reduce"}, report.collectives
    assert "stablehlo.dot %" in compiled.text
