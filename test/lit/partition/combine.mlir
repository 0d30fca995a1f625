// RUN: %opt %s -p propagate,partition --collectives 2>&1 | filecheck %s
// RUN: %opt %s -p 'propagate,partition{combine=false}' | filecheck %s --check-prefix=OFF
// RUN: %opt %s -p 'propagate,partition{cost=gpu}' | filecheck %s --check-prefix=GPU
// GPU-NOT: stablehlo.while
// GPU: stablehlo.slice %{{.*}} [0:1, 0:16] : (tensor<1x40xf32>) -> tensor<1x16xf32>
// GPU: stablehlo.slice %{{.*}} [0:1, 16:40] : (tensor<1x40xf32>) -> tensor<1x24xf32>
// GPU-NOT: stablehlo.while
// OFF-COUNT-2: "stablehlo.reduce_scatter"
// OFF-NOT: stablehlo.concatenate
// Independent collectives of the same kind, groups and reduction become one
// (partitioner/combine.py): each operand with its scatter dim moved first, as
// 4 rows (the group size), side by side; one reduce_scatter; each result cut
// out and put back in shape. The report keeps both reshards and says what was
// combined.
// CHECK: reduce-scatter  axes {"x"}        192 B
// CHECK: reduce-scatter  axes {"x"}        288 B
// CHECK: combined: 2 independent reduce-scatter ops into one (640 B operand per device)
// CHECK: issued after combining: reduce-scatter x1
// Two members of different types: their consumers cannot share a kernel, so
// the cuts are at constant offsets on CPU too (no offsets loop:
// partitioner/combine.py, SHARED_CUTS; the run-time form is in
// combine_offsets.mlir).
// CHECK-NOT: stablehlo.while
// CHECK: %[[D0:.*]] = stablehlo.dot_general {{.*}} -> tensor<8x8xf32>
// CHECK: %[[D1:.*]] = stablehlo.dot_general {{.*}} -> tensor<8x12xf32>
// CHECK: %[[R0:.*]] = stablehlo.reshape %[[D0]] : (tensor<8x8xf32>) -> tensor<4x16xf32>
// CHECK: %[[T1:.*]] = stablehlo.transpose %[[D1]], dims = [1, 0] : (tensor<8x12xf32>) -> tensor<12x8xf32>
// CHECK: %[[R1:.*]] = stablehlo.reshape %[[T1]] : (tensor<12x8xf32>) -> tensor<4x24xf32>
// CHECK: %[[J:.*]] = stablehlo.concatenate %[[R0]], %[[R1]], dim = 1 : (tensor<4x16xf32>, tensor<4x24xf32>) -> tensor<4x40xf32>
// CHECK: %[[RS:.*]] = "stablehlo.reduce_scatter"(%[[J]]) {{.*}}scatter_dimension = 0
// CHECK: }) : (tensor<4x40xf32>) -> tensor<1x40xf32>
// CHECK-NOT: stablehlo.reduce_scatter
// CHECK: %[[S0:.*]] = stablehlo.slice %[[RS]] [0:1, 0:16] : (tensor<1x40xf32>) -> tensor<1x16xf32>
// CHECK: %[[O0:.*]] = stablehlo.reshape %[[S0]] : (tensor<1x16xf32>) -> tensor<2x8xf32>
// CHECK: %[[S1:.*]] = stablehlo.slice %[[RS]] [0:1, 16:40] : (tensor<1x40xf32>) -> tensor<1x24xf32>
// CHECK: %[[B1:.*]] = stablehlo.reshape %[[S1]] : (tensor<1x24xf32>) -> tensor<3x8xf32>
// CHECK: %[[O1:.*]] = stablehlo.transpose %[[B1]], dims = [1, 0] : (tensor<3x8xf32>) -> tensor<8x3xf32>
// CHECK: sdy.return %[[O0]], %[[O1]] : tensor<2x8xf32>, tensor<8x3xf32>
sdy.mesh @mesh = <["x"=4]>
func.func public @main(%a: tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %b: tensor<64x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %c: tensor<64x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, tensor<8x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<8x64xf32>, tensor<64x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.dot_general %a, %c, contracting_dims = [1] x [0] : (tensor<8x64xf32>, tensor<64x12xf32>) -> tensor<8x12xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8x12xf32>
}
