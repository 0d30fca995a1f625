// RUN: %opt %s -p propagate --split-input-file | filecheck %s
sdy.mesh @mesh = <["x"=2, "y"=4]>
// An elementwise op whose operand has another use waits for the second
// op-priority stage: the negate sends ["x", "y"] back to the subtract first.
// CHECK-LABEL: func @multi_use_operand_waits_a_stage(
// CHECK-SAME: -> (tensor<64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", "y"}]>})
// CHECK: stablehlo.subtract
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", "y", ?}]>]>}
// CHECK: stablehlo.negate
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", "y", ?}]>]>}
func.func @multi_use_operand_waits_a_stage(%a: tensor<64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}]>}) -> (tensor<64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", "y"}]>}) {
  %0 = stablehlo.subtract %a, %a : tensor<64xf32>
  %1 = stablehlo.negate %0 : tensor<64xf32>
  return %1 : tensor<64xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// With single-use operands the subtract goes first and forwards ["y"].
// CHECK-LABEL: func @single_use_operands_go_first(
// CHECK-SAME: -> (tensor<64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", "y"}]>})
// CHECK: stablehlo.subtract
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y", ?}]>]>}
// CHECK: stablehlo.negate
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", "y", ?}]>]>}
func.func @single_use_operands_go_first(%a: tensor<64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}]>}, %b: tensor<64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}]>}) -> (tensor<64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", "y"}]>}) {
  %0 = stablehlo.subtract %a, %b : tensor<64xf32>
  %1 = stablehlo.negate %0 : tensor<64xf32>
  return %1 : tensor<64xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// Element-wise ops before dot_general: dim 1 of the dot's result comes from
// the add chain, not from the lhs's dim 0.
// CHECK-LABEL: func @element_wise_before_dot_general(
// CHECK-SAME: -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"x", ?}]>})
// CHECK: stablehlo.dot_general
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"x", ?}]>]>}
// CHECK: stablehlo.add
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"x", ?}]>]>}
// CHECK: stablehlo.add
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"x", ?}]>]>}
func.func @element_wise_before_dot_general(%a: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>}, %b: tensor<8x8xf32>) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"x", ?}]>}) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.add %0, %0 : tensor<8x8xf32>
  %2 = stablehlo.add %1, %1 : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// Broadcast propagates forward only in the last stage: the negate's result
// sharding reaches the broadcast's dim 0 first.
// CHECK-LABEL: func @broadcast_forward_last(
// CHECK-SAME: -> (tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {"x", ?}]>})
// CHECK: stablehlo.broadcast_in_dim
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y", ?}, {"x", ?}]>]>}
// CHECK: stablehlo.negate
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y", ?}, {"x", ?}]>]>}
func.func @broadcast_forward_last(%a: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> (tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {?}]>}) {
  %0 = stablehlo.broadcast_in_dim %a, dims = [1] : (tensor<8xf32>) -> tensor<16x8xf32>
  %1 = stablehlo.negate %0 : tensor<16x8xf32>
  return %1 : tensor<16x8xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// A dot_general's pass-through factors propagate a stage before its
// reduction factor: the rhs's "x" on the contracting dim does not reach the lhs.
// CHECK-LABEL: func @dot_general_reduction_factor_after_pass_through(
// CHECK-SAME: -> (tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>})
// CHECK: stablehlo.dot_general
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>}
func.func @dot_general_reduction_factor_after_pass_through(%a: tensor<32x1024xf32>, %b: tensor<1024x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>}) -> (tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>}) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<32x1024xf32>, tensor<1024x16xf32>) -> tensor<32x16xf32>
  return %0 : tensor<32x16xf32>
}

// -----
// Moves between host and device memory (custom calls @MoveToHost and
// @MoveToDevice) are element-wise and propagate in the first stage, so both
// sides of the round trip keep the value's sharding; the sharding the
// result asks for reaches only the add after them.
sdy.mesh @mesh = <["a"=2, "b"=2]>
// CHECK-LABEL: func @host_offload_first(
// CHECK: stablehlo.custom_call @MoveToHost(%0) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>}
// CHECK-NEXT: stablehlo.custom_call @MoveToDevice(%1) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>}
// CHECK-NEXT: stablehlo.add %2, %2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}]>]>}
func.func @host_offload_first(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"a", ?}]>}) {
  %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>
  %1 = stablehlo.custom_call @MoveToHost(%0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %2 = stablehlo.custom_call @MoveToDevice(%1) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %3 = stablehlo.add %2, %2 : tensor<8x8xf32>
  return %3 : tensor<8x8xf32>
}
