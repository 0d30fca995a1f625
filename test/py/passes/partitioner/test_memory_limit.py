"""The partitioner under a per-device memory limit (`partition{memory-limit=}`,
`MESHJIT_MEMORY_LIMIT`, AUTO's memory budget): the live-bytes estimate, the
gathers it refuses, the error when the layouts alone exceed it, and the
numerics of what it chooses instead (8 CPU devices against one)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import meshjit
from meshjit.compiler.diagnostics import Diagnostics, SourceLoc
from meshjit.compiler.graph import read_graph
from meshjit.compiler.ir import make_context, parse_module
from meshjit.frontend.stages import partition_pipeline
from meshjit.passes.partitioner import partition_module_text
from meshjit.passes.partitioner.memory import MemoryWatch, fmt_bytes, parse_bytes
from meshjit.passes.partitioner.report import PartitionFailure

pytestmark = pytest.mark.devices(8)

_SPLIT = '#sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>'
_X, _K, _Y = "tensor<2x16x8x4xf32>", "tensor<3x3x4x8xf32>", "tensor<2x16x8x8xf32>"
# x (1 KiB per device) and k (1.125 KiB) -> conv (2 KiB) -> add (2 KiB); the
# window is dilated 3 along the split height: halos of 3 rows on each side of
# 4-row blocks, so gathering only the pieces would send what gathering the dim
# sends, and the cost model weighs the gather against permutes.
CONV = (
    'sdy.mesh @mesh = <["x"=4]>\n'
    f"func.func public @main(%x: {_X} {{sdy.sharding = {_SPLIT}}}, %k: {_K})"
    f" -> ({_Y} {{sdy.sharding = {_SPLIT}}}) {{\n"
    "  %0 = stablehlo.convolution(%x, %k)"
    " dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],"
    " window = {stride = [1, 1], pad = [[3, 3], [1, 1]],"
    " lhs_dilate = [1, 1], rhs_dilate = [3, 1]}"
    " {batch_group_count = 1 : i64, feature_group_count = 1 : i64,"
    f" sdy.sharding = #sdy.sharding_per_value<[{_SPLIT[13:]}]>}}"
    f" : ({_X}, {_K}) -> {_Y}\n"
    "  %1 = stablehlo.add %0, %0"
    f" {{sdy.sharding = #sdy.sharding_per_value<[{_SPLIT[13:]}]>}} : {_Y}\n"
    f"  return %1 : {_Y}\n"
    "}\n"
)


def _partition(text: str, limit: float | None) -> Any:
    module = parse_module(text, make_context(), "conv.mlir")
    diags = Diagnostics(source_name="conv.mlir")
    graph = read_graph(module, "conv.mlir", keep_attr_text=True)
    built = partition_module_text(graph, diags, memory_limit=limit)
    assert built is not None
    return built[1]


def test_sizes_and_the_live_bytes_of_a_body() -> None:
    assert parse_bytes("") is None
    assert parse_bytes("512MiB") == 512 * 2**20
    assert parse_bytes("2GB") == 2e9
    assert parse_bytes("1e3") == 1000
    with pytest.raises(ValueError, match="memory-limit 'lots' is not a size"):
        parse_bytes("lots")
    with pytest.raises(ValueError, match="memory-limit must be positive"):
        parse_bytes("0")
    assert fmt_bytes(1536) == "1.50 KiB"
    graph = read_graph(parse_module(CONV, make_context(), "c"), "c")
    body = next(graph.funcs()).regions[0][0]
    conv_id, add_id = body.nodes[0], body.nodes[1]
    x, k = body.args
    c = graph.node(conv_id).results[0]
    a = graph.node(add_id).results[0]
    sizes = {x: 1024, k: 1152, c: 2048, a: 2048}
    watch = MemoryWatch.of_body(graph, body.args, body.nodes, [a], sizes, 6500.0)
    # at the convolution: both arguments and its result; at the add: the
    # convolution's result (last used there) and the add's; at the return
    # and the end: the arguments and the returned value
    assert watch.live == [4224, 6272, 4224, 4224]
    assert watch.peak()[0] == 6272
    assert watch.room(conv_id, 700) == (True, 4924, watch.where[0])
    assert not watch.room(add_id, 700)[0]
    watch.hold(conv_id, 100, key="copy")
    # a later op reads the copy: it lives on while that fits the limit
    assert watch.reuse("copy", add_id)
    assert watch.live == [4324, 6372, 4224, 4224]
    assert watch.reuse("copy", add_id)  # already alive there: nothing more
    assert watch.live == [4324, 6372, 4224, 4224]
    watch.hold(conv_id, 300, key="big")
    # 300 more across the add would make 6672 > 6500: let go after the
    # convolution, and counted again as a new copy at the add
    assert not watch.reuse("big", add_id)
    assert watch.live == [4624, 6672, 4224, 4224]
    assert watch.held["big"] == (1, 1, 300)


def test_a_gather_over_the_limit_becomes_a_halo_exchange() -> None:
    free = _partition(CONV, None)
    assert [c.kind for c in free.collectives] == ["all-gather"]
    # arguments 1 KiB + 1.125 KiB, two 2 KiB results: the gathered 4 KiB copy
    # of the input would take the convolution's point to 8.12 KiB
    limited = _partition(CONV, 7 * 1024)
    assert [c.kind for c in limited.collectives] == ["collective-permute"] * 2
    texts = [r.message for r in limited.remarks]
    assert any(
        "exchanging the window's pieces" in t
        and "gathered copy (4.00 KiB) would take the live values to 8.12 KiB" in t
        and "memory-limit 7.00 KiB" in t
        for t in texts
    ), texts
    assert any("estimated peak of live values per device: 6.12 KiB" in t for t in texts)
    roomy = _partition(CONV, 9 * 1024)
    assert [c.kind for c in roomy.collectives] == ["all-gather"]
    assert any(
        "peak of live values per device: 8.12 KiB" in r.message for r in roomy.remarks
    )


def test_layouts_that_alone_exceed_the_limit_are_an_error() -> None:
    with pytest.raises(PartitionFailure) as err:
        _partition(CONV, 4096)
    assert err.value.loc == SourceLoc("conv.mlir", 4, 8)  # the add
    assert "take an estimated 6.12 KiB per device as laid out" in str(err.value)
    assert "above memory-limit 4.00 KiB" in str(err.value)


# --- through meshjit.jit: numerics on 8 devices ------------------------------


def _stem(x: jax.Array, k: jax.Array) -> jax.Array:
    y = jax.lax.conv_general_dilated(
        x, k, (2, 2), ((3, 3), (3, 3)), dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    y = jax.nn.relu(y)
    return jax.lax.reduce_window(
        y, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"
    )


def _compile(
    monkeypatch: pytest.MonkeyPatch, limit: str, rows: int = 16
) -> meshjit.Compiled:
    if limit:
        monkeypatch.setenv("MESHJIT_MEMORY_LIMIT", limit)
    else:
        monkeypatch.delenv("MESHJIT_MEMORY_LIMIT", raising=False)
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("b", "h"))
    spec = NamedSharding(mesh, P("b", "h"))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, rows, 32, 3)).astype(np.float32)
    k = rng.standard_normal((7, 7, 3, 8)).astype(np.float32)
    ksh = NamedSharding(mesh, P())
    compiled = (
        meshjit.jit(_stem, in_shardings=(spec, ksh), out_shardings=spec)
        .lower(x, k)
        .compile()
    )
    got = compiled(jax.device_put(x, spec), jax.device_put(k, ksh))
    one = jax.devices()[0]
    want = jax.jit(_stem)(jax.device_put(x, one), jax.device_put(k, one))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-5)
    return compiled


@pytest.mark.parametrize(
    ("rows", "limit", "gathered", "refused"),
    [
        (
            16,
            "16KiB",
            "",
            "the gathered copy (12.00 KiB) would take the live values to 21.59 KiB "
            "per device, above memory-limit 16.00 KiB",
        ),
        (
            64,
            "36KiB",
            "the pieces from blocks -1, +1",
            "exchanging the window's pieces rather than one all-gather of them: the "
            "gathered copy (15.00 KiB) would take the live values to 39.59 KiB per "
            "device, above memory-limit 36.00 KiB",
        ),
    ],
    ids=["height16_gather_of_the_dim", "height64_gather_of_the_pieces"],
)
def test_a_stem_under_the_limit_exchanges_halos_and_matches(
    monkeypatch: pytest.MonkeyPatch, rows: int, limit: str, gathered: str, refused: str
) -> None:
    """A 7x7/2 stem convolution and a 3x3/2 max pool with the height split 4
    ways. Height 16 (halos of 3 and 2 rows around 4-row blocks, as long as a
    block together): unlimited, the stem's window comes by one all-gather of
    the height (12 KiB per device), the cost model's faster way. Height 64
    (16-row blocks): unlimited, its halos come in one all-gather of the
    pieces (5 rows from each of 4 devices held: 15 KiB). Under the limit
    that copy does not fit, the halos come by collective-permutes, and XLA's
    temporaries shrink with it."""
    free = _compile(monkeypatch, "", rows)
    assert [c.kind for c in free.partition_report.collectives] == [
        "all-gather",
        "collective-permute",
    ]
    assert gathered in free.partition_report.collectives[0].reason
    limited = _compile(monkeypatch, limit, rows)
    assert [c.kind for c in limited.partition_report.collectives] == [
        "collective-permute"
    ] * 3
    remarks = [r.message for r in limited.partition_report.remarks]
    assert any(refused in m for m in remarks), remarks
    temp = [
        c.runtime_executable().get_compiled_memory_stats().temp_size_in_bytes
        for c in (free, limited)
    ]
    assert temp[1] < temp[0], temp


def test_the_limit_reaches_the_pipeline_and_bad_values_are_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert (
        partition_pipeline([jax.devices()[0]], "512MiB")
        == "partition{cost=cpu memory-limit=512MiB}"
    )
    with pytest.raises(meshjit.ShardingError, match=r"above memory-limit 1\.00 KiB"):
        _compile(monkeypatch, "1KiB")
    with pytest.raises(meshjit.ShardingError, match="MESHJIT_MEMORY_LIMIT 'big'"):
        _compile(monkeypatch, "big")
