// stablehlo.dot (before dot_general; other frontends still write it) runs on
// local blocks as dot_general does: the contraction split over "y" makes
// partial sums, one all-reduce over "y" sums them; nothing is gathered.
// RUN: %opt %s -p 'propagate,partition' | filecheck %s

sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func.func public @main
// CHECK: (%arg2: tensor<4x4xf32>, %arg3: tensor<4x12xf32>)
// CHECK-NOT: all_gather
// CHECK: %[[DOT:.*]] = stablehlo.dot %arg2, %arg3 : (tensor<4x4xf32>, tensor<4x12xf32>) -> tensor<4x12xf32>
// CHECK: "stablehlo.all_reduce"(%[[DOT]])
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]>
// CHECK-NOT: all_gather
func.func @main(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %b: tensor<16x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) -> (tensor<8x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = stablehlo.dot %a, %b : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  return %0 : tensor<8x12xf32>
}
