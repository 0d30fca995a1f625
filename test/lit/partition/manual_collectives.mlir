// A shard_map body's own collectives over its manual axis "y" (one ring or
// group per "x" position, as jax writes them) run on the body's blocks split
// over the free axis "x": a ppermute ring, a tiled all_gather, psum_scatter
// and all_to_all, with their own dims whole. Pairs that join devices of
// different "x" blocks make the op run replicated, with a remark.
// RUN: %opt %s -p partition --split-input-file | filecheck %s
// RUN: %opt %s -p partition --split-input-file --collectives 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func.func public @ring_over_manual_axis_on_free_blocks
// CHECK: sdy.manual_computation
// CHECK: %[[P:.*]] = "stablehlo.collective_permute"(%arg1)
// CHECK-SAME: source_target_pairs = dense<{{\[\[}}0, 1], [1, 2], [2, 3], [3, 0], [4, 5], [5, 6], [6, 7], [7, 4]]>
// CHECK-SAME: (tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NOT: all_gather
// CHECK: sdy.return
// The report lists it as the program's own, on the local block (4x16 f32).
// REMARK: total: 0 collectives (none)
// REMARK-NEXT: program's own: collective-permute axes {"y"} 256 B {{.*}} stablehlo.collective_permute at {{.*}}manual_collectives.mlir:{{[0-9]+}}:10 (a shard_map body's, as written)
func.func public @ring_over_manual_axis_on_free_blocks(%arg0: tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {"y"}]>] out_shardings=[<@mesh, [{"x"}, {"y"}]>] manual_axes={"y"} (%arg1: tensor<8x16xf32>) {
    %1 = "stablehlo.collective_permute"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 0], [4, 5], [5, 6], [6, 7], [7, 4]]> : tensor<8x2xi64>}> {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %2 = stablehlo.tanh %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<8x16xf32>
    sdy.return %2 : tensor<8x16xf32>
  } : (tensor<8x64xf32>) -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// Pairs from device 3 to 4 cross from the first "x" block to the second:
// the operand is gathered along "x" and the permute runs on the whole.
// CHECK-LABEL: func.func public @pairs_across_free_blocks_run_replicated
// CHECK: %[[G:.*]] = "stablehlo.all_gather"(%arg1)
// CHECK: "stablehlo.collective_permute"(%[[G]])
// CHECK-SAME: (tensor<8x16xf32>) -> tensor<8x16xf32>
// REMARK: 'stablehlo.collective_permute' computed replicated (its pairs join devices of different "x" blocks)
func.func public @pairs_across_free_blocks_run_replicated(%arg0: tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {"y"}]>] out_shardings=[<@mesh, [{"x"}, {"y"}]>] manual_axes={"y"} (%arg1: tensor<8x16xf32>) {
    %1 = "stablehlo.collective_permute"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 0]]> : tensor<8x2xi64>}> {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
    sdy.return %1 : tensor<8x16xf32>
  } : (tensor<8x64xf32>) -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// all_gather then reduce_scatter along dim 1 over "y" on blocks of dim 0
// split over "x": 4 of the 8 rows each, nothing else moved.
// CHECK-LABEL: func.func public @gather_and_scatter_on_free_blocks
// CHECK: %[[G:.*]] = "stablehlo.all_gather"(%arg1)
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]>
// CHECK-SAME: (tensor<4x4x12xf32>) -> tensor<4x16x12xf32>
// CHECK: %[[S:.*]] = "stablehlo.reduce_scatter"(%[[G]])
// CHECK: }) : (tensor<4x16x12xf32>) -> tensor<4x4x12xf32>
// CHECK: sdy.return %[[S]] : tensor<4x4x12xf32>
// CHECK-NOT: all_gather
// REMARK-NOT: computed replicated
func.func public @gather_and_scatter_on_free_blocks(%arg0: tensor<8x16x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}, {}]>}) -> (tensor<8x16x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}, {}]>}) {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {"y"}, {}]>] out_shardings=[<@mesh, [{"x"}, {"y"}, {}]>] manual_axes={"y"} (%arg1: tensor<8x4x12xf32>) {
    %1 = "stablehlo.all_gather"(%arg1) <{all_gather_dim = 1 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, use_global_device_ids}> {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}, {}]>]>} : (tensor<8x4x12xf32>) -> tensor<8x16x12xf32>
    %2 = "stablehlo.reduce_scatter"(%1) <{channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, scatter_dimension = 1 : i64, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %3 = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %3 : tensor<f32>
    }) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}, {}]>]>} : (tensor<8x16x12xf32>) -> tensor<8x4x12xf32>
    sdy.return %2 : tensor<8x4x12xf32>
  } : (tensor<8x16x12xf32>) -> tensor<8x16x12xf32>
  return %0 : tensor<8x16x12xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// all_to_all over "y" (split dim 2, concat dim 1) on blocks of dim 0 split
// over "x"; where dim 2, which it splits, is split over "x" too, that dim is
// gathered first (its rule keeps the op's own dims whole).
// CHECK-LABEL: func.func public @all_to_all_on_free_blocks
// CHECK-NOT: all_gather
// CHECK: "stablehlo.all_to_all"(%arg1)
// CHECK-SAME: (tensor<4x4x12xf32>) -> tensor<4x16x3xf32>
func.func public @all_to_all_on_free_blocks(%arg0: tensor<8x16x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}, {}]>}) -> (tensor<8x16x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {"y"}]>}) {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {"y"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}, {"y"}]>] manual_axes={"y"} (%arg1: tensor<8x4x12xf32>) {
    %1 = "stablehlo.all_to_all"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, concat_dimension = 1 : i64, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, split_count = 4 : i64, split_dimension = 2 : i64}> {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}, {}]>]>} : (tensor<8x4x12xf32>) -> tensor<8x16x3xf32>
    sdy.return %1 : tensor<8x16x3xf32>
  } : (tensor<8x16x12xf32>) -> tensor<8x16x12xf32>
  return %0 : tensor<8x16x12xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func.func public @all_to_all_split_dim_split_over_free_axis
// CHECK: %[[G:.*]] = "stablehlo.all_gather"(%arg1)
// CHECK-SAME: all_gather_dim = 2
// CHECK: "stablehlo.all_to_all"(%[[G]])
// CHECK-SAME: (tensor<8x4x12xf32>) -> tensor<8x16x3xf32>
func.func public @all_to_all_split_dim_split_over_free_axis(%arg0: tensor<8x16x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}, {"x"}]>}) -> (tensor<8x16x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {"y"}]>}) {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{}, {"y"}, {"x"}]>] out_shardings=[<@mesh, [{}, {}, {"y"}]>] manual_axes={"y"} (%arg1: tensor<8x4x12xf32>) {
    %1 = "stablehlo.all_to_all"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, concat_dimension = 1 : i64, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, split_count = 4 : i64, split_dimension = 2 : i64}> {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}, {}]>]>} : (tensor<8x4x12xf32>) -> tensor<8x16x3xf32>
    sdy.return %1 : tensor<8x16x3xf32>
  } : (tensor<8x16x12xf32>) -> tensor<8x16x12xf32>
  return %0 : tensor<8x16x12xf32>
}
