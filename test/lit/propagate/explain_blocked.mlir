// RUN: %opt %s -p propagate --explain -o /dev/null 2>&1 | filecheck %s
// --explain says where a blocked factor stopped a sharding: the result's "y"
// on the sliced dim (3 rows in, 2 out) does not reach the operand.
sdy.mesh @mesh = <["x"=4, "y"=2]>
// CHECK: result of stablehlo.abs at {{.*}}explain_blocked.mlir:[[# @LINE + 8]]:8: <@mesh, [{?}, {"x", ?}]>
// CHECK: result of stablehlo.dynamic_slice at {{.*}}explain_blocked.mlir:[[# @LINE + 8]]:8: <@mesh, [{"y", ?}, {"x", ?}]>
// CHECK: conflict at stablehlo.dynamic_slice ({{.*}}explain_blocked.mlir:[[# @LINE + 7]]:8), factor 0: result of stablehlo.dynamic_slice at {{.*}} {"y"}; a blocked factor (its size differs between operand and result): nothing propagates across it [op-priority
// CHECK-NOT: conflict
// CHECK: result 0 of @main
func.func @main(%a: tensor<3x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {"x"}]>}) {
  %c = stablehlo.constant dense<1> : tensor<i32>
  %c_0 = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.abs %a : tensor<3x8xf32>
  %1 = stablehlo.dynamic_slice %0, %c, %c_0, sizes = [2, 8] : (tensor<3x8xf32>, tensor<i32>, tensor<i32>) -> tensor<2x8xf32>
  return %1 : tensor<2x8xf32>
}
