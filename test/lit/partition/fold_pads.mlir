// A causal dilated convolution as jnp.pad writes it (7 rows of zeros before
// the time dim, a VALID window of 2 taps 7 apart) on time split 8 ways (8
// rows a device). With `fold-pads` first (as in spmd-pipeline and
// meshjit.jit) the pad is the convolution's own low padding, and each
// device fetches the 7 rows before its block from the previous device: one
// collective-permute of 2 x 7 x 8 floats, the first device's window padded
// with zeros. Without it the pad's 71 rows split 8 ways no longer line up
// with the operand's blocks: the call's argument is gathered whole, and the
// convolution's uneven operand gathered again.
// RUN: %opt %s -p spmd-pipeline --collectives -o /dev/null 2>&1 | filecheck %s
// RUN: %opt %s -p 'import-shardings,propagate{relocate=cpu},partition' --collectives -o /dev/null 2>&1 | filecheck %s --check-prefix=UNFOLDED
// CHECK: collective-permute axes {"x"} 448 B {{.*}} stablehlo.convolution {{.*}} operand 0 window along dim 1: 7 along dim 1 from block -1
// CHECK-NEXT: total: 1 collectives
// UNFOLDED: all-gather axes {"x"} 3584 B {{.*}} func.call
// UNFOLDED: all-gather axes {"x"} 4032 B {{.*}} stablehlo.convolution
// UNFOLDED: total: 2 collectives
sdy.mesh @mesh = <["x"=8]>
func.func public @main(%arg0: tensor<2x64x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}]>}, %arg1: tensor<2x8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {}]>}) -> (tensor<2x64x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}]>}) {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0 = call @_pad(%arg0, %c) : (tensor<2x64x8xf32>, tensor<i32>) -> tensor<2x71x8xf32>
  %1 = stablehlo.convolution(%0, %arg1) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [1], pad = [[0, 0]], lhs_dilate = [1], rhs_dilate = [7]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x71x8xf32>, tensor<2x8x8xf32>) -> tensor<2x64x8xf32>
  return %1 : tensor<2x64x8xf32>
}
func.func private @_pad(%arg0: tensor<2x64x8xf32>, %arg1: tensor<i32>) -> tensor<2x71x8xf32> {
  %0 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<f32>
  %1 = stablehlo.pad %arg0, %0, low = [0, 7, 0], high = [0, 0, 0], interior = [0, 0, 0] : (tensor<2x64x8xf32>, tensor<f32>) -> tensor<2x71x8xf32>
  return %1 : tensor<2x71x8xf32>
}
