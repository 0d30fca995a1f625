// RUN: not %opt %s -p partition --split-input-file 2>&1 | filecheck %s

sdy.mesh @a = <["x"=2]>
sdy.mesh @b = <["y"=2]>
// CHECK: partition_errors.mlir:4:1: error: partition handles modules with one sdy.mesh; found @a, @b
func.func public @two_meshes(%x: tensor<4xf32> {sdy.sharding = #sdy.sharding<@a, [{"x"}]>}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// CHECK: partition_errors.mlir:[[# @LINE + 1]]:1: error: cannot partition: dim 0 of value tensor<6xf32> has size 6, not divisible by 4 (axes "x")
func.func public @uneven_argument(%x: tensor<6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<6xf32> {
  return %x : tensor<6xf32>
}

// -----
sdy.mesh @mesh = <["i"=4, "j"=2]>
// A result whose sharding does not divide it (jax's rule for out_shardings),
// named at the return (it was written out as is and failed the verifier on
// meshjit's own output, a shard_map of the whole body).
func.func public @uneven_result(%x: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i", "j"}]>}) -> (tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i", "j"}]>}) {
  %0 = stablehlo.slice %x [0:4] : (tensor<8xf32>) -> tensor<4xf32>
  // CHECK: partition_errors.mlir:[[# @LINE + 1]]:3: error: cannot partition: dim 0 of result 0 of @uneven_result (tensor<4xf32>) has size 4, not divisible by 8 (axes "i", "j")
  return %0 : tensor<4xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// CHECK: partition_errors.mlir:[[# @LINE + 4]]:1: error: partition needs a function @main or exactly one public function; found @f, @g
func.func public @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}
func.func public @g(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----
module attributes {mhlo.num_partitions = 8 : i32} {
  // CHECK: partition_errors.mlir:[[# @LINE + 1]]:3: error: mesh @mesh has 12 devices (x=3 x y=4) but the module declares mhlo.num_partitions = 8; the axis sizes must multiply to the device count
  sdy.mesh @mesh = <["x"=3, "y"=4]>
  func.func @main(%a: tensor<12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<12xf32> {
    return %a : tensor<12xf32>
  }
}

// -----
// Unreduced values pass a shard_map boundary over its manual axes only: over
// an axis the body is partitioned over (partial manual) they are refused,
// not read as replicated.
sdy.mesh @mesh = <["x"=2, "y"=2]>
func.func public @unreduced_free_axis(%x: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}], unreduced={"y"}>}) -> tensor<8xf32> {
  // CHECK: partition_errors.mlir:[[# @LINE + 1]]:8: error: a sharding with unreduced={"y"} on a shard_map argument, over axes the shard_map is not manual over: meshjit's partitioner does not support that yet
  %0 = sdy.manual_computation(%x) in_shardings=[<@mesh, [{}], unreduced={"y"}>] out_shardings=[<@mesh, [{}]>] manual_axes={"x"} (%a: tensor<8xf32>) {
    sdy.return %a : tensor<8xf32>
  } : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
