// RUN: %opt %s -p propagation-pipeline | filecheck %s
// RUN: %opt %s -p 'export-shardings' | filecheck %s --check-prefix=KEEP
// RUN: %opt %s -p spmd-pipeline | filecheck %s --check-prefix=PART
// propagation-pipeline leaves Shardy's export form: a sharding constraint
// becomes the sdy.reshard it stands for (export-shardings alone keeps it, as
// meshjit.jit's pipeline does); the partitioner lays the value out as the
// reshard says either way.
sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func @constraint_becomes_reshard(
// CHECK-NEXT: %0 = sdy.reshard %arg0 <@mesh, [{"x"}, {"y"}]> : tensor<8x8xf32>
// CHECK-NOT: sdy.sharding_constraint
// KEEP: sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {"y"}]>
// PART: in_shardings=[<@mesh, [{"x"}, {"y"}]>] out_shardings=[<@mesh, [{"x"}, {"y"}]>]
// PART: stablehlo.tanh %{{.*}} : tensor<4x2xf32>
func.func @constraint_becomes_reshard(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {"y"}]> : tensor<8x8xf32>
  %1 = stablehlo.tanh %0 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
