"""XLA compiles a partitioned module's replica form (`compiler/replicas.py`):
@main is the manual body, device i is replica i, and every collective keeps
its device groups. Each collective kind's answers are checked against numpy
on a 2x4 mesh, and modules whose meaning would change are left as SPMD."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from meshjit.compiler import spmd
from meshjit.compiler.ir import make_context, parse_module, print_module
from meshjit.compiler.replicas import replica_count, to_replicas
from meshjit.compiler.spmd import compile_module

pytestmark = pytest.mark.devices(8)

_SUM = """({
      ^bb0(%u: tensor<f32>, %v: tensor<f32>):
        %s = stablehlo.add %u, %v : tensor<f32>
        stablehlo.return %s : tensor<f32>
      })"""
_Y = "dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>"
_X = "dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>"
_RING = (
    "dense<[[0, 1], [1, 2], [2, 3], [3, 0], [4, 5], [5, 6], [6, 7], [7, 4]]>"
    " : tensor<8x2xi64>"
)


def _channel(n: int) -> str:
    return f"channel_handle = #stablehlo.channel_handle<handle = {n}, type = 1>"


# Every result is one row per device ([{"x", "y"}, {}]): the global value is
# the devices' local values in device order.
_ROWS = '<@mesh, [{"x", "y"}, {}]>'
_LOCAL = ["1x1", "1x16", "1x32", "1x4", "1x16", "1x16", "1x4"]
_GLOBAL = ["8" + t[1:] for t in _LOCAL]


def _types(shapes: list[str]) -> str:
    return ", ".join(f"tensor<{s}xf32>" for s in shapes)


_RESULTS = ",\n          ".join(
    f"tensor<{s}xf32> {{sdy.sharding = #sdy.sharding{_ROWS}}}" for s in _GLOBAL
)
_HEADER = "mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32"
_SPLIT = '<@mesh, [{"x"}, {"y"}]>'
TEXT = f"""
module @partitioned attributes {{{_HEADER}}} {{
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func public @main(
      %a: tensor<8x16xf32> {{sdy.sharding = #sdy.sharding{_SPLIT}}},
      %b: tensor<8x4xf32> {{sdy.sharding = #sdy.sharding{_ROWS},
                           tf.aliasing_output = 6 : i32}})
      -> ({_RESULTS}) {{
    %r:7 = sdy.manual_computation(%a, %b)
        in_shardings=[{_SPLIT}, {_ROWS}]
        out_shardings=[{", ".join([_ROWS] * 7)}]
        manual_axes={{"x", "y"}} (%l: tensor<4x4xf32>, %lb: tensor<1x4xf32>) {{
      %id = stablehlo.partition_id : tensor<ui32>
      %idf = stablehlo.convert %id : (tensor<ui32>) -> tensor<f32>
      %p = stablehlo.reshape %idf : (tensor<f32>) -> tensor<1x1xf32>
      %ar = "stablehlo.all_reduce"(%l) <{{{_channel(1)}, replica_groups = {_Y},
          use_global_device_ids}}> {_SUM} : (tensor<4x4xf32>) -> tensor<4x4xf32>
      %ar1 = stablehlo.reshape %ar : (tensor<4x4xf32>) -> tensor<1x16xf32>
      %ag = "stablehlo.all_gather"(%l) <{{all_gather_dim = 0 : i64, {_channel(2)},
          replica_groups = {_X}, use_global_device_ids}}>
          : (tensor<4x4xf32>) -> tensor<8x4xf32>
      %ag1 = stablehlo.reshape %ag : (tensor<8x4xf32>) -> tensor<1x32xf32>
      %rs = "stablehlo.reduce_scatter"(%l) <{{{_channel(3)}, replica_groups = {_Y},
          scatter_dimension = 1 : i64, use_global_device_ids}}> {_SUM}
          : (tensor<4x4xf32>) -> tensor<4x1xf32>
      %rs1 = stablehlo.reshape %rs : (tensor<4x1xf32>) -> tensor<1x4xf32>
      %aa = "stablehlo.all_to_all"(%l) <{{{_channel(4)}, concat_dimension = 0 : i64,
          replica_groups = {_Y}, split_count = 4 : i64, split_dimension = 1 : i64}}>
          : (tensor<4x4xf32>) -> tensor<16x1xf32>
      %aa1 = stablehlo.reshape %aa : (tensor<16x1xf32>) -> tensor<1x16xf32>
      %cp = "stablehlo.collective_permute"(%l) <{{{_channel(5)},
          source_target_pairs = {_RING}}}> : (tensor<4x4xf32>) -> tensor<4x4xf32>
      %cp1 = stablehlo.reshape %cp : (tensor<4x4xf32>) -> tensor<1x16xf32>
      %two = sdy.constant dense<2.0> : tensor<1x4xf32>
      %nb = stablehlo.add %lb, %two : tensor<1x4xf32>
      sdy.return %p, %ar1, %ag1, %rs1, %aa1, %cp1, %nb : {_types(_LOCAL)}
    }} : (tensor<8x16xf32>, tensor<8x4xf32>) -> ({_types(_GLOBAL)})
    return %r#0, %r#1, %r#2, %r#3, %r#4, %r#5, %r#6 : {_types(_GLOBAL)}
  }}
}}
"""


def _expected(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    """Each result's rows: device d = 4x + y holds block (x, y) of `a`."""

    def block(x: int, y: int) -> np.ndarray:
        return a[4 * x : 4 * x + 4, 4 * y : 4 * y + 4]

    rows: list[list[np.ndarray]] = [[] for _ in range(7)]
    for d in range(8):
        x, y = divmod(d, 4)
        row_sum = sum(block(x, j) for j in range(4))
        rows[0].append(np.array([d], np.float32))
        rows[1].append(row_sum.ravel())
        rows[2].append(np.concatenate([block(i, y) for i in range(2)]).ravel())
        rows[3].append(row_sum[:, y])
        rows[4].append(np.concatenate([block(x, j)[:, y] for j in range(4)]))
        rows[5].append(block(x, (y - 1) % 4).ravel())
        rows[6].append(b[d] + 2)
    return [np.stack(r) for r in rows]


def _check_collectives(text: str, seed: int) -> jax.Array:
    """Compiles `text` (TEXT's collectives) and checks its results against
    `_expected`; returns the donated argument."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((8, 4)).astype(np.float32)
    devices = jax.devices()[:8]
    compiled = compile_module(text, devices, "")
    assert "replica_count=8" in compiled.executable.hlo_text()
    mesh = Mesh(np.array(devices).reshape(2, 4), ("x", "y"))
    placed_b = jax.device_put(b, NamedSharding(mesh, P(("x", "y"))))
    got = compiled.executable(
        jax.device_put(a, NamedSharding(mesh, P("x", "y"))), placed_b
    )
    for i, (out, want) in enumerate(zip(got, _expected(a, b), strict=True)):
        np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6, err_msg=f"{i}")
    return placed_b


def test_every_collective_keeps_its_groups_in_the_replica_form() -> None:
    placed_b = _check_collectives(TEXT, seed=0)
    assert placed_b.is_deleted()  # the donation survived the rewrite


def test_the_replica_form_is_the_manual_body() -> None:
    module = parse_module(TEXT, make_context())
    before = print_module(module)
    assert replica_count(module) == 8  # the check alone rewrites nothing
    assert print_module(module) == before
    assert to_replicas(module) == 8
    text = print_module(module)
    assert "mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32" in text
    assert "sdy" not in text
    signature = "@main(%arg0: tensor<4x4xf32>, %arg1: tensor<1x4xf32> {tf.aliasing"
    assert signature + "_output = 6 : i32})" in text
    assert "stablehlo.replica_id" in text
    assert "partition_id" not in text
    # permutes and all-to-alls lose their channel (cross-replica); reductions
    # and gathers keep it with use_global_device_ids (flattened ids)
    assert text.count("#stablehlo.channel_handle") == 3
    for op in ("all_to_all", "collective_permute"):
        line = next(x for x in text.splitlines() if op in x)
        assert "channel_handle" not in line


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("%id = stablehlo.partition_id", "%id = stablehlo.replica_id"),
        (f"{_channel(5)},\n          source_target_pairs", "source_target_pairs"),
        (
            f"{_channel(1)}, replica_groups = {_Y},\n          use_global_device_ids",
            f"replica_groups = {_Y}",
        ),
        (
            "%nb = stablehlo.add %lb, %two :",
            '%nb = stablehlo.add %lb, %two {mhlo.sharding = "{replicated}"} :',
        ),
    ],
    ids=["replica_id", "permute_without_channel", "reduce_without_channel", "sharding"],
)
def test_a_module_whose_meaning_would_change_stays_spmd(old: str, new: str) -> None:
    text = TEXT.replace(old, new)
    assert text != TEXT
    module = parse_module(text, make_context())
    before = print_module(module)
    assert replica_count(module) is None
    assert to_replicas(module) is None
    assert print_module(module) == before


# jax 0.11 names some shard_map collectives' groups by mesh axes; the replica
# form drops the mesh, so it writes the groups out.
def _mesh_axes(*axes: str) -> str:
    refs = []
    for axis in axes:
        name, _, sub = axis.partition(":")
        info = f", sub_axis_info = {sub}" if sub else ""
        refs.append(f'#stablehlo.axis_ref<name = "{name}"{info}>')
    return (
        f"#stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [{', '.join(refs)}]>"
    )


MESH_AXES_TEXT = TEXT.replace(
    f"replica_groups = {_Y}", f"replica_groups = {_mesh_axes('y')}"
).replace(f"replica_groups = {_X}", f"replica_groups = {_mesh_axes('x')}")


def test_mesh_axes_groups_become_the_groups_they_name() -> None:
    assert MESH_AXES_TEXT.count("replica_group_mesh_axes") == 4
    _check_collectives(MESH_AXES_TEXT, seed=1)
    module = parse_module(MESH_AXES_TEXT, make_context())
    assert to_replicas(module) == 8
    text = print_module(module)
    assert "mesh_axes" not in text
    assert text.count(_Y.split(" :")[0]) == 3


def _gather(groups: str, size: int) -> str:
    """Each device's row gathered over `groups` (`size` devices each)."""
    return f"""
module @gather attributes {{{_HEADER}}} {{
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func public @main(%a: tensor<8x2xf32> {{sdy.sharding = #sdy.sharding{_ROWS}}})
      -> (tensor<8x{2 * size}xf32> {{sdy.sharding = #sdy.sharding{_ROWS}}}) {{
    %r = sdy.manual_computation(%a) in_shardings=[{_ROWS}] out_shardings=[{_ROWS}]
        manual_axes={{"x", "y"}} (%l: tensor<1x2xf32>) {{
      %g = "stablehlo.all_gather"(%l) <{{all_gather_dim = 0 : i64, {_channel(1)},
          replica_groups = {groups}, use_global_device_ids}}>
          : (tensor<1x2xf32>) -> tensor<{size}x2xf32>
      %f = stablehlo.reshape %g : (tensor<{size}x2xf32>) -> tensor<1x{2 * size}xf32>
      sdy.return %f : tensor<1x{2 * size}xf32>
    }} : (tensor<8x2xf32>) -> tensor<8x{2 * size}xf32>
    return %r : tensor<8x{2 * size}xf32>
  }}
}}
"""


@pytest.mark.parametrize(
    ("axes", "size"),
    [
        (("x",), 2),
        (("y", "x"), 8),
        (("x", "y"), 8),
        (("y:(1)2",), 2),
        (("y:(2)2", "x"), 4),
        ((), 1),
    ],
    ids=["x", "y_x", "x_y", "y_major_half", "y_minor_half_then_x", "none"],
)
def test_mesh_axes_groups_are_read_as_xla_reads_them(
    axes: tuple[str, ...], size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replica form's groups against XLA's own reading of the mesh axes
    (the same module compiled as SPMD, where the mesh stays)."""
    text = _gather(_mesh_axes(*axes), size)
    devices = jax.devices()[:8]
    mesh = Mesh(np.array(devices).reshape(2, 4), ("x", "y"))
    a = np.arange(16, dtype=np.float32).reshape(8, 2)
    placed = jax.device_put(a, NamedSharding(mesh, P(("x", "y"))))
    replica = compile_module(text, devices, "")
    assert "replica_count=8" in replica.executable.hlo_text()
    monkeypatch.setattr(spmd, "to_replicas", lambda module: None)
    reference = compile_module(text, devices, "")  # SPMD: XLA reads the mesh axes
    assert "replica_count=8" not in reference.executable.hlo_text()
    (want,) = reference.executable(placed)
    (got,) = replica.executable(placed)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize(
    ("mesh", "groups"),
    [
        ('<["x"=2, "y"=4], device_ids=[1, 0, 2, 3, 4, 5, 6, 7]>', _mesh_axes("y")),
        ('<["x"=2, "y"=4]>', _mesh_axes("z")),
        ('<["x"=2, "y"=4]>', _mesh_axes("y", "y:(1)2")),
    ],
    ids=["device_ids", "unknown_axis", "overlapping"],
)
def test_mesh_axes_groups_that_cannot_be_resolved_stay_spmd(
    mesh: str, groups: str
) -> None:
    text = _gather(groups, 4).replace('<["x"=2, "y"=4]>', mesh, 1)
    module = parse_module(text, make_context())
    before = print_module(module)
    assert replica_count(module) is None
    assert to_replicas(module) is None
    assert print_module(module) == before


def test_shard_map_psums_named_by_mesh_axes_compile_and_agree() -> None:
    """What jax 0.11 lowers for two psums over "x" in a shard_map (made from
    jax 0.10's lowering where jax writes dense groups): the partitioner's
    combiner leaves such groups alone, and the replica form writes them out."""
    import re

    import jax.numpy as jnp

    import meshjit

    devices = jax.devices()[:8]
    mesh = Mesh(np.array(devices).reshape(2, 4), ("x", "y"))

    def body(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jax.lax.psum(jnp.tanh(a), "x"), jax.lax.psum(jnp.sin(b), "x")

    def f(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
        specs = (P("x"), P("x"))
        return jax.shard_map(body, mesh=mesh, in_specs=specs, out_specs=(P(), P()))(
            a, b
        )

    split = NamedSharding(mesh, P("x"))
    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((16, 4)).astype(np.float32)
    lowered = meshjit.jit(f, in_shardings=(split, split)).lower(a, b)
    dense = r"dense<\[\[0, 4\], \[1, 5\], \[2, 6\], \[3, 7\]\]> : tensor<4x2xi64>"
    # jax 0.11 writes the mesh axes itself; jax 0.10's groups are rewritten
    text = re.sub(dense, _mesh_axes("x"), lowered.as_text("sharded"))
    assert text.count("#stablehlo.replica_group_mesh_axes") == 2
    pipeline = f"{lowered.propagation},{lowered.partition_pipeline}"
    compiled = compile_module(text, devices, pipeline)
    assert "replica_count=8" in compiled.executable.hlo_text()
    got = compiled.executable(jax.device_put(a, split), jax.device_put(b, split))
    want = f(a, b)
    for out, ref in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(out), np.asarray(ref), rtol=1e-6)
