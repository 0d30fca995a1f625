// jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), mode="reflect") before a VALID
// convolution, as jax lowers it: a private function that concatenates
// reversed slices around x along height, then slices and reverses of that
// around it along width. `fold-pads` inlines the data-movement calls, slices
// the pieces instead of the concatenations (row 62 of x, not row 63 of the
// first concatenation), and moves the width pieces' slices and reverses into
// the height concatenation's pieces: the convolution reads a grid, columns
// side by side along width, each one edge row around a core of 64 along
// height, that the partitioner reads through along either dim.
// RUN: %opt %s -p fold-pads --split-input-file | filecheck %s
// CHECK-LABEL: func.func public @main
// CHECK-NOT: call
// CHECK: %[[S0:.*]] = stablehlo.slice %arg0 [0:2, 1:2, 0:8, 0:4]
// CHECK: %[[TOP:.*]] = stablehlo.reverse %[[S0]], dims = [1]
// CHECK: %[[S1:.*]] = stablehlo.slice %arg0 [0:2, 62:63, 0:8, 0:4]
// CHECK: %[[BOTTOM:.*]] = stablehlo.reverse %[[S1]], dims = [1]
// CHECK: %[[MID:.*]] = stablehlo.concatenate %[[TOP]], %arg0, %[[BOTTOM]], dim = 1 : (tensor<2x1x8x4xf32>, tensor<2x64x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x66x8x4xf32>
// CHECK: %[[LEFT:.*]] = stablehlo.concatenate %{{.*}}, %{{.*}}, %{{.*}}, dim = 1 : (tensor<2x1x1x4xf32>, tensor<2x64x1x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x66x1x4xf32>
// CHECK: %[[RIGHT:.*]] = stablehlo.concatenate %{{.*}}, %{{.*}}, %{{.*}}, dim = 1 : (tensor<2x1x1x4xf32>, tensor<2x64x1x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x66x1x4xf32>
// CHECK: %[[GRID:.*]] = stablehlo.concatenate %[[LEFT]], %[[MID]], %[[RIGHT]], dim = 2
// CHECK: stablehlo.convolution(%[[GRID]], %arg1)
// CHECK-NOT: func.func private
module {  func.func public @main(%arg0: tensor<2x64x8x4xf32>, %arg1: tensor<3x3x4x4xf32>) -> (tensor<2x64x8x4xf32> {jax.result_info = "result"}) {
    %0 = call @_pad(%arg0) : (tensor<2x64x8x4xf32>) -> tensor<2x66x10x4xf32>
    %1 = stablehlo.convolution(%0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[0, 0], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<2x66x10x4xf32>, tensor<3x3x4x4xf32>) -> tensor<2x64x8x4xf32>
    return %1 : tensor<2x64x8x4xf32>
  }
  func.func private @_pad(%arg0: tensor<2x64x8x4xf32>) -> tensor<2x66x10x4xf32> {
    %0 = stablehlo.slice %arg0 [0:2, 1:2, 0:8, 0:4] : (tensor<2x64x8x4xf32>) -> tensor<2x1x8x4xf32>
    %1 = call @_flip(%0) : (tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
    %2 = stablehlo.concatenate %1, %arg0, dim = 1 : (tensor<2x1x8x4xf32>, tensor<2x64x8x4xf32>) -> tensor<2x65x8x4xf32>
    %3 = stablehlo.slice %2 [0:2, 63:64, 0:8, 0:4] : (tensor<2x65x8x4xf32>) -> tensor<2x1x8x4xf32>
    %4 = call @_flip(%3) : (tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
    %5 = stablehlo.concatenate %2, %4, dim = 1 : (tensor<2x65x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x66x8x4xf32>
    %6 = stablehlo.slice %5 [0:2, 0:66, 1:2, 0:4] : (tensor<2x66x8x4xf32>) -> tensor<2x66x1x4xf32>
    %7 = call @_flip_0(%6) : (tensor<2x66x1x4xf32>) -> tensor<2x66x1x4xf32>
    %8 = stablehlo.concatenate %7, %5, dim = 2 : (tensor<2x66x1x4xf32>, tensor<2x66x8x4xf32>) -> tensor<2x66x9x4xf32>
    %9 = stablehlo.slice %8 [0:2, 0:66, 7:8, 0:4] : (tensor<2x66x9x4xf32>) -> tensor<2x66x1x4xf32>
    %10 = call @_flip_0(%9) : (tensor<2x66x1x4xf32>) -> tensor<2x66x1x4xf32>
    %11 = stablehlo.concatenate %8, %10, dim = 2 : (tensor<2x66x9x4xf32>, tensor<2x66x1x4xf32>) -> tensor<2x66x10x4xf32>
    return %11 : tensor<2x66x10x4xf32>
  }
  func.func private @_flip(%arg0: tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32> {
    %0 = stablehlo.reverse %arg0, dims = [1] : tensor<2x1x8x4xf32>
    return %0 : tensor<2x1x8x4xf32>
  }
  func.func private @_flip_0(%arg0: tensor<2x66x1x4xf32>) -> tensor<2x66x1x4xf32> {
    %0 = stablehlo.reverse %arg0, dims = [2] : tensor<2x66x1x4xf32>
    return %0 : tensor<2x66x1x4xf32>
  }
}

// -----
// Left alone: a padded value no convolution reads (the call stays, as do
// the slices of the concatenation it makes).
// CHECK-LABEL: func.func public @returned
// CHECK: call @_pad2
// CHECK: func.func private @_pad2
// CHECK: stablehlo.slice %{{.*}} [0:4, 7:8]
module {
  func.func public @returned(%arg0: tensor<4x8xf32>) -> tensor<4x10xf32> {
    %0 = call @_pad2(%arg0) : (tensor<4x8xf32>) -> tensor<4x10xf32>
    return %0 : tensor<4x10xf32>
  }
  func.func private @_pad2(%arg0: tensor<4x8xf32>) -> tensor<4x10xf32> {
    %0 = stablehlo.slice %arg0 [0:4, 1:2] : (tensor<4x8xf32>) -> tensor<4x1xf32>
    %1 = stablehlo.concatenate %0, %arg0, dim = 1 : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x9xf32>
    %2 = stablehlo.slice %1 [0:4, 7:8] : (tensor<4x9xf32>) -> tensor<4x1xf32>
    %3 = stablehlo.concatenate %1, %2, dim = 1 : (tensor<4x9xf32>, tensor<4x1xf32>) -> tensor<4x10xf32>
    return %3 : tensor<4x10xf32>
  }
}
