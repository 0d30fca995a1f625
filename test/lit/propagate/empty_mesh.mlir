// RUN: %opt %s -p 'propagate{strategy=basic}' --split-input-file | filecheck %s
// A sharding on a mesh with no axes (Shardy's empty mesh) says nothing about
// a layout but which dims are closed: propagation replaces its mesh with the
// one it brings, and keeps its closed dims unsharded.
sdy.mesh @empty_mesh = <[]>
sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func @empty_mesh_is_replaced(
// CHECK-SAME: %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>}
// CHECK: stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>}
func.func @empty_mesh_is_replaced(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@empty_mesh, [{?}, {?}]>]>} : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
// -----
sdy.mesh @empty_mesh = <[]>
sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func @empty_mesh_closed_dim_stays_closed(
// CHECK-SAME: %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {}]>}
// CHECK: stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>}
func.func @empty_mesh_closed_dim_stays_closed(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@empty_mesh, [{?}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
