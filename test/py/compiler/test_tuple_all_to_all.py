"""All-to-alls handed to XLA's CPU backend in its tuple form, their pieces
cut at run-time offsets (`compiler/tuple_all_to_all.py`): the answers stay
jax's, each all-to-all's pieces share one kernel, and the partitioned text
keeps the array form."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit
from meshjit.compiler.ir import make_context, parse_module, print_module
from meshjit.compiler.tuple_all_to_all import split_all_to_alls

pytestmark = pytest.mark.devices(8)
# the rewrite is made for CPU devices only (`bridge.tuple_all_to_all`)
_CPU = jax.devices()[0].platform == "cpu"


def _mesh() -> Mesh:
    return Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))


# (axis, split, concat, local shape, dtype): groups of 4 contiguous devices,
# groups of 2 strided ones, all 8; pieces with a dim the group divides, a
# piece flattened (2x4 over 8), one that keeps the array form (3x1 over 8).
CASES = [
    ("y", 0, 1, (8, 6), np.float32),
    ("x", 1, 0, (6, 4), np.complex64),
    (("x", "y"), 1, 1, (8, 16), np.int32),
    (("x", "y"), 1, 0, (2, 32), np.float32),
    (("x", "y"), 1, 0, (3, 8), np.float32),
]


@pytest.mark.parametrize(("axis", "split", "concat", "local", "dtype"), CASES)
def test_answers_are_jax_s(
    axis: Any, split: int, concat: int, local: tuple[int, int], dtype: Any
) -> None:
    mesh = _mesh()
    spec = P("x", "y")

    def step(a: jax.Array) -> jax.Array:
        def body(b: jax.Array) -> jax.Array:
            moved = jax.lax.all_to_all(b, axis, split, concat, tiled=True)
            return moved * 2 + 1

        return jax.shard_map(body, mesh=mesh, in_specs=spec, out_specs=spec)(a)

    shape = (2 * local[0], 4 * local[1])
    a = (np.arange(np.prod(shape)) % 97).reshape(shape).astype(dtype)
    if np.iscomplexobj(a):
        a = a + 1j * a[::-1]
    placed = jax.device_put(a, NamedSharding(mesh, spec))
    compiled = meshjit.jit(step).lower(placed).compile()
    np.testing.assert_array_equal(
        np.asarray(compiled(placed)), np.asarray(jax.jit(step)(placed))
    )
    partitioned = compiled.as_text("partitioned")
    assert partitioned.count('"stablehlo.all_to_all"(%') == 1
    hlo = compiled.as_text()
    tuple_form = "dynamic-slice" in hlo
    assert tuple_form == (_CPU and local != (3, 8)), hlo


@pytest.mark.skipif(not _CPU, reason="XLA's CPU backend: its LLVM dump")
def test_each_all_to_all_s_pieces_share_one_kernel(tmp_path: Path) -> None:
    """Four all-to-alls of different shapes over 8 devices: XLA's CPU backend
    would cut each with 8 constant slices (32 slice kernels); cut at run-time
    offsets, each all-to-all's 8 pieces are one kernel."""
    mesh = Mesh(np.array(jax.devices()[:8]), ("x",))
    sizes = [16, 32, 48, 64]

    def body(*xs: jax.Array) -> tuple[jax.Array, ...]:
        return tuple(jnp.tanh(jax.lax.all_to_all(x, "x", 0, 1, tiled=True)) for x in xs)

    step = jax.shard_map(
        body, mesh=mesh, in_specs=(P("x"),) * 4, out_specs=(P(None, "x"),) * 4
    )
    xs = [np.ones((8 * s, 8), np.float32) * s for s in sizes]
    compiled = (
        meshjit.jit(step).lower(*xs).compile({"xla_dump_to": str(tmp_path / "dump")})
    )
    for got, want in zip(compiled(*xs), jax.jit(step)(*xs), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    kernels = [p.name for p in (tmp_path / "dump").glob("*ir-with-opt.ll")]
    slices = [k for k in kernels if "slice" in k]
    assert 0 < len(slices) <= len(sizes), sorted(kernels)


_MODULE = """
module @m attributes {mhlo.num_partitions = 8 : i32} {
  func.func public @main(%a: tensor<16x8xf32>, %b: tensor<3x8xf32>)
      -> (tensor<2x64xf32>, tensor<24x1xf32>) {
    %x = "stablehlo.all_to_all"(%a) <{concat_dimension = 1 : i64,
        replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>,
        split_count = 8 : i64, split_dimension = 0 : i64}>
        : (tensor<16x8xf32>) -> tensor<2x64xf32>
    %y = "stablehlo.all_to_all"(%b) <{concat_dimension = 0 : i64,
        replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>,
        split_count = 8 : i64, split_dimension = 1 : i64}>
        : (tensor<3x8xf32>) -> tensor<24x1xf32>
    return %x, %y : tensor<2x64xf32>, tensor<24x1xf32>
  }
}
"""


def test_the_rewrite_verifies_and_leaves_what_it_cannot_write() -> None:
    """The 16x8 operand's pieces (2x8) name dim 1 (8 divides it); the 3x8
    operand's pieces (3x1, 3 elements) have no shape the group divides."""
    module = parse_module(_MODULE, make_context())
    assert split_all_to_alls(module) == 1
    assert module.operation.verify()
    text = print_module(module)
    assert text.count("stablehlo.while") == 1
    assert text.count("stablehlo.dynamic_slice") == 8
    variadic = re.search(r'%\S+:8 = "stablehlo.all_to_all"\(([^)]*)\)', text)
    assert variadic is not None, text
    assert len(variadic.group(1).split(", ")) == 8
    assert "split_count = 8 : i64, split_dimension = 1 : i64" in text
    assert "(tensor<3x8xf32>) -> tensor<24x1xf32>" in text  # kept
