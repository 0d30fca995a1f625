// A reduce whose combiner no collective computes (bitwise xor; and, or of
// integers: XLA's CPU runtime refuses such an all-reduce) along a split dim:
// the partial values are all-gathered on a new major dim and reduced there.
// RUN: %opt %s -p partition | filecheck %s

sdy.mesh @mesh = <["x"=8]>
// CHECK-LABEL: func.func public @xor_rows
// CHECK: %[[R:.*]] = stablehlo.reduce(%arg1 init: %{{.*}}) applies stablehlo.xor across dimensions = [0] : (tensor<8x16xi32>, tensor<i32>) -> tensor<16xi32>
// CHECK: %[[S:.*]] = stablehlo.reshape %[[R]] : (tensor<16xi32>) -> tensor<1x16xi32>
// CHECK: %[[G:.*]] = "stablehlo.all_gather"(%[[S]]) <{all_gather_dim = 0 : i64
// CHECK-SAME: -> tensor<8x16xi32>
// CHECK: stablehlo.reduce(%[[G]] init: %{{.*}}) applies stablehlo.xor across dimensions = [0] : (tensor<8x16xi32>, tensor<i32>) -> tensor<16xi32>
// CHECK-NOT: all_reduce
func.func public @xor_rows(%arg0: tensor<64x16xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<16xi32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.xor across dimensions = [0] : (tensor<64x16xi32>, tensor<i32>) -> tensor<16xi32>
  return %0 : tensor<16xi32>
}
