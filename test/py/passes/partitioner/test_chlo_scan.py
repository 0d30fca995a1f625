"""chlo.scan, what jax 0.11 emits for cumulative sums on GPUs: the other dims
split freely (the body made again on local slices); a split scanned dim is
scanned per block, then each device combines the totals of the blocks before
it (one all-gather of the block totals), when the scan is associative and
its init the combiner's identity; otherwise that dim is made whole first.

XLA's CPU compiler (jaxlib 0.10.2) aborts on chlo.scan, so the numerics here
run the partitioned module with each chlo.scan replaced by a call to a
function computing the same scan with reduce_window (`_emulate_scans`): the
partitioner's own code (blocks, totals, offsets, the carry) runs as emitted.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jaxlib.mlir import ir

from meshjit.compiler.ir import make_context, parse_module, print_module
from meshjit.compiler.pipeline import parse_pipeline, run_pipeline
from meshjit.compiler.spmd import compile_module

pytestmark = pytest.mark.devices(8)

# numpy's op, the identity as MLIR writes it, its value
COMBINERS = {
    "add": (np.add, "0.0", 0.0),
    "multiply": (np.multiply, "1.0", 1.0),
    "maximum": (np.maximum, "0xFF800000", -np.inf),
    "minimum": (np.minimum, "0x7F800000", np.inf),
}


def scan_module(
    shape: tuple[int, int],
    dim: int,
    spec: str,
    combiner: str,
    reverse: bool = False,
    init: str | None = None,
    associative: bool = True,
) -> str:
    """`out, carry = chlo.scan(x, init)` along `dim`, as jax's GPU lowering
    writes it (init: a broadcast scalar), on a 2x4 mesh."""
    n, m = shape
    slice_shape = m if dim == 0 else n
    t = f"tensor<{n}x{m}xf32>"
    s = f"tensor<{slice_shape}xf32>"
    scalar = init if init is not None else COMBINERS[combiner][1]
    return f"""
sdy.mesh @mesh = <["x"=2, "y"=4]>
func.func public @main(%x: {t} {{sdy.sharding = #sdy.sharding<@mesh, {spec}>}})
    -> ({t} {{sdy.sharding = #sdy.sharding<@mesh, {spec}>}}, {s}) {{
  %zero = stablehlo.constant dense<{scalar}> : tensor<f32>
  %init = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> {s}
  %0:2 = chlo.scan(%x) inits(%init) dimension={dim} attributes {{
      is_associative = {flag(associative)}, is_reverse = {flag(reverse)}}} {{
  ^bb0(%a: {s}, %b: {s}):
    %1 = stablehlo.{combiner} %a, %b : {s}
    stablehlo.return %1, %1 : {s}, {s}
  }} : ({t}, {s}) -> ({t}, {s})
  return %0#0, %0#1 : {t}, {s}
}}
"""


def flag(value: bool) -> str:
    return "true" if value else "false"


def reference(
    x: np.ndarray, dim: int, combiner: str, reverse: bool, init: float
) -> tuple[np.ndarray, np.ndarray]:
    op = COMBINERS[combiner][0]
    y = np.flip(x, dim) if reverse else x
    out = op(op.accumulate(y, axis=dim), np.float32(init))
    if reverse:
        out = np.flip(out, dim)
    carry = op(op.reduce(x, axis=dim), np.float32(init))
    return out, carry


def partitioned(text: str) -> str:
    module = parse_module(text, make_context())
    run_pipeline(parse_pipeline("propagate,partition", module.context), module, "-")
    return print_module(module)


_EMULATION = """
func.func private @{name}(%x: {t}, %init: {s}) -> ({t}, {s}) {{
  %id = stablehlo.constant dense<{identity}> : tensor<f32>
  %scan = "stablehlo.reduce_window"(%x, %id) ({{
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %r = stablehlo.{combiner} %a, %b : tensor<f32>
    stablehlo.return %r : tensor<f32>
  }}) {{window_dimensions = array<i64: {window}>,
       padding = dense<{padding}> : tensor<{rank}x2xi64>}} : ({t}, tensor<f32>) -> {t}
  %spread = stablehlo.broadcast_in_dim %init, dims = {kept} : ({s}) -> {t}
  %out = stablehlo.{combiner} %scan, %spread : {t}
  %end = stablehlo.slice %scan [{last}] : ({t}) -> {end_t}
  %total = stablehlo.reshape %end : ({end_t}) -> {s}
  %carry = stablehlo.{combiner} %total, %init : {s}
  return %out, %carry : {t}, {s}
}}
"""


def _emulate_scans(text: str) -> str:
    """Each chlo.scan (one input, one init, a one-op body) replaced by a call
    to a function computing it with reduce_window."""
    ctx = make_context()
    module = parse_module(text, ctx)
    scans: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "chlo.scan":
            scans.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    funcs = []
    with ctx, ir.Location.unknown():
        for i, op in enumerate(scans):
            x, init = op.operands
            t, s = x.type, init.type
            shape = ir.RankedTensorType(t).shape
            dim = ir.IntegerAttr(op.attributes["dimension"]).value
            reverse = ir.BoolAttr(op.attributes["is_reverse"]).value
            combiner = op.regions[0].blocks[0].operations[0].name.split(".")[1]
            n = shape[dim]
            window = [n if d == dim else 1 for d in range(len(shape))]
            pads = [
                ([0, n - 1] if reverse else [n - 1, 0]) if d == dim else [0, 0]
                for d in range(len(shape))
            ]
            last = ", ".join(
                (
                    f"{0 if reverse else n - 1}:{1 if reverse else n}"
                    if d == dim
                    else f"0:{k}"
                )
                for d, k in enumerate(shape)
            )
            end = [1 if d == dim else k for d, k in enumerate(shape)]
            funcs.append(
                _EMULATION.format(
                    name=f"scan_{i}",
                    t=t,
                    s=s,
                    identity=COMBINERS[combiner][1],
                    combiner=combiner,
                    window=", ".join(map(str, window)),
                    padding=str(pads),
                    rank=len(shape),
                    kept=str([d for d in range(len(shape)) if d != dim]),
                    last=last,
                    end_t=ir.RankedTensorType.get(end, ir.F32Type.get()),
                )
            )
            call = ir.Operation.create(
                "func.call",
                results=[t, s],
                operands=[x, init],
                attributes={"callee": ir.FlatSymbolRefAttr.get(f"scan_{i}")},
                loc=op.location,
                ip=ir.InsertionPoint(op),
            )
            for old, new in zip(op.results, call.results, strict=True):
                old.replace_all_uses_with(new)
            op.erase()
        for text in funcs:
            for op in ir.Module.parse(text).body.operations:
                op.clone(ip=ir.InsertionPoint(module.body))
    return print_module(module)


def run(text: str, x: np.ndarray, spec: P) -> tuple[list[np.ndarray], str]:
    """(outputs, partitioned text) of the module on 8 devices."""
    part = partitioned(text)
    compiled = compile_module(_emulate_scans(part), jax.devices()[:8], "")
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))
    outs = compiled.executable(jax.device_put(x, NamedSharding(mesh, spec)))
    return [np.asarray(o) for o in outs], part


X = (np.arange(16 * 6, dtype=np.float32).reshape(16, 6) % 7 - 3) / 4


@pytest.mark.parametrize("combiner", sorted(COMBINERS))
@pytest.mark.parametrize("reverse", [False, True])
def test_a_split_scanned_dim_is_scanned_per_block(combiner: str, reverse: bool) -> None:
    text = scan_module((16, 6), 0, '[{"y"}, {"x"}]', combiner, reverse)
    (out, carry), part = run(text, X, P("y", "x"))
    want_out, want_carry = reference(X, 0, combiner, reverse, COMBINERS[combiner][2])
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(carry, want_carry, rtol=1e-5, atol=1e-5)
    # The operand stays split: the one all-gather carries the block totals.
    gathers = [line for line in part.splitlines() if "all_gather" in line]
    assert len(gathers) == 1, part
    assert "(tensor<1x3xf32>) -> tensor<4x3xf32>" in gathers[0], part


def test_other_dims_split_and_the_body_is_made_on_local_slices() -> None:
    text = scan_module((16, 6), 1, '[{"y"}, {}]', "add")
    (out, carry), part = run(text, X, P("y"))
    want_out, want_carry = reference(X, 1, "add", False, 0.0)
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(carry, want_carry, rtol=1e-5, atol=1e-5)
    assert "all_gather" not in part, part
    assert "all_reduce" not in part, part
    assert "^bb0(%input: tensor<4xf32>, %carry: tensor<4xf32>):" in part, part


@pytest.mark.parametrize(
    ("init", "associative"), [("1.5", True), ("0.0", False)], ids=["init", "serial"]
)
def test_a_scanned_dim_is_made_whole_unless_blocks_can_be_combined(
    init: str, associative: bool
) -> None:
    """An init that is not the identity would enter every block's scan; a scan
    not marked associative may not be regrouped: the dim is gathered."""
    text = scan_module((16, 6), 0, '[{"y"}, {"x"}]', "add", False, init, associative)
    (out, carry), part = run(text, X, P("y", "x"))
    want_out, want_carry = reference(X, 0, "add", False, float(init))
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(carry, want_carry, rtol=1e-5, atol=1e-5)
    gathers = [line for line in part.splitlines() if "all_gather" in line]
    assert len(gathers) == 1, part
    assert "-> tensor<16x3xf32>" in gathers[0], part
