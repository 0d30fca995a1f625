// Hostile text given to the whole pipeline: a diagnostic at the right place, no
// traceback, no hang; other cases of the file still run.
// RUN: not %opt %s -p spmd-pipeline --split-input-file 2>&1 | filecheck %s
// RUN: not %opt %s -p spmd-pipeline --split-input-file 2>&1 | filecheck %s --check-prefix=NOTRACE
// NOTRACE-NOT: Traceback
// NOTRACE-NOT: internal error

// CHECK: hostile.mlir:[[# @LINE + 1]]:9: error: invalid type identifier
garbage !@#$ in the middle of nowhere

// -----
func.func @unknown_dialect(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: hostile.mlir:[[# @LINE + 1]]:8: error: Dialect `foo' not found for custom op 'foo.bar'
  %0 = foo.bar %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @unknown_op(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: hostile.mlir:[[# @LINE + 1]]:8: error: custom op 'stablehlo.frobnicate' is unknown
  %0 = stablehlo.frobnicate %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @wrong_types(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: hostile.mlir:[[# @LINE + 1]]:8: error: op requires the same element type for all operands and results
  %0 = "stablehlo.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi32>
  return %a : tensor<4xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// CHECK: hostile.mlir:[[# @LINE + 1]]:1: error: 'func.func' op arg 0 - unknown mesh: @nomesh
func.func @unknown_mesh(%a: tensor<8xf32> {sdy.sharding = #sdy.sharding<@nomesh, [{"x"}]>}) -> tensor<8xf32> {
  return %a : tensor<8xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// CHECK: hostile.mlir:[[# @LINE + 1]]:1: error: 'func.func' op arg 0 - unknown axis name: "z"
func.func @unknown_axis(%a: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"z"}]>}) -> tensor<8xf32> {
  return %a : tensor<8xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// CHECK: hostile.mlir:[[# @LINE + 1]]:1: error: 'func.func' op arg 0 - duplicate axis ref: "x"
func.func @axis_twice(%a: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"x"}]>}) -> tensor<8x8xf32> {
  return %a : tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
func.func @bad_priority(%a: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: hostile.mlir:[[# @LINE + 1]]:81: error: expected '>'
  %0 = stablehlo.abs %a {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]pq>]>} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// CHECK: hostile.mlir:[[# @LINE + 1]]:1: error: 'func.func' op arg 0 - sub-axis next pre-size 15 doesn't divide the size of the full axis 4: "x":(3)5
func.func @bad_sub_axis(%a: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x":(3)5}]>}) -> tensor<8xf32> {
  return %a : tensor<8xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// A boundary its axes do not divide: propagated as Shardy does; the partitioned
// program's boundary keeps the axes that divide it, and says so.
// CHECK: hostile.mlir:[[# @LINE + 1]]:1: warning: argument 0 of @non_divisible: dim 0 has size 6, which mesh axes {"x"} do not divide
func.func @non_divisible(%a: tensor<6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<6xf32> {
  return %a : tensor<6xf32>
}

// -----
func.func @region_arity(%a: tensor<i32>) -> tensor<i32> {
  // CHECK: hostile.mlir:[[# @LINE + 1]]:8: error: expect condition body returns a single value but got 2
  %0 = stablehlo.while(%i = %a) : tensor<i32>
  cond {
    stablehlo.return %i, %i : tensor<i32>, tensor<i32>
  } do {
    stablehlo.return %i : tensor<i32>
  }
  return %0 : tensor<i32>
}

// -----
module attributes {mhlo.num_partitions = 8 : i32} {
  // CHECK: hostile.mlir:[[# @LINE + 1]]:3: error: mesh @mesh has 12 devices (x=3 x y=4) but the module declares mhlo.num_partitions = 8
  sdy.mesh @mesh = <["x"=3, "y"=4]>
  func.func @main(%a: tensor<12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<12xf32> {
    return %a : tensor<12xf32>
  }
}

// -----
// Huge shapes are fine as long as nothing is allocated: the pipeline runs.
// CHECK-LABEL: func.func @huge_shapes
func.func @huge_shapes(%a: tensor<100000000000x100000000000xf32>) -> tensor<100000000000x100000000000xf32> {
  %0 = stablehlo.abs %a : tensor<100000000000x100000000000xf32>
  return %0 : tensor<100000000000x100000000000xf32>
}
