// RUN: %opt %s -p 'propagate{strategy=basic}' --split-input-file | filecheck %s
// RUN: %opt %s -p 'spmd-pipeline' --split-input-file | filecheck %s --check-prefix=PART

// Axes of size 1 split nothing, but propagation keeps them where the user
// wrote them and carries them like any other axis (as Shardy's propagation
// does; a size-1 axis is used once per tensor like any other). The
// partitioner reads them as absent: no collective over a group of one.

sdy.mesh @mesh = <["a"=1, "b"=2, "c"=1, "d"=2]>
// CHECK-LABEL: func @kept_and_propagated(
// CHECK-SAME: %arg0: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"d", ?}, {"a", "b", "c"}]>}
// CHECK: stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"d"}, {"a", "b", "c", ?}]>]>}
// PART-LABEL: func public @kept_and_propagated(
// PART-NOT: stablehlo.all_gather
// PART-NOT: stablehlo.all_reduce
// PART: return
func.func @kept_and_propagated(
    %arg0: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"a", "b", "c"}]>}) -> tensor<4x8xf32> {
  %0 = stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"d"}, {?}]>]>} : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----
// A size-1 axis on one dim is not put on another dim of the same tensor.
sdy.mesh @mesh = <["x"=1, "y"=1]>
// CHECK-LABEL: func @used_once_per_tensor(
// CHECK: stablehlo.dot_general %arg0, %arg1
// CHECK-SAME: <@mesh, [{"x", ?}, {"y", ?}]>
func.func @used_once_per_tensor(
    %arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>},
    %arg1: tensor<16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}) -> tensor<8x16xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
