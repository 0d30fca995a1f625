"""read_graph turns a module into plain Python data; write_attrs writes back once."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshjit.compiler.graph import (
    AttrPlan,
    DenseElements,
    Opaque,
    SymbolRef,
    read_graph,
    write_attrs,
)
from meshjit.compiler.ir import make_context, parse_module, print_module

INPUTS = Path(__file__).parents[2] / "lit" / "roundtrip" / "Inputs"


@pytest.fixture(scope="module")
def features_text() -> str:
    return (INPUTS / "jax_features.mlir").read_text()


def test_nodes_hold_plain_python_values(features_text: str) -> None:
    module = parse_module(features_text, make_context(), "features.mlir")
    graph = read_graph(module, "features.mlir")
    by_op: dict[str, list[int]] = {}
    for node in graph.walk():
        by_op.setdefault(node.op, []).append(node.id)
    dot = graph.node(by_op["stablehlo.dot_general"][0])
    dims = dot.attrs["dot_dimension_numbers"]
    assert isinstance(dims, dict) or hasattr(dims, "keys")
    assert dims["lhs_contracting_dimensions"] == (1,)  # type: ignore[index]
    assert dims["rhs_contracting_dimensions"] == (0,)  # type: ignore[index]
    assert graph.value(dot.results[0]).shape == (8, 32)
    assert graph.value(dot.results[0]).dtype == "f32"
    call = graph.node(by_op["func.call"][0])
    assert call.attrs["callee"] == SymbolRef("argmax")
    constraint = graph.node(by_op["sdy.sharding_constraint"][0])
    assert constraint.attrs["sharding"] == Opaque('#sdy.sharding<@mesh, [{"x"}, {}]>')
    const = graph.node(by_op["stablehlo.constant"][0])
    assert const.attrs["value"] == DenseElements((), "i32", 0)


def test_locations_name_the_source_file(features_text: str) -> None:
    module = parse_module(features_text, make_context(), "-")
    graph = read_graph(module, "features.mlir")
    dot = next(n for n in graph.walk() if n.op == "stablehlo.dot_general")
    assert (dot.loc.file, dot.loc.line) == ("features.mlir", 5)


def test_regions_are_nested_blocks_of_node_ids(features_text: str) -> None:
    graph = read_graph(parse_module(features_text, make_context()))
    loop = next(n for n in graph.walk() if n.op == "stablehlo.while")
    cond, body = loop.regions
    assert [graph.value(a).shape for a in cond[0].args] == [(), (8, 32)]
    body_ops = [graph.node(n).op for n in body[0].nodes]
    assert body_ops[-1] == "stablehlo.return"
    assert all(graph.node(n).parent == loop.id for n in body[0].nodes)
    # A value used inside the case region but defined outside keeps its id.
    case = next(n for n in graph.walk() if n.op == "stablehlo.case")
    inner_add = next(
        graph.node(n)
        for n in case.regions[0][0].nodes
        if graph.node(n).op.endswith("add")
    )
    assert inner_add.operands[0] == loop.results[1]


def test_symbols_and_users(features_text: str) -> None:
    graph = read_graph(parse_module(features_text, make_context()))
    assert set(graph.symbols) == {"mesh", "main", "argmax", "sort"}
    main = graph.node(graph.symbols["main"])
    arg1 = main.regions[0][0].args[1]
    assert [graph.node(u).op for u in graph.users(arg1)] == ["sdy.sharding_constraint"]


def test_write_attrs_applies_one_plan(features_text: str) -> None:
    module = parse_module(features_text, make_context())
    graph = read_graph(module)
    main = graph.symbols["main"]
    tanh = next(n for n in graph.walk() if n.op == "stablehlo.tanh")
    plan = AttrPlan()
    plan.set_op(
        tanh.id, "sdy.sharding", '#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>'
    )
    plan.set_arg(main, 2, "sdy.sharding", None)
    plan.set_result(main, 0, "sdy.sharding", '#sdy.sharding<@mesh, [{"x", "y"}]>')
    write_attrs(module, plan)
    text = print_module(module)
    per_value = '#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>'
    assert f"stablehlo.tanh %1 {{sdy.sharding = {per_value}}}" in text
    assert "%arg2: tensor<i32>)" in text
    assert (
        'sdy.sharding = #sdy.sharding<@mesh, [{"x", "y"}]>}, tensor<8x32xf32>' in text
    )
    module.operation.verify()
    # Reading again sees exactly what was written.
    again = read_graph(module)
    assert again.node(tanh.id).attrs["sdy.sharding"] == Opaque(
        '#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>'
    )


def test_complex_constants_are_read_from_their_printed_form() -> None:
    # jaxlib aborts the interpreter when Python fetches such an attribute.
    text = """func.func @f() -> tensor<2xcomplex<f32>> {
  %c = stablehlo.constant dense<[(1.0,2.0),(3.0,4.0)]> : tensor<2xcomplex<f32>>
  return %c : tensor<2xcomplex<f32>>
}"""
    graph = read_graph(parse_module(text, make_context()), keep_attr_text=True)
    const = next(n for n in graph.walk() if n.op == "stablehlo.constant")
    assert const.attrs["value"] == DenseElements((2,), "complex<f32>", None)
    assert const.attr_text["value"] == (
        "dense<[(1.000000e+00,2.000000e+00), (3.000000e+00,4.000000e+00)]> "
        ": tensor<2xcomplex<f32>>"
    )


def _snapshot(graph: object) -> list[tuple[object, ...]]:
    from meshjit.compiler.graph import Graph

    assert isinstance(graph, Graph)
    return [
        (n.op, n.operands, n.results, dict(n.attrs), dict(n.attr_text), n.loc)
        for n in graph.nodes
    ]


@pytest.mark.parametrize("keep_attr_text", [False, True])
def test_a_session_graph_after_write_attrs_equals_a_fresh_read(
    features_text: str, keep_attr_text: bool
) -> None:
    """Passes of a pipeline share one read; what write_attrs changes reaches
    the shared graph exactly as a new walk of the module would read it."""
    from meshjit.compiler.graph import graph_session

    module = parse_module(features_text, make_context(), "features.mlir")
    with graph_session(module):
        graph = read_graph(module, "features.mlir", keep_attr_text=keep_attr_text)
        assert read_graph(module, "features.mlir") is graph
        dot = next(n for n in graph.walk() if n.op == "stablehlo.dot_general")
        main = graph.node(graph.symbols["main"])
        plan = AttrPlan()
        plan.set_op(
            dot.id,
            "sdy.sharding",
            '#sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>',
        )
        plan.set_arg(main.id, 0, "sdy.sharding", '#sdy.sharding<@mesh, [{}, {"y"}]>')
        plan.set_result(main.id, 0, "sdy.sharding", None)
        graph.memo["derived"] = 1
        write_attrs(module, plan)
        assert graph.memo == {}
        shared = read_graph(module, "features.mlir", keep_attr_text=keep_attr_text)
        assert shared is graph
    fresh = read_graph(module, "features.mlir", keep_attr_text=keep_attr_text)
    assert fresh is not graph
    assert _snapshot(shared) == _snapshot(fresh)


def test_write_attrs_in_a_session_writes_what_it_writes_outside(
    features_text: str,
) -> None:
    """Inside a session write_attrs finds ops through the handles of the last
    read (also after the module was rebuilt and read again)."""
    from meshjit.compiler.graph import graph_session
    from meshjit.compiler.ir import replace_module

    def plan_for(graph: object) -> AttrPlan:
        from meshjit.compiler.graph import Graph

        assert isinstance(graph, Graph)
        plan = AttrPlan()
        for node in graph.walk():
            if node.op == "stablehlo.dot_general":
                plan.set_op(
                    node.id,
                    "sdy.sharding",
                    '#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>',
                )
        main = graph.node(graph.symbols["main"])
        plan.set_arg(main.id, 1, "sdy.sharding", '#sdy.sharding<@mesh, [{"y"}, {}]>')
        return plan

    outside = parse_module(features_text, make_context(), "features.mlir")
    write_attrs(outside, plan_for(read_graph(outside, "features.mlir")))
    written = print_module(outside)
    assert '[{"x"}, {}]>]>' in written
    assert '#sdy.sharding<@mesh, [{"y"}, {}]>' in written
    inside = parse_module(features_text, make_context(), "features.mlir")
    with graph_session(inside):
        write_attrs(inside, plan_for(read_graph(inside, "features.mlir")))
        assert print_module(inside) == print_module(outside)
        replace_module(inside, features_text, "features.mlir")
        write_attrs(inside, plan_for(read_graph(inside, "features.mlir")))
    assert print_module(inside) == print_module(outside)


def test_rebuilding_the_module_drops_the_session_graph(features_text: str) -> None:
    from meshjit.compiler.graph import graph_session
    from meshjit.compiler.ir import replace_module

    module = parse_module(features_text, make_context(), "features.mlir")
    with graph_session(module):
        graph = read_graph(module, "features.mlir")
        replace_module(module, print_module(module), "features.mlir")
        assert read_graph(module, "features.mlir") is not graph
    # outside a session every read walks the module
    assert read_graph(module, "features.mlir") is not read_graph(
        module, "features.mlir"
    )


@pytest.mark.parametrize("constant", ["stablehlo.constant", "sdy.constant"])
def test_scalar_constant_operands_of_either_dialect(constant: str) -> None:
    """A rule sees a scalar constant operand (a constant start index keeps a
    dynamic_update_slice's dim passing through) whether StableHLO or Shardy
    (after `sdy-import`) wrote the constant."""
    from meshjit.compiler.op_info import op_info

    text = f"""
    sdy.mesh @mesh = <["x"=2]>
    func.func @f(%a: tensor<8x4xf32>, %u: tensor<2x4xf32>) -> tensor<8x4xf32> {{
      %i = {constant} dense<2> : tensor<i32>
      %j = {constant} dense<0> : tensor<i32>
      %0 = stablehlo.dynamic_update_slice %a, %u, %i, %j
        : (tensor<8x4xf32>, tensor<2x4xf32>, tensor<i32>, tensor<i32>)
        -> tensor<8x4xf32>
      return %0 : tensor<8x4xf32>
    }}
    """
    graph = read_graph(parse_module(text, make_context()))
    node = next(n for n in graph.nodes if n.op == "stablehlo.dynamic_update_slice")
    info = op_info(graph, node)
    assert info is not None
    assert dict(info.constant_operands) == {2: 2, 3: 0}
