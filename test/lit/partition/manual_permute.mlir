// A shard_map body's own collective_permute (a ring over the manual axis "y",
// one ring per "x" position as jax writes it) runs on the body's blocks split
// over the free axis "x"; pairs that join devices of different "x" blocks
// make it run replicated, with a remark.
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
