// Out-of-range indices keep XLA's meaning (what jax.jit's program relies on):
// a gather's start index is clamped into the whole operand, a scatter's
// update for no position is dropped.
// RUN: %opt %s -p partition --split-input-file | filecheck %s

sdy.mesh @mesh = <["x"=8]>
// A lookup in a table split along the looked-up dim (masked per block, then
// summed): the ids are clamped into [0, 63] first, so an id past the end
// reads row 63 (`jnp.take(..., mode="clip")`, `x[i]`) and not zeros.
// CHECK-LABEL: func.func public @clamped_lookup
// CHECK: %[[LO:.*]] = stablehlo.maximum %{{.*}}, %{{.*}} : tensor<6x1xi32>
// CHECK: %[[C:.*]] = stablehlo.minimum %[[LO]], %{{.*}} : tensor<6x1xi32>
// CHECK: %[[S:.*]] = stablehlo.subtract %[[C]], %{{.*}} : tensor<6x1xi32>
// CHECK: "stablehlo.gather"(%arg2, %[[S]])
// CHECK: "stablehlo.all_reduce"
func.func public @clamped_lookup(%arg0: tensor<64x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<6xi32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) -> (tensor<6x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %0 = stablehlo.broadcast_in_dim %arg1, dims = [0] : (tensor<6xi32>) -> tensor<6x1xi32>
  %1 = "stablehlo.gather"(%arg0, %0) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 4>}> {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<64x4xf32>, tensor<6x1xi32>) -> tensor<6x4xf32>
  return %1 : tensor<6x4xf32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// A scatter into a table split along its columns only (the window dim, not
// the dim scattered into): each device scatters its columns of every update
// with the ids as they are; no id routed anywhere (an id past either end
// was sent to row 0 when no split row dim gave it a scratch row).
// CHECK-LABEL: func.func public @column_split_scatter
// CHECK: %[[S:.*]] = "stablehlo.scatter"(%arg3, %{{.*}}, %arg5)
// CHECK: -> tensor<16x1xf32>
// CHECK-NEXT: sdy.return %[[S]]
// CHECK-NOT: stablehlo.pad
func.func public @column_split_scatter(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %arg1: tensor<64xi32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}, %arg2: tensor<64x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  %0 = stablehlo.broadcast_in_dim %arg1, dims = [0] : (tensor<64xi32>) -> tensor<64x1xi32>
  %1 = "stablehlo.scatter"(%arg0, %0, %arg2) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %2 = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %2 : tensor<f32>
  }) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<16x8xf32>, tensor<64x1xi32>, tensor<64x8xf32>) -> tensor<16x8xf32>
  return %1 : tensor<16x8xf32>
}
