// RUN: %opt %s -p 'propagate' --split-input-file | filecheck %s
// RUN: %opt %s -p 'propagation-pipeline' --split-input-file | filecheck %s --check-prefix=EXPORT
// RUN: %opt %s -p 'propagation-pipeline' --split-input-file 2>&1 | filecheck %s --check-prefix=WARN
// A boundary sharding that does not divide its dim is propagated as written,
// as Shardy does; the export to a partitionable program keeps only the axes
// that divide the boundary and warns that it dropped the others.
sdy.mesh @mesh = <["x"=4, "y"=2]>
// CHECK-LABEL: func @uneven_argument(
// CHECK-SAME: %arg0: tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}
// CHECK: stablehlo.tanh %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>}
// WARN: warning: argument 0 of @uneven_argument: dim 0 has size 6, which mesh axes {"x"} do not divide
// EXPORT-LABEL: func @uneven_argument(
// EXPORT-SAME: %arg0: tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}
func.func @uneven_argument(%arg0: tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> tensor<6x8xf32> {
  %0 = stablehlo.tanh %arg0 : tensor<6x8xf32>
  return %0 : tensor<6x8xf32>
}
// -----
sdy.mesh @mesh = <["x"=4, "y"=2]>
// WARN: warning: result 0 of @uneven_result: dim 1 has size 6, which mesh axes {"x"} do not divide
// EXPORT-LABEL: func @uneven_result(
// EXPORT-SAME: -> (tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>})
func.func @uneven_result(%a: tensor<8x6xf32>) -> (tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  return %a : tensor<8x6xf32>
}
