// The local rewrite of each op family: local shapes, shape-carrying attributes,
// device offsets, and the collectives a sharded reduction needs.
// RUN: %opt %s -p partition --split-input-file | filecheck %s

sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func.func public @elementwise_runs_on_local_blocks
// CHECK: (%[[A:arg[0-9]+]]: tensor<4x4xf32>)
// CHECK-NEXT: %[[M:.*]] = stablehlo.multiply %[[A]], %[[A]] : tensor<4x4xf32>
// CHECK-NEXT: sdy.return %[[M]] : tensor<4x4xf32>
func.func public @elementwise_runs_on_local_blocks(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) {
  %0 = stablehlo.multiply %a, %a {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// A reduction over a sharded dim reduces locally, then all-reduces with the
// reduce's own combiner. XLA's all-reduce max drops NaN where the unsharded
// reduce keeps it, so a float max/min reduces integer keys ordered as the
// floats are (negative bit patterns flipped below the sign), NaN the largest
// key, in one collective; the same map turns the result back.
// CHECK-LABEL: func.func public @reduce_max_over_sharded_dim
// CHECK: %[[LOCAL:.*]] = stablehlo.reduce({{.*}}) applies stablehlo.maximum across dimensions = [1] : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf32>
// (The flip mask and NaN's key are one constant: the builder writes an op
// once per region.)
// CHECK: %[[BITS:.*]] = stablehlo.bitcast_convert %[[LOCAL]] : (tensor<4xf32>) -> tensor<4xi32>
// CHECK: %[[TOP:.*]] = stablehlo.constant dense<2147483647> : tensor<4xi32>
// CHECK: %[[NEG:.*]] = stablehlo.compare LT, %[[BITS]]
// CHECK: %[[FLIP:.*]] = stablehlo.xor %[[BITS]], %[[TOP]]
// CHECK: %[[KEY:.*]] = stablehlo.select %[[NEG]], %[[FLIP]], %[[BITS]]
// CHECK: %[[IS_NAN:.*]] = stablehlo.compare NE, %[[LOCAL]], %[[LOCAL]]
// CHECK: %[[NKEY:.*]] = stablehlo.select %[[IS_NAN]], %[[TOP]], %[[KEY]]
// CHECK: %[[MAX:.*]] = "stablehlo.all_reduce"(%[[NKEY]])
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]>
// CHECK: stablehlo.maximum %{{.*}} : tensor<i32>
// CHECK: }) : (tensor<4xi32>) -> tensor<4xi32>
// CHECK: %[[NEG2:.*]] = stablehlo.compare LT, %[[MAX]]
// CHECK: %[[FLIP2:.*]] = stablehlo.xor %[[MAX]]
// CHECK: %[[OUT:.*]] = stablehlo.select %[[NEG2]], %[[FLIP2]], %[[MAX]]
// CHECK: stablehlo.bitcast_convert %[[OUT]] : (tensor<4xi32>) -> tensor<4xf32>
func.func public @reduce_max_over_sharded_dim(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
  %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = stablehlo.reduce(%a init: %cst) applies stablehlo.maximum across dimensions = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>} : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func.func public @transpose_and_reshape_keep_attributes
// CHECK: stablehlo.transpose %{{.*}}, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK: stablehlo.reshape %{{.*}} : (tensor<4x4xf32>) -> tensor<4x1x4xf32>
func.func public @transpose_and_reshape_keep_attributes(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {"x"}]>}, tensor<8x4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}, {}]>}) {
  %0 = stablehlo.transpose %a, dims = [1, 0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y"}, {"x"}]>]>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %1 = stablehlo.reshape %a {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}, {}]>]>} : (tensor<8x16xf32>) -> tensor<8x4x4xf32>
  return %0, %1 : tensor<16x8xf32>, tensor<8x4x4xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// A slice of a sharded dim gathers that dim first (its factor needs data
// movement); an untouched sharded dim keeps its local limit.
// CHECK-LABEL: func.func public @slice_gathers_the_sliced_dim
// CHECK: %[[G:.*]] = "stablehlo.all_gather"
// CHECK-SAME: all_gather_dim = 1 : i64
// CHECK: stablehlo.slice %[[G]] [0:4, 2:14] : (tensor<4x16xf32>) -> tensor<4x12xf32>
func.func public @slice_gathers_the_sliced_dim(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = stablehlo.slice %a [0:8, 2:14] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<8x16xf32>) -> tensor<8x12xf32>
  return %0 : tensor<8x12xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// An iota along a sharded dim adds the device's offset (y * 4).
// CHECK-LABEL: func.func public @iota_adds_the_block_offset
// CHECK: %[[IOTA:.*]] = stablehlo.iota dim = 1 : tensor<4x4xi32>
// CHECK: %[[PID:.*]] = stablehlo.partition_id
// CHECK: %[[UY:.*]] = stablehlo.remainder %[[PID]], %{{.*}} : tensor<ui32>
// CHECK: %[[Y:.*]] = stablehlo.convert %[[UY]] : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[OFF:.*]] = stablehlo.multiply %[[Y]]
// CHECK: %[[B:.*]] = stablehlo.broadcast_in_dim %[[OFF]], dims = [] : (tensor<i32>) -> tensor<4x4xi32>
// CHECK: stablehlo.add %[[IOTA]], %[[B]] : tensor<4x4xi32>
func.func public @iota_adds_the_block_offset() -> (tensor<8x16xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) {
  %0 = stablehlo.iota dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : tensor<8x16xi32>
  return %0 : tensor<8x16xi32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// A splat constant is built at its local shape; any other is sliced.
// CHECK-LABEL: func.func public @constants_local_or_sliced
// CHECK: stablehlo.constant dense<1.000000e+00> : tensor<2xf32>
// CHECK: %[[FULL:.*]] = stablehlo.constant dense<[0.000000e+00, 1.000000e+00, {{.*}}]> : tensor<16xf32>
// CHECK: stablehlo.dynamic_slice %[[FULL]], %{{.*}}, sizes = [2]
func.func public @constants_local_or_sliced() -> (tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
  %0 = stablehlo.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>} dense<1.0> : tensor<16xf32>
  %1 = stablehlo.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>} dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]> : tensor<16xf32>
  %2 = stablehlo.add %0, %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>} : tensor<16xf32>
  return %2 : tensor<16xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// Loop-carried values keep the loop's sharding through both regions.
// CHECK-LABEL: func.func public @while_partitions_its_regions
// CHECK: stablehlo.while(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) : tensor<i32>, tensor<4x4xf32>
// CHECK: stablehlo.compare LT
// CHECK: stablehlo.tanh %{{.*}} : tensor<4x4xf32>
func.func public @while_partitions_its_regions(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%i = %c, %v = %a) : tensor<i32>, tensor<8x16xf32> attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, []>, <@mesh, [{"x"}, {"y"}]>]>}
  cond {
    %c3 = stablehlo.constant dense<3> : tensor<i32>
    %p = stablehlo.compare LT, %i, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %n = stablehlo.add %i, %c1 : tensor<i32>
    %t = stablehlo.tanh %v {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : tensor<8x16xf32>
    stablehlo.return %n, %t : tensor<i32>, tensor<8x16xf32>
  }
  return %0#1 : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// Calls are inlined; the callee's shardings apply inside.
// CHECK-LABEL: func.func public @call_is_inlined
// CHECK-NOT: call
// CHECK: stablehlo.negate %{{.*}} : tensor<2xf32>
// CHECK-NOT: func.func private
func.func public @call_is_inlined(%a: tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> (tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
  %0 = call @neg(%a) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>} : (tensor<16xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}
func.func private @neg(%a: tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> (tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
  %0 = stablehlo.negate %a {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>} : tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// A Cholesky factorization on a split batch runs on the local batch.
// CHECK-LABEL: func.func public @cholesky_runs_on_the_local_batch
// CHECK-NOT: all_gather
// CHECK: stablehlo.cholesky %arg1, lower = true : tensor<1x4x4xf32>
func.func public @cholesky_runs_on_the_local_batch(%a: tensor<8x4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {}]>}) -> (tensor<8x4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {}]>}) {
  %0 = stablehlo.cholesky %a, lower = true : tensor<8x4x4xf32>
  return %0 : tensor<8x4x4xf32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// An op without a partitioned form (a custom call with no rule) runs
// replicated: operands gathered, result sliced back to its sharding; the
// remark says so.
// CHECK-LABEL: func.func public @unknown_custom_call_runs_replicated
// CHECK: "stablehlo.all_gather"
// CHECK: stablehlo.custom_call @my_kernel(%{{.*}}) : (tensor<8x4x4xf32>) -> tensor<8x4x4xf32>
// CHECK: stablehlo.dynamic_slice
func.func public @unknown_custom_call_runs_replicated(%a: tensor<8x4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {}]>}) -> (tensor<8x4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {}]>}) {
  %0 = stablehlo.custom_call @my_kernel(%a) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}, {}]>]>} : (tensor<8x4x4xf32>) -> tensor<8x4x4xf32>
  return %0 : tensor<8x4x4xf32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// A lookup into a table split along the indexed dim: each device shifts the
// indices to its block, masks the ones outside it, and the partial results
// are summed.
// CHECK-LABEL: func.func public @gather_from_split_table_is_masked
// CHECK: stablehlo.subtract
// CHECK: stablehlo.compare GE
// CHECK: stablehlo.compare LT
// CHECK: "stablehlo.gather"({{.*}} : (tensor<2x4xf32>, tensor<8x1xi32>) -> tensor<8x4xf32>
// CHECK: stablehlo.select
// CHECK: "stablehlo.all_reduce"
func.func public @gather_from_split_table_is_masked(%t: tensor<16x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %i: tensor<8x1xi32>) -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %0 = "stablehlo.gather"(%t, %i) {dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 4>, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<16x4xf32>, tensor<8x1xi32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// A value whose sharding does not divide its dim is kept replicated, visibly.
// CHECK-LABEL: func.func public @uneven_value_kept_replicated
// CHECK: stablehlo.abs %{{.*}} : tensor<6xf32>
func.func public @uneven_value_kept_replicated(%a: tensor<6xf32>) -> (tensor<6xf32>) {
  %0 = stablehlo.abs %a {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>} : tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// A value resharded once is reused by later uses; a callee inlined twice is
// resharded afresh at each call.
// CHECK-LABEL: func.func public @one_gather_per_value_and_layout
// CHECK-COUNT-1: "stablehlo.all_gather"(%arg1)
// CHECK-NOT: "stablehlo.all_gather"(%arg1)
// CHECK: stablehlo.negate
// CHECK: stablehlo.negate
func.func public @one_gather_per_value_and_layout(%a: tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> (tensor<32xf32>, tensor<16xf32>, tensor<16xf32>) {
  %0 = stablehlo.concatenate %a, %a, dim = 0 : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
  %1 = call @neg(%a) : (tensor<16xf32>) -> tensor<16xf32>
  %2 = call @neg(%1) : (tensor<16xf32>) -> tensor<16xf32>
  return %0, %1, %2 : tensor<32xf32>, tensor<16xf32>, tensor<16xf32>
}
func.func private @neg(%a: tensor<16xf32>) -> tensor<16xf32> {
  %0 = stablehlo.negate %a : tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// broadcast_in_dim keeps its dims on local shapes; a batched dot splits its
// contraction when the operand is sharded there (partial sum, all-reduce);
// concatenate and pad gather the dim they work along when the result is not
// split there (windows.mlir has the split cases); dynamic_slice cuts its slice
// from the copy of %a they gathered (no collective of its own; the next case
// has none to reuse).
// CHECK-LABEL: func.func public @broadcast_dot_concat_pad_dynamic_slice
// CHECK: stablehlo.broadcast_in_dim %{{.*}}, dims = [1] : (tensor<4xf32>) -> tensor<4x4xf32>
// CHECK: stablehlo.dot_general {{.*}}, batching_dims = [0] x [0], contracting_dims = [1] x [1] : (tensor<4x4xf32>, tensor<4x4x4xf32>) -> tensor<4x4xf32>
// CHECK: "stablehlo.all_reduce"
// CHECK: %[[G:.*]] = "stablehlo.all_gather"(%arg{{[0-9]+}}) <{all_gather_dim = 1 : i64
// CHECK: stablehlo.concatenate %[[G]], %[[G]], dim = 1 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x32xf32>
// CHECK: stablehlo.pad %[[G]], %{{.*}}, low = [0, 1], high = [0, 3], interior = [0, 0] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x20xf32>
// CHECK-NOT: all_reduce
// CHECK: stablehlo.dynamic_slice %[[G]], %{{.*}}, %{{.*}}, sizes = [4, 4] : (tensor<4x16xf32>, tensor<i32>, tensor<i32>) -> tensor<4x4xf32>
// CHECK-NEXT: sdy.return
func.func public @broadcast_dot_concat_pad_dynamic_slice(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %v: tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}]>}, %b: tensor<8x16x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {}]>}, %i: tensor<i32>) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, tensor<8x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, tensor<8x20xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = stablehlo.broadcast_in_dim %v, dims = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : (tensor<16xf32>) -> tensor<8x16xf32>
  %1 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [1] x [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<8x16xf32>, tensor<8x16x4xf32>) -> tensor<8x4xf32>
  %2 = stablehlo.concatenate %a, %a, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x32xf32>
  %cst = stablehlo.constant dense<0.0> : tensor<f32>
  %3 = stablehlo.pad %a, %cst, low = [0, 1], high = [0, 3], interior = [0, 0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x20xf32>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %4 = stablehlo.dynamic_slice %a, %c0, %i, sizes = [8, 4] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<8x16xf32>, tensor<i32>, tensor<i32>) -> tensor<8x4xf32>
  return %0, %1, %2, %3, %4 : tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x32xf32>, tensor<8x20xf32>, tensor<8x4xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// dynamic_slice keeps its operand split where the slice is small beside it:
// each device cuts the part of the slice in its block from its block padded
// by the slice's size (zeros elsewhere) and an all-reduce of the bit
// patterns assembles the slice (cheaper than gathering the 64 columns).
// CHECK-LABEL: func.func public @dynamic_slice_assembles_the_pieces
// CHECK-NOT: all_gather
// CHECK: %[[P:.*]] = stablehlo.pad %arg{{[0-9]+}}, %{{.*}}, low = [0, 4], high = [0, 4], interior = [0, 0] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x24xf32>
// CHECK: %[[CUT:.*]] = stablehlo.dynamic_slice %[[P]], %{{.*}}, %{{.*}}, sizes = [4, 4] : (tensor<4x24xf32>, tensor<i32>, tensor<i32>) -> tensor<4x4xf32>
// CHECK: %[[MINE:.*]] = stablehlo.select %{{.*}}, %[[CUT]], %{{.*}} : tensor<4x4xi1>, tensor<4x4xf32>
// CHECK: %[[BITS:.*]] = stablehlo.bitcast_convert %[[MINE]] : (tensor<4x4xf32>) -> tensor<4x4xi32>
// CHECK: "stablehlo.all_reduce"(%[[BITS]]) {{.*}}replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]>
// CHECK: stablehlo.bitcast_convert %{{.*}} : (tensor<4x4xi32>) -> tensor<4x4xf32>
func.func public @dynamic_slice_assembles_the_pieces(%a: tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %i: tensor<i32>) -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.dynamic_slice %a, %c0, %i, sizes = [8, 4] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<8x64xf32>, tensor<i32>, tensor<i32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// A scatter-add into an operand split along the scattered dim: each device
// shifts the indices into its block; an update meant for another block
// becomes a zero added at the block's first row (what scatter does with
// out-of-bounds indices is implementation-defined), so the block is not
// copied. A replace has no update that changes nothing: it routes them to a
// scratch row appended to its block, sliced off after the scatter.
// CHECK-LABEL: func.func public @scatter_into_split_operand
// CHECK-NOT: all_
// CHECK: %[[SHIFTED:.*]] = stablehlo.subtract %arg{{[0-9]+}}, %{{.*}} : tensor<4x1xi32>
// CHECK: %[[KEPT:.*]] = stablehlo.select %{{.*}}, %arg{{[0-9]+}}, %{{.*}} : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK: %[[ROUTED:.*]] = stablehlo.select %{{.*}}, %[[SHIFTED]], %{{.*}} : tensor<4x1xi1>, tensor<4x1xi32>
// CHECK-NOT: stablehlo.pad
// CHECK: "stablehlo.scatter"(%arg{{[0-9]+}}, %[[ROUTED]], %[[KEPT]])
// CHECK: }) : (tensor<4x8xf32>, tensor<4x1xi32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NOT: all_

func.func public @scatter_into_split_operand(%t: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %i: tensor<4x1xi32>, %u: tensor<4x8xf32>) -> (tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = "stablehlo.scatter"(%t, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<16x8xf32>, tensor<4x1xi32>, tensor<4x8xf32>) -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// CHECK-LABEL: func.func public @scatter_replace_into_split_operand
// CHECK: %[[SHIFTED:.*]] = stablehlo.subtract %arg{{[0-9]+}}, %{{.*}} : tensor<4x1xi32>
// CHECK: %[[ROUTED:.*]] = stablehlo.select %{{.*}}, %[[SHIFTED]], %{{.*}} : tensor<4x1xi1>, tensor<4x1xi32>
// CHECK: %[[PADDED:.*]] = stablehlo.pad %arg{{[0-9]+}}, %{{.*}}, low = [0, 0], high = [1, 0], interior = [0, 0] : (tensor<4x8xf32>, tensor<f32>) -> tensor<5x8xf32>
// CHECK: %[[OUT:.*]] = "stablehlo.scatter"(%[[PADDED]], %[[ROUTED]], %arg{{[0-9]+}})
// CHECK: }) : (tensor<5x8xf32>, tensor<4x1xi32>, tensor<4x8xf32>) -> tensor<5x8xf32>
// CHECK: stablehlo.slice %[[OUT]] [0:4, 0:8]
// CHECK-NOT: all_
func.func public @scatter_replace_into_split_operand(%t: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %i: tensor<4x1xi32>, %u: tensor<4x8xf32>) -> (tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = "stablehlo.scatter"(%t, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    stablehlo.return %b : tensor<f32>
  }) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<16x8xf32>, tensor<4x1xi32>, tensor<4x8xf32>) -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// A scatter-max (a segment max) into a split operand: an update for another
// block becomes -inf, max'ed into the block's first row in place. The
// routed indices repeat and lose their order, so the scatter no longer
// promises unique or sorted indices. Under max with updates bigger than the
// block (many rows into few segments) the scratch row copies fewer bytes
// than the select over the updates. Integer min combines INT_MAX.
// CHECK-LABEL: func.func public @scatter_max_into_split_operand
// CHECK-NOT: all_
// CHECK: %[[NEG_INF:.*]] = stablehlo.constant dense<0xFF800000> : tensor<4x8xf32>
// CHECK: %[[KEPT:.*]] = stablehlo.select %{{.*}}, %arg{{[0-9]+}}, %[[NEG_INF]] : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK-NOT: stablehlo.pad
// CHECK: "stablehlo.scatter"(%arg{{[0-9]+}}, %{{.*}}, %[[KEPT]]) <{indices_are_sorted = false, {{.*}}unique_indices = false}>
// CHECK: stablehlo.maximum
// CHECK: }) : (tensor<4x8xf32>, tensor<4x1xi32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: stablehlo.constant dense<2147483647> : tensor<4x8xi32>
// CHECK-NOT: stablehlo.pad
// CHECK: stablehlo.minimum
// CHECK: stablehlo.pad %arg{{[0-9]+}}, %{{.*}}, low = [0, 0], high = [1, 0], interior = [0, 0] : (tensor<4x8xf32>, tensor<f32>) -> tensor<5x8xf32>
// CHECK: "stablehlo.scatter"
// CHECK: stablehlo.maximum
// CHECK: }) : (tensor<5x8xf32>, tensor<64x1xi32>, tensor<64x8xf32>) -> tensor<5x8xf32>
// CHECK-NOT: all_
// CHECK: return
func.func public @scatter_max_into_split_operand(%t: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %i: tensor<4x1xi32>, %u: tensor<4x8xf32>, %ti: tensor<16x8xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %ui: tensor<4x8xi32>, %j: tensor<64x1xi32>, %v: tensor<64x8xf32>) -> (tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, tensor<16x8xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = "stablehlo.scatter"(%t, %i, %u) <{indices_are_sorted = true, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<16x8xf32>, tensor<4x1xi32>, tensor<4x8xf32>) -> tensor<16x8xf32>
  %1 = "stablehlo.scatter"(%ti, %i, %ui) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %s = stablehlo.minimum %a, %b : tensor<i32>
    stablehlo.return %s : tensor<i32>
  }) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<16x8xi32>, tensor<4x1xi32>, tensor<4x8xi32>) -> tensor<16x8xi32>
  %2 = "stablehlo.scatter"(%t, %j, %v) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<16x8xf32>, tensor<64x1xi32>, tensor<64x8xf32>) -> tensor<16x8xf32>
  return %0, %1, %2 : tensor<16x8xf32>, tensor<16x8xi32>, tensor<16x8xf32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// A segment max over rows split with its segment ids: each device scatters
// its rows into every segment, starting from the -inf splat (printed in
// hex), made again at the full shape rather than gathered; the partial
// maxima meet in one reduce-scatter.
// CHECK-LABEL: func.func public @segment_max_of_split_rows
// CHECK-NOT: all_gather
// CHECK: stablehlo.broadcast_in_dim %{{.*}}, dims = [] : (tensor<f32>) -> tensor<64x8xf32>
// CHECK-NOT: all_gather
// CHECK: "stablehlo.reduce_scatter"
// CHECK-NOT: all_gather
// CHECK: return
func.func public @segment_max_of_split_rows(%x: tensor<256x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %ids: tensor<256x1xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<64x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %init = stablehlo.broadcast_in_dim %cst, dims = [] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<f32>) -> tensor<64x8xf32>
  %0 = "stablehlo.scatter"(%init, %ids, %x) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<64x8xf32>, tensor<256x1xi32>, tensor<256x8xf32>) -> tensor<64x8xf32>
  return %0 : tensor<64x8xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// dynamic_update_slice into an operand split along the updated dim: each
// device pads the (whole) update by a block on both sides, cuts the window
// aligned with its block and selects it where the update covers the block.
// No collective.
// CHECK-LABEL: func.func public @dynamic_update_slice_into_split_dim
// CHECK-NOT: stablehlo.all_
// CHECK: %[[P:.*]] = stablehlo.pad %arg{{[0-9]+}}, %{{.*}}, low = [4], high = [4], interior = [0] : (tensor<6xf32>, tensor<f32>) -> tensor<14xf32>
// CHECK: %[[W:.*]] = stablehlo.dynamic_slice %[[P]], %{{.*}}, sizes = [4] : (tensor<14xf32>, tensor<i32>) -> tensor<4xf32>
// CHECK: stablehlo.select %{{.*}}, %[[W]], %arg{{[0-9]+}} : tensor<4xi1>, tensor<4xf32>
// CHECK-NOT: stablehlo.all_
// CHECK: return
func.func public @dynamic_update_slice_into_split_dim(%a: tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}, %u: tensor<6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}, %i: tensor<i32>) -> (tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
  %0 = stablehlo.dynamic_update_slice %a, %u, %i {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>} : (tensor<16xf32>, tensor<6xf32>, tensor<i32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// An update shorter than the block (a KV cache split along its sequence,
// written at one traced position per decoding step): each device writes an
// update-sized window of its block, at the update's start clamped into the
// block, and keeps the window's old elements where the update does not
// cover them. No whole-block select, no collective.
// CHECK-LABEL: func.func public @short_update_writes_a_window_of_the_block
// CHECK-NOT: stablehlo.all_
// CHECK: %[[P:.*]] = stablehlo.pad %arg{{[0-9]+}}, %{{.*}}, low = [0, 2], high = [0, 2], interior = [0, 0] : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x6xf32>
// CHECK: %[[W:.*]] = stablehlo.dynamic_slice %[[P]], %{{.*}}, %{{.*}}, sizes = [3, 2] : (tensor<3x6xf32>, tensor<i32>, tensor<i32>) -> tensor<3x2xf32>
// CHECK: %[[OLD:.*]] = stablehlo.dynamic_slice %[[BLOCK:arg[0-9]+]], %{{.*}}, %[[AT:.*]], sizes = [3, 2] : (tensor<3x8xf32>, tensor<i32>, tensor<i32>) -> tensor<3x2xf32>
// CHECK: %[[NEW:.*]] = stablehlo.select %{{.*}}, %[[W]], %[[OLD]] : tensor<3x2xi1>, tensor<3x2xf32>
// CHECK: stablehlo.dynamic_update_slice %[[BLOCK]], %[[NEW]], %{{.*}}, %[[AT]] : (tensor<3x8xf32>, tensor<3x2xf32>, tensor<i32>, tensor<i32>) -> tensor<3x8xf32>
// CHECK-NOT: stablehlo.all_
// CHECK: return
func.func public @short_update_writes_a_window_of_the_block(%a: tensor<3x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %u: tensor<3x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, %i: tensor<i32>) -> (tensor<3x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.dynamic_update_slice %a, %u, %c, %i {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<3x32xf32>, tensor<3x2xf32>, tensor<i32>, tensor<i32>) -> tensor<3x32xf32>
  return %0 : tensor<3x32xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// An optimization_barrier (what jax.checkpoint puts before a recomputed
// forward pass) only orders: it runs on the local blocks in its operands'
// layouts, a token as it is; nothing is gathered.
// CHECK-LABEL: func.func public @barrier_runs_on_local_blocks
// CHECK: %[[T:.*]] = stablehlo.tanh %{{.*}} : tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]]:2 = stablehlo.optimization_barrier %[[T]], %{{.*}} : tensor<4x4xf32>, !stablehlo.token
// CHECK-NEXT: stablehlo.exponential %[[B]]#0 : tensor<4x4xf32>
// CHECK-NOT: all_gather
func.func public @barrier_runs_on_local_blocks(%x: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %t: !stablehlo.token) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, !stablehlo.token) {
  %0 = stablehlo.tanh %x {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : tensor<8x16xf32>
  %1:2 = "stablehlo.optimization_barrier"(%0, %t) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>, <@mesh, []>]>} : (tensor<8x16xf32>, !stablehlo.token) -> (tensor<8x16xf32>, !stablehlo.token)
  %2 = stablehlo.exponential %1#0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : tensor<8x16xf32>
  return %2, %1#1 : tensor<8x16xf32>, !stablehlo.token
}

// -----
sdy.mesh @mesh = <["x"=4]>
// argmax along a split dim: each device reduces its block to (value, index)
// pairs; the pairs travel in one variadic all-gather, each in its own type
// (bf16 values, i32 indices: nothing packed or reinterpreted) and flat (one
// layout each), and are reduced again with the op's own region.
// CHECK-LABEL: func.func public @argmax_of_split_rows
// CHECK: %[[LOCAL:.*]]:2 = stablehlo.reduce(%arg1 init: %{{.*}}), (%{{.*}} init: %{{.*}}) across dimensions = [0]
// CHECK: %[[ALL:.*]]:2 = "stablehlo.all_gather"(%{{.*}}, %{{.*}}) <{all_gather_dim = 0 : i64
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 1, 2, 3]]>
// CHECK-SAME: (tensor<8xbf16>, tensor<8xi32>) -> (tensor<32xbf16>, tensor<32xi32>)
// CHECK-NOT: all_gather
// CHECK-NOT: bitcast_convert
// CHECK: %[[VALUES:.*]] = stablehlo.reshape %[[ALL]]#0 : (tensor<32xbf16>) -> tensor<4x8xbf16>
// CHECK: %[[INDICES:.*]] = stablehlo.reshape %[[ALL]]#1 : (tensor<32xi32>) -> tensor<4x8xi32>
// CHECK: stablehlo.reduce(%[[VALUES]] init: %{{.*}}), (%[[INDICES]] init: %{{.*}}) across dimensions = [0]
func.func public @argmax_of_split_rows(%arg0: tensor<16x8xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8xi32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
  %0 = stablehlo.iota dim = 0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<16x8xi32>
  %cst = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %c = stablehlo.constant dense<0> : tensor<i32>
  %1:2 = stablehlo.reduce(%arg0 init: %cst), (%0 init: %c) across dimensions = [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}]>, <@mesh, [{}]>]>} : (tensor<16x8xbf16>, tensor<16x8xi32>, tensor<bf16>, tensor<i32>) -> (tensor<8xbf16>, tensor<8xi32>)
   reducer(%arg1: tensor<bf16>, %arg3: tensor<bf16>) (%arg2: tensor<i32>, %arg4: tensor<i32>)  {
    %2 = stablehlo.compare GT, %arg1, %arg3, FLOAT : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
    %3 = stablehlo.compare NE, %arg1, %arg1, FLOAT : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
    %4 = stablehlo.or %2, %3 : tensor<i1>
    %5 = stablehlo.compare EQ, %arg1, %arg3, FLOAT : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
    %6 = stablehlo.compare LT, %arg2, %arg4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %7 = stablehlo.and %5, %6 : tensor<i1>
    %8 = stablehlo.or %4, %7 : tensor<i1>
    %9 = stablehlo.select %4, %arg1, %arg3 : tensor<i1>, tensor<bf16>
    %10 = stablehlo.select %8, %arg2, %arg4 : tensor<i1>, tensor<i32>
    stablehlo.return %9, %10 : tensor<bf16>, tensor<i32>
  }
  return %1#1 : tensor<8xi32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// top_k along a split row: each device takes the top 2 of its block, makes
// the indices global, and the candidates (values and indices, each in its own
// type) travel in one variadic all-gather, flat: the gathered dim made major
// and the rest flattened into it (XLA's CPU backend gathers a variadic
// all-gather's operands right only in their default layout); the top 2 of
// them pick positions, and a gather takes the winners' indices.
// CHECK-LABEL: func.func public @top_k_of_split_rows
// CHECK: %[[VALUES:.*]], %[[INDICES:.*]] = chlo.top_k(%arg1, k = 2) : tensor<3x8xf32> -> (tensor<3x2xf32>, tensor<3x2xi32>)
// CHECK: %[[GLOBAL:.*]] = stablehlo.add %[[INDICES]], %{{.*}} : tensor<3x2xi32>
// CHECK: %[[VT:.*]] = stablehlo.transpose %[[VALUES]], dims = [1, 0] : (tensor<3x2xf32>) -> tensor<2x3xf32>
// CHECK: %[[VF:.*]] = stablehlo.reshape %[[VT]] : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK: %[[IT:.*]] = stablehlo.transpose %[[GLOBAL]], dims = [1, 0] : (tensor<3x2xi32>) -> tensor<2x3xi32>
// CHECK: %[[IF:.*]] = stablehlo.reshape %[[IT]] : (tensor<2x3xi32>) -> tensor<6xi32>
// CHECK: %[[ALL:.*]]:2 = "stablehlo.all_gather"(%[[VF]], %[[IF]]) <{all_gather_dim = 0 : i64
// CHECK-SAME: -> (tensor<24xf32>, tensor<24xi32>)
// CHECK-NOT: all_gather
// CHECK: %[[VB:.*]] = stablehlo.reshape %[[ALL]]#0 : (tensor<24xf32>) -> tensor<8x3xf32>
// CHECK: %[[CANDS:.*]] = stablehlo.transpose %[[VB]], dims = [1, 0] : (tensor<8x3xf32>) -> tensor<3x8xf32>
// CHECK: %[[IB:.*]] = stablehlo.reshape %[[ALL]]#1 : (tensor<24xi32>) -> tensor<8x3xi32>
// CHECK: %[[CIDX:.*]] = stablehlo.transpose %[[IB]], dims = [1, 0] : (tensor<8x3xi32>) -> tensor<3x8xi32>
// CHECK: %{{.*}}, %[[WHERE:.*]] = chlo.top_k(%[[CANDS]], k = 2) : tensor<3x8xf32> -> (tensor<3x2xf32>, tensor<3x2xi32>)
// CHECK: "stablehlo.gather"(%[[CIDX]], %[[WHERE]])
// CHECK-SAME: -> tensor<3x2xi32>
// CHECK-NOT: bitcast_convert
func.func public @top_k_of_split_rows(%arg0: tensor<3x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<3x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, tensor<3x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %values, %indices = chlo.top_k(%arg0, k = 2) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>, <@mesh, [{}, {}]>]>} : tensor<3x32xf32> -> (tensor<3x2xf32>, tensor<3x2xi32>)
  return %values, %indices : tensor<3x2xf32>, tensor<3x2xi32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// A counted loop (16 iterations) reads one row of a split carry it never
// changes, as a scan reads its xs: the carry is gathered once before the loop
// and passed in as one more carry, and the body slices that copy; assembling
// each row would be an all-reduce in every iteration.
// CHECK-LABEL: func.func public @scan_reads_rows_of_a_split_carry
// CHECK: %[[G:.*]] = "stablehlo.all_gather"(%arg1) <{all_gather_dim = 0 : i64
// CHECK-SAME: (tensor<2x4xf32>) -> tensor<16x4xf32>
// CHECK: stablehlo.while(%[[X:.*]] = %arg1, %[[I:.*]] = %{{.*}}, %[[ACC:.*]] = %{{.*}}, %[[COPY:.*]] = %[[G]]) : tensor<2x4xf32>, tensor<i32>, tensor<4xf32>, tensor<16x4xf32>
// CHECK: } do {
// CHECK-NOT: all_reduce
// CHECK: stablehlo.dynamic_slice %[[COPY]], %[[I]], %{{.*}}, sizes = [1, 4] : (tensor<16x4xf32>, tensor<i32>, tensor<i32>) -> tensor<1x4xf32>
// CHECK: stablehlo.return %[[X]], %{{.*}}, %{{.*}}, %[[COPY]]
func.func public @scan_reads_rows_of_a_split_carry(%xs: tensor<16x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %zero = stablehlo.constant dense<0.0> : tensor<4xf32>
  %r:3 = stablehlo.while(%x = %xs, %i = %c0, %acc = %zero) : tensor<16x4xf32>, tensor<i32>, tensor<4xf32> attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>, <@mesh, []>, <@mesh, [{}]>]>}
  cond {
    %n = stablehlo.constant dense<16> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %z = stablehlo.constant dense<0> : tensor<i32>
    %row = stablehlo.dynamic_slice %x, %i, %z, sizes = [1, 4] : (tensor<16x4xf32>, tensor<i32>, tensor<i32>) -> tensor<1x4xf32>
    %v = stablehlo.reshape %row : (tensor<1x4xf32>) -> tensor<4xf32>
    %s = stablehlo.add %acc, %v : tensor<4xf32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %x, %j, %s : tensor<16x4xf32>, tensor<i32>, tensor<4xf32>
  }
  return %r#2 : tensor<4xf32>
}

// -----
// A string attribute that is not UTF-8 text (jax's InspectSharding custom
// call holds a callback pointer there) is read and written back byte for
// byte (reading it crashed the graph reader); an unknown target runs
// replicated, as any.
sdy.mesh @mesh = <["x"=2]>
// CHECK-LABEL: func.func public @bytes_in_a_string_attribute
// CHECK: "stablehlo.all_gather"
// CHECK: stablehlo.custom_call @my_target(%{{.*}}) {backend_config = "\10\05J\FB\A8\7F\00\00`\EB\1C\E0\A8\7F\00\00", has_side_effect = true} : (tensor<8xi32>) -> tensor<8xi32>
func.func public @bytes_in_a_string_attribute(%x: tensor<8xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<8xi32> {
  %0 = stablehlo.custom_call @my_target(%x) {backend_config = "\10\05J\FB\A8\7F\00\00`\EB\1C\E0\A8\7F\00\00", has_side_effect = true} : (tensor<8xi32>) -> tensor<8xi32>
  return %x : tensor<8xi32>
}

// -----
// jax.debug.inspect_array_sharding's custom call (@InspectSharding) is
// removed, in the partitioned body and in a shard_map's alike: meshjit.jit
// calls its callback with the propagated sharding before partitioning, and
// XLA's partitioner would call the callback its backend_config points to.
// Its result is its operand: nothing is gathered for it.
sdy.mesh @mesh = <["x"=2]>
// CHECK-LABEL: func.func public @inspect_sharding
// CHECK-NOT: InspectSharding
// CHECK-NOT: all_gather
// CHECK: return
func.func public @inspect_sharding(%x: tensor<8xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> (tensor<8xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
  %0 = stablehlo.custom_call @InspectSharding(%x) {backend_config = "\10\05J\FB\A8\7F\00\00", has_side_effect = true} : (tensor<8xi32>) -> tensor<8xi32>
  %1 = sdy.manual_computation(%x) in_shardings=[<@mesh, [{"x"}]>] out_shardings=[<@mesh, [{"x"}]>] manual_axes={"x"} (%a: tensor<4xi32>) {
    %2 = stablehlo.custom_call @InspectSharding(%a) {backend_config = "meshjit.inspect:1", has_side_effect = true} : (tensor<4xi32>) -> tensor<4xi32>
    sdy.return %a : tensor<4xi32>
  } : (tensor<8xi32>) -> tensor<8xi32>
  return %1 : tensor<8xi32>
}
