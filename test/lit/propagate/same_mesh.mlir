// RUN: %opt %s -p 'propagate{strategy=basic}' --split-input-file | filecheck %s

// Two mesh symbols with the same axes (and devices) are one mesh, as Shardy
// compares meshes by definition: shardings on either propagate to each
// other; a new sharding takes the first operand's mesh name, and a value
// that gains nothing keeps its own.
sdy.mesh @m1 = <["a"=2, "b"=2]>
sdy.mesh @m2 = <["a"=2, "b"=2]>
// CHECK-LABEL: func @same_axes_two_names(
// CHECK-SAME: %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@m2, [{"a"}, {?}]>}
// CHECK-SAME: -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@m1, [{"a", ?}, {?}]>})
// CHECK: stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@m1, [{"a", ?}, {?}]>]>}
func.func @same_axes_two_names(
    %arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@m1, [{"a"}, {?}]>},
    %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@m2, [{"a"}, {?}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----
// Meshes that differ (other axis sizes) do not propagate to each other.
sdy.mesh @m1 = <["a"=2, "b"=2]>
sdy.mesh @m2 = <["a"=4]>
// CHECK-LABEL: func @different_meshes(
// CHECK: stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
func.func @different_meshes(
    %arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@m1, [{"a"}, {?}]>},
    %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@m2, [{"a"}, {?}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
