// RUN: %opt %s -p export-shardings --split-input-file | filecheck %s
// RUN: %opt %s -p 'export-shardings{close-shardings=true}' --split-input-file | filecheck %s --check-prefix=CLOSED
// RUN: %opt %s -p 'export-shardings{close-shardings=true even-callees=false}' --split-input-file | filecheck %s --check-prefix=CALLEES
sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func @open_dims_kept(
// CHECK-SAME: {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>}
// CHECK: stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>}
// CLOSED-LABEL: func @open_dims_kept(
// CLOSED-SAME: {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}
// CLOSED: stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>}
func.func @open_dims_kept(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>}) -> tensor<8x16xf32> {
  %0 = stablehlo.negate %a {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}]>]>} : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func @boundary_made_divisible(
// CHECK-SAME: {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}
// CLOSED-LABEL: func @boundary_made_divisible(
func.func @boundary_made_divisible(%a: tensor<6x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", "y"}, {}]>}) -> tensor<6x16xf32> {
  return %a : tensor<6x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// The entry function's boundary loses open sub-axes (Shardy's
// remove-sub-axes-in-input-output-shardings); a private callee keeps them, so
// that its body and its call sites are partitioned alike.
// CHECK-LABEL: func @main(
// CHECK-SAME: %arg0: tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {?}]>}
// CHECK-LABEL: func private @callee(
// CHECK-SAME: %arg0: tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y":(1)2, ?}, {"y":(2)2, "x", ?}]>}
// CHECK-SAME: -> (tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y":(1)2, ?}, {"y":(2)2, "x", ?}]>})
// CLOSED-LABEL: func private @callee(
// CLOSED-SAME: %arg0: tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y":(1)2}, {"y":(2)2, "x"}]>}
func.func @main(%a: tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y":(1)2, ?}, {"y":(2)2, "x", ?}]>}) -> tensor<2x8xf32> {
  %0 = func.call @callee(%a) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}
func.func private @callee(%a: tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y":(1)2, ?}, {"y":(2)2, "x", ?}]>}) -> (tensor<2x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y":(1)2, ?}, {"y":(2)2, "x", ?}]>}) {
  return %a : tensor<2x8xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// A boundary dim of 6 keeps only the axes that divide it: on the entry
// function always; on a private callee only in Shardy's form. meshjit.jit's
// pipeline (`even-callees=false`) leaves a callee as propagation found it:
// the partitioner inlines the call, and an even signature would gather a
// value its ops keep split.
// CLOSED-LABEL: func @entry(
// CLOSED-SAME: %arg0: tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}
// CLOSED-LABEL: func private @flip(
// CLOSED-SAME: %arg0: tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}
// CLOSED-SAME: -> (tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>})
// CALLEES-LABEL: func @entry(
// CALLEES-SAME: %arg0: tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}
// CALLEES-LABEL: func private @flip(
// CALLEES-SAME: %arg0: tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}
// CALLEES-SAME: -> (tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
func.func @entry(%a: tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<6x8xf32> {
  %0 = func.call @flip(%a) : (tensor<6x8xf32>) -> tensor<6x8xf32>
  return %0 : tensor<6x8xf32>
}
func.func private @flip(%a: tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = stablehlo.reverse %a, dims = [1] : tensor<6x8xf32>
  return %0 : tensor<6x8xf32>
}
