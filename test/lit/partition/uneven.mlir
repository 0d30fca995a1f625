// A dim its axes do not divide (here 6 over 4, or 10 over 4 in a constraint)
// is split in blocks of ceil(size / ways); the last blocks are padded. Ops
// that read the padding mask it first; reshards of such a dim gather it
// whole and slice it again.
// RUN: %opt %s -p partition --split-input-file | filecheck %s

sdy.mesh @mesh = <["x"=4]>
// The replicated argument is padded to 4 blocks of 2 before each device
// slices its block; the sum masks the padding with the reduction's init (0)
// and finishes with an all-reduce.
// CHECK-LABEL: func.func public @uneven_constraint_then_sum
// CHECK: %[[PADDED:.*]] = stablehlo.pad %arg1, %{{.*}}, low = [0], high = [2], interior = [0] : (tensor<6xf32>, tensor<f32>) -> tensor<8xf32>
// CHECK: %[[BLOCK:.*]] = stablehlo.dynamic_slice %[[PADDED]], %{{.*}}, sizes = [2] : (tensor<8xf32>, tensor<i32>) -> tensor<2xf32>
// CHECK: %[[ABS:.*]] = stablehlo.abs %[[BLOCK]] : tensor<2xf32>
// CHECK: %[[POS:.*]] = stablehlo.add %{{.*}}, %{{.*}} : tensor<2xi32>
// CHECK: %[[IN:.*]] = stablehlo.compare LT, %[[POS]], %{{.*}} : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
// CHECK: %[[MASKED:.*]] = stablehlo.select %[[IN]], %[[ABS]], %{{.*}} : tensor<2xi1>, tensor<2xf32>
// CHECK: stablehlo.reduce(%[[MASKED]] init: %{{.*}}) applies stablehlo.add across dimensions = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
// CHECK: "stablehlo.all_reduce"
func.func public @uneven_constraint_then_sum(%a: tensor<6xf32>) -> tensor<f32> {
  %0 = sdy.sharding_constraint %a <@mesh, [{"x"}]> : tensor<6xf32>
  %1 = stablehlo.abs %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>} : tensor<6xf32>
  %cst = stablehlo.constant dense<0.0> : tensor<f32>
  %2 = stablehlo.reduce(%1 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<6xf32>, tensor<f32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// Back to replicated: the blocks are gathered (8 rows) and the padding cut.
// CHECK-LABEL: func.func public @uneven_value_gathered_whole
// CHECK: %[[G:.*]] = "stablehlo.all_gather"(%{{.*}}) <{all_gather_dim = 0 : i64{{.*}}}> : (tensor<3x4xf32>) -> tensor<12x4xf32>
// CHECK: stablehlo.slice %[[G]] [0:10, 0:4] : (tensor<12x4xf32>) -> tensor<10x4xf32>
func.func public @uneven_value_gathered_whole(%a: tensor<10x4xf32>) -> tensor<10x4xf32> {
  %0 = sdy.sharding_constraint %a <@mesh, [{"x"}, {}]> : tensor<10x4xf32>
  %1 = stablehlo.exponential %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<10x4xf32>
  %2 = stablehlo.add %1, %a {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : tensor<10x4xf32>
  return %2 : tensor<10x4xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// Slicing, reversing and concatenating along a whole dim (here the columns)
// leave the uneven split of the rows in place: the ops run on the padded
// blocks of 3 rows and nothing moves before the result is gathered (the last
// reverse runs on the gathered rows: either place costs the same). A
// reversed dim of size 1 is its own reverse: no op is left of it
// (`jnp.pad(mode="reflect")` slices and reverses such edges).
// CHECK-LABEL: func.func public @uneven_rows_kept_under_column_ops
// CHECK-NOT: all_gather
// CHECK: %[[EDGE:.*]] = stablehlo.slice %{{.*}} [0:3, 1:2] : (tensor<3x8xf32>) -> tensor<3x1xf32>
// CHECK-NOT: stablehlo.reverse
// CHECK: stablehlo.concatenate %[[EDGE]], %{{.*}}, dim = 1 : (tensor<3x1xf32>, tensor<3x8xf32>) -> tensor<3x9xf32>
// CHECK: %[[G:.*]] = "stablehlo.all_gather"
// CHECK: %[[ROWS:.*]] = stablehlo.slice %[[G]] [0:10, 0:9] : (tensor<12x9xf32>) -> tensor<10x9xf32>
// CHECK: stablehlo.reverse %[[ROWS]], dims = [1] : tensor<10x9xf32>
func.func public @uneven_rows_kept_under_column_ops(%a: tensor<10x8xf32>) -> tensor<10x9xf32> {
  %0 = sdy.sharding_constraint %a <@mesh, [{"x"}, {}]> : tensor<10x8xf32>
  %1 = stablehlo.slice %0 [0:10, 1:2] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<10x8xf32>) -> tensor<10x1xf32>
  %2 = stablehlo.reverse %1, dims = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<10x1xf32>
  %3 = stablehlo.concatenate %2, %0, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<10x1xf32>, tensor<10x8xf32>) -> tensor<10x9xf32>
  %4 = stablehlo.reverse %3, dims = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<10x9xf32>
  return %4 : tensor<10x9xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// A one-row slice split over the axis (as propagation leaves the edge row of
// a reflect pad): its reverse along that dim is the row itself, and the row
// stays split (device 0 holds it) until the result needs it whole. Three of
// four blocks are padding there: rather than gathering them, device 0 puts
// the row at its offset (0) in zeros of one row, the others zeros, and one
// all-reduce adds their bits as integers.
// CHECK-LABEL: func.func public @reverse_of_a_split_size_one_dim_is_local
// CHECK-NOT: all_gather
// CHECK: %[[ROW:.*]] = stablehlo.dynamic_slice %{{.*}}, sizes = [1, 8] : (tensor<3x8xf32>, tensor<i32>, tensor<i32>) -> tensor<1x8xf32>
// CHECK-NOT: stablehlo.reverse
// CHECK: stablehlo.pad %{{.*}}, %{{.*}}, low = [1, 0], high = [1, 0], interior = [0, 0] : (tensor<1x8xf32>, tensor<f32>) -> tensor<3x8xf32>
// CHECK: %[[MINE:.*]] = stablehlo.select %{{.*}} : tensor<1x8xi1>, tensor<1x8xf32>
// CHECK: %[[BITS:.*]] = stablehlo.bitcast_convert %[[MINE]] : (tensor<1x8xf32>) -> tensor<1x8xi32>
// CHECK: "stablehlo.all_reduce"(%[[BITS]])
// CHECK: stablehlo.add %{{.*}} : tensor<i32>
// CHECK: stablehlo.bitcast_convert %{{.*}} : (tensor<1x8xi32>) -> tensor<1x8xf32>
// CHECK-NOT: all_gather
// CHECK: stablehlo.negate
func.func public @reverse_of_a_split_size_one_dim_is_local(%a: tensor<12x8xf32>) -> tensor<1x8xf32> {
  %0 = sdy.sharding_constraint %a <@mesh, [{"x"}, {}]> : tensor<12x8xf32>
  %1 = stablehlo.slice %0 [1:2, 0:8] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<12x8xf32>) -> tensor<1x8xf32>
  %2 = stablehlo.reverse %1, dims = [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<1x8xf32>
  %3 = stablehlo.negate %2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<1x8xf32>
  return %3 : tensor<1x8xf32>
}
