// shard_map bodies (sdy.manual_computation): manual over every axis they run
// as written; over a subset the body is partitioned over the free axes.
// RUN: %opt %s -p partition --split-input-file | filecheck %s

sdy.mesh @mesh = <["x"=8]>
// The result keeps the out_shardings' layout: the add runs on the block.
// CHECK-LABEL: func.func public @full_manual_result_stays_split
// CHECK: %[[M:.*]] = stablehlo.multiply %arg1, %{{.*}} : tensor<8x16xf32>
// CHECK-NEXT: %{{.*}} = stablehlo.constant dense<1.000000e+00> : tensor<8x16xf32>
// CHECK-NEXT: %[[A:.*]] = stablehlo.add %[[M]], %{{.*}} : tensor<8x16xf32>
// CHECK-NEXT: sdy.return %[[A]]
// CHECK-NOT: all_gather
func.func public @full_manual_result_stays_split(%arg0: tensor<64x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<64x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%arg1: tensor<8x16xf32>) {
    %c = stablehlo.constant dense<2.0> : tensor<8x16xf32>
    %1 = stablehlo.multiply %arg1, %c : tensor<8x16xf32>
    sdy.return %1 : tensor<8x16xf32>
  } : (tensor<64x16xf32>) -> tensor<64x16xf32>
  %c1 = stablehlo.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} dense<1.0> : tensor<64x16xf32>
  %2 = stablehlo.add %0, %c1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<64x16xf32>
  return %2 : tensor<64x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// Manual over "x" only: the body's dot contracts a dim split over the free
// axis "y" (partial sums, all-reduced over "y" only); the body's own psum
// over "x" keeps its replica groups.
// CHECK-LABEL: func.func public @partial_manual_body_partitioned_over_free_axes
// CHECK: %[[D:.*]] = stablehlo.dot_general %arg1, %{{.*}} : (tensor<32x4xf32>, tensor<4x32xf32>) -> tensor<32x32xf32>
// CHECK: %[[Y:.*]] = "stablehlo.all_reduce"(%[[D]])
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]>
// CHECK: %[[X:.*]] = "stablehlo.all_reduce"(%[[Y]])
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 4], [1, 5], [2, 6], [3, 7]]>
// CHECK: sdy.return %[[X]] : tensor<32x32xf32>
func.func public @partial_manual_body_partitioned_over_free_axes(%arg0: tensor<64x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<32x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {"y"}]>] out_shardings=[<@mesh, [{}, {}]>] manual_axes={"x"} (%arg1: tensor<32x16xf32>) {
    %1 = stablehlo.transpose %arg1, dims = [1, 0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y"}, {}]>]>} : (tensor<32x16xf32>) -> tensor<16x32xf32>
    %2 = stablehlo.dot_general %arg1, %1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<32x16xf32>, tensor<16x32xf32>) -> tensor<32x32xf32>
    %3 = "stablehlo.all_reduce"(%2) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<32x32xf32>) -> tensor<32x32xf32>
    sdy.return %3 : tensor<32x32xf32>
  } : (tensor<64x16xf32>) -> tensor<32x32xf32>
  return %0 : tensor<32x32xf32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// A full-manual body that calls private functions, one from a loop body
// (jnp.where and a fori_loop's closed_call inside a shard_map): the calls are
// inlined as written (the partitioned module keeps no private functions).
// CHECK-LABEL: func.func public @full_manual_body_calls
// CHECK: sdy.manual_computation
// CHECK: stablehlo.while
// CHECK: do {
// CHECK: %[[T:.*]] = stablehlo.tanh %{{.*}} : tensor<8x16xf32>
// CHECK: stablehlo.return %{{.*}}, %[[T]]
// CHECK: %[[S:.*]] = stablehlo.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<8x16xi1>, tensor<8x16xf32>
// CHECK: sdy.return %[[S]]
// CHECK-NOT: func.call
// CHECK-NOT: func.func private
func.func public @full_manual_body_calls(%arg0: tensor<64x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<64x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%arg1: tensor<8x16xf32>) {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %1:2 = stablehlo.while(%i = %c0, %x = %arg1) : tensor<i32>, tensor<8x16xf32>
    cond {
      %c3 = stablehlo.constant dense<3> : tensor<i32>
      %p = stablehlo.compare LT, %i, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %2 = func.call @step(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
      %c1 = stablehlo.constant dense<1> : tensor<i32>
      %3 = stablehlo.add %i, %c1 : tensor<i32>
      stablehlo.return %3, %2 : tensor<i32>, tensor<8x16xf32>
    }
    %z = stablehlo.constant dense<0.0> : tensor<8x16xf32>
    %4 = stablehlo.compare GT, %1#1, %z : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xi1>
    %5 = func.call @_where(%4, %1#1, %z) : (tensor<8x16xi1>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    sdy.return %5 : tensor<8x16xf32>
  } : (tensor<64x16xf32>) -> tensor<64x16xf32>
  return %0 : tensor<64x16xf32>
}
func.func private @step(%arg0: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.tanh %arg0 : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
func.func private @_where(%arg0: tensor<8x16xi1>, %arg1: tensor<8x16xf32>, %arg2: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<8x16xi1>, tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["i"=4, "j"=2]>
// Manual over "i"; the result's free axis "j" does not divide the body's
// one-row block (jax's partially_sharded_dim_with_auto: a shard_map's result
// then constrained to P(("i", "j"))). Split by "j" inside each block, the
// rows are not where "i","j" put them across the dim (there device (i, j)
// holds row 2i+j), so the body returns its row unsplit by "j" (gathered over
// the "j" pairs, the padding cut off) and the value is laid out [{"i"}]
// outside: reaching [{"i", "j"}] gathers it over "i" and cuts row 2i+j.
// CHECK-LABEL: func.func public @free_axis_not_dividing_a_manual_block
// CHECK: %[[ROW:.*]] = stablehlo.broadcast_in_dim %{{.*}}, dims = [] : (tensor<f32>) -> tensor<1xf32>
// CHECK: %[[J:.*]] = "stablehlo.all_gather"(%[[ROW]])
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 1], [2, 3], [4, 5], [6, 7]]>
// CHECK-SAME: (tensor<1xf32>) -> tensor<2xf32>
// CHECK: %[[MINE:.*]] = stablehlo.slice %[[J]] [0:1]
// CHECK: %[[I:.*]] = "stablehlo.all_gather"(%[[MINE]])
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 2, 4, 6], [1, 3, 5, 7]]>
// CHECK-SAME: (tensor<1xf32>) -> tensor<4xf32>
// CHECK: %[[P:.*]] = stablehlo.pad %[[I]], %{{.*}}, low = [0], high = [4]
// CHECK: stablehlo.dynamic_slice %[[P]], %{{.*}}, sizes = [1]
func.func public @free_axis_not_dividing_a_manual_block(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) -> (tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i"}]>}) {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"i"}]>] out_shardings=[<@mesh, [{"i", "j"}]>] manual_axes={"i"} (%arg1: tensor<2xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.reduce(%arg1 init: %cst) applies stablehlo.add across dimensions = [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, []>]>} : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
    %4 = stablehlo.broadcast_in_dim %2, dims = [] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"j"}]>]>} : (tensor<f32>) -> tensor<1xf32>
    sdy.return %4 : tensor<1xf32>
  } : (tensor<8xf32>) -> tensor<4xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"i", "j"}]> : tensor<4xf32>
  return %1 : tensor<4xf32>
}
