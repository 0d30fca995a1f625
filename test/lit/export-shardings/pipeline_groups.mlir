// RUN: %opt %s -p propagation-pipeline | filecheck %s

// The propagation pipeline writes Shardy's export form: constraints become
// reshards and sharding groups, their members agreed, are removed.
sdy.mesh @mesh = <["a"=2, "b"=2]>
// CHECK-LABEL: func @groups_removed(
// CHECK-NEXT: %[[R0:.*]] = sdy.reshard %arg0 <@mesh, [{"a"}, {"b"}]>
// CHECK-NEXT: %[[ADD:.*]] = stablehlo.add %[[R0]], %[[R0]]
// CHECK-NOT: sdy.sharding_group
// CHECK: return
func.func @groups_removed(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{"a"}, {"b"}]> : tensor<8x8xf32>
  sdy.sharding_group %0 group_id=7 : tensor<8x8xf32>
  %1 = stablehlo.add %0, %0 : tensor<8x8xf32>
  sdy.sharding_group %1 group_id=7 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
