// A 3x3 window over a height split 4 ways needs a halo from each neighbour.
// On a small value one all-gather of the dim costs less than two
// collective-permutes (a fixed latency each); one all-to-all carries both
// halos in one launch too, with a quarter of the gather's bytes and no whole
// copy, and is taken instead. With all-to-alls dear (a cost file), the gather
// is taken and a remark says why.
// RUN: %opt %s -p partition --collectives 2>&1 >/dev/null | filecheck %s
// RUN: %opt %s -p partition | filecheck %s --check-prefix=IR
// RUN: %opt %s -p 'partition{cost=%S/Inputs/dear_all_to_all.json}' --collectives 2>&1 >/dev/null | filecheck %s --check-prefix=DEAR

sdy.mesh @mesh = <["x"=4]>
func.func public @main(%x: tensor<2x16x8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}, %k: tensor<3x3x4x8xf32>) -> (tensor<2x16x8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) {
  // DEAR: windows_remarks.mlir:[[# @LINE + 1]]:8: remark: operand 0 window along dim 1: one all-gather of the dim (estimated {{.*}} us) is cheaper than exchanging the window's pieces ({{.*}} us)
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : (tensor<2x16x8x4xf32>, tensor<3x3x4x8xf32>) -> tensor<2x16x8x8xf32>
  return %0 : tensor<2x16x8x8xf32>
}
// CHECK-NOT: remark
// CHECK: collectives inserted by partition (bytes sent per device):
// CHECK-NEXT: all-to-all {{ +}}axes {"x"} {{ +}}768 B {{ +}}{{[0-9.]+}} us  stablehlo.convolution at {{.*}}: operand 0 window along dim 1: 1 along dim 1 from blocks -1, +1
// CHECK-NEXT: total: 1 collectives (all-to-all x1), 768 B per device, estimated {{[0-9.]+}} us

// Each device sends its first row to the block before and its last row to
// the block after (chunks of one row, one per device of the group; a row no
// one takes goes into its own chunk), then concatenates: the row from the
// block before, its own 4 rows, the row from the block after (zeros past the
// ends, as the padding).
// IR: stablehlo.dynamic_update_slice {{.*}} : (tensor<2x4x8x4xf32>, tensor<2x1x8x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<2x4x8x4xf32>
// IR: %[[SEND:.+]] = stablehlo.dynamic_update_slice {{.*}} : (tensor<2x4x8x4xf32>, tensor<2x1x8x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<2x4x8x4xf32>
// IR: %[[GOT:.+]] = "stablehlo.all_to_all"(%[[SEND]]) <{{[{]}}channel_handle = {{.*}}, concat_dimension = 1 : i64, replica_groups = dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>, split_count = 4 : i64, split_dimension = 1 : i64}> : (tensor<2x4x8x4xf32>) -> tensor<2x4x8x4xf32>
// IR: %[[BEFORE:.+]] = stablehlo.dynamic_slice %[[GOT]], {{.*}} sizes = [2, 1, 8, 4]
// IR: %[[AFTER:.+]] = stablehlo.dynamic_slice %[[GOT]], {{.*}} sizes = [2, 1, 8, 4]
// IR: stablehlo.concatenate %[[BEFORE]], %{{.+}}, %[[AFTER]], dim = 1 : (tensor<2x1x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x6x8x4xf32>
// IR: stablehlo.convolution
// IR-SAME: -> tensor<2x4x8x8xf32>
// DEAR: collectives inserted by partition (bytes sent per device):
// DEAR-NEXT: all-gather {{ +}}axes {"x"} {{ +}}3072 B
