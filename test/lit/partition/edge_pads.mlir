// The reflect-padded convolution of test/lit/fold-pads/edge_pads.mlir with
// height split 8 ways (8 rows a device). The convolution reads its 66 x 10
// input as a grid of edges around x's own blocks: each device runs it on
// its block with a one-row halo from each neighbour (the cost model's way:
// permutes, or one gather of the pieces), and the first and last devices'
// windows take the reflected rows 1 and 62, which come whole, each by one
// all-reduce of the row cut from the block that holds it. The 66 rows are
// never made, so nothing moves to a block of 9 rows or gathers the height.
// Without `fold-pads` (UNFOLDED) the pad is made: 7 collectives, 37 KB per
// device, gathering the padded input's pieces and the call's argument.
// RUN: %opt %s -p spmd-pipeline --collectives -o /dev/null 2>&1 | filecheck %s
// RUN: %opt %s -p 'import-shardings,propagate{relocate=cpu},partition' --collectives -o /dev/null 2>&1 | filecheck %s --check-prefix=UNFOLDED
// CHECK: all-reduce axes {"x"} 448 B {{.*}} stablehlo.slice {{.*}} slice pieces of the blocks
// CHECK-NEXT: all-reduce axes {"x"} 448 B {{.*}} stablehlo.slice {{.*}} slice pieces of the blocks
// CHECK-NEXT: all-gather axes {"x"} 4480 B {{.*}} stablehlo.convolution {{.*}} operand 0 window along dim 1: 2 along dim 1, the pieces from blocks -1, +1
// CHECK-NEXT: total: 3 collectives (all-gather x1, all-reduce x2), 5376 B per device
// UNFOLDED: total: 7 collectives {{.*}} 37248 B per device
// The partitioned body: the window of the block, its edge rows set where a
// device's window reaches past x.
// RUN: %opt %s -p spmd-pipeline | filecheck %s --check-prefix=BODY
// BODY: sdy.manual_computation
// BODY-NOT: tensor<2x66x
// BODY-NOT: tensor<2x9x
// BODY: stablehlo.convolution{{.*}} : (tensor<2x10x10x4xf32>, tensor<3x3x4x4xf32>) -> tensor<2x8x8x4xf32>
sdy.mesh @mesh = <["x"=8]>
  func.func public @main(%arg0: tensor<2x64x8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}, %arg1: tensor<3x3x4x4xf32>) -> (tensor<2x64x8x4xf32> {jax.result_info = "result", sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) {
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

