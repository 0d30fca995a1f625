// A 3x3 window over a height split 4 ways needs a halo row from each
// neighbour. On a small value one launch costs more than the bytes: one
// all-gather of only the rows the neighbours take (each device's first and
// last row) beats both two collective-permutes (a launch each) and a gather
// of the dim (3x the bytes and a whole copy), and a remark says so. On a
// larger value the pieces' gather still beats the permutes while gathering
// the dim does not; on rows of half a MiB the bytes dominate and the
// permutes, which send the fewest, are taken. Where the halos are as long
// as a block (a window dilated 3), the pieces are the whole dim and the dim
// is gathered.
// RUN: %opt %s -p partition --split-input-file --collectives 2>&1 >/dev/null | filecheck %s
// RUN: %opt %s -p partition --split-input-file | filecheck %s --check-prefix=IR

sdy.mesh @mesh = <["x"=4]>
func.func public @main(%x: tensor<2x16x8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}, %k: tensor<3x3x4x8xf32>) -> (tensor<2x16x8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) {
  // CHECK: windows_remarks.mlir:[[# @LINE + 1]]:8: remark: operand 0 window along dim 1: one all-gather of the window's pieces (estimated {{.*}} us) rather than one all-gather of the dim ({{.*}} us)
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : (tensor<2x16x8x4xf32>, tensor<3x3x4x8xf32>) -> tensor<2x16x8x8xf32>
  return %0 : tensor<2x16x8x8xf32>
}
// CHECK: collectives inserted by partition (bytes sent per device):
// CHECK-NEXT: all-gather {{ +}}axes {"x"} {{ +}}1536 B {{ +}}{{[0-9.]+}} us  stablehlo.convolution at {{.*}}: operand 0 window along dim 1: 2 along dim 1, the pieces from blocks -1, +1
// CHECK-NEXT: total: 1 collectives (all-gather x1), 1536 B per device, estimated {{[0-9.]+}} us

// Each device contributes its last row (for the block after) and its first
// (for the block before); the window is the last row of the block before,
// its own 4 rows and the first row of the block after. Past the ends the
// row cut from the gathered pieces is another block's: each of the two rows
// is set to zeros (the padding) by a scalar test of where it lies, and the
// window itself is not masked.
// IR-LABEL: func.func public @main
// IR: %[[LAST:.+]] = stablehlo.slice %arg2 [0:2, 3:4, 0:8, 0:4]
// IR: %[[FIRST:.+]] = stablehlo.slice %arg2 [0:2, 0:1, 0:8, 0:4]
// IR: %[[MINE:.+]] = stablehlo.concatenate %[[LAST]], %[[FIRST]], dim = 1 : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x2x8x4xf32>
// IR: %[[ALL:.+]] = "stablehlo.all_gather"(%[[MINE]]) <{all_gather_dim = 1 : i64, {{.*}}replica_groups = dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>{{.*}}}> : (tensor<2x2x8x4xf32>) -> tensor<2x8x8x4xf32>
// IR: %[[BEFORE:.+]] = stablehlo.dynamic_slice %[[ALL]], {{.*}} sizes = [2, 1, 8, 4]
// IR: %[[B:.+]] = stablehlo.select %{{.*}}, %[[BEFORE]], %{{.*}} : tensor<2x1x8x4xi1>, tensor<2x1x8x4xf32>
// IR: %[[AFTER:.+]] = stablehlo.dynamic_slice %[[ALL]], {{.*}} sizes = [2, 1, 8, 4]
// IR: %[[A:.+]] = stablehlo.select %{{.*}}, %[[AFTER]], %{{.*}} : tensor<2x1x8x4xi1>, tensor<2x1x8x4xf32>
// IR: %[[WINDOW:.+]] = stablehlo.concatenate %[[B]], %arg2, %[[A]], dim = 1 : (tensor<2x1x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x6x8x4xf32>
// IR-NOT: stablehlo.select
// IR: stablehlo.convolution
// IR-SAME: -> tensor<2x4x8x8xf32>

// -----

sdy.mesh @mesh = <["x"=4]>
func.func public @dilated(%x: tensor<2x16x8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}, %k: tensor<3x3x4x8xf32>) -> (tensor<2x16x8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) {
  // CHECK: windows_remarks.mlir:[[# @LINE + 1]]:8: remark: operand 0 window along dim 1: one all-gather of the dim (estimated {{.*}} us) is cheaper than exchanging the window's pieces ({{.*}} us)
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[3, 3], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [3, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : (tensor<2x16x8x4xf32>, tensor<3x3x4x8xf32>) -> tensor<2x16x8x8xf32>
  return %0 : tensor<2x16x8x8xf32>
}
// CHECK: collectives inserted by partition (bytes sent per device):
// CHECK-NEXT: all-gather {{ +}}axes {"x"} {{ +}}3072 B {{ +}}{{[0-9.]+}} us  stablehlo.convolution at {{.*}}: operand 0 window along dim 1: [{}, {"x"}, {}, {}] -> [{}, {}, {}, {}]
// CHECK-NEXT: total: 1 collectives (all-gather x1), 3072 B per device

// -----

sdy.mesh @mesh = <["x"=4]>
func.func public @rows_of_4KiB(%x: tensor<2x64x32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}, %k: tensor<3x3x16x16xf32>) -> (tensor<2x64x32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) {
  // CHECK: windows_remarks.mlir:[[# @LINE + 1]]:8: remark: operand 0 window along dim 1: one all-gather of the window's pieces (estimated {{.*}} us) rather than exchanging the window's pieces ({{.*}} us)
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : (tensor<2x64x32x16xf32>, tensor<3x3x16x16xf32>) -> tensor<2x64x32x16xf32>
  return %0 : tensor<2x64x32x16xf32>
}
// CHECK: collectives inserted by partition (bytes sent per device):
// CHECK-NEXT: all-gather{{ +}}axes {"x"} {{ +}}24576 B {{ +}}{{[0-9.]+}} us  stablehlo.convolution at {{.*}}: operand 0 window along dim 1: 2 along dim 1, the pieces from blocks -1, +1
// CHECK-NEXT: total: 1 collectives (all-gather x1), 24576 B per device

// -----

sdy.mesh @mesh = <["x"=4]>
func.func public @rows_of_512KiB(%x: tensor<8x64x256x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}, %k: tensor<3x3x64x64xf32>) -> (tensor<8x64x256x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) {
  // CHECK-NOT: remark
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : (tensor<8x64x256x64xf32>, tensor<3x3x64x64xf32>) -> tensor<8x64x256x64xf32>
  return %0 : tensor<8x64x256x64xf32>
}
// CHECK: collectives inserted by partition (bytes sent per device):
// CHECK-NEXT: collective-permute{{ +}}axes {"x"} {{ +}}524288 B
// CHECK-NEXT: collective-permute{{ +}}axes {"x"} {{ +}}524288 B
// CHECK-NEXT: total: 2 collectives (collective-permute x2), 1048576 B per device
