"""A function called at two sites that want different shardings.

Propagation reads each call site as if inlined; with `callees=copies` (the
propagation pipeline and meshjit.jit) each site gets its own copy of the
callee, copies with equal signatures merged, as Shardy's pipeline does. The
partitioner inlines calls at emission, so every copy is laid out as its
call site wants and the answer is exact.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from meshjit.compiler.spmd import compile_module


def _mesh() -> Mesh:
    return Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))


@pytest.mark.devices(8)
def test_callee_used_with_two_shardings_is_exact() -> None:
    mesh = _mesh()

    @jax.jit
    def inner(v: jax.Array) -> jax.Array:
        return jnp.tanh(v) * 2.0 + v

    def outer(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
        ra = inner(a)
        rb = inner(b)
        return ra, rb @ rb.T

    a_sh = NamedSharding(mesh, P("x", None))
    b_sh = NamedSharding(mesh, P(None, "y"))
    lowered = jax.jit(outer, in_shardings=(a_sh, b_sh)).lower(
        jax.ShapeDtypeStruct((16, 32), jnp.float32),
        jax.ShapeDtypeStruct((16, 32), jnp.float32),
    )
    text = lowered.as_text()
    assert text.count("call @inner") == 2  # one callee, two call sites
    from meshjit.compiler.ir import make_context, parse_module, print_module
    from meshjit.compiler.pipeline import parse_pipeline, run_pipeline

    ctx = make_context()
    propagated = parse_module(text, ctx)
    run_pipeline(parse_pipeline("propagation-pipeline", ctx), propagated, "-")
    printed = print_module(propagated)
    # two copies, each with its call site's layout
    assert "func.func private @inner(" in printed
    assert "func.func private @inner_0(" in printed
    assert printed.count("call @inner(") == 1
    assert printed.count("call @inner_0(") == 1
    compiled = compile_module(text, jax.devices(), "spmd-pipeline")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 32), dtype=np.float32)
    b = rng.standard_normal((16, 32), dtype=np.float32)
    got = compiled.executable(jax.device_put(a, a_sh), jax.device_put(b, b_sh))
    want = jax.jit(outer)(a, b)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


@pytest.mark.devices(8)
@pytest.mark.parametrize("keep", ["", ', unreduced={"c"}'])
def test_unreduced_values_get_all_reduces_that_partition_exactly(keep: str) -> None:
    """propagation-pipeline writes an sdy.all_reduce where an unreduced value
    meets a use that is not unreduced (Shardy's export form); spmd-pipeline
    partitions it: the partial sum is summed over the all_reduce's axes."""
    text = """
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
func.func @main(
    %arg0: tensor<8x8xf32>
      {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b", "c"}]>},
    %arg1: tensor<8x16xf32>)
    -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"b", "c"}]>}) {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0]
    {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {?}],
                                              unreduced={"b", "c"}>]>} :
    (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %1 = stablehlo.add %0, %0
    {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {?}]KEEP>]>}
    : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
""".replace("KEEP", keep)
    from meshjit.compiler.ir import make_context, parse_module, print_module
    from meshjit.compiler.pipeline import parse_pipeline, run_pipeline

    ctx = make_context()
    propagated = parse_module(text, ctx)
    run_pipeline(parse_pipeline("propagation-pipeline", ctx), propagated, "-")
    printed = print_module(propagated)
    if keep:  # {"b"} before the add (per use), {"c"} before the return
        assert printed.count('sdy.all_reduce {"b"}') == 2
        assert printed.count('sdy.all_reduce {"c"}') == 1
    else:
        assert printed.count('sdy.all_reduce {"b", "c"}') == 2
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 2, 2), ("a", "b", "c"))
    compiled = compile_module(text, jax.devices(), "spmd-pipeline")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 8), dtype=np.float32)
    w = rng.standard_normal((8, 16), dtype=np.float32)
    (got,) = compiled.executable(
        jax.device_put(x, NamedSharding(mesh, P("a", ("b", "c")))),
        # propagation gives %arg1 the contracting dim's axes
        jax.device_put(w, NamedSharding(mesh, P(("b", "c"), None))),
    )
    np.testing.assert_allclose(np.asarray(got), 2 * (x @ w), rtol=1e-5, atol=1e-5)


_T = "tensor<8x2xf32>"
_SPLIT = '{sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}'


def _module(first: str, second: str) -> str:
    """@main calls `first` then `second`; @g calls @f; @g precedes @f."""
    return f"""
sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: {_T} {_SPLIT}) -> {_T} {{
  %0 = stablehlo.add %arg0, %arg0 : {_T}
  %1 = call @{first}(%0) : ({_T}) -> {_T}
  %2 = call @{second}(%1) : ({_T}) -> {_T}
  return %2 : {_T}
}}
func.func private @g(%arg0: {_T}) -> {_T} {{
  %0 = call @f(%arg0) : ({_T}) -> {_T}
  %1 = stablehlo.negate %0 : {_T}
  return %1 : {_T}
}}
func.func private @f(%arg0: {_T}) -> {_T} {{
  %0 = stablehlo.abs %arg0 : {_T}
  return %0 : {_T}
}}
"""


@pytest.mark.parametrize(
    ("first", "second", "functions"),
    [
        # @g's call of @f makes the first copy of @f (post-order), main's
        # the second, @f_0, which both calls use: renamed
        ("g", "f", ["g", "f_0"]),
        # main's call of @f makes the first copy, which both use; the
        # copies come in creation order (@f, @g): moved
        ("f", "g", ["f", "g"]),
    ],
    ids=["renamed", "moved"],
)
def test_copies_that_are_the_functions_are_written_in_place(
    first: str, second: str, functions: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """When each function keeps one copy, the copies are written where the
    functions are, renamed and moved: the module is the one the copying
    path makes, and the graph the session keeps is what a new read gives
    (no second walk)."""
    from meshjit.compiler import graph
    from meshjit.compiler.ir import make_context, parse_module, print_module
    from meshjit.compiler.pipeline import parse_pipeline, run_pipeline
    from meshjit.passes.propagation import calls

    pipeline = "import-shardings,propagate{callees=copies},export-shardings"
    source = _module(first, second)

    def run() -> tuple[str, graph.Graph, graph.Graph]:
        module = parse_module(source, make_context())
        with graph.graph_session(module):
            run_pipeline(parse_pipeline(pipeline, module.context), module, "-")
            walks = graph.walks()
            kept = graph.read_graph(module, "-")
            assert graph.walks() == walks
        fresh = graph.read_graph(module, "-")  # outside the session: a new walk
        return print_module(module), kept, fresh

    text, kept, fresh = run()
    defined = [
        line.split("@")[1].split("(")[0]
        for line in text.splitlines()
        if line.lstrip().startswith("func.func private")
    ]
    assert defined == functions
    f_copy = next(name for name in functions if name.startswith("f"))
    assert text.count(f"call @{f_copy}(") == 2  # main's and @g's
    assert kept.nodes == fresh.nodes
    assert kept.values == fresh.values
    assert kept.body == fresh.body
    assert kept.symbols == fresh.symbols
    taken: list[bool] = []
    in_place = calls._in_place

    def copying(built: object, plan: object) -> bool:
        taken.append(in_place(built, plan))  # type: ignore[arg-type]
        return False

    monkeypatch.setattr(calls, "_in_place", copying)
    copied, _, _ = run()
    assert taken == [True]
    assert copied == text
