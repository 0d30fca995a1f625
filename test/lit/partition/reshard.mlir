// Each reshard kind the planner emits, on a value that only changes layout
// at the function boundary.
// RUN: %opt %s -p partition --split-input-file | filecheck %s

sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func.func public @all_gather_removes_an_axis
// CHECK: sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{}, {}]>] manual_axes={"x", "y"} (%[[X:.*]]: tensor<4x16xf32>)
// CHECK: %[[G:.*]] = "stablehlo.all_gather"(%[[X]])
// CHECK-SAME: all_gather_dim = 0 : i64
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>, use_global_device_ids
// CHECK-SAME: (tensor<4x16xf32>) -> tensor<8x16xf32>
// CHECK: sdy.return %[[G]] : tensor<8x16xf32>
func.func public @all_gather_removes_an_axis(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  return %a : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func.func public @two_axes_of_one_dim_gather_in_one_collective
// CHECK: "stablehlo.all_gather"
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK-SAME: (tensor<1x16xf32>) -> tensor<8x16xf32>
// CHECK-NOT: all_gather
func.func public @two_axes_of_one_dim_gather_in_one_collective(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", "y"}, {}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  return %a : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// The dim lists "y" before "x", so blocks concatenate y-major.
// CHECK-LABEL: func.func public @gather_order_follows_the_dim_not_the_mesh
// CHECK: "stablehlo.all_gather"
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 4, 1, 5, 2, 6, 3, 7]]>
func.func public @gather_order_follows_the_dim_not_the_mesh(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y", "x"}, {}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  return %a : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// Moving an axis between dims is one all-to-all, never a gather then a slice.
// Written as XLA's partitioner writes it (XLA's CPU pipeline fuses its
// pieces into the consumer): the pieces of dim 1 get a dim of their own, the
// all-to-all splits and concatenates along it, and a transpose puts the
// pieces received (one per source device) before dim 0.
// CHECK-LABEL: func.func public @all_to_all_moves_an_axis_between_dims
// CHECK: %[[G:.*]] = stablehlo.reshape %{{.*}} : (tensor<1x16xf32>) -> tensor<1x8x2xf32>
// CHECK: %[[M:.*]] = "stablehlo.all_to_all"(%[[G]])
// CHECK-SAME: concat_dimension = 1 : i64
// CHECK-SAME: split_count = 8 : i64, split_dimension = 1 : i64
// CHECK-SAME: (tensor<1x8x2xf32>) -> tensor<1x8x2xf32>
// CHECK: %[[T:.*]] = stablehlo.transpose %[[M]], dims = [1, 0, 2] : (tensor<1x8x2xf32>) -> tensor<8x1x2xf32>
// CHECK: stablehlo.reshape %[[T]] : (tensor<8x1x2xf32>) -> tensor<8x2xf32>
// CHECK-NOT: all_gather
func.func public @all_to_all_moves_an_axis_between_dims(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  return %a : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// Moving the axis to an earlier dim across another: the received pieces
// (group dim 0 after the all-to-all) go just before the last dim's block.
// CHECK-LABEL: func.func public @all_to_all_moves_an_axis_to_an_earlier_dim
// CHECK: %[[G:.*]] = stablehlo.reshape %{{.*}} : (tensor<8x3x4xf32>) -> tensor<4x2x3x4xf32>
// CHECK: %[[M:.*]] = "stablehlo.all_to_all"(%[[G]])
// CHECK-SAME: concat_dimension = 0 : i64
// CHECK-SAME: split_count = 4 : i64, split_dimension = 0 : i64
// CHECK: %[[T:.*]] = stablehlo.transpose %[[M]], dims = [1, 2, 0, 3] : (tensor<4x2x3x4xf32>) -> tensor<2x3x4x4xf32>
// CHECK: stablehlo.reshape %[[T]] : (tensor<2x3x4x4xf32>) -> tensor<2x3x16xf32>
func.func public @all_to_all_moves_an_axis_to_an_earlier_dim(%a: tensor<8x3x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {"x"}]>}) -> (tensor<8x3x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {}]>}) {
  return %a : tensor<8x3x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// Adding axes needs no communication: each device slices its block at an
// offset computed from stablehlo.partition_id (x = id / 4, y = id % 4, on
// the unsigned id: XLA makes them a shift and a mask).
// CHECK-LABEL: func.func public @local_slice_adds_axes
// CHECK: %[[PID:.*]] = stablehlo.partition_id : tensor<ui32>
// CHECK: %[[UFOUR:.*]] = stablehlo.constant dense<4> : tensor<ui32>
// CHECK: %[[UX:.*]] = stablehlo.divide %[[PID]], %[[UFOUR]] : tensor<ui32>
// CHECK: %[[X:.*]] = stablehlo.convert %[[UX]] : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[FOUR:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[ROW:.*]] = stablehlo.multiply %[[X]], %[[FOUR]]
// CHECK: %[[UY:.*]] = stablehlo.remainder %[[PID]], %[[UFOUR]] : tensor<ui32>
// CHECK: %[[Y:.*]] = stablehlo.convert %[[UY]] : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[COL:.*]] = stablehlo.multiply %[[Y]], %[[FOUR]]
// CHECK: stablehlo.dynamic_slice %{{.*}}, %[[ROW]], %[[COL]], sizes = [4, 4] : (tensor<8x16xf32>, tensor<i32>, tensor<i32>) -> tensor<4x4xf32>
// CHECK-NOT: all_
func.func public @local_slice_adds_axes(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) {
  return %a : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=2, "z"=2]>
// Swapping two equal-sized axes between dims moves each block to one other
// device: one collective-permute (self pairs included: a device that receives
// nothing would get zeros).
// CHECK-LABEL: func.func public @swap_equal_axes_is_one_permute
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME: source_target_pairs = dense<{{\[\[}}0, 0], [1, 1], [2, 4], [3, 5], [4, 2], [5, 3], [6, 6], [7, 7]]>
// CHECK-SAME: (tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NOT: all_
func.func public @swap_equal_axes_is_one_permute(%a: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {"x"}]>}) {
  return %a : tensor<8x8xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// Every "y" block (2 rows) lies inside one "x" block (4 rows): each device
// cuts out the 2 rows one other device needs (offsets from a per-position
// table) and one collective-permute delivers them: 128 B instead of the 256 B
// an all-gather of the other "x" block would send.
// CHECK-LABEL: func.func public @nested_blocks_cut_then_permute
// CHECK: %[[TABLE:.*]] = stablehlo.constant dense<[0, 2, 0, 2, 0, 2, 0, 2]> : tensor<8xi32>
// CHECK: %[[ROW:.*]] = stablehlo.dynamic_slice %[[TABLE]], %{{.*}}, sizes = [1]
// CHECK: %[[OFF:.*]] = stablehlo.reshape %[[ROW]] : (tensor<1xi32>) -> tensor<i32>
// CHECK: %[[PART:.*]] = stablehlo.dynamic_slice %arg1, %[[OFF]], %{{.*}}, sizes = [2, 16] : (tensor<4x16xf32>, tensor<i32>, tensor<i32>) -> tensor<2x16xf32>
// CHECK: "stablehlo.collective_permute"(%[[PART]])
// CHECK-SAME: source_target_pairs = dense<{{\[\[}}0, 0], [1, 1], [2, 4], [3, 5], [4, 2], [5, 3], [6, 6], [7, 7]]>
// CHECK-SAME: (tensor<2x16xf32>) -> tensor<2x16xf32>
// CHECK-NOT: all_
func.func public @nested_blocks_cut_then_permute(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) {
  return %a : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// A sub-axis: "x":(1)2 is the major half of "x" (positions 0,1 vs 2,3).
// CHECK-LABEL: func.func public @sub_axis_gather
// CHECK: "stablehlo.all_gather"
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 2], [1, 3]]> : tensor<2x2xi64>
// CHECK-SAME: (tensor<4x16xf32>) -> tensor<8x16xf32>
func.func public @sub_axis_gather(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x":(1)2}, {}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  return %a : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// A partial sum the result wants split along the reduced axis becomes one
// reduce-scatter.
// CHECK-LABEL: func.func public @partial_sum_to_sharded_result_is_reduce_scatter
// CHECK: stablehlo.dot_general {{.*}} -> tensor<8x16xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME: scatter_dimension = 0 : i64
// CHECK: stablehlo.add
// CHECK: }) : (tensor<8x16xf32>) -> tensor<2x16xf32>
// CHECK-NOT: all_reduce
func.func public @partial_sum_to_sharded_result_is_reduce_scatter(%a: tensor<8x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}, %b: tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y"}, {}]>]>} : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// An sdy.reshard (what Shardy's export and propagation-pipeline write for a
// constraint) lays its result out as it says: here by an all-to-all.
// CHECK-LABEL: func.func public @reshard_op_lays_out_its_result
// CHECK: sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"y"}, {}]>] out_shardings=[<@mesh, [{}, {"y"}]>]
// CHECK: "stablehlo.all_to_all"
// CHECK: stablehlo.tanh %{{.*}} : tensor<8x4xf32>
func.func @reshard_op_lays_out_its_result(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}) {
  %0 = sdy.reshard %arg0 <@mesh, [{}, {"y"}]> : tensor<8x16xf32>
  %1 = stablehlo.tanh %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"y"}]>]>} : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
