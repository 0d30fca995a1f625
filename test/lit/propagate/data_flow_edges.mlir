// RUN: %opt %s -p 'propagate' --split-input-file | filecheck %s
// Explicit data-flow edge ops (what Shardy's add-data-flow-edges inserts):
// the edge op holds the sharding of its input, a while/case result, and the
// owner op carries none for that value.
sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func @case_edge_takes_the_sharding(
// CHECK-SAME: -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}]>})
// CHECK: "stablehlo.case"
// CHECK: }) : (tensor<i32>) -> tensor<8xf32>
// CHECK-NEXT: sdy.data_flow_edge %{{.*}} sharding=<@mesh, [{"x", ?}]> : tensor<8xf32>
func.func @case_edge_takes_the_sharding(%i: tensor<i32>, %a: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}, %b: tensor<8xf32>) -> tensor<8xf32> {
  %0 = "stablehlo.case"(%i) ({
    stablehlo.return %a : tensor<8xf32>
  }, {
    stablehlo.return %b : tensor<8xf32>
  }) : (tensor<i32>) -> tensor<8xf32>
  %1 = sdy.data_flow_edge %0 : tensor<8xf32>
  return %1 : tensor<8xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// A sharding on the edge op is where the edge starts: it flows into the
// loop body and out to the function's argument and result.
// CHECK-LABEL: func @while_edge_sharding_flows_everywhere(
// CHECK-SAME: %arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y", ?}, {?}]>}
// CHECK-SAME: -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y", ?}, {?}]>})
// CHECK: stablehlo.while
// CHECK: stablehlo.tanh %iterArg {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y", ?}, {?}]>]>}
// CHECK: sdy.data_flow_edge %{{.*}}#0 sharding=<@mesh, [{"y", ?}, {?}]> : tensor<8x16xf32>
// CHECK-NEXT: sdy.data_flow_edge %{{.*}}#1 : tensor<i32>
func.func @while_edge_sharding_flows_everywhere(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c4 = stablehlo.constant dense<4> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %x, %n = %c0) : tensor<8x16xf32>, tensor<i32>
    cond {
    %p = stablehlo.compare LT, %n, %c4 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %t = stablehlo.tanh %iterArg : tensor<8x16xf32>
    %m = stablehlo.add %n, %c1 : tensor<i32>
    stablehlo.return %t, %m : tensor<8x16xf32>, tensor<i32>
  }
  %1 = sdy.data_flow_edge %0#0 sharding=<@mesh, [{"y", ?}, {?}]> : tensor<8x16xf32>
  %2 = sdy.data_flow_edge %0#1 : tensor<i32>
  return %1 : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// sdy.func_data_flow_edge on a callee's argument and on a call's result: the
// sharding goes through the call and is written on each edge, per value.
// CHECK-LABEL: func private @callee(
// CHECK-NEXT: sdy.func_data_flow_edge %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>}
// CHECK-LABEL: func @caller(
// CHECK-SAME: -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>})
// CHECK: call @callee
// CHECK-NEXT: sdy.func_data_flow_edge %{{.*}} {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>}
func.func private @callee(%arg0: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = sdy.func_data_flow_edge %arg0 : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
func.func @caller(%x: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x16xf32> {
  %0 = stablehlo.negate %x : tensor<8x16xf32>
  %1 = call @callee(%0) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %2 = sdy.func_data_flow_edge %1 : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
// Explicit data-flow edges on a manual computation's block argument and
// result hold what propagation finds (the free axes "a" and "c" inside, the
// operand outside); the in/out_shardings stay as written, as in Shardy.
// CHECK-LABEL: func @manual_computation_explicit_edges(
// CHECK-SAME: %arg0: tensor<32x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", "a", ?}, {"c", ?}]>}
// CHECK: in_shardings=[<@mesh, [{"b", ?}, {?}]>] out_shardings=[<@mesh, [{"b", ?}, {?}]>] manual_axes={"b"}
// CHECK-NEXT: sdy.data_flow_edge %arg1 sharding=<@mesh, [{"a", ?}, {"c", ?}]>
func.func @manual_computation_explicit_edges(%arg0: tensor<32x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"c", ?}]>}) -> tensor<32x32xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"b", ?}, {?}]>] out_shardings=[<@mesh, [{"b", ?}, {?}]>] manual_axes={"b"} (%arg1: tensor<16x32xf32>) {
    %2 = sdy.data_flow_edge %arg1 sharding=<@mesh, [{?}, {?}]> : tensor<16x32xf32>
    %3 = stablehlo.add %2, %2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>} : tensor<16x32xf32>
    sdy.return %3 : tensor<16x32xf32>
  } : (tensor<32x32xf32>) -> tensor<32x32xf32>
  %1 = sdy.data_flow_edge %0 sharding=<@mesh, [{"b", ?}, {?}]> : tensor<32x32xf32>
  return %1 : tensor<32x32xf32>
}
