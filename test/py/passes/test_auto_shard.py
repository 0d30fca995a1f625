"""The auto-shard pass: strategies from rules, the integer program against a
brute-force search, Alpa's known optima with their exact collectives, the
memory budget, determinism."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import pytest

from meshjit.compiler.diagnostics import DiagnosticError, Diagnostics
from meshjit.compiler.graph import read_graph
from meshjit.compiler.ir import make_context, parse_module, print_module
from meshjit.compiler.pipeline import Instrumentation, parse_pipeline, run_pipeline
from meshjit.dialects.rules import FactorKind, ShardingRule
from meshjit.dialects.sharding import AxisRef, MeshModel
from meshjit.passes.autoshard.build import build
from meshjit.passes.autoshard.ilp import min_peak, solve
from meshjit.passes.autoshard.problem import (
    Edge,
    FanOut,
    MemoryPoint,
    Problem,
    Shared,
    Tie,
    brute_force,
)
from meshjit.passes.autoshard.result import AutoShardResult
from meshjit.passes.autoshard.strategies import (
    ORDER_TIEBREAK,
    TensorInfo,
    op_strategies,
    out_of_order,
    tensor_layouts,
)
from meshjit.passes.partition import PartitionReport
from meshjit.passes.partitioner.cost import PLATFORMS
from meshjit.passes.partitioner.memory import fmt_bytes

X, Y = AxisRef("x"), AxisRef("y")
MESH_8 = MeshModel.of(("x", 8))
MESH_2X4 = MeshModel.of(("x", 2), ("y", 4))


def test_tensor_layouts_respect_divisibility_and_axis_order() -> None:
    layouts = tensor_layouts((8, 8), MESH_2X4)
    assert layouts[0] == ((), ())
    # x and y each on dim 0, dim 1 or neither, and both on one dim in
    # either order: 3 * 3 + 2
    assert len(layouts) == len(set(layouts)) == 11
    assert ((X, Y), ()) in layouts
    assert ((Y, X), ()) in layouts
    # 2 rows take x (2) but not y (4)
    small = tensor_layouts((2, 8), MESH_2X4)
    assert all(Y not in dim0 for dim0, _ in small)
    assert ((X,), (Y,)) in small


def test_dot_strategies_reduce_by_all_reduce_or_reduce_scatter() -> None:
    rule = ShardingRule(
        (8, 32, 16),
        (((0,), (2,)), ((2,), (1,))),
        (((0,), (1,)),),
        (FactorKind.PASS_THROUGH, FactorKind.PASS_THROUGH, FactorKind.REDUCTION),
    )
    f32 = [TensorInfo((8, 16), 4), TensorInfo((16, 32), 4)]
    out = [TensorInfo((8, 32), 4)]
    found = op_strategies(
        rule, (0, 1, 2), f32, out, (2.0 * 8 * 32 * 16, 2048.0), MESH_8, PLATFORMS["cpu"]
    )
    texts = [s.text() for s in found]
    assert texts == [
        "[{}, {}] x [{}, {}] -> [{}, {}]",
        '[{"x"}, {}] x [{}, {}] -> [{"x"}, {}]',
        '[{}, {}] x [{}, {"x"}] -> [{}, {"x"}]',
        '[{}, {"x"}] x [{"x"}, {}] -> [{}, {}] (all-reduce over x)',
        '[{}, {"x"}] x [{"x"}, {}] -> [{"x"}, {}] (reduce-scatter over x onto dim 0)',
        '[{}, {"x"}] x [{"x"}, {}] -> [{}, {"x"}] (reduce-scatter over x onto dim 1)',
    ]
    assert found[0].collective == 0.0 < found[3].collective
    assert found[1].compute == pytest.approx(found[0].compute / 8)


def _random_problem(rng: random.Random) -> Problem:
    sizes = [rng.randint(1, 4) for _ in range(rng.randint(2, 6))]
    costs = tuple(tuple(rng.uniform(0, 1e-3) for _ in range(n)) for n in sizes)
    edges = []
    for _ in range(rng.randint(0, 6)):
        a, b = rng.sample(range(len(sizes)), 2)
        na, nb = rng.randint(1, sizes[a]), rng.randint(1, sizes[b])
        edges.append(
            Edge(
                a,
                b,
                tuple(rng.randrange(na) for _ in range(sizes[a])),
                tuple(rng.randrange(nb) for _ in range(sizes[b])),
                tuple(
                    tuple(rng.uniform(0, 1e-3) for _ in range(nb)) for _ in range(na)
                ),
            )
        )
    memory = []
    for _ in range(rng.randint(0, 3)):
        groups = rng.sample(range(len(sizes)), rng.randint(1, len(sizes)))
        terms = tuple(
            (g, tuple(float(rng.randint(0, 100)) for _ in range(sizes[g])))
            for g in sorted(groups)
        )
        memory.append(MemoryPoint(terms, float(rng.randint(0, 20)), f"p{len(memory)}"))
    shared = []
    for _ in range(rng.randint(0, 2)):
        members = {(g, rng.randrange(sizes[g])) for g in range(len(sizes))}
        shared.append(Shared(rng.uniform(0, 1e-3), tuple(sorted(members))))
    fans = []
    for _ in range(rng.randint(0, 2)):
        src = rng.randrange(len(sizes))
        others = [g for g in range(len(sizes)) if g != src]
        na, nb = rng.randint(1, sizes[src]), rng.randint(1, 3)
        readers = tuple(
            (g, tuple(rng.randrange(nb) for _ in range(sizes[g])))
            for g in rng.sample(others, min(len(others), rng.randint(2, 3)))
        )
        fans.append(
            FanOut(
                src,
                tuple(rng.randrange(na) for _ in range(sizes[src])),
                readers,
                tuple(
                    tuple(rng.uniform(0, 1e-3) for _ in range(nb)) for _ in range(na)
                ),
            )
        )
    ties = []
    if len(sizes) >= 2 and rng.random() < 0.5:
        a, b = rng.sample(range(len(sizes)), 2)
        k = rng.randint(1, 3)
        ties.append(
            Tie(
                a,
                tuple(rng.randrange(k) for _ in range(sizes[a])),
                b,
                tuple(rng.randrange(k) for _ in range(sizes[b])),
            )
        )
    return Problem(
        costs, tuple(edges), tuple(memory), tuple(shared), tuple(fans), tuple(ties)
    )


@pytest.mark.parametrize("seed", range(40))
def test_ilp_objective_equals_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    problem = _random_problem(rng)
    budget = None if seed % 2 else float(rng.randint(40, 250))
    best, _ = brute_force(problem, budget)
    found = solve(problem, budget=budget)
    if best == float("inf"):
        assert found.status == "infeasible"
        return
    assert found.status == "optimal"
    assert found.objective == pytest.approx(best, rel=1e-6, abs=1e-12)
    if budget is not None:
        assert problem.peak(found.choice)[0] <= budget
        least = min(
            problem.peak(c)[0]
            for c in itertools.product(*(range(len(c)) for c in problem.costs))
        )
        assert min_peak(problem) == pytest.approx(least)


# -- programs ----------------------------------------------------------------------


def lowered(fn: Callable[..., Any], *shapes: tuple[int, ...], mesh: str) -> str:
    """`fn` lowered by jax for f32 arguments of `shapes`, with `sdy.mesh @mesh`."""
    args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
    text = jax.jit(fn).lower(*args).as_text(debug_info=True)
    devices = 1
    for size in re.findall(r"=(\d+)", mesh):
        devices *= int(size)
    axes = ", ".join(f'"{n}"={s}' for n, s in re.findall(r"(\w+)=(\d+)", mesh))
    text = text.replace("mhlo.num_partitions = 1", f"mhlo.num_partitions = {devices}")
    return re.sub(
        r"(module @\S+ [^\n]*\{\n)",
        rf"\1  sdy.mesh @mesh = <[{axes}]>\n",
        text,
        count=1,
    )


def run(text: str, pipeline: str) -> tuple[Any, Diagnostics]:
    module = parse_module(text, make_context(), "t.mlir")
    diags = run_pipeline(
        parse_pipeline(pipeline, module.context),
        module,
        "t.mlir",
        Instrumentation(reports=frozenset({"explain", "collectives"})),
    )
    return module, diags


def mlp_forward(x: jax.Array, w1: jax.Array, w2: jax.Array) -> jax.Array:
    return jnp.tanh(x @ w1) @ w2


def mlp_step(w1: jax.Array, w2: jax.Array, x: jax.Array, y: jax.Array) -> Any:
    def loss(w1: jax.Array, w2: jax.Array) -> jax.Array:
        return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)

    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 0.1 * g1, w2 - 0.1 * g2


def test_ilp_equals_brute_force_on_a_program() -> None:
    text = lowered(mlp_forward, (64, 32), (32, 64), (64, 32), mesh="x=8")
    module = parse_module(text, make_context(), "t.mlir")
    built = build(read_graph(module, "t.mlir"), PLATFORMS["cpu"])
    combos = 1
    for c in built.problem.costs:
        combos *= len(c)
    assert 100 < combos < 200_000  # a real search, small enough to enumerate
    best, _ = brute_force(built.problem)
    assert solve(built.problem).objective == pytest.approx(best, rel=1e-9)


def arg_shardings(module: Any) -> list[str]:
    text = print_module(module)
    header = text[text.index("func.func public @main") :].split(") -> (", 1)[0]
    return re.findall(r"sdy.sharding = (#sdy.sharding<[^>]*>)", header)


def collectives(diags: Diagnostics) -> list[tuple[str, int]]:
    report = diags.payloads["partition"]
    assert isinstance(report, PartitionReport)
    return [(c.kind, c.bytes_per_device) for c in report.collectives]


def test_small_batch_large_weights_picks_model_parallelism() -> None:
    """Alpa's case: weights dominate, so they stay split (Megatron: w1 by
    columns, w2 by rows) and one all-reduce of the [16, 1024] activations
    replaces gradient all-reduces of the 16 MiB weights."""
    text = lowered(
        mlp_step, (1024, 4096), (4096, 1024), (16, 1024), (16, 1024), mesh="x=8"
    )
    module, diags = run(text, "auto-shard,spmd-pipeline")
    assert arg_shardings(module)[:2] == [
        '#sdy.sharding<@mesh, [{}, {"x"}]>',
        '#sdy.sharding<@mesh, [{"x"}, {}]>',
    ]
    assert collectives(diags) == [("all-reduce", 2 * 16 * 1024 * 4 * 7 // 8)]


def test_large_batch_small_weights_picks_data_parallelism() -> None:
    """The batch dominates: inputs split by rows and the weights whole for
    the forward and backward passes; each weight gradient is
    reduce-scattered ([32, 64] f32: 7 KiB sent per device, half an
    all-reduce's) and the update runs on blocks (ZeRO-2), so the updated
    weights come out split."""
    text = lowered(mlp_step, (32, 64), (64, 32), (8192, 32), (8192, 32), mesh="x=8")
    module, diags = run(text, "auto-shard,spmd-pipeline")
    assert arg_shardings(module) == [
        "#sdy.sharding<@mesh, [{}, {}]>",
        "#sdy.sharding<@mesh, [{}, {}]>",
        '#sdy.sharding<@mesh, [{"x"}, {}]>',
        '#sdy.sharding<@mesh, [{"x"}, {}]>',
    ]
    grad = 32 * 64 * 4 * 7 // 8
    assert collectives(diags) == [("reduce-scatter", grad), ("reduce-scatter", grad)]


DP_STEP = ((32, 64), (64, 32), (8192, 32), (8192, 32))  # DP wins on time


def test_equal_cost_layouts_keep_the_mesh_axis_order() -> None:
    """On a 2 x 4 mesh the batch split over ("x", "y") and over ("y", "x")
    cost the same (the same blocks on other devices, no collective); the
    search takes the order a user writes (and data parallelism's own
    layout), not whichever the solver meets first: without the tie-break
    both programs here chose ("y", "x") for the batch."""

    def two_layers(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
        return jnp.tanh(jnp.tanh(x @ w1) @ w2)

    def norm_dense(x: jax.Array, w: jax.Array) -> jax.Array:
        m = jnp.mean(x, -1, keepdims=True)
        v = jnp.var(x, -1, keepdims=True)
        return jax.nn.relu(((x - m) / jnp.sqrt(v + 1e-5)) @ w)

    text = lowered(two_layers, (64, 64), (64, 64), (4096, 64), mesh="x=2,y=4")
    module, _ = run(text, "auto-shard")
    assert arg_shardings(module)[2] == '#sdy.sharding<@mesh, [{"x", "y"}, {}]>'
    text = lowered(norm_dense, (4096, 128), (128, 128), mesh="x=2,y=4")
    module, _ = run(text, "auto-shard")
    assert arg_shardings(module)[0] == '#sdy.sharding<@mesh, [{"x", "y"}, {}]>'


def test_out_of_order_counts_dims_against_the_mesh() -> None:
    mesh = MeshModel.of(("x", 2), ("y", 4))
    in_order = ((X, Y), ())
    assert out_of_order([in_order, None], mesh) == 0.0
    assert out_of_order([((Y, X), (X,))], mesh) == ORDER_TIEBREAK
    assert out_of_order([((Y, X), ()), ((), (Y, X))], mesh) == 2 * ORDER_TIEBREAK
    # sub-axes of one axis: the major part first
    major, minor = AxisRef("y", 1, 2), AxisRef("y", 2, 2)
    assert out_of_order([((major, minor),)], mesh) == 0.0
    assert out_of_order([((minor, major),)], mesh) == ORDER_TIEBREAK
    # far below a collective's latency, as a tie-break must be
    assert all(c.latency > 1000 * ORDER_TIEBREAK for c in PLATFORMS.values())


def conv_bn(x: jax.Array, w: jax.Array) -> jax.Array:
    y = jax.lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    m = jnp.mean(y, axis=(0, 1, 2))
    v = jnp.mean((y - m) ** 2, axis=(0, 1, 2))
    return jax.nn.relu((y - m) * jax.lax.rsqrt(v + 1e-5))


def test_a_stem_convolution_with_batch_norm_splits_the_batch() -> None:
    """A 7x7x3x16 convolution and its batch norm on 16 images: split by
    output feature, each device's convolution has 2 output features and its
    statistics reduce rows of 2, both far below the CPU's tiles (measured:
    3.2x the step time of the batch split). The batch split pays two
    all-reduces of the 16 statistics (the variance needs the mean first)."""
    text = lowered(conv_bn, (16, 16, 16, 3), (7, 7, 3, 16), mesh="x=8")
    module, diags = run(text, "auto-shard,spmd-pipeline")
    assert arg_shardings(module) == [
        '#sdy.sharding<@mesh, [{"x"}, {}, {}, {}]>',
        "#sdy.sharding<@mesh, [{}, {}, {}, {}]>",
    ]
    stats = 16 * 4 * 2 * 7 // 8
    assert collectives(diags) == [("all-reduce", stats), ("all-reduce", stats)]


def test_reductions_in_one_round_share_a_launch() -> None:
    """Reductions neither of which can reach the other are reduced in one
    collective (the partitioner's combining): the search charges their
    launch once. Here the two sums of x and x * x are one round, the sum
    they feed is the last one (nothing it reaches reduces again)."""
    from meshjit.passes.autoshard.build import _reduction_rounds, find_main

    def f(x: jax.Array) -> jax.Array:
        a = jnp.sum(x, axis=0)
        b = jnp.sum(x * x, axis=0)
        return jnp.sum(x * (a * b), axis=1)

    text = lowered(f, (64, 32), mesh="x=8")
    graph = read_graph(parse_module(text, make_context(), "t.mlir"), "t.mlir")
    order = [graph.node(n) for n in find_main(graph).regions[0][0].nodes]
    rounds = [
        r
        for n, r in sorted(_reduction_rounds(graph, order).items())
        if graph.node(n).op == "stablehlo.reduce"
    ]
    assert rounds == [0, 0, -1]
    built = build(graph, PLATFORMS["cpu"])
    # Per kind (all-reduce, reduce-scatter), one shared launch for round 0
    # holding both sums' strategies; the last round holds one op, which
    # pays its own launch (no shared variable).
    groups = sorted(
        (s.what, len({g for g, _ in s.members})) for s in built.problem.shared
    )
    assert groups == [
        ("independent all-reduces", 2),
        ("independent reduce-scatters", 2),
    ]


def test_memory_budget_splits_what_does_not_fit() -> None:
    text = lowered(mlp_step, *DP_STEP, mesh="x=8")
    _, diags = run(text, "auto-shard")
    free = diags.payloads["auto-shard"]
    assert isinstance(free, AutoShardResult)
    dp_peak = free.peak()[0]
    least = min_peak(free.built.problem)
    assert least < dp_peak  # splitting a weight saves a little
    budget = (dp_peak + least) // 2
    module, diags = run(text, f"auto-shard{{memory-budget={int(budget)}}}")
    tight = diags.payloads["auto-shard"]
    assert isinstance(tight, AutoShardResult)
    assert tight.peak()[0] <= budget
    assert arg_shardings(module)[:2] != ["#sdy.sharding<@mesh, [{}, {}]>"] * 2
    assert tight.solution.objective > free.solution.objective  # it costs time
    assert "(budget 1." in tight.summary()


def test_infeasible_budget_names_the_smallest_peak() -> None:
    text = lowered(mlp_step, *DP_STEP, mesh="x=8")
    _, diags = run(text, "auto-shard")
    result = diags.payloads["auto-shard"]
    assert isinstance(result, AutoShardResult)
    least = fmt_bytes(min_peak(result.built.problem))
    with pytest.raises(DiagnosticError) as err:
        run(text, "auto-shard{memory-budget=1MiB}")
    assert (
        "no layout fits the memory budget of 1.00 MiB per device; the smallest "
        f"peak of live values the solver found is {least} per device"
    ) in str(err.value)


def test_same_module_same_choice() -> None:
    text = lowered(
        mlp_step, (256, 512), (512, 256), (512, 256), (512, 256), mesh="x=2,y=4"
    )
    first, _ = run(text, "auto-shard")
    second, _ = run(text, "auto-shard{share-layers=false}")
    third, _ = run(text, "auto-shard")
    assert print_module(first) == print_module(third)
    assert print_module(first) == print_module(second)  # no layers to share here


def test_fixed_arguments_keep_their_sharding() -> None:
    text = lowered(mlp_step, *DP_STEP, mesh="x=8")
    # w1 fixed to column blocks; the rest is chosen around it
    text = text.replace(
        "%arg0: tensor<32x64xf32>",
        '%arg0: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}',
        1,
    )
    module, diags = run(text, "auto-shard{memory-budget=1GiB}")
    assert arg_shardings(module)[0] == '#sdy.sharding<@mesh, [{}, {"x"}]>'
    result = diags.payloads["auto-shard"]
    assert isinstance(result, AutoShardResult)
    assert result.built.auto_args == (False, True, True, True)
    explained = "".join(t for k, t in diags.reports if k == "explain")
    assert "argument 0 of @main" not in explained  # not a decision
    assert "argument 1 of @main: chosen by auto-sharding" in explained


def test_identical_layers_share_a_decision_when_asked() -> None:
    """Ops traced from one source line with the same shapes (a Python loop's
    layers) share one decision with `share-layers=true`: fewer groups, and
    an objective that can only be higher (consecutive copies are never
    tied, so alternating splits stay possible). The default `auto` shares
    only problems too big to solve quickly; this one is solved exactly."""

    def layers(x: jax.Array, ws: jax.Array) -> jax.Array:
        for i in range(4):
            x = jnp.tanh(x @ ws[i])
        return x

    text = lowered(layers, (64, 128), (4, 128, 128), mesh="x=8")
    found = {}
    for mode in ("true", "false", "auto"):
        _, diags = run(text, f"auto-shard{{share-layers={mode}}}")
        result = diags.payloads["auto-shard"]
        assert isinstance(result, AutoShardResult)
        found[mode] = result
    shared, alone = found["true"], found["false"]
    assert shared.built.tied >= 3
    assert alone.built.tied == 0
    assert len(shared.built.problem.costs) < len(alone.built.problem.costs)
    assert shared.solution.objective >= alone.solution.objective - 1e-12
    assert found["auto"].solution.objective == pytest.approx(alone.solution.objective)
    # the matmuls alternate without sharing (column split, then row split)
    plans = [c.strategy for c in alone.choices() if c.what.startswith("dot_general")]
    assert len(set(plans)) > 1


def test_a_search_stopped_by_its_time_limit_says_so(monkeypatch: Any) -> None:
    """HiGHS stopped at the limit with a feasible point: the pass keeps it
    and warns; with none, it is an error asking for more time."""
    import scipy.optimize

    text = lowered(mlp_step, *DP_STEP, mesh="x=8")
    real = scipy.optimize.milp

    def stopped(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        found.status, found.mip_gap = 1, 0.25
        return found

    monkeypatch.setattr(scipy.optimize, "milp", stopped)
    # a budget makes the pass skip the LP relaxation and run the integer search
    _, diags = run(text, "auto-shard{memory-budget=1GiB time-limit=7}")
    (warning,) = [d for d in diags.items if "time limit" in d.message]
    assert warning.message == (
        "auto-shard: stopped at the time limit of 7 s; the layout is the best "
        "found (within 25.0% of the solver's bound)"
    )

    def nothing(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        found.status, found.x = 1, None
        return found

    monkeypatch.setattr(scipy.optimize, "milp", nothing)
    with pytest.raises(DiagnosticError, match="found no layout within the time limit"):
        run(text, "auto-shard{memory-budget=1GiB time-limit=7}")


def test_tied_arguments_come_out_as_they_went_in() -> None:
    """`tie=ARG:RESULT` (jit ties donated arguments so): the updated weights
    are laid out as the weights, so a training loop moves nothing between
    steps; here that costs the search its reduce-scattered update."""
    text = lowered(mlp_step, *DP_STEP, mesh="x=8")
    module, diags = run(text, "auto-shard{tie=0:0,1:1},spmd-pipeline")
    shardings = arg_shardings(module)
    header = print_module(module)
    results = re.findall(r"-> \((.*)\) \{", header)[0]
    assert re.findall(r"#sdy.sharding<[^>]*>", results) == shardings[:2]
    result = diags.payloads["auto-shard"]
    assert isinstance(result, AutoShardResult)
    assert len(result.built.problem.ties) == 2
    with pytest.raises(DiagnosticError, match="tie '0-1' is not ARG:RESULT"):
        run(text, "auto-shard{tie=0-1}")


def test_jax_donation_marks_tie_too() -> None:
    """Arguments JAX marks `tf.aliasing_output` (donated) are tied to their
    result without the option."""
    text = lowered(mlp_step, *DP_STEP, mesh="x=8")
    text = text.replace(
        "%arg1: tensor<64x32xf32>",
        "%arg1: tensor<64x32xf32> {tf.aliasing_output = 1 : i32}",
        1,
    )
    _, diags = run(text, "auto-shard")
    result = diags.payloads["auto-shard"]
    assert isinstance(result, AutoShardResult)
    assert len(result.built.problem.ties) == 1
    assert result.layout(result.built.args[1]) == result.result_layouts()[1]
