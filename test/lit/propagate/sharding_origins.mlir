// RUN: %opt %s -p 'propagate{strategy=aggressive op-priority=false user-priority=false debug-sharding-origins=true}' --split-input-file | filecheck %s
// debug-sharding-origins writes Shardy's `sdy.sharding_origins`: per value
// and axis, the user sharding the axis came from ("input: N", "output: N",
// "constraint_N", "mc_N_input: N" / "mc_N_output: N"), "self" on the sharding
// that is its own origin. An axis keeps the first origin it gets, from the
// first operand (then result) that already had it.
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=8]>
// CHECK-LABEL: func @inputs_and_outputs(
// CHECK-SAME: %arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"c", ?}]>, sdy.sharding_origins = {a = "self", c = "input: 1"}}
// CHECK-SAME: %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"c", ?}]>, sdy.sharding_origins = {a = "input: 0", c = "self"}}
// CHECK-SAME: -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>, sdy.sharding_origins = {a = "input: 0", b = "self"}})
// CHECK: stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"c", ?}]>]>, sdy.sharding_origins = [{a = "input: 0", c = "input: 1"}]}
// CHECK: stablehlo.dot_general {{.*}} sdy.sharding_origins = [{a = "input: 0", b = "output: 0"}]}
func.func @inputs_and_outputs(
  %arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>},
  %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"c", ?}]>},
  %arg2: tensor<8x16xf32>
  ) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"b", ?}]>}) {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] :
    (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=8]>
// Constraints are named in order; each names itself "self".
// CHECK-LABEL: func @constraints(
// CHECK-SAME: sdy.sharding_origins = {a = "constraint_0", b = "constraint_1"}
// CHECK: sdy.sharding_constraint %arg0 <@mesh, [{"a"}, {"b", ?}]> {sdy.sharding_origin_name = "constraint_0", sdy.sharding_origins = {a = "self", b = "constraint_1"}}
// CHECK: stablehlo.add {{.*}} sdy.sharding_origins = [{a = "constraint_0", b = "constraint_1"}]}
// CHECK: sdy.sharding_constraint %{{.*}} <@mesh, [{"a", ?}, {"b"}]> {sdy.sharding_origin_name = "constraint_1", sdy.sharding_origins = {a = "constraint_0", b = "self"}}
func.func @constraints(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{"a"}, {?}]> : tensor<8x8xf32>
  %1 = stablehlo.add %0, %0 : tensor<8x8xf32>
  %2 = sdy.sharding_constraint %1 <@mesh, [{?}, {"b"}]> : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}
// -----
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=8]>
// A manual computation's in/out shardings are "mc_N_input: i" and
// "mc_N_output: i"; the free axes carry them into the body.
// CHECK-LABEL: func @manual(
// CHECK-SAME: sdy.sharding_origins = {a = "mc_0_input: 0", b = "mc_0_input: 0"}
// CHECK: stablehlo.add %arg1, %arg1 {{.*}} sdy.sharding_origins = [{b = "mc_0_input: 0"}]}
// CHECK: sdy.block_arg_sharding_origins = [{a = "self", b = "self"}]
// CHECK-SAME: sdy.result_sharding_origins = [{a = "self", b = "mc_0_input: 0"}]
// CHECK-SAME: sdy.sharding_origin_name = "mc_0"
func.func @manual(%arg0: tensor<32x32x32xf32>) -> tensor<32x32x32xf32> {
  %0 = stablehlo.subtract %arg0, %arg0 : tensor<32x32x32xf32>
  %1 = sdy.manual_computation(%0) in_shardings=[<@mesh, [{"a", ?}, {"b", ?}, {?}]>] out_shardings=[<@mesh, [{"a", ?}, {?}, {?}]>] manual_axes={"a"} (%arg1: tensor<16x32x32xf32>) {
    %3 = stablehlo.add %arg1, %arg1 : tensor<16x32x32xf32>
    sdy.return %3 : tensor<16x32x32xf32>
  } : (tensor<32x32x32xf32>) -> tensor<32x32x32xf32>
  %2 = stablehlo.subtract %1, %1 : tensor<32x32x32xf32>
  return %2: tensor<32x32x32xf32>
}
