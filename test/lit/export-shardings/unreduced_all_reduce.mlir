// RUN: %opt %s -p propagation-pipeline | filecheck %s
// RUN: %opt %s -p spmd-pipeline | filecheck %s --check-prefix=PART
// Shardy's export form of unreduced values: where a value unreduced over
// some axes meets a use that is not unreduced over them (an op whose result
// is not, a function result), an sdy.all_reduce over those axes goes before
// that use, one per use; what the use keeps unreduced stays so. The
// partitioner sums the partial sum over the all_reduce's axes.
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
// CHECK-LABEL: func @main(
// CHECK-NEXT: %0 = stablehlo.dot_general {{.*}} {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}], unreduced={"b", "c"}>]>}
// CHECK-NEXT: %1 = sdy.all_reduce {"b"} %0 out_sharding=<@mesh, [{"a"}, {}], unreduced={"c"}>
// CHECK-NEXT: %2 = sdy.all_reduce {"b"} %0 out_sharding=<@mesh, [{"a"}, {}], unreduced={"c"}>
// CHECK-NEXT: %3 = stablehlo.add %1, %2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}], unreduced={"c"}>]>}
// CHECK-NEXT: %4 = sdy.all_reduce {"c"} %3 out_sharding=<@mesh, [{"a"}, {"b"}]>
// CHECK-NEXT: return %4
// The dot's partial sums over "b" and "c": summed over "b" (groups of
// devices that differ in "b"), then over "c".
// PART: stablehlo.dot_general {{.*}} -> tensor<4x16xf32>
// PART: "stablehlo.all_reduce"({{.*}}) <{channel_handle = {{.*}}, replica_groups = dense<{{\[\[}}0, 2], [1, 3], [4, 6], [5, 7]]>
// PART: "stablehlo.all_reduce"({{.*}}) <{channel_handle = {{.*}}, replica_groups = dense<{{\[\[}}0, 1], [2, 3], [4, 5], [6, 7]]>
func.func @main(
    %arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b", "c"}]>},
    %arg1: tensor<8x16xf32>)
    -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"b", "c"}]>}) {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0]
    {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {?}], unreduced={"b", "c"}>]>} :
    (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %1 = stablehlo.add %0, %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {?}], unreduced={"c"}>]>} : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
