// A class token concatenated onto 16 tokens split over "y" (4), then a
// projection and a sum over the tokens. Shardy's propagation passes "y" on
// to the 17-token dim: each device holds 5 padded tokens, the concatenation
// moves pieces by a permute, and the padding is masked before the sum (an
// iota and selects, on every contraction and reduction that follows in a
// transformer). Propagation with relocate joins "y" onto the batch dim
// instead: one all-to-all, 17 whole tokens a device, no masks (the result's
// closed {"x"} gathers "y" at the end).
// RUN: %opt %s -p 'propagate{relocate=cpu},partition' --collectives 2>&1 >/dev/null | filecheck %s
// RUN: %opt %s -p 'propagate{relocate=cpu},partition' | filecheck %s --check-prefix=IR
// RUN: %opt %s -p 'propagate,partition' --collectives 2>&1 >/dev/null | filecheck %s --check-prefix=UNEVEN
// RUN: %opt %s -p 'propagate,partition' | filecheck %s --check-prefix=UNEVEN-IR
// RUN: %opt %s -p spmd-pipeline --collectives 2>&1 >/dev/null | filecheck %s

sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK: all-to-all axes {"y"} 6144 B {{.*}} stablehlo.concatenate at {{.*}}uneven_relocate.mlir:[[# @LINE + 13]]:8: operand 1: [{"x"}, {"y"}, {}] -> [{"x", "y"}, {}, {}]
// CHECK-NEXT: all-gather axes {"y"} 1536 B {{.*}} stablehlo.reduce at {{.*}}: result: [{"x", "y"}, {}] -> [{"x"}, {}]
// CHECK-NEXT: total: 2 collectives (all-gather x1, all-to-all x1)
// IR: stablehlo.concatenate {{.*}} -> tensor<1x17x128xf32>
// IR-NOT: stablehlo.select
// UNEVEN: collective-permute axes {"y"} {{.*}} stablehlo.concatenate
// UNEVEN-NEXT: all-reduce axes {"y"} {{.*}} stablehlo.reduce {{.*}} (partial over "y")
// UNEVEN-NEXT: total: 2 collectives (all-reduce x1, collective-permute x1)
// UNEVEN-IR: stablehlo.concatenate {{.*}} -> tensor<4x17x128xf32>
// UNEVEN-IR: stablehlo.iota dim = 1 : tensor<4x5x128xi32>
// UNEVEN-IR: stablehlo.select
func.func @main(%p: tensor<8x16x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}, {}]>}, %cls: tensor<1x1x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {}]>}, %w: tensor<128x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) -> (tensor<8x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %c = stablehlo.broadcast_in_dim %cls, dims = [0, 1, 2] : (tensor<1x1x128xf32>) -> tensor<8x1x128xf32>
  %0 = stablehlo.concatenate %c, %p, dim = 1 : (tensor<8x1x128xf32>, tensor<8x16x128xf32>) -> tensor<8x17x128xf32>
  %1 = stablehlo.dot_general %0, %w, contracting_dims = [2] x [0] : (tensor<8x17x128xf32>, tensor<128x128xf32>) -> tensor<8x17x128xf32>
  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %2 = stablehlo.reduce(%1 init: %z) applies stablehlo.add across dimensions = [1] : (tensor<8x17x128xf32>, tensor<f32>) -> tensor<8x128xf32>
  return %2 : tensor<8x128xf32>
}
