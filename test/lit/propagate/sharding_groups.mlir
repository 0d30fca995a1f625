// RUN: %opt %s -p 'propagate{strategy=basic}' --split-input-file | filecheck %s
// RUN: %opt %s -p 'propagate{strategy=basic}' --split-input-file 2>&1 | filecheck %s --check-prefix=WARN
// RUN: %opt %s -p 'propagate{strategy=basic apply-sharding-constraints=true}' --split-input-file | filecheck %s --check-prefix=APPLY

// Sharding groups (`sdy.sharding_group`, what jax.shard_alike writes): before
// propagation the members' starting shardings are compared. When they agree
// (no sharding, or a fully open replicated one, agrees with anything) every
// member starts with the common one, even one that no propagation reaches
// (an unused value, a returned argument).

sdy.mesh @mesh = <["x"=2, "y"=2]>
// CHECK-LABEL: func @members_take_the_common_sharding(
// CHECK-SAME: %arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>}
// CHECK-SAME: %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>}
// CHECK: stablehlo.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>}
func.func @members_take_the_common_sharding(
    %a: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>},
    %b: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %c = stablehlo.constant dense<0.0> : tensor<8x8xf32>
  sdy.sharding_group %a group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %b group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %c group_id=0 : tensor<8x8xf32>
  return %a, %b : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----
// A fully open constraint in a group agrees with the other member's, and
// takes it.
sdy.mesh @mesh = <["x"=2, "y"=2]>
// CHECK-LABEL: func @open_constraint_takes_the_group_sharding(
// CHECK: sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {?}]>
// CHECK: sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {?}]>
func.func @open_constraint_takes_the_group_sharding(%a: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = sdy.sharding_constraint %a <@mesh, [{?}, {?}]> : tensor<8x8xf32>
  sdy.sharding_group %0 group_id=0 : tensor<8x8xf32>
  %1 = sdy.sharding_constraint %a <@mesh, [{"x"}, {?}]> : tensor<8x8xf32>
  sdy.sharding_group %1 group_id=0 : tensor<8x8xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----
// Members that start with different shardings: a warning on the first
// member's op, and an open constraint after every member (at the block's
// start for an argument, so the second argument's comes first) which takes
// its place in the group; the members keep their own shardings and the
// constraints meet in propagation.
sdy.mesh @mesh = <["x"=2, "y"=2]>
// WARN: warning: The initial operand shardings on the sharding groups of groupID: 0 do not match. Inserting an open sharding constraint to all constrained values.
// CHECK-LABEL: func @conflicting_members_get_open_constraints(
// CHECK-SAME: %arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}
// CHECK-SAME: %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}
// CHECK-NEXT: %[[C1:.*]] = sdy.sharding_constraint %arg1 <@mesh, [{"y", ?}, {?}]>
// CHECK-NEXT: %[[C0:.*]] = sdy.sharding_constraint %arg0 <@mesh, [{"y", ?}, {?}]>
// CHECK-NEXT: stablehlo.negate %[[C0]]
// CHECK-NEXT: sdy.sharding_group %[[C0]] group_id=0
// CHECK-NEXT: sdy.sharding_group %[[C1]] group_id=0
func.func @conflicting_members_get_open_constraints(
    %a: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>},
    %b: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.negate %a : tensor<8x8xf32>
  sdy.sharding_group %a group_id=0 : tensor<8x8xf32>
  sdy.sharding_group %b group_id=0 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
// -----
sdy.mesh @mesh = <["a"=2]>
// With apply-sharding-constraints (the pipelines), a closed constraint is
// applied to its input before groups sync, so the other members of the
// input's group take it too (as Shardy imports groups after applying
// constraints); plain propagate applies no constraint (the constraint's
// axes only flow back open).
// CHECK-LABEL: func @group_member_with_constraint(
// CHECK: stablehlo.add %arg1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}]>]>}
// APPLY-LABEL: func @group_member_with_constraint(
// APPLY: stablehlo.add %arg0, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"a"}]>]>}
// APPLY: stablehlo.add %arg1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"a"}]>]>}
func.func @group_member_with_constraint(%arg0: tensor<16x16xf32>, %arg1: tensor<16x16xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>) {
  %0 = stablehlo.add %arg0, %arg0 : tensor<16x16xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"a"}]> :  tensor<16x16xf32>
  %2 = stablehlo.add %arg1, %arg1 : tensor<16x16xf32>
  sdy.sharding_group %0 group_id = 32 : tensor<16x16xf32>
  sdy.sharding_group %2 group_id = 32 : tensor<16x16xf32>
  return %1, %2 : tensor<16x16xf32>, tensor<16x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=2]>
// A constant expression in a group (`shard_alike(x, jnp.arange(16).reshape(8,
// 2))`): the group op names the value but does not read it, so it gets no
// copy of its own; the returned value is the grouped one and the result
// takes the group's sharding (as under Shardy and jax.jit).
// CHECK-LABEL: func @grouped_constant_expression_returned(
// CHECK-SAME: -> (tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>})
// CHECK: stablehlo.reshape %{{.*}} {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>}
func.func @grouped_constant_expression_returned(
    %arg0: tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> tensor<8x2xi32> {
  %0 = stablehlo.iota dim = 0 : tensor<16xi32>
  %1 = stablehlo.reshape %0 : (tensor<16xi32>) -> tensor<8x2xi32>
  sdy.sharding_group %arg0 group_id=1 : tensor<8x2xi32>
  sdy.sharding_group %1 group_id=1 : tensor<8x2xi32>
  return %1 : tensor<8x2xi32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=2]>
// A grouped constant read by two ops: each read gets its own copy, and
// every copy stays in the group (Shardy's splitter clones the group op with
// each copy), so both the add and the returned iota are sharded as %arg0.
// CHECK-LABEL: func @grouped_constant_with_two_uses(
// CHECK-SAME: %arg1: tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>}
// CHECK-SAME: -> (tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>}, tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {"y", ?}]>})
// CHECK: stablehlo.add %arg1, %{{.*}} {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>}
func.func @grouped_constant_with_two_uses(
    %arg0: tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>},
    %arg1: tensor<8x2xi32>) -> (tensor<8x2xi32>, tensor<8x2xi32>) {
  %0 = stablehlo.iota dim = 0 : tensor<8x2xi32>
  sdy.sharding_group %arg0 group_id=2 : tensor<8x2xi32>
  sdy.sharding_group %0 group_id=2 : tensor<8x2xi32>
  %1 = stablehlo.add %arg1, %0 : tensor<8x2xi32>
  return %1, %0 : tensor<8x2xi32>, tensor<8x2xi32>
}
