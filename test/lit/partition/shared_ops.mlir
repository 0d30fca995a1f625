// RUN: %opt %s -p 'propagate{callees=copies},partition' --collectives 2>&1 | filecheck %s
// The builder writes each distinct pure op once per region: a batch norm's
// variance recomputing the mean (jnp.var sums x again in a function of its
// own) sums x locally once, that partial sum is all-reduced once and divided
// once; the report counts the collectives the program issues: that one and
// the variance's own.
// CHECK: collectives inserted by partition
// CHECK-NEXT: all-reduce {{ +}}axes {"x"} {{ +}}96 B {{.*}}shared_ops.mlir:23:{{.*}}: result: [{}] -> [{}] (partial over "x")
// CHECK-NEXT: all-reduce {{ +}}axes {"x"} {{ +}}96 B {{.*}}shared_ops.mlir:37:{{.*}}: result: [{}] -> [{}] (partial over "x")
// CHECK-NEXT: total: 2 collectives (all-reduce x2), 192 B per device
// CHECK-LABEL: func.func public @main
// CHECK: %[[SUM:.*]] = stablehlo.reduce(%arg1 init: %{{.*}}) applies stablehlo.add across dimensions = [0]
// CHECK: %[[ALL:.*]] = "stablehlo.all_reduce"(%[[SUM]])
// CHECK: %[[MEAN:.*]] = stablehlo.divide %[[ALL]]
// CHECK-NOT: %[[ALL]]
// CHECK: stablehlo.broadcast_in_dim %[[MEAN]]
// CHECK: %[[SQ:.*]] = stablehlo.reduce(
// CHECK: "stablehlo.all_reduce"(%[[SQ]])
// CHECK: sdy.return %[[MEAN]], %{{.*}} : tensor<16xf32>, tensor<16xf32>
sdy.mesh @mesh = <["x"=4]>
func.func public @main(%x: tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<16xf32>, tensor<16xf32>) {
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%x init: %c) applies stablehlo.add across dimensions = [0] : (tensor<32x16xf32>, tensor<f32>) -> tensor<16xf32>
  %n = stablehlo.constant dense<32.0> : tensor<16xf32>
  %mean = stablehlo.divide %sum, %n : tensor<16xf32>
  %var = func.call @var(%x) : (tensor<32x16xf32>) -> tensor<16xf32>
  return %mean, %var : tensor<16xf32>, tensor<16xf32>
}
func.func private @var(%x: tensor<32x16xf32>) -> tensor<16xf32> {
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%x init: %c) applies stablehlo.add across dimensions = [0] : (tensor<32x16xf32>, tensor<f32>) -> tensor<16xf32>
  %n = stablehlo.constant dense<32.0> : tensor<16xf32>
  %mean = stablehlo.divide %sum, %n : tensor<16xf32>
  %b = stablehlo.broadcast_in_dim %mean, dims = [1] : (tensor<16xf32>) -> tensor<32x16xf32>
  %d = stablehlo.subtract %x, %b : tensor<32x16xf32>
  %sq = stablehlo.multiply %d, %d : tensor<32x16xf32>
  %ss = stablehlo.reduce(%sq init: %c) applies stablehlo.add across dimensions = [0] : (tensor<32x16xf32>, tensor<f32>) -> tensor<16xf32>
  %v = stablehlo.divide %ss, %n : tensor<16xf32>
  return %v : tensor<16xf32>
}
