// RUN: %opt %s -p propagation-pipeline | filecheck %s
// RUN: %opt %s -p spmd-pipeline | filecheck %s --check-prefix=PART
// propagation-pipeline leaves constants as Shardy's pipeline does: a
// constant with several uses is a copy per use (each with the sharding its
// use wanted), written as sdy.constant. The partitioner reads them alike.
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
// CHECK-LABEL: func @main(
// CHECK-NEXT: %0 = sdy.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} dense<1.000000e+00> : tensor<8x16xf32>
// CHECK-NEXT: %1 = sdy.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b"}, {}]>]>} dense<1.000000e+00> : tensor<8x16xf32>
// CHECK-NEXT: %2 = sdy.constant dense<1.000000e+00> : tensor<8x16xf32>
// CHECK-NEXT: %3 = stablehlo.dot_general %0, %1
// CHECK: return %2, %4
// PART: stablehlo.dot_general {{.*}} -> tensor<4x4xf32>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>})
    -> (tensor<8x16xf32>, tensor<8x8xf32>) {
  %0 = stablehlo.constant dense<1.000000e+00> : tensor<8x16xf32>
  %1 = stablehlo.dot_general %0, %0, contracting_dims = [1] x [1] : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x8xf32>
  %2 = stablehlo.add %1, %arg0 : tensor<8x8xf32>
  return %0, %2 : tensor<8x16xf32>, tensor<8x8xf32>
}
