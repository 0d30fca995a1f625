// RUN: %opt %s -p partition --split-input-file | filecheck %s

// An op placed on one device (a sharding on a maximal mesh, as jax writes
// for host callbacks) runs under stablehlo.if on that device's partition
// only, on its operands gathered whole; elsewhere its token result is its
// token operand. Token arguments pass through the manual computation.
sdy.mesh @mesh = <["x"=4]>
sdy.mesh @maximal_mesh_0 = <[], device_ids=[2]>
// CHECK-LABEL: func.func public @callback
// CHECK: sdy.manual_computation(%arg0, %arg1) in_shardings=[<@mesh, []>, <@mesh, [{"x"}]>]
// CHECK: %[[ALL:.*]] = "stablehlo.all_gather"
// CHECK: %[[PID:.*]] = stablehlo.partition_id
// CHECK: %[[TWO:.*]] = stablehlo.constant dense<2> : tensor<ui32>
// CHECK: %[[HERE:.*]] = stablehlo.compare EQ, %[[PID]], %[[TWO]]
// CHECK: %[[TOK:.*]] = "stablehlo.if"(%[[HERE]]) ({
// CHECK: %[[CB:.*]] = stablehlo.custom_call @xla_ffi_python_cpu_callback(%arg2, %[[ALL]])
// CHECK-NOT: sdy.sharding
// CHECK: stablehlo.return %[[CB]] : !stablehlo.token
// CHECK: }, {
// CHECK: stablehlo.return %arg2 : !stablehlo.token
// CHECK: sdy.return %[[TOK]]
func.func public @callback(%tok: !stablehlo.token, %x: tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> (!stablehlo.token, tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
  %0 = stablehlo.custom_call @xla_ffi_python_cpu_callback(%tok, %x) {has_side_effect = true, mhlo.backend_config = {index = 0 : ui64}, sdy.sharding = #sdy.sharding_per_value<[<@maximal_mesh_0, []>]>} : (!stablehlo.token, tensor<16xf32>) -> !stablehlo.token
  return %0, %x : !stablehlo.token, tensor<16xf32>
}

// -----
// A placed op's tensor result is zeros on the other devices: a partial sum
// over every axis, summed where it is used.
sdy.mesh @mesh = <["x"=2, "y"=2]>
sdy.mesh @maximal_mesh_0 = <[], device_ids=[0]>
// CHECK-LABEL: func.func public @callback_result
// CHECK: "stablehlo.if"
// CHECK: stablehlo.custom_call @cb
// CHECK: }, {
// CHECK: %[[Z:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<8xf32>
// CHECK: stablehlo.return %[[Z]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 1, 2, 3]]>
func.func public @callback_result(%x: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
  %0 = stablehlo.custom_call @cb(%x) {has_side_effect = true, sdy.sharding = #sdy.sharding_per_value<[<@maximal_mesh_0, []>]>} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----
// A partitioned host callback (jax's `partitioned=True`) is not placed,
// though jax writes a one-device sharding on it: every device calls it with
// its own block (no gather, no stablehlo.if); a dim its axes do not divide
// is gathered first (the padded block's padding is no data of the user's).
sdy.mesh @mesh = <["x"=4]>
sdy.mesh @maximal_mesh_0 = <[], device_ids=[0]>
// CHECK-LABEL: func.func public @per_shard
// CHECK: sdy.manual_computation(%arg0, %arg1, %arg2)
// CHECK-SAME: (%[[TOK:.*]]: !stablehlo.token, %[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<6xf32>)
// CHECK-NOT: stablehlo.if
// CHECK: %[[T1:.*]] = stablehlo.custom_call @xla_ffi_partitioned_python_cpu_callback(%[[TOK]], %[[X]])
// CHECK-NOT: sdy.sharding
// CHECK-SAME: (!stablehlo.token, tensor<4xf32>) -> !stablehlo.token
// CHECK: %[[WHOLE:.*]] = "stablehlo.all_gather"
// CHECK: %[[W:.*]] = stablehlo.slice %[[WHOLE]] [0:6]
// CHECK: stablehlo.custom_call @xla_ffi_partitioned_python_cpu_callback(%[[T1]], %[[W]])
// CHECK-SAME: (!stablehlo.token, tensor<6xf32>) -> !stablehlo.token
func.func public @per_shard(%tok: !stablehlo.token, %x: tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}, %y: tensor<6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) -> !stablehlo.token {
  %0 = stablehlo.custom_call @xla_ffi_partitioned_python_cpu_callback(%tok, %x) {has_side_effect = true, mhlo.backend_config = {index = 0 : ui64}, sdy.sharding = #sdy.sharding_per_value<[<@maximal_mesh_0, []>]>} : (!stablehlo.token, tensor<16xf32>) -> !stablehlo.token
  %z = stablehlo.multiply %y, %y : tensor<6xf32>
  %c = sdy.sharding_constraint %z <@mesh, [{"x"}]> : tensor<6xf32>
  %1 = stablehlo.custom_call @xla_ffi_partitioned_python_cpu_callback(%0, %c) {has_side_effect = true, mhlo.backend_config = {index = 1 : ui64}, sdy.sharding = #sdy.sharding_per_value<[<@maximal_mesh_0, []>]>} : (!stablehlo.token, tensor<6xf32>) -> !stablehlo.token
  return %1 : !stablehlo.token
}
