// The gradient of `logits[jnp.arange(n), labels]` (a scatter-add of each
// row's gradient at the iota-and-labels index vector) on rows split 8 ways.
// With `batch-gathers` first (as in spmd-pipeline and meshjit.jit) the
// scatter is batched over the rows: each device adds into its own rows, no
// collective. Without it the operand's rows are an indexed dim that the
// split index rows conflict with over "x": the partitioner gathers the
// indices (7/8 of 1 KiB) and the updates (7/8 of 512 B) to every device.
// RUN: %opt %s -p spmd-pipeline --collectives -o /dev/null 2>&1 | filecheck %s
// RUN: %opt %s -p 'import-shardings,propagate{relocate=cpu},partition' --collectives -o /dev/null 2>&1 | filecheck %s --check-prefix=UNBATCHED
// CHECK: total: 0 collectives
// UNBATCHED: all-gather axes {"x"} 896 B {{.*}} stablehlo.scatter
// UNBATCHED: all-gather axes {"x"} 448 B {{.*}} stablehlo.scatter
// UNBATCHED: total: 2 collectives
sdy.mesh @mesh = <["x"=8]>
func.func public @main(%arg0: tensor<128x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<128xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}, %arg2: tensor<128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> (tensor<128x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = stablehlo.iota dim = 0 : tensor<128xi32>
  %c = stablehlo.constant dense<0> : tensor<i32>
  %1 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<128xi32>
  %2 = stablehlo.compare LT, %0, %1, SIGNED : (tensor<128xi32>, tensor<128xi32>) -> tensor<128xi1>
  %c_0 = stablehlo.constant dense<128> : tensor<i32>
  %3 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<128xi32>
  %4 = stablehlo.add %0, %3 : tensor<128xi32>
  %5 = stablehlo.select %2, %4, %0 : tensor<128xi1>, tensor<128xi32>
  %11 = stablehlo.broadcast_in_dim %5, dims = [0] : (tensor<128xi32>) -> tensor<128x1xi32>
  %12 = stablehlo.broadcast_in_dim %arg1, dims = [0] : (tensor<128xi32>) -> tensor<128x1xi32>
  %13 = stablehlo.concatenate %11, %12, dim = 1 : (tensor<128x1xi32>, tensor<128x1xi32>) -> tensor<128x2xi32>
  %14 = "stablehlo.scatter"(%arg0, %13, %arg2) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0, 1], scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 1>, unique_indices = false}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<128x64xf32>, tensor<128x2xi32>, tensor<128xf32>) -> tensor<128x64xf32>
  return %14 : tensor<128x64xf32>
}
