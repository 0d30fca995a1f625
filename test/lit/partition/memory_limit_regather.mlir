// Under partition{memory-limit=...} a gathered copy that a later op reads
// again is held only while that keeps the live values under the limit;
// otherwise it is let go and gathered again where it is read (and the two
// all-gathers are not combined back into one).
// (A 3x3 window dilated 3 along the split height: halos of 3 rows on each
// side of 4-row blocks, so a gather of the pieces would send what the gather
// of the dim sends.)
// RUN: %opt %s -p partition --collectives 2>&1 >/dev/null | filecheck %s --check-prefix=FREE
// RUN: %opt %s -p 'partition{memory-limit=22KiB}' --collectives 2>&1 >/dev/null | filecheck %s

// x: 1 KiB per device, k: 1.125 KiB; x gathered whole: 4 KiB. Between the two
// convolutions %1 holds 16 KiB: the copy held across would take the live
// values to 24.12 KiB.
sdy.mesh @mesh = <["x"=4]>
func.func public @regather(%x: tensor<2x16x8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}, %k: tensor<3x3x4x8xf32>) -> (tensor<2x16x8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[3, 3], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [3, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : (tensor<2x16x8x4xf32>, tensor<3x3x4x8xf32>) -> tensor<2x16x8x8xf32>
  %1 = stablehlo.broadcast_in_dim %0, dims = [0, 1, 2, 3] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}, {}]>]>} : (tensor<2x16x8x8xf32>) -> tensor<2x16x8x8x8xf32>
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %2 = stablehlo.reduce(%1 init: %c) applies stablehlo.add across dimensions = [4] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : (tensor<2x16x8x8x8xf32>, tensor<f32>) -> tensor<2x16x8x8xf32>
  // CHECK: memory_limit_regather.mlir:[[# @LINE + 1]]:8: remark: operand 0: [{}, {}, {}, {}] made again here; holding the copy made before until here would take the live values above memory-limit 22.00 KiB
  %3 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[3, 3], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [3, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : (tensor<2x16x8x4xf32>, tensor<3x3x4x8xf32>) -> tensor<2x16x8x8xf32>
  %4 = stablehlo.add %2, %3 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : tensor<2x16x8x8xf32>
  return %4 : tensor<2x16x8x8xf32>
}
// CHECK: remark: estimated peak of live values per device: 20.13 KiB (memory-limit 22.00 KiB)
// FREE: collectives inserted by partition
// FREE-NEXT: all-gather {{ +}}axes {"x"} {{ +}}3072 B {{.*}}:16:8: operand 0 window along dim 1
// FREE-NEXT: total: 1 collectives (all-gather x1)
// CHECK: collectives inserted by partition
// CHECK-NEXT: all-gather {{ +}}axes {"x"} {{ +}}3072 B {{.*}}:16:8: operand 0 window along dim 1
// CHECK-NEXT: all-gather {{ +}}axes {"x"} {{ +}}3072 B {{.*}}:{{[0-9]+}}:8: operand 0:
// CHECK-NEXT: total: 2 collectives (all-gather x2), 6144 B per device
// CHECK-NOT: combined
