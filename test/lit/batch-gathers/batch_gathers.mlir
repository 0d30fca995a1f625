// RUN: %opt %s -p batch-gathers --split-input-file | filecheck %s
// `x[jnp.arange(n), labels]` as jax lowers it: the index vector is an iota
// (through jax's negative-index normalization, which picks it) beside the
// labels. Written as a batched gather, row i of the operand and index i are
// one factor: a batch split stays local. Without the rewrite the operand's
// rows are an indexed dim the split index rows conflict with, and the
// partitioner gathers the whole 64 KiB operand
// (`test/lit/partition/batch_gathers.mlir`).

// CHECK-LABEL: func.func public @pick_labels
// CHECK-NOT: stablehlo.concatenate
// CHECK: "stablehlo.gather"(%arg0, %{{.*}}) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<128x128xf32>, tensor<128x1xi32>) -> tensor<128xf32>
sdy.mesh @mesh = <["x"=8]>
func.func public @pick_labels(%arg0: tensor<128x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<128xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> (tensor<128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
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
  %14 = "stablehlo.gather"(%arg0, %13) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0, 1], start_index_map = [0, 1], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<128x128xf32>, tensor<128x2xi32>) -> tensor<128xf32>
  return %14 : tensor<128xf32>
}

// -----
// The iota second in the index vector, a reshape instead of a broadcast,
// no normalization, three components (one kept pair is concatenated again).
// CHECK-LABEL: func.func public @second_of_three
// CHECK: %[[KEPT:.*]] = stablehlo.concatenate %{{.*}}, %{{.*}}, dim = 1 : (tensor<16x1xi32>, tensor<16x1xi32>) -> tensor<16x2xi32>
// CHECK: "stablehlo.gather"(%arg0, %[[KEPT]]) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0, 2], operand_batching_dims = [1], start_indices_batching_dims = [0], start_index_map = [0, 2], index_vector_dim = 1>
sdy.mesh @mesh = <["x"=8]>
func.func public @second_of_three(%arg0: tensor<4x16x8xf32>, %a: tensor<16x1xi32>, %b: tensor<16x1xi32>) -> tensor<16xf32> {
  %0 = stablehlo.iota dim = 0 : tensor<16xi32>
  %1 = stablehlo.reshape %0 : (tensor<16xi32>) -> tensor<16x1xi32>
  %2 = stablehlo.concatenate %a, %1, %b, dim = 1 : (tensor<16x1xi32>, tensor<16x1xi32>, tensor<16x1xi32>) -> tensor<16x3xi32>
  %3 = "stablehlo.gather"(%arg0, %2) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0, 1, 2], start_index_map = [0, 1, 2], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1, 1>}> : (tensor<4x16x8xf32>, tensor<16x3xi32>) -> tensor<16xf32>
  return %3 : tensor<16xf32>
}

// -----
// Not rewritten: an arange shorter than the operand's dim (rows 0-63 of
// 128: not a batching dim), and an iota that is not the whole index dim's
// position (a normalization that does not pick it: `iota < 0` selects the
// other way round).
// CHECK-LABEL: func.func public @shorter
// CHECK: stablehlo.concatenate
// CHECK: collapsed_slice_dims = [0, 1], start_index_map = [0, 1]
// CHECK-LABEL: func.func public @not_the_iota
// CHECK: stablehlo.concatenate
// CHECK: collapsed_slice_dims = [0, 1], start_index_map = [0, 1]
sdy.mesh @mesh = <["x"=8]>
func.func public @shorter(%arg0: tensor<128x128xf32>, %arg1: tensor<64x1xi32>) -> tensor<64xf32> {
  %0 = stablehlo.iota dim = 0 : tensor<64x1xi32>
  %1 = stablehlo.concatenate %0, %arg1, dim = 1 : (tensor<64x1xi32>, tensor<64x1xi32>) -> tensor<64x2xi32>
  %2 = "stablehlo.gather"(%arg0, %1) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0, 1], start_index_map = [0, 1], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<128x128xf32>, tensor<64x2xi32>) -> tensor<64xf32>
  return %2 : tensor<64xf32>
}
func.func public @not_the_iota(%arg0: tensor<128x128xf32>, %arg1: tensor<128x1xi32>) -> tensor<128xf32> {
  %0 = stablehlo.iota dim = 0 : tensor<128xi32>
  %c = stablehlo.constant dense<0> : tensor<128xi32>
  %2 = stablehlo.compare LT, %0, %c, SIGNED : (tensor<128xi32>, tensor<128xi32>) -> tensor<128xi1>
  %5 = stablehlo.select %2, %0, %c : tensor<128xi1>, tensor<128xi32>
  %11 = stablehlo.broadcast_in_dim %5, dims = [0] : (tensor<128xi32>) -> tensor<128x1xi32>
  %13 = stablehlo.concatenate %11, %arg1, dim = 1 : (tensor<128x1xi32>, tensor<128x1xi32>) -> tensor<128x2xi32>
  %14 = "stablehlo.gather"(%arg0, %13) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0, 1], start_index_map = [0, 1], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<128x128xf32>, tensor<128x2xi32>) -> tensor<128xf32>
  return %14 : tensor<128xf32>
}

// -----
// Not rewritten: an i8 iota over 200 rows wraps past 127, so it is not
// each row's position.
// CHECK-LABEL: func.func public @narrow_iota
// CHECK: stablehlo.concatenate
// CHECK: collapsed_slice_dims = [0, 1], start_index_map = [0, 1]
sdy.mesh @mesh = <["x"=8]>
func.func public @narrow_iota(%arg0: tensor<200x8xf32>, %arg1: tensor<200x1xi8>) -> tensor<200xf32> {
  %i = stablehlo.iota dim = 0 : tensor<200xi8>
  %0 = stablehlo.reshape %i : (tensor<200xi8>) -> tensor<200x1xi8>
  %1 = stablehlo.concatenate %0, %arg1, dim = 1 : (tensor<200x1xi8>, tensor<200x1xi8>) -> tensor<200x2xi8>
  %2 = "stablehlo.gather"(%arg0, %1) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0, 1], start_index_map = [0, 1], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<200x8xf32>, tensor<200x2xi8>) -> tensor<200xf32>
  return %2 : tensor<200xf32>
}

// -----
// The gradient of the pick above: a scatter-add of each row's gradient at
// the same index vector (what `jax.grad` emits, and
// `x.at[jnp.arange(n), labels].add(v)`). Written as a batched scatter the
// same way: the iota's component leaves the index vector, its operand dim
// (an inserted window dim, window size 1) becomes a batching dim, and
// `unique_indices` stays (each (row, label) pair is the same tuple).
// CHECK-LABEL: func.func public @scatter_add_labels
// CHECK-NOT: stablehlo.concatenate
// CHECK: "stablehlo.scatter"(%{{.*}}, %{{.*}}, %arg2) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [1], input_batching_dims = [0], scatter_indices_batching_dims = [0], scatter_dims_to_operand_dims = [1], index_vector_dim = 1>, unique_indices = true}>
// CHECK: }) : (tensor<128x64xf32>, tensor<128x1xi32>, tensor<128xf32>) -> tensor<128x64xf32>
sdy.mesh @mesh = <["x"=8]>
func.func public @scatter_add_labels(%arg0: tensor<128x64xf32>, %arg1: tensor<128xi32>, %arg2: tensor<128xf32>) -> tensor<128x64xf32> {
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
  %14 = "stablehlo.scatter"(%arg0, %13, %arg2) <{indices_are_sorted = true, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0, 1], scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 1>, unique_indices = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<128x64xf32>, tensor<128x2xi32>, tensor<128xf32>) -> tensor<128x64xf32>
  return %14 : tensor<128x64xf32>
}

// -----
// A scatter with an update window (rows of 4 features from column labels
// picked per row: `x.at[arange, labels, :].set(v)`), two inputs at once
// (variadic: the indices sit between the inputs and the updates). Not
// rewritten: an arange over 64 of the operand's 128 rows.
// CHECK-LABEL: func.func public @scatter_window_variadic
// CHECK: "stablehlo.scatter"(%arg0, %arg1, %{{.*}}, %arg3, %arg4) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [1], input_batching_dims = [0], scatter_indices_batching_dims = [0], scatter_dims_to_operand_dims = [1], index_vector_dim = 1>}>
// CHECK-LABEL: func.func public @scatter_shorter
// CHECK: stablehlo.concatenate
// CHECK: inserted_window_dims = [0, 1], scatter_dims_to_operand_dims = [0, 1]
sdy.mesh @mesh = <["x"=8]>
func.func public @scatter_window_variadic(%arg0: tensor<16x8x4xf32>, %arg1: tensor<16x8x4xf32>, %arg2: tensor<16x1xi32>, %arg3: tensor<16x4xf32>, %arg4: tensor<16x4xf32>) -> (tensor<16x8x4xf32>, tensor<16x8x4xf32>) {
  %0 = stablehlo.iota dim = 0 : tensor<16x1xi32>
  %1 = stablehlo.concatenate %0, %arg2, dim = 1 : (tensor<16x1xi32>, tensor<16x1xi32>) -> tensor<16x2xi32>
  %2:2 = "stablehlo.scatter"(%arg0, %arg1, %1, %arg3, %arg4) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0, 1], scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<f32>, %d: tensor<f32>):
    stablehlo.return %c, %d : tensor<f32>, tensor<f32>
  }) : (tensor<16x8x4xf32>, tensor<16x8x4xf32>, tensor<16x2xi32>, tensor<16x4xf32>, tensor<16x4xf32>) -> (tensor<16x8x4xf32>, tensor<16x8x4xf32>)
  return %2#0, %2#1 : tensor<16x8x4xf32>, tensor<16x8x4xf32>
}
func.func public @scatter_shorter(%arg0: tensor<128x64xf32>, %arg1: tensor<64x1xi32>, %arg2: tensor<64xf32>) -> tensor<128x64xf32> {
  %0 = stablehlo.iota dim = 0 : tensor<64x1xi32>
  %1 = stablehlo.concatenate %0, %arg1, dim = 1 : (tensor<64x1xi32>, tensor<64x1xi32>) -> tensor<64x2xi32>
  %2 = "stablehlo.scatter"(%arg0, %1, %arg2) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0, 1], scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 1>, unique_indices = false}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<128x64xf32>, tensor<64x2xi32>, tensor<64xf32>) -> tensor<128x64xf32>
  return %2 : tensor<128x64xf32>
}

// -----
// `x[jnp.arange(b)[:, None], jnp.arange(s)[None, :], labels]`: two
// components count (each through jax's normalization and broadcasts that
// keep its dim whole), one per round: both rows and positions become
// batching dims, only the labels stay in the index vector.
// CHECK-LABEL: func.func public @two_aranges
// CHECK: "stablehlo.gather"(%arg0, %{{.*}}) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [2], operand_batching_dims = [0, 1], start_indices_batching_dims = [0, 1], start_index_map = [2], index_vector_dim = 2>
// CHECK-SAME: (tensor<4x16x32xf32>, tensor<4x16x1xi32>) -> tensor<4x16xf32>
sdy.mesh @mesh = <["x"=8]>
func.func public @two_aranges(%arg0: tensor<4x16x32xf32>, %arg1: tensor<4x16xi32>) -> tensor<4x16xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %c4 = stablehlo.constant dense<4> : tensor<i32>
  %c16 = stablehlo.constant dense<16> : tensor<i32>
  %0 = stablehlo.iota dim = 0 : tensor<4xi32>
  %1 = stablehlo.broadcast_in_dim %0, dims = [0] : (tensor<4xi32>) -> tensor<4x1xi32>
  %2 = stablehlo.iota dim = 0 : tensor<16xi32>
  %3 = stablehlo.broadcast_in_dim %2, dims = [1] : (tensor<16xi32>) -> tensor<1x16xi32>
  %z1 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<4x1xi32>
  %lt1 = stablehlo.compare LT, %1, %z1, SIGNED : (tensor<4x1xi32>, tensor<4x1xi32>) -> tensor<4x1xi1>
  %n1 = stablehlo.broadcast_in_dim %c4, dims = [] : (tensor<i32>) -> tensor<4x1xi32>
  %a1 = stablehlo.add %1, %n1 : tensor<4x1xi32>
  %s1 = stablehlo.select %lt1, %a1, %1 : tensor<4x1xi1>, tensor<4x1xi32>
  %z2 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<1x16xi32>
  %lt2 = stablehlo.compare LT, %3, %z2, SIGNED : (tensor<1x16xi32>, tensor<1x16xi32>) -> tensor<1x16xi1>
  %n2 = stablehlo.broadcast_in_dim %c16, dims = [] : (tensor<i32>) -> tensor<1x16xi32>
  %a2 = stablehlo.add %3, %n2 : tensor<1x16xi32>
  %s2 = stablehlo.select %lt2, %a2, %3 : tensor<1x16xi1>, tensor<1x16xi32>
  %b1 = stablehlo.broadcast_in_dim %s1, dims = [0, 1] : (tensor<4x1xi32>) -> tensor<4x16xi32>
  %b2 = stablehlo.broadcast_in_dim %s2, dims = [0, 1] : (tensor<1x16xi32>) -> tensor<4x16xi32>
  %p1 = stablehlo.broadcast_in_dim %b1, dims = [0, 1] : (tensor<4x16xi32>) -> tensor<4x16x1xi32>
  %p2 = stablehlo.broadcast_in_dim %b2, dims = [0, 1] : (tensor<4x16xi32>) -> tensor<4x16x1xi32>
  %p3 = stablehlo.broadcast_in_dim %arg1, dims = [0, 1] : (tensor<4x16xi32>) -> tensor<4x16x1xi32>
  %idx = stablehlo.concatenate %p1, %p2, %p3, dim = 2 : (tensor<4x16x1xi32>, tensor<4x16x1xi32>, tensor<4x16x1xi32>) -> tensor<4x16x3xi32>
  %r = "stablehlo.gather"(%arg0, %idx) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0, 1, 2], start_index_map = [0, 1, 2], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1, 1>}> : (tensor<4x16x32xf32>, tensor<4x16x3xi32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----
// Not rewritten: a broadcast that expands the counted dim (an arange of 1
// broadcast over 16 rows counts nothing).
// CHECK-LABEL: func.func public @expanded
// CHECK: stablehlo.concatenate
// CHECK: collapsed_slice_dims = [0, 1], start_index_map = [0, 1]
sdy.mesh @mesh = <["x"=8]>
func.func public @expanded(%arg0: tensor<16x8xf32>, %arg1: tensor<16x1xi32>) -> tensor<16xf32> {
  %0 = stablehlo.iota dim = 0 : tensor<1xi32>
  %1 = stablehlo.broadcast_in_dim %0, dims = [0] : (tensor<1xi32>) -> tensor<16x1xi32>
  %2 = stablehlo.concatenate %1, %arg1, dim = 1 : (tensor<16x1xi32>, tensor<16x1xi32>) -> tensor<16x2xi32>
  %3 = "stablehlo.gather"(%arg0, %2) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0, 1], start_index_map = [0, 1], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<16x8xf32>, tensor<16x2xi32>) -> tensor<16xf32>
  return %3 : tensor<16xf32>
}
