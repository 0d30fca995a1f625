// RUN: %opt %s -p propagation-pipeline | filecheck %s
// RUN: not %opt %s -p spmd-pipeline 2>&1 | filecheck %s --check-prefix=PART
// A maximal sharding (one device) on an op with no results places the op: it
// is kept as written, and nothing propagates from it. The partitioner runs
// placed ops on their device of the module's mesh (partition/placed.mlir); a
// module with a maximal mesh only has no mesh to partition over, and it says so.
sdy.mesh @maximal_mesh = <[], device_ids=[0]>
// CHECK-LABEL: func @maximal_sharding_no_results
// CHECK-SAME: (%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
// CHECK-NEXT: stablehlo.custom_call @host_callback(%arg0) {has_side_effect = true, sdy.sharding = #sdy.sharding_per_value<[<@maximal_mesh, []>]>} : (tensor<8x8xf32>) -> ()
// PART: error: partition needs a mesh with axes; the module has only maximal meshes (@maximal_mesh: ops placed whole on one device)
func.func @maximal_sharding_no_results(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  stablehlo.custom_call @host_callback(%arg0) {has_side_effect = true, sdy.sharding = #sdy.sharding_per_value<[<@maximal_mesh, []>]>} : (tensor<8x8xf32>) -> ()
  return %arg0 : tensor<8x8xf32>
}
