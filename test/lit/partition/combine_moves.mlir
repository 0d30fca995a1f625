// RUN: %opt %s -p partition | filecheck %s
// An op between two combined collectives that uses the first one's result
// (the negate) moves after the combined collective; it cannot feed the second
// (the two are independent), so nothing else has to move.
// CHECK: stablehlo.dot_general
// CHECK: stablehlo.dot_general
// CHECK-NOT: stablehlo.negate
// CHECK: %[[RS:.*]] = "stablehlo.reduce_scatter"
// CHECK-NOT: stablehlo.reduce_scatter
// CHECK: %[[S0:.*]] = stablehlo.slice %[[RS]] [0:1, 0:16]
// CHECK: %[[O0:.*]] = stablehlo.reshape %[[S0]] : (tensor<1x16xf32>) -> tensor<2x8xf32>
// CHECK: %[[N:.*]] = stablehlo.negate %[[O0]] : tensor<2x8xf32>
// CHECK: sdy.return %[[N]], %{{.*}} : tensor<2x8xf32>, tensor<8x3xf32>
sdy.mesh @mesh = <["x"=4]>
func.func public @main(%a: tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %b: tensor<64x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %c: tensor<64x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, tensor<8x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<8x64xf32>, tensor<64x8xf32>) -> tensor<8x8xf32>
  %n = stablehlo.negate %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<8x8xf32>
  %1 = stablehlo.dot_general %a, %c, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<8x64xf32>, tensor<64x12xf32>) -> tensor<8x12xf32>
  return %n, %1 : tensor<8x8xf32>, tensor<8x12xf32>
}
