// RUN: %opt %s -p 'propagate{strategy=basic conservative=true}' --split-input-file | filecheck %s
// RUN: %opt %s -p 'propagate{strategy=basic}' --split-input-file | filecheck %s --check-prefix=SPLIT
// Conservative propagation splits no mesh axis: a reshape that would need
// "a" (size 4) cut in two across its result dims leaves the result
// unsharded; by default the result gets the two sub-axes.
sdy.mesh @mesh = <["a"=4, "b"=2]>
// CHECK-LABEL: func @reshape_would_split_an_axis(
// CHECK: stablehlo.reshape %arg0 : (tensor<8xf32>) -> tensor<2x4xf32>
// SPLIT: stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a":(1)2, ?}, {"a":(2)2, ?}]>]>}
func.func @reshape_would_split_an_axis(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>}) -> tensor<2x4xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<8xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
// -----
sdy.mesh @mesh = <["a"=2, "b"=8]>
// Whole axes still propagate; the split part of "b" does not.
// CHECK-LABEL: func @whole_axes_propagate(
// CHECK: stablehlo.reshape %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>}
func.func @whole_axes_propagate(%arg0: tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", "b"}]>}) -> tensor<4x4xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<16xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
// -----
sdy.mesh @mesh = <["a"=4, "b"=2]>
// Conservative propagation carries nothing across dims that move data: the
// sliced dims of a slice (and pad, concatenate, windowed dims) stay as they
// are; the dim the slice keeps whole still propagates.
// CHECK-LABEL: func @slice_dims_blocked(
// CHECK: stablehlo.slice %arg0 [0:8, 4:8:2] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>}
// SPLIT: stablehlo.slice %arg0 [0:8, 4:8:2] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>}
func.func @slice_dims_blocked(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) -> tensor<8x2xf32> {
  %0 = stablehlo.slice %arg0 [0:8, 4:8:2] : (tensor<8x8xf32>) -> tensor<8x2xf32>
  return %0 : tensor<8x2xf32>
}
