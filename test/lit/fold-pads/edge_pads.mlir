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

// -----
// mode="edge": every dim padded (most by nothing: concatenations of empty
// pieces) and each edge row broadcast through a unit dim and reshaped. The
// empty pieces go; broadcasts and unit-dim reshapes of the height
// concatenation move into its pieces like the width slices: the same grid.
// CHECK-LABEL: func.func public @edge_mode
// CHECK-NOT: tensor<0x
// CHECK-NOT: x0x
// CHECK: %[[MID:.*]] = stablehlo.concatenate %{{.*}}, %arg0, %{{.*}}, dim = 1 : (tensor<2x1x8x4xf32>, tensor<2x64x8x4xf32>, tensor<2x1x8x4xf32>)
// CHECK: %[[LEFT:.*]] = stablehlo.concatenate %{{.*}}, %{{.*}}, %{{.*}}, dim = 1 : (tensor<2x1x1x4xf32>, tensor<2x64x1x4xf32>, tensor<2x1x1x4xf32>)
// CHECK: %[[RIGHT:.*]] = stablehlo.concatenate %{{.*}}, %{{.*}}, %{{.*}}, dim = 1 : (tensor<2x1x1x4xf32>, tensor<2x64x1x4xf32>, tensor<2x1x1x4xf32>)
// CHECK: %[[GRID:.*]] = stablehlo.concatenate %[[LEFT]], %[[MID]], %[[RIGHT]], dim = 2
// CHECK: stablehlo.convolution(%[[GRID]], %arg1)
module {  func.func public @edge_mode(%arg0: tensor<2x64x8x4xf32>, %arg1: tensor<3x3x4x4xf32>) -> (tensor<2x64x8x4xf32> {jax.result_info = "result"}) {
    %0 = call @_pad(%arg0) : (tensor<2x64x8x4xf32>) -> tensor<2x66x10x4xf32>
    %1 = stablehlo.convolution(%0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[0, 0], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<2x66x10x4xf32>, tensor<3x3x4x4xf32>) -> tensor<2x64x8x4xf32>
    return %1 : tensor<2x64x8x4xf32>
  }
  func.func private @_pad(%arg0: tensor<2x64x8x4xf32>) -> tensor<2x66x10x4xf32> {
    %0 = stablehlo.slice %arg0 [0:1, 0:64, 0:8, 0:4] : (tensor<2x64x8x4xf32>) -> tensor<1x64x8x4xf32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [0, 2, 3, 4] : (tensor<1x64x8x4xf32>) -> tensor<1x0x64x8x4xf32>
    %2 = stablehlo.reshape %1 : (tensor<1x0x64x8x4xf32>) -> tensor<0x64x8x4xf32>
    %3 = stablehlo.slice %arg0 [1:2, 0:64, 0:8, 0:4] : (tensor<2x64x8x4xf32>) -> tensor<1x64x8x4xf32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [0, 2, 3, 4] : (tensor<1x64x8x4xf32>) -> tensor<1x0x64x8x4xf32>
    %5 = stablehlo.reshape %4 : (tensor<1x0x64x8x4xf32>) -> tensor<0x64x8x4xf32>
    %6 = stablehlo.concatenate %2, %arg0, %5, dim = 0 : (tensor<0x64x8x4xf32>, tensor<2x64x8x4xf32>, tensor<0x64x8x4xf32>) -> tensor<2x64x8x4xf32>
    %7 = stablehlo.slice %6 [0:2, 0:1, 0:8, 0:4] : (tensor<2x64x8x4xf32>) -> tensor<2x1x8x4xf32>
    %8 = stablehlo.broadcast_in_dim %7, dims = [0, 1, 3, 4] : (tensor<2x1x8x4xf32>) -> tensor<2x1x1x8x4xf32>
    %9 = stablehlo.reshape %8 : (tensor<2x1x1x8x4xf32>) -> tensor<2x1x8x4xf32>
    %10 = stablehlo.slice %6 [0:2, 63:64, 0:8, 0:4] : (tensor<2x64x8x4xf32>) -> tensor<2x1x8x4xf32>
    %11 = stablehlo.broadcast_in_dim %10, dims = [0, 1, 3, 4] : (tensor<2x1x8x4xf32>) -> tensor<2x1x1x8x4xf32>
    %12 = stablehlo.reshape %11 : (tensor<2x1x1x8x4xf32>) -> tensor<2x1x8x4xf32>
    %13 = stablehlo.concatenate %9, %6, %12, dim = 1 : (tensor<2x1x8x4xf32>, tensor<2x64x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x66x8x4xf32>
    %14 = stablehlo.slice %13 [0:2, 0:66, 0:1, 0:4] : (tensor<2x66x8x4xf32>) -> tensor<2x66x1x4xf32>
    %15 = stablehlo.broadcast_in_dim %14, dims = [0, 1, 2, 4] : (tensor<2x66x1x4xf32>) -> tensor<2x66x1x1x4xf32>
    %16 = stablehlo.reshape %15 : (tensor<2x66x1x1x4xf32>) -> tensor<2x66x1x4xf32>
    %17 = stablehlo.slice %13 [0:2, 0:66, 7:8, 0:4] : (tensor<2x66x8x4xf32>) -> tensor<2x66x1x4xf32>
    %18 = stablehlo.broadcast_in_dim %17, dims = [0, 1, 2, 4] : (tensor<2x66x1x4xf32>) -> tensor<2x66x1x1x4xf32>
    %19 = stablehlo.reshape %18 : (tensor<2x66x1x1x4xf32>) -> tensor<2x66x1x4xf32>
    %20 = stablehlo.concatenate %16, %13, %19, dim = 2 : (tensor<2x66x1x4xf32>, tensor<2x66x8x4xf32>, tensor<2x66x1x4xf32>) -> tensor<2x66x10x4xf32>
    %21 = stablehlo.slice %20 [0:2, 0:66, 0:10, 0:1] : (tensor<2x66x10x4xf32>) -> tensor<2x66x10x1xf32>
    %22 = stablehlo.broadcast_in_dim %21, dims = [0, 1, 2, 3] : (tensor<2x66x10x1xf32>) -> tensor<2x66x10x1x0xf32>
    %23 = stablehlo.reshape %22 : (tensor<2x66x10x1x0xf32>) -> tensor<2x66x10x0xf32>
    %24 = stablehlo.slice %20 [0:2, 0:66, 0:10, 3:4] : (tensor<2x66x10x4xf32>) -> tensor<2x66x10x1xf32>
    %25 = stablehlo.broadcast_in_dim %24, dims = [0, 1, 2, 3] : (tensor<2x66x10x1xf32>) -> tensor<2x66x10x1x0xf32>
    %26 = stablehlo.reshape %25 : (tensor<2x66x10x1x0xf32>) -> tensor<2x66x10x0xf32>
    %27 = stablehlo.concatenate %23, %20, %26, dim = 3 : (tensor<2x66x10x0xf32>, tensor<2x66x10x4xf32>, tensor<2x66x10x0xf32>) -> tensor<2x66x10x4xf32>
    return %27 : tensor<2x66x10x4xf32>
  }
}
