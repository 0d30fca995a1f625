// What the partitioner could not do well is said, with the source line.
// RUN: %opt %s -p partition --collectives 2>&1 >/dev/null | filecheck %s

sdy.mesh @mesh = <["x"=4]>
func.func public @main(%t: tensor<8x4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {}]>}, %a: tensor<6xf32>) -> (tensor<8x4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {}]>}, tensor<6xf32>) {
  // CHECK-DAG: remarks.mlir:[[# @LINE + 1]]:8: remark: 'stablehlo.custom_call' computed replicated (no sharding rule for its target): its operands are all-gathered first
  %0 = stablehlo.custom_call @my_kernel(%t) : (tensor<8x4x4xf32>) -> tensor<8x4x4xf32>
  %1 = stablehlo.abs %a {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>} : tensor<6xf32>
  return %0, %1 : tensor<8x4x4xf32>, tensor<6xf32>
}
// CHECK: collectives inserted by partition (bytes sent per device):
// CHECK-NEXT: all-gather {{ +}}axes {"x"} {{ +}}384 B {{ +}}{{[0-9.]+}} us  stablehlo.custom_call at {{.*}}remarks.mlir:7:8: operand 0: [{"x"}, {}, {}] -> [{}, {}, {}]
// CHECK-NEXT: total: 1 collectives (all-gather x1), 384 B per device, estimated {{[0-9.]+}} us
