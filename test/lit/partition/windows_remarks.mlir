// On a small value one all-gather costs less than exchanging a halo in
// several collective-permutes (a fixed latency each): the cost model says so.
// RUN: %opt %s -p partition --collectives 2>&1 >/dev/null | filecheck %s

sdy.mesh @mesh = <["x"=4]>
func.func public @main(%x: tensor<2x16x8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}, %k: tensor<3x3x4x8xf32>) -> (tensor<2x16x8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) {
  // CHECK: windows_remarks.mlir:[[# @LINE + 1]]:8: remark: operand 0 window along dim 1: one all-gather of the dim (estimated {{.*}} us) is cheaper than exchanging the window's pieces ({{.*}} us)
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : (tensor<2x16x8x4xf32>, tensor<3x3x4x8xf32>) -> tensor<2x16x8x8xf32>
  return %0 : tensor<2x16x8x8xf32>
}
// CHECK: collectives inserted by partition (bytes sent per device):
// CHECK-NEXT: all-gather {{ +}}axes {"x"} {{ +}}3072 B {{ +}}{{[0-9.]+}} us  stablehlo.convolution at {{.*}}: operand 0 window along dim 1: [{}, {"x"}, {}, {}] -> [{}, {}, {}, {}]
// CHECK-NEXT: total: 1 collectives (all-gather x1), 3072 B per device, estimated {{[0-9.]+}} us
