// RUN: %opt %s -p partition --split-input-file | filecheck %s

// Unreduced values (jax's `unreduced=` specs: each device holds a partial
// sum over the listed axes) stay partial sums: a contraction over a split
// dim whose result is declared unreduced emits no all-reduce, and the
// partitioned module keeps the declaration on its result.
sdy.mesh @mesh = <["x"=2, "y"=2]>
// CHECK-LABEL: func.func public @dot_unreduced
// CHECK-SAME: -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}], unreduced={"y"}>})
// CHECK: out_shardings=[<@mesh, [{"x"}, {}], unreduced={"y"}>]
// CHECK: %[[DOT:.*]] = stablehlo.dot_general %arg2, %arg3, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NOT: all_reduce
// CHECK: sdy.return %[[DOT]] : tensor<4x4xf32>
func.func public @dot_unreduced(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %b: tensor<16x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}], unreduced={"y"}>}) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}], unreduced={"y"}>]>} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----
// An unreduced argument: the add is linear, so it runs on the partial sums;
// the constraint to a plain sharding sums them, over "y" only. No result
// keeps "y" unreduced, so the partitioned module declares the argument
// replicated over "y" (one whole block per device, as its buffers are):
// Shardy's verifier refuses unreduced operands with reduced results.
sdy.mesh @mesh = <["x"=2, "y"=2]>
// CHECK-LABEL: func.func public @add_then_sum
// CHECK-SAME: (%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
// CHECK: in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>]
// CHECK: %[[ADD:.*]] = stablehlo.add %arg1, %arg1 : tensor<4x4xf32>
// CHECK: "stablehlo.all_reduce"(%[[ADD]])
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 1], [2, 3]]>
func.func public @add_then_sum(%a: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}], unreduced={"y"}>}) -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = stablehlo.add %a, %a {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}], unreduced={"y"}>]>} : tensor<8x4xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"x"}, {}]> : tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}

// -----
// To unreduced without moving data, as jax lays such values out: a block
// split over the axis stays in place with zeros around it (dynamic update
// slice at the block's offset); a replicated value is kept by the devices at
// coordinate 0 along the axis, the others hold zeros.
sdy.mesh @mesh = <["x"=2, "y"=2]>
// CHECK-LABEL: func.func public @to_unreduced
// CHECK-NOT: all_gather
// CHECK: %[[UY:.*]] = stablehlo.remainder %{{.*}}, %c : tensor<ui32>
// CHECK: %[[Y:.*]] = stablehlo.convert %[[UY]] : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[AT:.*]] = stablehlo.multiply %[[Y]], %{{.*}} : tensor<i32>
// CHECK: %[[ZEROS:.*]] = stablehlo.constant dense<0.000000e+00> : tensor<8xf32>
// CHECK: %[[BLOCK:.*]] = stablehlo.dynamic_update_slice %[[ZEROS]], %arg2, %[[AT]] : (tensor<8xf32>, tensor<4xf32>, tensor<i32>) -> tensor<8xf32>
// CHECK: %[[UX:.*]] = stablehlo.divide %{{.*}}, %c : tensor<ui32>
// CHECK: %[[X:.*]] = stablehlo.convert %[[UX]] : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[FIRST:.*]] = stablehlo.compare EQ, %[[X]], %{{.*}} : (tensor<i32>, tensor<i32>) -> tensor<i1>
// CHECK: %[[MASK:.*]] = stablehlo.broadcast_in_dim %[[FIRST]], dims = [] : (tensor<i1>) -> tensor<8xi1>
// CHECK: %[[KEPT:.*]] = stablehlo.select %[[MASK]], %arg3, %{{.*}} : tensor<8xi1>, tensor<8xf32>
// CHECK: sdy.return %[[BLOCK]], %[[KEPT]]
func.func public @to_unreduced(%a: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}]>}, %b: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}], unreduced={"y"}>}, tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}], unreduced={"x"}>}) {
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// -----
// An accumulator declared unreduced is carried through the loop as partial
// sums: the one all-reduce comes after the loop, not in every iteration.
sdy.mesh @mesh = <["x"=2]>
// CHECK-LABEL: func.func public @accumulate
// CHECK: stablehlo.while
// CHECK: do {
// CHECK-NOT: all_reduce
// CHECK: %[[SUM:.*]] = stablehlo.add %iterArg_{{[0-9]+}}, %arg1 : tensor<4xf32>
// CHECK: stablehlo.return %{{.*}}, %[[SUM]]
// CHECK: }
// CHECK: "stablehlo.all_reduce"(%{{.*}}#1)
func.func public @accumulate(%g: tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}], unreduced={"x"}>}) -> (tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %zero = stablehlo.constant dense<0.0> : tensor<4xf32>
  %acc0 = sdy.sharding_constraint %zero <@mesh, [{}], unreduced={"x"}> : tensor<4xf32>
  %r:2 = stablehlo.while(%i = %c0, %acc = %acc0) : tensor<i32>, tensor<4xf32>
    cond {
      %n = stablehlo.constant dense<3> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      %sum = stablehlo.add %acc, %g {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}], unreduced={"x"}>]>} : tensor<4xf32>
      stablehlo.return %j, %sum : tensor<i32>, tensor<4xf32>
    }
  %out = sdy.sharding_constraint %r#1 <@mesh, [{}]> : tensor<4xf32>
  return %out : tensor<4xf32>
}
