// chlo.scan (jax 0.11's cumsum on GPUs) along a split dim: each device scans
// its block, one all-gather brings every block's total (one row per block),
// the exclusive prefix of the totals before this block is added in; the
// other dim stays split and the body is made again on the local slice.
// RUN: %opt %s -p 'propagate,partition' | filecheck %s
// RUN: %opt %s -p 'propagate,partition' --collectives 2>&1 >/dev/null | filecheck %s --check-prefix=COLL

sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func.func public @main
// CHECK: (%arg1: tensor<4x3xf32>)
// CHECK: %[[LOCAL:.*]]:2 = chlo.scan(%arg1) inits (%{{.*}}) dimension=0 attributes {is_associative = true, is_reverse = false} {
// CHECK-NEXT: ^bb0(%input: tensor<3xf32>, %carry: tensor<3xf32>):
// CHECK: %[[TOTAL:.*]] = stablehlo.slice %[[LOCAL]]#0 [3:4, 0:3]
// CHECK: "stablehlo.all_gather"(%[[TOTAL]])
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]>
// CHECK-SAME: (tensor<1x3xf32>) -> tensor<4x3xf32>
// CHECK: stablehlo.pad %{{.*}}, low = [1, 0], high = [0, 0]
// CHECK: stablehlo.dynamic_slice
// CHECK: %[[SUM:.*]] = stablehlo.add %[[LOCAL]]#0, %{{.*}} : tensor<4x3xf32>
// CHECK: sdy.return %[[SUM]], %{{.*}} : tensor<4x3xf32>, tensor<3xf32>
// COLL: all-gather axes {"y"} 36 B {{.*}} chlo.scan at {{.*}}: block totals along dim 0
func.func public @main(%x: tensor<16x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {"x"}]>}) -> (tensor<16x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {"x"}]>}, tensor<6xf32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %init = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> tensor<6xf32>
  %0:2 = chlo.scan(%x) inits(%init) dimension=0 attributes {is_associative = true, is_reverse = false} {
  ^bb0(%a: tensor<6xf32>, %b: tensor<6xf32>):
    %1 = stablehlo.add %a, %b : tensor<6xf32>
    stablehlo.return %1, %1 : tensor<6xf32>, tensor<6xf32>
  } : (tensor<16x6xf32>, tensor<6xf32>) -> (tensor<16x6xf32>, tensor<6xf32>)
  return %0#0, %0#1 : tensor<16x6xf32>, tensor<6xf32>
}
