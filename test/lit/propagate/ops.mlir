// RUN: %opt %s -p propagate --split-input-file | filecheck %s
sdy.mesh @mesh = <["x"=2, "y"=4]>
// gather: the operand's offset dim 1 reaches the result's dim 1; the indices'
// batch dim reaches the result's dim 0.
// CHECK-LABEL: func @gather_offset_and_batch_dims(
// CHECK-SAME: -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>})
// CHECK: "stablehlo.gather"(%arg0,
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>}
func.func @gather_offset_and_batch_dims(%op: tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}, %idx: tensor<8x1xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x16xf32> {
  %0 = "stablehlo.gather"(%op, %idx) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 16>}> : (tensor<32x16xf32>, tensor<8x1xi32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// scatter: the updates' window dim and the input's dim 1 share a factor.
// CHECK-LABEL: func @scatter_window_dim(
// CHECK-SAME: -> (tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"y", ?}]>})
// CHECK: })
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"y", ?}]>]>}
func.func @scatter_window_dim(%in: tensor<32x16xf32>, %idx: tensor<8x1xi32>, %upd: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}) -> tensor<32x16xf32> {
  %0 = "stablehlo.scatter"(%in, %idx, %upd) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false}> ({
  ^bb0(%p: tensor<f32>, %q: tensor<f32>):
    %s = stablehlo.add %p, %q : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<32x16xf32>, tensor<8x1xi32>, tensor<8x16xf32>) -> tensor<32x16xf32>
  return %0 : tensor<32x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// convolution: batch and output features propagate; the spatial dims do not.
// CHECK-LABEL: func @convolution_batch_and_features(
// CHECK-SAME: -> (tensor<8x16x16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}, {?}, {"y", ?}]>})
func.func @convolution_batch_and_features(%x: tensor<8x16x16x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {}, {}]>}, %k: tensor<3x3x4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {}, {"y"}]>}) -> tensor<8x16x16x8xf32> {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<8x16x16x4xf32>, tensor<3x3x4x8xf32>) -> tensor<8x16x16x8xf32>
  return %0 : tensor<8x16x16x8xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// case: the branches' returned values and the result share a sharding.
// CHECK-LABEL: func @case_branches_and_result(
// CHECK-SAME: -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>})
// CHECK: stablehlo.negate
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>}
// CHECK: })
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>}
// CHECK: stablehlo.abs
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>}
func.func @case_branches_and_result(%i: tensor<i32>, %a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x16xf32> {
  %0 = "stablehlo.case"(%i) ({
    stablehlo.return %a : tensor<8x16xf32>
  }, {
    %n = stablehlo.negate %a : tensor<8x16xf32>
    stablehlo.return %n : tensor<8x16xf32>
  }) : (tensor<i32>) -> tensor<8x16xf32>
  %1 = stablehlo.abs %0 : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// sharding groups keep their members equal.
// CHECK-LABEL: func @sharding_group_members_equal(
// CHECK-SAME: -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>}, tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>})
// CHECK: stablehlo.negate
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>}
// CHECK: stablehlo.abs
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>}
func.func @sharding_group_members_equal(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %b: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %0 = stablehlo.negate %a : tensor<8x16xf32>
  %1 = stablehlo.abs %b : tensor<8x16xf32>
  sdy.sharding_group %0 group_id=0 : tensor<8x16xf32>
  sdy.sharding_group %1 group_id=0 : tensor<8x16xf32>
  return %0, %1 : tensor<8x16xf32>, tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// p0 before p1: the p1 dim's axis is only used after the p0 round.
// CHECK-LABEL: func @priority_p0_before_p1(
// CHECK-SAME: -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y", ?}, {?}]>})
// CHECK: stablehlo.add
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y", ?}, {?}]>]>}
func.func @priority_p0_before_p1(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}p1, {}]>}, %b: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y", ?}p0, {}]>}) -> tensor<8x16xf32> {
  %0 = stablehlo.add %a, %b : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=4, "y"=2]>
// sub-axes through reshape: "x" splits over the 2x16 result.
// CHECK-LABEL: func @reshape_splits_axis_into_sub_axes(
// CHECK-SAME: -> (tensor<2x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x":(1)2, ?}, {"x":(2)2, "y", ?}]>})
// CHECK: stablehlo.reshape
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x":(1)2, ?}, {"x":(2)2, "y", ?}]>]>}
// CHECK: stablehlo.negate
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x":(1)2, ?}, {"x":(2)2, "y", ?}]>]>}
func.func @reshape_splits_axis_into_sub_axes(%b: tensor<32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", "y"}]>}) -> tensor<2x16xf32> {
  %0 = stablehlo.reshape %b : (tensor<32xf32>) -> tensor<2x16xf32>
  %1 = stablehlo.negate %0 : tensor<2x16xf32>
  return %1 : tensor<2x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// A closed dim keeps what it has; an open one takes more.
// CHECK-LABEL: func @open_and_closed_dims(
// CHECK-SAME: -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>})
// CHECK: stablehlo.add
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>}
func.func @open_and_closed_dims(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %b: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {?}]>}) -> tensor<8x16xf32> {
  %0 = stablehlo.add %a, %b : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// A propagation barrier lets shardings through forward only.
// CHECK-LABEL: func @barrier_forward_only(
// CHECK-SAME: -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
// CHECK: sdy.propagation_barrier
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>}
// CHECK: stablehlo.abs
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>}
func.func @barrier_forward_only(%a: tensor<8x16xf32>) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = stablehlo.negate %a : tensor<8x16xf32>
  %1 = sdy.propagation_barrier %0 allowed_direction=FORWARD : tensor<8x16xf32>
  %2 = stablehlo.abs %1 : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// A call propagates through the callee (as if inlined).
// CHECK-LABEL: func @call_through_callee(
// CHECK-SAME: -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>})
// CHECK: call
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>}
// CHECK: stablehlo.abs
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>}
// CHECK-LABEL: func private @callee(
// CHECK-SAME: -> tensor<8x16xf32> {
// CHECK: stablehlo.negate
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>}
func.func @call_through_callee(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> tensor<8x16xf32> {
  %0 = func.call @callee(%a) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %1 = stablehlo.abs %0 : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
func.func private @callee(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.negate %a : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=4, "y"=2]>
// dynamic_slice: the sliced dim's factor (3 rows in, 2 out) is in the rule's
// blocked_propagation list, so the result's "y" does not flow back into the
// operand; the unsliced dim passes "x" through.
// CHECK-LABEL: func @dynamic_slice_sliced_dim_is_blocked(
// CHECK: stablehlo.abs
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"x", ?}]>]>}
// CHECK: stablehlo.dynamic_slice
// CHECK-SAME: {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y", ?}, {"x", ?}]>]>}
func.func @dynamic_slice_sliced_dim_is_blocked(%a: tensor<3x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {"x"}]>}) {
  %c = stablehlo.constant dense<1> : tensor<i32>
  %c_0 = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.abs %a : tensor<3x8xf32>
  %1 = stablehlo.dynamic_slice %0, %c, %c_0, sizes = [2, 8] : (tensor<3x8xf32>, tensor<i32>, tensor<i32>) -> tensor<2x8xf32>
  return %1 : tensor<2x8xf32>
}
// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>
// An @X64Combine feeding an rng_bit_generator (its initial state, which must
// be replicated; a ui64 value is never resharded) propagates nothing, as in
// Shardy; other X64Combines are element-wise.
// CHECK-LABEL: func @x64_combine_for_rng(
// CHECK: stablehlo.custom_call @X64Combine(%arg0, %arg1) : (tensor<2xui32>, tensor<2xui32>) -> tensor<2xui64>
// CHECK: stablehlo.custom_call @X64Combine(%arg0, %arg1) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}]>]>}
func.func @x64_combine_for_rng(
    %arg0: tensor<2xui32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>},
    %arg1: tensor<2xui32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>})
    -> (tensor<4x8xui32>, tensor<2xui64>) {
  %0 = stablehlo.custom_call @X64Combine(%arg0, %arg1) : (tensor<2xui32>, tensor<2xui32>) -> tensor<2xui64>
  %s, %o = stablehlo.rng_bit_generator %0, algorithm = DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4x8xui32>)
  %1 = stablehlo.custom_call @X64Combine(%arg0, %arg1) : (tensor<2xui32>, tensor<2xui32>) -> tensor<2xui64>
  return %o, %1 : tensor<4x8xui32>, tensor<2xui64>
}
