// RUN: %opt %s -p 'propagate{strategy=aggressive op-priority=false user-priority=false apply-sharding-constraints=true debug-propagation-edge-sharding=true}' --split-input-file | filecheck %s
// debug-propagation-edge-sharding writes Shardy's `sdy.propagation_edges`:
// per op, each step (an op application that changed something, numbered
// over the whole propagation) and which axes went from which operand or
// result to which. A function result's edges are the sync between the
// returned value (operand-0) and the result (result-0), before and after the
// ops; every result's land on result 0, as in Shardy.
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=8]>
// CHECK-LABEL: func @steps(
// CHECK-SAME: -> (tensor<8x8x8xf32> {sdy.propagation_edges = #sdy.propagation_edges<[{step-0 = [{"b" = result-0 -> [operand-0]}]}, {step-2 = [{"a" = operand-0 -> [result-0]}, {"c" = operand-0 -> [result-0]}]}]>
// CHECK: stablehlo.add %arg0, %arg1 {sdy.propagation_edges = #sdy.propagation_edges<[{step-1 = [{"a" = operand-0 -> [operand-1, result-0]}, {"b" = result-0 -> [operand-0, operand-1]}, {"c" = operand-1 -> [operand-0, result-0]}]}]>
func.func @steps(
  %arg0: tensor<8x8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}, {?}]>},
  %arg1: tensor<8x8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {?}, {"c", ?}]>}
) -> (tensor<8x8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"b", ?}, {?}]>}) {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8x8xf32>
  return %0 : tensor<8x8x8xf32>
}
// -----
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=8]>
// A closed constraint applied to its input is the first step, on the
// constraint.
// CHECK-LABEL: func @applied_constraint(
// CHECK: sdy.sharding_constraint %arg0 <@mesh, [{"a"}]> {sdy.propagation_edges = #sdy.propagation_edges<[{step-0 = [{"a" = result-0 -> [operand-0]}]}]>}
func.func @applied_constraint(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{"a"}]> : tensor<8xf32>
  return %0 : tensor<8xf32>
}
// -----
sdy.mesh @mesh = <["c"=8]>
// Sub-axes of one axis that a reshape joins are one edge of the joined axis.
// CHECK-LABEL: func @merged_sub_axes(
// CHECK: stablehlo.reshape %arg0 {sdy.propagation_edges = #sdy.propagation_edges<[{step-0 = [{"c" = operand-0 -> [result-0]}]}]>
func.func @merged_sub_axes(%arg0: tensor<4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"c":(1)4, ?}, {"c":(4)2, ?}]>}) -> tensor<16xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<4x4xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}
