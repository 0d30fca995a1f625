// RUN: %opt %s -p 'propagate{relocate=cpu}' | filecheck %s
// RUN: %opt %s -p propagate | filecheck %s --check-prefix=SHARDY
// RUN: %opt %s -p 'propagate{relocate=cpu}' --explain -o /dev/null 2>&1 | filecheck %s --check-prefix=EXPLAIN
// A class token concatenated onto 16 patch tokens split over "y" (4): 17
// tokens over 4 devices. Shardy's propagation passes "y" on to the 17-token
// dim (the partitioner pads it to 20 and masks the padding before every
// contraction and reduction that follows). Under relocation the result
// keeps "y" off that dim and joins it onto the batch dim, already split
// over "x" and divisible by both (the partitioner moves it there by one
// all-to-all); what follows is split by batch only.
sdy.mesh @mesh = <["x"=2, "y"=4]>

// CHECK-LABEL: func.func @cls_token
// CHECK: stablehlo.concatenate {{.*}}sdy.sharding_per_value<[<@mesh, [{"x", "y", ?}, {?}, {?}]>]>
// CHECK: stablehlo.dot_general {{.*}}sdy.sharding_per_value<[<@mesh, [{"x", "y", ?}, {?}, {?}]>]>
// SHARDY-LABEL: func.func @cls_token
// SHARDY: stablehlo.concatenate {{.*}}sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}, {?}]>]>
// EXPLAIN: result of stablehlo.concatenate at {{.*}}relocate_uneven.mlir:[[# @LINE + 3]]:8: <@mesh, [{"x", "y", ?}, {?}, {?}]>
// EXPLAIN: joined through stablehlo.concatenate at {{.*}}relocate_uneven.mlir:[[# @LINE + 2]]:8 from argument 0 of @cls_token [relocation (axes that would split a resized dim unevenly)]
func.func @cls_token(%p: tensor<8x16x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}, {}]>}, %cls: tensor<8x1x128xf32>, %w: tensor<128x128xf32>) -> tensor<8x17x128xf32> {
  %0 = stablehlo.concatenate %cls, %p, dim = 1 : (tensor<8x1x128xf32>, tensor<8x16x128xf32>) -> tensor<8x17x128xf32>
  %1 = stablehlo.dot_general %0, %w, contracting_dims = [2] x [0] : (tensor<8x17x128xf32>, tensor<128x128xf32>) -> tensor<8x17x128xf32>
  return %1 : tensor<8x17x128xf32>
}

// Even results keep Shardy's propagation: 16 + 16 tokens over 4.
// CHECK-LABEL: func.func @even
// CHECK: stablehlo.concatenate {{.*}}sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}, {?}]>]>
func.func @even(%p: tensor<8x16x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}, {}]>}, %q: tensor<8x16x128xf32>) -> tensor<8x32x128xf32> {
  %0 = stablehlo.concatenate %q, %p, dim = 1 : (tensor<8x16x128xf32>, tensor<8x16x128xf32>) -> tensor<8x32x128xf32>
  return %0 : tensor<8x32x128xf32>
}

// No dim can take "y" (the batch of 2 is split over "x" and 2 is not
// divisible by 2 x 4): the tokens split unevenly, as in Shardy.
// CHECK-LABEL: func.func @nowhere
// CHECK: stablehlo.concatenate {{.*}}sdy.sharding_per_value<[<@mesh, [{"x", ?}, {"y", ?}, {?}]>]>
func.func @nowhere(%p: tensor<2x16x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}, {}]>}, %cls: tensor<2x1x128xf32>) -> tensor<2x17x128xf32> {
  %0 = stablehlo.concatenate %cls, %p, dim = 1 : (tensor<2x1x128xf32>, tensor<2x16x128xf32>) -> tensor<2x17x128xf32>
  return %0 : tensor<2x17x128xf32>
}

// An unsplit leading dim (the batch, by convention) takes them.
// CHECK-LABEL: func.func @unsplit_batch
// CHECK: stablehlo.concatenate {{.*}}sdy.sharding_per_value<[<@mesh, [{"y", ?}, {?}, {?}]>]>
func.func @unsplit_batch(%p: tensor<8x16x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}, {}]>}, %cls: tensor<8x1x128xf32>) -> tensor<8x17x128xf32> {
  %0 = stablehlo.concatenate %cls, %p, dim = 1 : (tensor<8x1x128xf32>, tensor<8x16x128xf32>) -> tensor<8x17x128xf32>
  return %0 : tensor<8x17x128xf32>
}

// An empty dim further in is not joined onto (it may be a feature dim that
// the next contraction sums over): the tokens split unevenly, as in Shardy.
// CHECK-LABEL: func.func @feature_dim_only
// CHECK: stablehlo.concatenate {{.*}}sdy.sharding_per_value<[<@mesh, [{"y", ?}, {?}]>]>
func.func @feature_dim_only(%p: tensor<16x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}, %cls: tensor<1x128xf32>) -> tensor<17x128xf32> {
  %0 = stablehlo.concatenate %cls, %p, dim = 0 : (tensor<1x128xf32>, tensor<16x128xf32>) -> tensor<17x128xf32>
  return %0 : tensor<17x128xf32>
}
