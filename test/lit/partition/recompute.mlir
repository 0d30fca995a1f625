// Values made only from iotas and splats through elementwise ops (index
// arithmetic, masks, the counters of counter-based random bits) are made again
// where a split use needs them, at the local shape, rather than computed whole
// and sliced (global ops left behind are dead; XLA drops them).
// RUN: %opt %s -p partition --split-input-file | filecheck %s

sdy.mesh @mesh = <["x"=2, "y"=3]>

// The threefry counter 9 * row + col of a 4x9 array split 2 x 3 (as
// propagation leaves it: the add sharded, its constant operands not): each
// device builds its 2x3 block from local iotas plus its block offsets.
// CHECK-LABEL: func.func public @counters
// CHECK: %[[ROW:.*]] = stablehlo.iota dim = 0 : tensor<2x3xui64>
// CHECK: stablehlo.partition_id
// CHECK: %[[R:.*]] = stablehlo.add %[[ROW]], %{{.*}} : tensor<2x3xui64>
// CHECK: %[[COL:.*]] = stablehlo.iota dim = 1 : tensor<2x3xui64>
// CHECK: %[[C:.*]] = stablehlo.add %[[COL]], %{{.*}} : tensor<2x3xui64>
// CHECK: %[[NINE:.*]] = stablehlo.multiply %{{.*}}, %[[R]] : tensor<2x3xui64>
// CHECK: %[[ONE:.*]] = stablehlo.multiply %{{.*}}, %[[C]] : tensor<2x3xui64>
// CHECK: stablehlo.add %[[NINE]], %[[ONE]] : tensor<2x3xui64>
// CHECK-NOT: dynamic_slice
// CHECK-NOT: all_gather
func.func public @counters(%arg0: tensor<4x9xui32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<4x9xui32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) {
  %0 = stablehlo.iota dim = 0 : tensor<4x9xui64>
  %1 = stablehlo.iota dim = 1 : tensor<4x9xui64>
  %c = stablehlo.constant dense<9> : tensor<ui64>
  %2 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui64>) -> tensor<4x9xui64>
  %3 = stablehlo.multiply %2, %0 : tensor<4x9xui64>
  %c_0 = stablehlo.constant dense<1> : tensor<ui64>
  %4 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<ui64>) -> tensor<4x9xui64>
  %5 = stablehlo.multiply %4, %1 : tensor<4x9xui64>
  %6 = stablehlo.add %3, %5 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : tensor<4x9xui64>
  %c_1 = stablehlo.constant dense<32> : tensor<ui64>
  %7 = stablehlo.broadcast_in_dim %c_1, dims = [] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : (tensor<ui64>) -> tensor<4x9xui64>
  %8 = stablehlo.shift_right_logical %6, %7 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : tensor<4x9xui64>
  %9 = stablehlo.convert %6 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : (tensor<4x9xui64>) -> tensor<4x9xui32>
  %10 = stablehlo.convert %8 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : (tensor<4x9xui64>) -> tensor<4x9xui32>
  %11 = stablehlo.xor %9, %10 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : tensor<4x9xui32>
  %12 = stablehlo.add %11, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : tensor<4x9xui32>
  return %12 : tensor<4x9xui32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=3]>
// Relative positions `arange(6)[:, None] - arange(6)[None, :]` (an ALiBi or
// relative-position bias table's index) on rows split over "x" and columns over
// "y": each 1-D iota is made at the local size of the dim it is broadcast
// into, with that dim's block offset, and broadcast locally; no 6x6 grid is
// cut.
// CHECK-LABEL: func.func public @relative_positions
// CHECK: %[[I:.*]] = stablehlo.iota dim = 0 : tensor<3xi32>
// CHECK: %[[IO:.*]] = stablehlo.add %[[I]], %{{.*}} : tensor<3xi32>
// CHECK: %[[IB:.*]] = stablehlo.broadcast_in_dim %[[IO]], dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
// CHECK: stablehlo.broadcast_in_dim %[[IB]], dims = [0, 1] : (tensor<3x1xi32>) -> tensor<3x2xi32>
// CHECK: %[[J:.*]] = stablehlo.iota dim = 0 : tensor<2xi32>
// CHECK: %[[JO:.*]] = stablehlo.add %[[J]], %{{.*}} : tensor<2xi32>
// CHECK: %[[JB:.*]] = stablehlo.broadcast_in_dim %[[JO]], dims = [1] : (tensor<2xi32>) -> tensor<1x2xi32>
// CHECK: stablehlo.broadcast_in_dim %[[JB]], dims = [0, 1] : (tensor<1x2xi32>) -> tensor<3x2xi32>
// CHECK: stablehlo.subtract %{{.*}}, %{{.*}} : tensor<3x2xi32>
// CHECK-NOT: dynamic_slice
func.func public @relative_positions(%arg0: tensor<6x6xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<6x6xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) {
  %0 = stablehlo.iota dim = 0 : tensor<6xi32>
  %1 = stablehlo.broadcast_in_dim %0, dims = [0] : (tensor<6xi32>) -> tensor<6x1xi32>
  %2 = stablehlo.iota dim = 0 : tensor<6xi32>
  %3 = stablehlo.broadcast_in_dim %2, dims = [1] : (tensor<6xi32>) -> tensor<1x6xi32>
  %4 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<6x1xi32>) -> tensor<6x6xi32>
  %5 = stablehlo.broadcast_in_dim %3, dims = [0, 1] : (tensor<1x6xi32>) -> tensor<6x6xi32>
  %6 = stablehlo.subtract %4, %5 : tensor<6x6xi32>
  %7 = stablehlo.add %6, %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : tensor<6x6xi32>
  return %7 : tensor<6x6xi32>
}

// -----

sdy.mesh @mesh = <["x"=8]>

// A pooling's window counts (count_include_pad=False: a window sum of ones)
// along a split dim, the ones laid out split as propagation leaves them: they
// are made whole where the window is cut, so each device sums its own window;
// no exchange, and no whole reduce_window (which XLA would fold into a 64-row
// constant at compile time) sliced afterwards.
// CHECK-LABEL: func.func public @window_counts
// CHECK-NOT: collective_permute
// CHECK-NOT: all_gather
// CHECK: %[[ONES:.*]] = stablehlo.broadcast_in_dim %{{.*}}, dims = [] : (tensor<f32>) -> tensor<64x4xf32>
// CHECK: %[[PAD:.*]] = stablehlo.pad %[[ONES]], %{{.*}}, low = [1, 0], high = [1, 0]
// CHECK: %[[WIN:.*]] = stablehlo.dynamic_slice %[[PAD]], %{{.*}}, %{{.*}}, sizes = [10, 4]
// CHECK: "stablehlo.reduce_window"(%[[WIN]], %{{.*}})
// CHECK-SAME: padding = dense<0> : tensor<2x2xi64>
// CHECK: -> tensor<8x4xf32>
// CHECK-NOT: collective_permute
// CHECK-NOT: all_gather
func.func public @window_counts(%arg0: tensor<64x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<64x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
  %0 = stablehlo.broadcast_in_dim %cst, dims = [] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<f32>) -> tensor<64x4xf32>
  %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %1 = "stablehlo.reduce_window"(%0, %cst_0) <{padding = dense<[[1, 1], [0, 0]]> : tensor<2x2xi64>, window_dimensions = array<i64: 3, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<64x4xf32>, tensor<f32>) -> tensor<64x4xf32>
  %2 = stablehlo.divide %arg0, %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<64x4xf32>
  return %2 : tensor<64x4xf32>
}
