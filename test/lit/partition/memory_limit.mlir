// Under partition{memory-limit=...} a gather of a whole dim that the cost
// model prefers is taken only while the live values stay under the limit;
// otherwise the window's pieces are exchanged, and a remark says why.
// (A 3x3 window dilated 3 along the split height: halos of 3 rows on each
// side of 4-row blocks, so a gather of the pieces would send what the gather
// of the dim sends.)
// RUN: %opt %s -p partition --split-input-file --collectives 2>&1 >/dev/null | filecheck %s --check-prefix=FREE
// RUN: %opt %s -p 'partition{memory-limit=7KiB}' --split-input-file --collectives 2>&1 >/dev/null | filecheck %s
// RUN: %opt %s -p 'partition{memory-limit=7KiB}' --split-input-file 2>/dev/null | filecheck %s --check-prefix=IR
// RUN: not %opt %s -p 'partition{memory-limit=1KiB}' --split-input-file 2>&1 | filecheck %s --check-prefix=ERR
// RUN: not %opt %s -p 'partition{memory-limit=lots}' --split-input-file 2>&1 | filecheck %s --check-prefix=BAD

// BAD: memory_limit.mlir:1:1: error: partition: memory-limit 'lots' is not a size; write bytes, optionally with a unit: 512MiB, 2GB, 1e9

// x: 1 KiB per device, k: 1.125 KiB, the result 2 KiB; the input gathered
// whole along its split height is 4 KiB more.
sdy.mesh @mesh = <["x"=4]>
func.func public @conv(%x: tensor<2x16x8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}, %k: tensor<3x3x4x8xf32>) -> (tensor<2x16x8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) {
  // FREE: memory_limit.mlir:[[# @LINE + 4]]:8: remark: operand 0 window along dim 1: one all-gather of the dim (estimated {{.*}} us) is cheaper than exchanging the window's pieces ({{.*}} us)
  // CHECK: memory_limit.mlir:[[# @LINE + 3]]:8: remark: operand 0 window along dim 1: exchanging the window's pieces (estimated {{.*}} us) rather than one all-gather of the dim ({{.*}} us): the gathered copy (4.00 KiB) would take the live values to 8.12 KiB per device, above memory-limit 7.00 KiB
  // CHECK: memory_limit.mlir:[[# @LINE + 2]]:8: remark: estimated peak of live values per device: 4.12 KiB (memory-limit 7.00 KiB)
  // ERR: memory_limit.mlir:[[# @LINE + 1]]:8: error: partition: the values live at this op take an estimated 4.12 KiB per device as laid out (each from the op that makes it to its last use), above memory-limit 1.00 KiB; split more of them over the mesh or raise the limit
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[3, 3], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [3, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : (tensor<2x16x8x4xf32>, tensor<3x3x4x8xf32>) -> tensor<2x16x8x8xf32>
  return %0 : tensor<2x16x8x8xf32>
}
// FREE: collectives inserted by partition
// FREE-NEXT: all-gather {{ +}}axes {"x"} {{ +}}3072 B
// FREE-NEXT: total: 1 collectives
// CHECK: collectives inserted by partition
// CHECK-NEXT: collective-permute axes {"x"} {{ +}}768 B {{.*}} 3 along dim 1 from block -1
// CHECK-NEXT: collective-permute axes {"x"} {{ +}}768 B {{.*}} 3 along dim 1 from block +1
// CHECK-NEXT: total: 2 collectives (collective-permute x2), 1536 B per device

// -----

// A rotation by four rows with the second piece negated (not a rotation of
// x, which the concatenate would move itself): the second slice (rows 0-3,
// one per block, all in block 0) would run whole on a gathered copy of x
// (8 KiB) and its whole result (2 KiB); under the limit it stays split, and
// each device receives the row its block needs: by permutes, as one
// all-gather of the pieces (6 KiB held) would not fit either.
sdy.mesh @mesh = <["x"=4]>
func.func public @roll(%x: tensor<16x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<16x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = stablehlo.slice %x [4:16, 0:128] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<16x128xf32>) -> tensor<12x128xf32>
  // CHECK: memory_limit.mlir:[[# @LINE + 2]]:8: remark: stablehlo.slice stays split along its dim 0 rather than running whole on gathered copies: the gathered copy (10.00 KiB) would take the live values to 14.00 KiB per device, above memory-limit 7.00 KiB
  // CHECK: memory_limit.mlir:[[# @LINE + 1]]:8: remark: operand 0 window along dim 0: exchanging the window's pieces rather than one all-gather of them: the gathered copy (6.00 KiB) would take the live values to 10.00 KiB per device, above memory-limit 7.00 KiB
  %1 = stablehlo.slice %x [0:4, 0:128] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<16x128xf32>) -> tensor<4x128xf32>
  %n = stablehlo.negate %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<4x128xf32>
  // ERR: memory_limit.mlir:[[# @LINE + 1]]:8: error: partition: the values live at this op take an estimated 6.00 KiB per device
  %2 = stablehlo.concatenate %0, %n, dim = 0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<12x128xf32>, tensor<4x128xf32>) -> tensor<16x128xf32>
  return %2 : tensor<16x128xf32>
}
// FREE: all-gather {{ +}}axes {"x"} {{ +}}6144 B {{.*}} stablehlo.slice
// CHECK: collectives inserted by partition
// CHECK-NOT: all-gather {{.*}} stablehlo.slice
// CHECK: collective-permute {{.*}} stablehlo.slice at {{.*}}: operand 0 window along dim 0: 1 along dim 0 from block -3
// CHECK-NOT: all-gather {{.*}} stablehlo.slice
// CHECK: total:

// -----

// Rotated by one row (the piece negated again), the second slice's row is
// block 0's own and its other blocks are padding (an uneven split): no block
// fetches anything for it.
sdy.mesh @mesh = <["x"=4]>
func.func public @roll_one(%x: tensor<16x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<16x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = stablehlo.slice %x [1:16, 0:128] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<16x128xf32>) -> tensor<15x128xf32>
  %1 = stablehlo.slice %x [0:1, 0:128] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<16x128xf32>) -> tensor<1x128xf32>
  %n = stablehlo.negate %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<1x128xf32>
  %2 = stablehlo.concatenate %0, %n, dim = 0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<15x128xf32>, tensor<1x128xf32>) -> tensor<16x128xf32>
  return %2 : tensor<16x128xf32>
}
// FREE: collectives inserted by partition
// FREE-NEXT: collective-permute{{ +}}axes {"x"} {{ +}}512 B {{.*}} stablehlo.slice at {{.*}}: operand 0 window along dim 0: 1 along dim 0 from block +1
// FREE-NEXT: collective-permute{{ +}}axes {"x"} {{ +}}512 B {{.*}} stablehlo.concatenate at {{.*}}: operand 1 window along dim 0: 1 along dim 0 from block -3
// FREE-NEXT: total: 2 collectives
// CHECK: collectives inserted by partition
// CHECK-NEXT: collective-permute {{.*}} 512 B {{.*}} stablehlo.slice
// CHECK-NEXT: collective-permute {{.*}} 512 B {{.*}} stablehlo.concatenate
// CHECK-NEXT: total: 2 collectives

// -----

// A sort along its only dim, split 4 ways: unlimited, every device sorts
// gathered copies; under the limit the gathered operand and result (4 KiB
// each) do not fit, and the blocks (1 KiB) are sorted where they are and
// merged: in round r blocks i and i + 1 (i + r even) swap by
// collective-permute, sort the two together and keep their half.
sdy.mesh @mesh = <["x"=4]>
func.func public @sort(%x: tensor<1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> (tensor<1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
  // CHECK: memory_limit.mlir:[[# @LINE + 1]]:8: remark: stablehlo.sort along its split dim 0 merges the sorted blocks over {"x"} (4 rounds of collective-permutes) rather than sorting gathered copies: the gathered copy (8.00 KiB) would take the live values to 10.00 KiB per device, above memory-limit 7.00 KiB
  %0 = "stablehlo.sort"(%x) <{dimension = 0 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) : (tensor<1024xf32>) -> tensor<1024xf32>
  return %0 : tensor<1024xf32>
}
// IR-LABEL: func.func public @sort
// IR: %[[BLOCK:.*]] = "stablehlo.sort"(%arg1) {{.*}}
// IR: (tensor<256xf32>) -> tensor<256xf32>
// Round 1: blocks 0 and 1, 2 and 3 swap; the lower (1 at positions 0, 2)
// puts its own block first and keeps elements 0-255 of the merge.
// IR: %[[GOT:.*]] = "stablehlo.collective_permute"(%[[BLOCK]]) {{.*}} source_target_pairs = dense<{{\[}}[0, 1], [1, 0], [2, 3], [3, 2]]>
// IR: stablehlo.constant dense<[1, 0, 1, 0]>
// IR: stablehlo.constant dense<[0, 256, 0, 256]>
// IR: %[[FIRST:.*]] = stablehlo.select %{{.*}}, %[[BLOCK]], %[[GOT]]
// IR: %[[SECOND:.*]] = stablehlo.select %{{.*}}, %[[GOT]], %[[BLOCK]]
// IR: %[[BOTH:.*]] = stablehlo.concatenate %[[FIRST]], %[[SECOND]], dim = 0
// IR: %[[MERGED:.*]] = "stablehlo.sort"(%[[BOTH]])
// IR: (tensor<512xf32>) -> tensor<512xf32>
// IR: %[[KEPT:.*]] = stablehlo.dynamic_slice %[[MERGED]], %{{.*}}, sizes = [256]
// Round 2: blocks 1 and 2 swap; blocks 0 and 3 keep their own.
// IR: "stablehlo.collective_permute"(%[[KEPT]]) {{.*}} source_target_pairs = dense<{{\[}}[1, 2], [2, 1]]>
// IR: stablehlo.constant dense<[0, 1, 1, 0]>
// IR: stablehlo.select %{{.*}}, %{{.*}}, %[[KEPT]] : tensor<i1>, tensor<256xf32>
// FREE: all-gather {{ +}}axes {"x"} {{ +}}3072 B {{.*}} stablehlo.sort
// CHECK: collectives inserted by partition
// CHECK-NEXT: collective-permute axes {"x"} {{ +}}1024 B {{.*}} odd-even merge of sorted blocks, round 1 of 4
// CHECK-NEXT: collective-permute axes {"x"} {{ +}}1024 B {{.*}} round 2 of 4
// CHECK-NEXT: collective-permute axes {"x"} {{ +}}1024 B {{.*}} round 3 of 4
// CHECK-NEXT: collective-permute axes {"x"} {{ +}}1024 B {{.*}} round 4 of 4
// CHECK-NEXT: total: 4 collectives (collective-permute x4), 4096 B per device
