// RUN: %opt %s -p propagation-pipeline --split-input-file | filecheck %s
// RUN: %opt %s -p 'export-shardings' --split-input-file | filecheck %s --check-prefix=KEEP
// RUN: %opt %s -p spmd-pipeline --split-input-file | filecheck %s --check-prefix=PART
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

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// A constraint nothing uses has done its work once propagation read it:
// Shardy's export form drops it instead of writing a reshard of nothing.
// CHECK-LABEL: func @unused_constraint_dropped(
// CHECK-NEXT: %0 = stablehlo.abs %arg0
// CHECK-NEXT: %1 = sdy.reshard %0 <@mesh, [{"y"}, {}]>
// CHECK-NEXT: return %1
// KEEP-LABEL: func @unused_constraint_dropped(
// KEEP: sdy.sharding_constraint %0 <@mesh, [{"x"}, {}]>
func.func @unused_constraint_dropped(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.abs %arg0 : tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"x"}, {}]> : tensor<8x8xf32>
  %2 = sdy.sharding_constraint %0 <@mesh, [{"y"}, {}]> : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}
