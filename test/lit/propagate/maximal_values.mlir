// RUN: %opt %s -p 'propagate{strategy=basic}' --split-input-file | filecheck %s
// A value with a maximal sharding (`<@maximal_mesh, []>`, any rank) is placed
// whole on one device: it keeps that sharding, and nothing propagates through
// an op that touches it.
sdy.mesh @maximal_mesh = <[], device_ids=[0]>
sdy.mesh @mesh = <["x"=2, "y"=2]>
// CHECK-LABEL: func @maximal_value_is_kept(
// CHECK-SAME: %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@maximal_mesh, []>})
// CHECK-NEXT: stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
func.func @maximal_value_is_kept(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@maximal_mesh, []>}) -> tensor<8x8xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
// -----
sdy.mesh @maximal_mesh = <[], device_ids=[0]>
sdy.mesh @mesh = <["x"=2, "y"=2]>
// A host transfer's results are on device 0; what uses them takes its
// sharding from elsewhere (here the function's result).
// CHECK-LABEL: func @recv_on_one_device(
// CHECK: stablehlo.abs %{{.*}}#0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y", ?}, {"x", ?}]>]>}
func.func @recv_on_one_device(%arg0: !stablehlo.token) -> (tensor<2x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {"x"}]>}) {
  %0:2 = "stablehlo.recv"(%arg0) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 3>, is_host_transfer = true, sdy.sharding = #sdy.sharding_per_value<[<@maximal_mesh, []>, <@maximal_mesh, []>]>} : (!stablehlo.token) -> (tensor<2x2xi32>, !stablehlo.token)
  %1 = stablehlo.abs %0#0 : tensor<2x2xi32>
  return %1 : tensor<2x2xi32>
}
