"""The AOT stages' attributes jax documents, against jax.jit's.

`args_info`, `in_tree`, `in_avals`, `donate_argnums` on Traced, Lowered and
Compiled; `Lowered.compiler_ir`, `as_text(dialect=...)` (also jax's positional
spelling `as_text("stablehlo")`), `cost_analysis`; `Compiled.out_info` and
`runtime_executable`; lowering on `jax.core.ShapedArray` arguments.
"""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit

pytestmark = pytest.mark.devices(8)

MESH = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))


def lowered_pair() -> tuple[Any, Any]:
    arr = jax.device_put(np.arange(8, dtype=np.int32), NamedSharding(MESH, P("x")))
    out = []
    for jit in (jax.jit, meshjit.jit):
        f = jit(lambda x, y=1: x * 2 + y, donate_argnums=0)
        out.append(f.lower(arr, y=3))
    return out[0], out[1]


def described(tree: Any) -> list[tuple[Any, ...]]:
    """Shape, dtype, weak type (and donation for ArgInfo) of each leaf: the
    avals' shardings differ (jax's carry the argument's abstract mesh)."""
    out = []
    for leaf in jax.tree.leaves(tree):
        aval = getattr(leaf, "_aval", leaf)
        out.append(
            (aval.shape, aval.dtype, aval.weak_type, getattr(leaf, "donated", None))
        )
    return out


def test_argument_info_matches_jax() -> None:
    theirs, ours = lowered_pair()
    assert described(ours.args_info) == described(theirs.args_info)
    assert ours.in_tree == theirs.in_tree
    assert described(ours.in_avals) == described(theirs.in_avals)
    assert ours.donate_argnums == theirs.donate_argnums == (0,)
    compiled = ours.compile()
    assert described(compiled.in_avals) == described(theirs.in_avals)
    assert compiled.donate_argnums == (0,)
    traced = meshjit.jit(lambda x: x * 2).trace(jnp.arange(8, dtype=jnp.int32))
    assert traced.in_tree == jax.tree.structure(((0,), {}))
    assert described(traced.in_avals) == [((8,), jnp.int32, False, None)]


def test_compiler_ir_and_texts() -> None:
    theirs, ours = lowered_pair()
    assert type(ours.compiler_ir()) is type(theirs.compiler_ir())
    assert type(ours.compiler_ir("hlo")) is type(theirs.compiler_ir("hlo"))
    hlo = ours.as_text(dialect="hlo")
    assert hlo.startswith("HloModule")
    assert "multiply" in hlo
    assert ours.as_text("stablehlo") == ours.as_text()  # jax's dialect-first spelling
    assert "sdy.sharding" in ours.as_text("stablehlo")
    partitioned_hlo = ours.as_text("partitioned", dialect="hlo")
    assert "s32[1]" in partitioned_hlo  # the per-device program
    assert ours.cost_analysis()["flops"] == theirs.cost_analysis()["flops"]


def test_compiled_out_info_and_executable() -> None:
    theirs, ours = lowered_pair()
    mine, jaxs = ours.compile().out_info, theirs.compile().out_info
    assert (mine.shape, mine.dtype) == (jaxs.shape, jaxs.dtype)
    assert mine.sharding == jaxs.sharding == NamedSharding(MESH, P("x"))
    assert ours.compile().runtime_executable() is not None


def test_lower_on_shaped_array() -> None:
    aval = jax.core.ShapedArray((8,), jnp.int32)
    compiled = meshjit.jit(lambda x: x + 1).lower(aval).compile()
    np.testing.assert_array_equal(
        np.asarray(compiled(jnp.arange(8, dtype=jnp.int32))), np.arange(1, 9)
    )


def test_lower_on_a_64_bit_shape_dtype_struct_is_canonical_as_under_jax() -> None:
    """Without jax_enable_x64 an int64 ShapeDtypeStruct lowers as int32, and
    the compiled program takes int64 numpy arrays and int32 arrays alike
    (jax's layout_test.test_default_layout: meshjit compiled for int32 but
    expected int64, and refused both)."""
    assert not jax.config.jax_enable_x64  # type: ignore[attr-defined]
    abstract = jax.ShapeDtypeStruct((4,), np.int64)
    outs = []
    for jit in (jax.jit, meshjit.jit):
        compiled = jit(lambda x: x * 2).lower(abstract).compile()
        assert compiled.in_avals[0][0].dtype == np.int32
        outs.append([compiled(np.arange(4)), compiled(jnp.arange(4))])
    for ours, theirs in zip(outs[1], outs[0], strict=True):
        assert ours.dtype == theirs.dtype == np.int32
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


@pytest.mark.parametrize("axis_type", ["none", "Auto", "Explicit"])
@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_a_64_bit_array_made_under_enable_x64_is_taken_as_it_is(
    axis_type: str, dtype: Any
) -> None:
    """An array made under `jax.enable_x64()` keeps its 64-bit dtype after;
    jax traces it as it is (the program converts it), so the executable
    takes its buffer (meshjit traced it narrowed and handed the 64-bit buffer
    to a 32-bit parameter: RuntimeProgramInputMismatch; jax's
    x64_context_test.test_convert_element_type)."""
    assert not jax.config.jax_enable_x64  # type: ignore[attr-defined]
    with jax.enable_x64():
        if axis_type == "none":
            x = jnp.arange(16, dtype=dtype)
        else:
            kind = getattr(jax.sharding.AxisType, axis_type)
            mesh = jax.make_mesh((8,), ("x",), axis_types=(kind,))
            x = jax.device_put(np.arange(16, dtype=dtype), NamedSharding(mesh, P("x")))
    assert x.dtype == dtype

    def f(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        return x.astype(jnp.int32) * 2, x.astype(jnp.float32).sum()

    want = jax.jit(f)(x)
    for _ in range(3):  # the first call, then the fast path
        got = meshjit.jit(f)(x)
        for ours, theirs in zip(got, want, strict=True):
            assert ours.dtype == theirs.dtype
            np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    compiled = meshjit.jit(f).lower(x).compile()
    assert compiled.in_avals[0][0].dtype == dtype
    np.testing.assert_array_equal(np.asarray(compiled(x)[0]), np.asarray(want[0]))


def test_lowered_on_an_abstract_mesh_compiles_for_a_device_assignment() -> None:
    """Shardings on an AbstractMesh (no devices): lowering needs
    `lowering_platforms` (as in jax), compiling needs `device_assignment`,
    and the program then runs on those devices."""
    mesh = jax.make_mesh(
        (2, 1),
        ("x", "y"),
        axis_types=(jax.sharding.AxisType.Auto,) * 2,
        devices=jax.devices()[4:6],
    )
    abstract = jax.ShapeDtypeStruct(
        (8, 2), jnp.float32, sharding=NamedSharding(mesh.abstract_mesh, P("x"))
    )
    f = meshjit.jit(lambda x: x * 2)
    with pytest.raises(ValueError, match="Passing lowering_platforms"):
        f.lower(abstract)
    lowered = f.trace(abstract).lower(lowering_platforms=("cpu",))
    assert "mhlo.num_partitions = 2" in lowered.as_text()
    with pytest.raises(RuntimeError, match="device_assignment cannot be `None`"):
        lowered.compile()
    with pytest.raises(ValueError, match=r"abstract mesh 2 .* device assignment: 1"):
        lowered.compile(device_assignment=(jax.devices()[0],))
    compiled = lowered.compile(device_assignment=tuple(mesh.devices.flat))
    arr = jax.device_put(np.arange(16.0).reshape(8, 2), NamedSharding(mesh, P("x")))
    out = compiled(arr)
    np.testing.assert_array_equal(np.asarray(out), np.arange(16.0).reshape(8, 2) * 2)
    assert out.sharding == NamedSharding(mesh, P("x"))
    assert {d.id for d in out.sharding.device_set} == {4, 5}


def test_compile_device_assignment_must_be_the_meshs() -> None:
    arr = jax.ShapeDtypeStruct(
        (8, 2), jnp.float32, sharding=NamedSharding(MESH, P("x"))
    )
    lowered = meshjit.jit(lambda x: x).lower(arr)
    with pytest.raises(ValueError, match=r"device_assignment passed to `\.compile`"):
        lowered.compile(device_assignment=(jax.devices()[0],))
    assert lowered.compile(device_assignment=jax.devices()) is not None


def test_hlo_text_carries_metadata_only_with_debug_info() -> None:
    """As jax's `Lowered.as_text("hlo", debug_info=...)`: each op's metadata
    (its source line) only when asked for (jax's aot_test)."""
    has_metadata = re.compile(r"sine.*metadata=.*(stack_frame_id|source_file)=")
    for jit in (jax.jit, meshjit.jit):
        lowered = jit(jnp.sin).lower(42.0)
        assert has_metadata.search(lowered.as_text("hlo", debug_info=True))
        assert not has_metadata.search(lowered.as_text("hlo"))
