// RUN: %opt %s -p 'propagate{apply-sharding-constraints=true}' --split-input-file | filecheck %s
sdy.mesh @mesh = <["x"=2, "y"=4]>
// A closed constraint is applied to its unsharded input even when the input
// has other uses.
// CHECK-LABEL: func @closed_constraint_applied_to_multi_use_input(
// CHECK-SAME: -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>}, tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>})
// CHECK: stablehlo.abs
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>}
// CHECK: sdy.sharding_constraint
// CHECK-SAME: <@mesh, [{"x"}, {}]>
// CHECK: stablehlo.negate
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>}
func.func @closed_constraint_applied_to_multi_use_input(%a: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %0 = stablehlo.abs %a : tensor<8x16xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"x"}, {}]> : tensor<8x16xf32>
  %2 = stablehlo.negate %0 : tensor<8x16xf32>
  return %1, %2 : tensor<8x16xf32>, tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// An open constraint is not applied to its input; it propagates like an
// element-wise op, so its input still gets "x" (and keeps dim 1 open).
// CHECK-LABEL: func @open_constraint_not_applied(
// CHECK-SAME: -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>})
// CHECK: stablehlo.abs
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>}
// CHECK: sdy.sharding_constraint
// CHECK-SAME: <@mesh, [{"x", ?}, {?}]>
func.func @open_constraint_not_applied(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.abs %a : tensor<8x16xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"x", ?}, {?}]> : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// Two constraints asking different things of one value: neither is applied.
// CHECK-LABEL: func @conflicting_constraints_not_applied(
// CHECK-SAME: -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>}, tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"y", ?}]>})
// CHECK: stablehlo.abs
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>}
// CHECK: sdy.sharding_constraint
// CHECK-SAME: <@mesh, [{"x"}, {}]>
// CHECK: sdy.sharding_constraint
// CHECK-SAME: <@mesh, [{}, {"y"}]>
func.func @conflicting_constraints_not_applied(%a: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %0 = stablehlo.abs %a : tensor<8x16xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"x"}, {}]> : tensor<8x16xf32>
  %2 = sdy.sharding_constraint %0 <@mesh, [{}, {"y"}]> : tensor<8x16xf32>
  return %1, %2 : tensor<8x16xf32>, tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// Uses after a chain of constraints read the chain's last value: the negate
// gets ["y"] on dim 1 from the second constraint.
// CHECK-LABEL: func @uses_after_a_constraint_chain(
// CHECK-SAME: -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"y", ?}]>})
// CHECK: stablehlo.abs
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>}
// CHECK: sdy.sharding_constraint
// CHECK-SAME: <@mesh, [{}, {}]>
// CHECK: sdy.sharding_constraint
// CHECK-SAME: <@mesh, [{}, {"y"}]>
// CHECK: stablehlo.negate
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"y", ?}]>]>}
// CHECK: stablehlo.add
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"y", ?}]>]>}
func.func @uses_after_a_constraint_chain(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.abs %a : tensor<8x16xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{}, {}]> : tensor<8x16xf32>
  %2 = sdy.sharding_constraint %1 <@mesh, [{}, {"y"}]> : tensor<8x16xf32>
  %3 = stablehlo.negate %0 : tensor<8x16xf32>
  %4 = stablehlo.add %2, %3 : tensor<8x16xf32>
  return %4 : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// A closed constraint's empty dim stays empty: the conflict at the add keeps
// the constraint's side and the argument's side apart.
// CHECK-LABEL: func @conflict_at_elementwise_next_to_constraint(
// CHECK: sdy.sharding_constraint
// CHECK-SAME: <@mesh, [{"y"}, {}]>
func.func @conflict_at_elementwise_next_to_constraint(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>}, %b: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = sdy.sharding_constraint %b <@mesh, [{"y"}, {}]> : tensor<8x16xf32>
  %1 = stablehlo.add %a, %0 : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// A chain starts at a constraint whose input is not itself a constraint's
// result (Shardy's rule): %1 -> %2 is no chain, so the transpose keeps reading
// %0 and gets its ["x"], not %2's.
// CHECK-LABEL: func @a_chain_head_is_not_a_constraint_result(
// CHECK: stablehlo.transpose %0
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>}
func.func @a_chain_head_is_not_a_constraint_result(%a: tensor<8x16xf32>) -> (tensor<16x8xf32>, tensor<8x16xf32>) {
  %0 = sdy.sharding_constraint %a <@mesh, [{}, {"x"}]> : tensor<8x16xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"y"}, {}]> : tensor<8x16xf32>
  %2 = sdy.sharding_constraint %1 <@mesh, [{"x"}, {}]> : tensor<8x16xf32>
  %3 = stablehlo.transpose %0, dims = [1, 0] : (tensor<8x16xf32>) -> tensor<16x8xf32>
  return %3, %2 : tensor<16x8xf32>, tensor<8x16xf32>
}
