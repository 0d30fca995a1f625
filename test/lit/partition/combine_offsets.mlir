// RUN: %opt %s -p propagate,partition | filecheck %s
// Two combined groups in one block (f32 and bf16 partial sums). The f32
// group has three members of one type (SHARED_CUTS in partitioner/combine.py:
// their consumers may share a kernel), so its cuts read offsets from a loop at
// the block's start (a loop costs a few microseconds a step); the bf16 pair,
// which alone would be cut at constant offsets, reads them from the same loop,
// one value per distinct offset (0 and 16 serve both).
// CHECK: sdy.manual_computation
// CHECK: %[[PID:.*]] = stablehlo.partition_id
// CHECK: %[[W:.*]]:6 = stablehlo.while({{.*}}) : tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>
// CHECK-NOT: stablehlo.while
// CHECK: %[[F:.*]] = "stablehlo.reduce_scatter"
// CHECK: }) : (tensor<4x72xf32>) -> tensor<1x72xf32>
// CHECK: stablehlo.dynamic_slice %[[F]], %[[W]]#2, %[[W]]#2, sizes = [1, 16]
// CHECK: stablehlo.dynamic_slice %[[F]], %[[W]]#2, %[[W]]#3, sizes = [1, 24]
// CHECK: stablehlo.dynamic_slice %[[F]], %[[W]]#2, %[[W]]#4, sizes = [1, 16]
// CHECK: stablehlo.dynamic_slice %[[F]], %[[W]]#2, %[[W]]#5, sizes = [1, 16]
// CHECK: %[[B:.*]] = "stablehlo.reduce_scatter"
// CHECK: }) : (tensor<4x32xbf16>) -> tensor<1x32xbf16>
// CHECK: stablehlo.dynamic_slice %[[B]], %[[W]]#2, %[[W]]#2, sizes = [1, 16]
// CHECK: stablehlo.dynamic_slice %[[B]], %[[W]]#2, %[[W]]#3, sizes = [1, 16]
// CHECK-NOT: stablehlo.partition_id
sdy.mesh @mesh = <["x"=4]>
func.func public @main(%a: tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %b: tensor<64x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %c: tensor<64x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %g: tensor<64x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %h: tensor<64x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %d: tensor<8x64xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %e: tensor<64x8xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %f: tensor<64x8xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, tensor<8x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, tensor<8x8xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, tensor<8x8xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<8x64xf32>, tensor<64x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.dot_general %a, %c, contracting_dims = [1] x [0] : (tensor<8x64xf32>, tensor<64x12xf32>) -> tensor<8x12xf32>
  %4 = stablehlo.dot_general %a, %g, contracting_dims = [1] x [0] : (tensor<8x64xf32>, tensor<64x8xf32>) -> tensor<8x8xf32>
  %5 = stablehlo.dot_general %a, %h, contracting_dims = [1] x [0] : (tensor<8x64xf32>, tensor<64x8xf32>) -> tensor<8x8xf32>
  %2 = stablehlo.dot_general %d, %e, contracting_dims = [1] x [0] : (tensor<8x64xbf16>, tensor<64x8xbf16>) -> tensor<8x8xbf16>
  %3 = stablehlo.dot_general %d, %f, contracting_dims = [1] x [0] : (tensor<8x64xbf16>, tensor<64x8xbf16>) -> tensor<8x8xbf16>
  return %0, %1, %4, %5, %2, %3 : tensor<8x8xf32>, tensor<8x12xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xbf16>, tensor<8x8xbf16>
}
