// RUN: %opt %s -p propagate --explain -o /dev/null 2>&1 | filecheck %s
// A broadcast_in_dim that only adds size-1 dims copies nothing: it propagates
// as a reshape does, both ways from the first op-priority stage (jax writes
// x[..., None] so, and XLA's simplifier makes it a reshape before its Shardy
// runs). A broadcast that copies data still forwards only in the last stage,
// as in Shardy. (%a has two uses, so stage 1 rather than 0.)
sdy.mesh @mesh = <["x"=8]>
// CHECK: result of stablehlo.broadcast_in_dim at {{.*}}unit_broadcast.mlir:[[# @LINE + 7]]:8: <@mesh, [{"x", ?}, {?}, {?}]>
// CHECK-NEXT: dim 0 {"x"}:
// CHECK-NEXT: <- forward through stablehlo.broadcast_in_dim at {{.*}} from argument 0 of @main [op-priority 1 (pass-through ops)]
// CHECK: result of stablehlo.broadcast_in_dim at {{.*}}unit_broadcast.mlir:[[# @LINE + 5]]:8: <@mesh, [{"x", ?}, {?}, {?}]>
// CHECK-NEXT: dim 0 {"x"}:
// CHECK-NEXT: <- forward through stablehlo.broadcast_in_dim at {{.*}} from argument 0 of @main [op-priority 4 (all ops)]
func.func @main(%a: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x4x1xf32>, tensor<8x4x2xf32>) {
  %0 = stablehlo.broadcast_in_dim %a, dims = [0, 1] : (tensor<8x4xf32>) -> tensor<8x4x1xf32>
  %1 = stablehlo.broadcast_in_dim %a, dims = [0, 1] : (tensor<8x4xf32>) -> tensor<8x4x2xf32>
  return %0, %1 : tensor<8x4x1xf32>, tensor<8x4x2xf32>
}
