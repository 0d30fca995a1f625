// RUN: %opt %s -p propagate --split-input-file | filecheck %s
sdy.mesh @mesh = <["a"=2, "b"=2]>
// The free axis "b" flows into the body and out again; "a" stays manual.
// CHECK-LABEL: func @free_axes_propagate_through(
// CHECK-SAME: -> (tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>})
// CHECK: stablehlo.negate
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>}
// CHECK: sdy.manual_computation
// CHECK-SAME{LITERAL}: in_shardings=[<@mesh, [{"a", ?}, {"b", ?}]>] out_shardings=[<@mesh, [{"a", ?}, {"b", ?}]>] manual_axes={"a"}
// CHECK: stablehlo.abs
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b", ?}]>]>}
// CHECK: stablehlo.exponential
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>}
func.func @free_axes_propagate_through(%arg0: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) -> tensor<16x32xf32> {
  %0 = stablehlo.negate %arg0 : tensor<16x32xf32>
  %1 = sdy.manual_computation(%0) in_shardings=[<@mesh, [{"a", ?}, {?}]>] out_shardings=[<@mesh, [{"a", ?}, {?}]>] manual_axes={"a"} (%arg1: tensor<8x32xf32>) {
    %2 = stablehlo.abs %arg1 : tensor<8x32xf32>
    sdy.return %2 : tensor<8x32xf32>
  } : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %3 = stablehlo.exponential %1 : tensor<16x32xf32>
  return %3 : tensor<16x32xf32>
}
// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>
// A sharding found inside the body (the constraint on "b") leaves through the
// out_shardings to the users of the result.
// CHECK-LABEL: func @body_sharding_flows_out(
// CHECK-SAME: -> (tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>})
// CHECK: sdy.manual_computation
// CHECK-SAME{LITERAL}: in_shardings=[<@mesh, [{"a", ?}, {"b", ?}]>] out_shardings=[<@mesh, [{"a", ?}, {"b", ?}]>] manual_axes={"a"}
// CHECK: stablehlo.abs
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b", ?}]>]>}
// CHECK: sdy.sharding_constraint
// CHECK-SAME: <@mesh, [{}, {"b"}]>
// CHECK: stablehlo.exponential
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>}
func.func @body_sharding_flows_out(%arg0: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %1 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"a", ?}, {?}]>] out_shardings=[<@mesh, [{"a", ?}, {?}]>] manual_axes={"a"} (%arg1: tensor<8x32xf32>) {
    %2 = stablehlo.abs %arg1 : tensor<8x32xf32>
    %3 = sdy.sharding_constraint %2 <@mesh, [{}, {"b"}]> : tensor<8x32xf32>
    sdy.return %3 : tensor<8x32xf32>
  } : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %4 = stablehlo.exponential %1 : tensor<16x32xf32>
  return %4 : tensor<16x32xf32>
}
// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>
// Both axes manual: nothing to propagate inside.
// CHECK-LABEL: func @all_axes_manual(
// CHECK-SAME: -> (tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>})
// CHECK: sdy.manual_computation
// CHECK-SAME{LITERAL}: in_shardings=[<@mesh, [{"a"}, {"b"}]>] out_shardings=[<@mesh, [{"a"}, {"b"}]>] manual_axes={"a", "b"}
// CHECK: stablehlo.exponential
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>}
func.func @all_axes_manual(%arg0: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) -> tensor<16x32xf32> {
  %1 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"a"}, {"b"}]>] out_shardings=[<@mesh, [{"a"}, {"b"}]>] manual_axes={"a", "b"} (%arg1: tensor<8x16xf32>) {
    %2 = stablehlo.abs %arg1 : tensor<8x16xf32>
    sdy.return %2 : tensor<8x16xf32>
  } : (tensor<16x32xf32>) -> tensor<16x32xf32>
  %3 = stablehlo.exponential %1 : tensor<16x32xf32>
  return %3 : tensor<16x32xf32>
}
// -----
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
// An operand gets what propagation brings from the in_sharding (open dims),
// not the in_sharding itself: the manual axes it lists as replicated mean
// nothing outside the body.
// CHECK-LABEL: func @operand_drops_replicated_manual_axes(
// CHECK-SAME: %arg0: tensor<32x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", ?}, {?}]>})
// CHECK: sdy.manual_computation(%arg0)
// CHECK-SAME{LITERAL}: in_shardings=[<@mesh, [{"b", ?}, {?}], replicated={"c"}>]
func.func @operand_drops_replicated_manual_axes(%arg0: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"b", ?}, {?}], replicated={"c"}>] out_shardings=[<@mesh, [{"b", ?}, {?}], replicated={"c"}>] manual_axes={"b", "c"} (%arg1: tensor<16x32xf32>) {
    %1 = stablehlo.add %arg1, %arg1 : tensor<16x32xf32>
    sdy.return %1 : tensor<16x32xf32>
  } : (tensor<32x32xf32>) -> tensor<32x32xf32>
  return %0 : tensor<32x32xf32>
}
// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>
// The operand gets the in_sharding's axes by propagation, in open dims: it is
// not given the in_sharding's closed dims as its own.
// CHECK-LABEL: func @operand_not_given_closed_in_sharding(
// CHECK-SAME: %arg0: tensor<32x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>})
func.func @operand_not_given_closed_in_sharding(%arg0: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"a"}, {}]>] out_shardings=[<@mesh, [{"a"}, {}]>] manual_axes={"a"} (%arg1: tensor<16x32xf32>) {
    sdy.return %arg1 : tensor<16x32xf32>
  } : (tensor<32x32xf32>) -> tensor<32x32xf32>
  return %0 : tensor<32x32xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
// A user's sharding with the manual axis "b" after the free axis "a" does
// not flow into the manual computation's out_sharding (manual axes come
// first there, as the attribute gives them): only "a" does, and on into
// the body and the argument.
// CHECK-LABEL: func @manual_axes_not_propagated_in(
// CHECK-SAME: %arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}]>}
// CHECK: in_shardings=[<@mesh, [{"a", ?}]>] out_shardings=[<@mesh, [{"a", ?}]>] manual_axes={"b"}
// CHECK-NEXT: stablehlo.add %arg1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}]>]>}
// CHECK: stablehlo.sine %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", "b"}]>]>}
func.func @manual_axes_not_propagated_in(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{?}]>] out_shardings=[<@mesh, [{?}]>] manual_axes={"b"} (%arg1: tensor<8xf32>) {
    %1 = stablehlo.add %arg1, %arg1 : tensor<8xf32>
    sdy.return %1 : tensor<8xf32>
  } : (tensor<8xf32>) -> tensor<8xf32>
  %1 = stablehlo.sine %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", "b"}]>]>} : tensor<8xf32>
  return %1 : tensor<8xf32>
}
