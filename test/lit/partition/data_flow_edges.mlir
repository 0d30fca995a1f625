// RUN: %opt %s -p spmd-pipeline | filecheck %s
// A module with Shardy's explicit data-flow edge ops (as sdy-add-data-flow-edges
// leaves it): the edge's sharding lays out the loop it belongs to, so the loop
// runs on local blocks and nothing is gathered.
sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func.func public @loop(
// CHECK: sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"y"}, {}]>] out_shardings=[<@mesh, [{"y"}, {}]>]
// CHECK: stablehlo.while(%iterArg = %arg1, %iterArg_2 = %c) : tensor<2x16xf32>, tensor<i32>
// CHECK: stablehlo.tanh %iterArg : tensor<2x16xf32>
// CHECK-NOT: all_gather
// CHECK-NOT: sdy.data_flow_edge
// CHECK: sdy.return %1#0 : tensor<2x16xf32>
func.func @loop(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
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
