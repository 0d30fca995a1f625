// Windowed ops and data movement along split dims: each block of the result
// reads one window of the input, brought by collective-permutes of the pieces
// it needs (halo exchange); the local op gets local padding. The cost model
// here counts bytes alone (launches free), so the exchange that sends the
// fewest is taken; with the default CPU one, whose launches dominate these
// small halos, one all-gather of the pieces replaces two permutes
// (windows_remarks.mlir).
// RUN: %opt %s -p "partition{cost=%S/Inputs/bytes_bound.json}" --split-input-file | filecheck %s

sdy.mesh @mesh = <["x"=4]>
// A SAME 3x3 convolution split along height: one row from each neighbour
// (the ends receive zeros: the padding), no padding left on that dim.
// CHECK-LABEL: func.func public @conv_exchanges_one_row_each_way
// CHECK: %[[LOW:.*]] = stablehlo.slice %[[X:arg[0-9]+]] [0:2, 15:16, 0:32, 0:16]
// CHECK: %[[FROM_PREV:.*]] = "stablehlo.collective_permute"(%[[LOW]])
// CHECK-SAME: source_target_pairs = dense<{{\[\[}}0, 1], [1, 2], [2, 3]]>
// CHECK: %[[HIGH:.*]] = stablehlo.slice %[[X]] [0:2, 0:1, 0:32, 0:16]
// CHECK: %[[FROM_NEXT:.*]] = "stablehlo.collective_permute"(%[[HIGH]])
// CHECK-SAME: source_target_pairs = dense<{{\[\[}}1, 0], [2, 1], [3, 2]]>
// CHECK: %[[EXT:.*]] = stablehlo.concatenate %[[FROM_PREV]], %[[X]], %[[FROM_NEXT]], dim = 1 : (tensor<2x1x32x16xf32>, tensor<2x16x32x16xf32>, tensor<2x1x32x16xf32>) -> tensor<2x18x32x16xf32>
// CHECK: stablehlo.convolution(%[[EXT]], %{{.*}}) {{.*}}pad = {{\[\[}}0, 0], [1, 1]]{{.*}} -> tensor<2x16x32x16xf32>
// CHECK-NOT: all_gather
func.func public @conv_exchanges_one_row_each_way(%x: tensor<2x64x32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}, %k: tensor<3x3x16x16xf32>) -> (tensor<2x64x32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : (tensor<2x64x32x16xf32>, tensor<3x3x16x16xf32>) -> tensor<2x64x32x16xf32>
  return %0 : tensor<2x64x32x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// A 7x7 stride-2 SAME convolution (ResNet's stem, padding 2/3): each block of
// 8 output rows reads 21 input rows, 2 before its block and 3 after.
// CHECK-LABEL: func.func public @strided_conv_halo_is_two_and_three_rows
// CHECK: stablehlo.slice %[[X:arg[0-9]+]] [0:2, 14:16, 0:32, 0:16]
// CHECK: "stablehlo.collective_permute"
// CHECK: stablehlo.slice %[[X]] [0:2, 0:3, 0:32, 0:16]
// CHECK: "stablehlo.collective_permute"
// CHECK: stablehlo.concatenate {{.*}} -> tensor<2x21x32x16xf32>
// CHECK: stablehlo.convolution{{.*}}stride = [2, 2], pad = {{\[\[}}0, 0], [2, 3]]{{.*}} -> tensor<2x8x16x16xf32>
func.func public @strided_conv_halo_is_two_and_three_rows(%x: tensor<2x64x32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}, %k: tensor<7x7x16x16xf32>) -> (tensor<2x32x16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [2, 2], pad = [[2, 3], [2, 3]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : (tensor<2x64x32x16xf32>, tensor<7x7x16x16xf32>) -> tensor<2x32x16x16xf32>
  return %0 : tensor<2x32x16x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// A filter gradient: the kernel (here the cotangent) is larger than the
// output, so blocks split the kernel's window: each device convolves its
// rows (with a one-row halo of the input) and the partial kernels are summed.
// CHECK-LABEL: func.func public @filter_gradient_splits_the_window
// CHECK-COUNT-2: "stablehlo.collective_permute"
// CHECK: %[[PART:.*]] = stablehlo.convolution{{.*}}pad = {{\[\[}}0, 0], [1, 1]]{{.*}} : (tensor<8x18x32x16xf32>, tensor<8x16x32x16xf32>) -> tensor<3x3x16x16xf32>
// CHECK: "stablehlo.all_reduce"(%[[PART]])
func.func public @filter_gradient_splits_the_window(%x: tensor<8x64x32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}, %dy: tensor<8x64x32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) -> (tensor<3x3x16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {}, {}]>}) {
  %0 = stablehlo.convolution(%x, %dy) dim_numbers = [f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}, {}, {}]>]>} : (tensor<8x64x32x16xf32>, tensor<8x64x32x16xf32>) -> tensor<3x3x16x16xf32>
  return %0 : tensor<3x3x16x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// A 3x3/2 max pool (SAME: padding 0/1): one row from the next block; the
// last block's window reaches past the input, so the row it receives (from
// no block: zeros) is set to the init value (-inf) before the local pool,
// by one scalar test of where the row lies (blocks split evenly: a piece is
// wholly inside the input or wholly outside), not a mask of the window.
// CHECK-LABEL: func.func public @max_pool_masks_with_the_init_value
// CHECK: %[[HIGH:.*]] = stablehlo.slice %[[X:arg[0-9]+]] [0:2, 0:1, 0:32, 0:16]
// CHECK: %[[NEXT:.*]] = "stablehlo.collective_permute"(%[[HIGH]])
// CHECK: %[[AT:.*]] = stablehlo.add %{{.*}}, %{{.*}} : tensor<i32>
// CHECK: stablehlo.compare GE, %[[AT]]
// CHECK: stablehlo.compare LT, %[[AT]]
// CHECK: %[[ROW:.*]] = stablehlo.select %{{.*}}, %[[NEXT]], %{{.*}} : tensor<2x1x32x16xi1>, tensor<2x1x32x16xf32>
// CHECK: %[[WIN:.*]] = stablehlo.concatenate %[[X]], %[[ROW]], dim = 1
// CHECK-NOT: stablehlo.select
// CHECK: "stablehlo.reduce_window"(%[[WIN]], %{{.*}}) <{padding = dense<{{\[\[}}0, 0], [0, 0], [0, 1], [0, 0]]>
// CHECK: -> tensor<2x8x16x16xf32>
func.func public @max_pool_masks_with_the_init_value(%x: tensor<2x64x32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) -> (tensor<2x32x16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) {
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%x, %init) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) {window_dimensions = array<i64: 1, 3, 3, 1>, window_strides = array<i64: 1, 2, 2, 1>, padding = dense<[[0, 0], [0, 1], [0, 1], [0, 0]]> : tensor<4x2xi64>, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : (tensor<2x64x32x16xf32>, tensor<f32>) -> tensor<2x32x16x16xf32>
  return %0 : tensor<2x32x16x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// Pooling windows that tile the split dim (stride = window, no padding) run
// on the local block as they are.
// CHECK-LABEL: func.func public @tiled_max_pool_runs_locally
// CHECK-NOT: collective
// CHECK: "stablehlo.reduce_window"(%arg1, %{{.*}})
// CHECK: }) : (tensor<2x4x8x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
// CHECK-NOT: collective
func.func public @tiled_max_pool_runs_locally(%x: tensor<2x16x8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) -> (tensor<2x8x4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) {
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%x, %init) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) {window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : (tensor<2x16x8x4xf32>, tensor<f32>) -> tensor<2x8x4x4xf32>
  return %0 : tensor<2x8x4x4xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// The middle third of a dim split in 4 (a fused QKV projection's K): block i
// needs columns [1024 + 256i, +256), held by block 1 or 2. Each round of
// collective-permute moves one 256-column piece to the targets that need it,
// cut and placed at per-device offsets; nothing is gathered.
// CHECK-LABEL: func.func public @slice_moves_only_the_pieces
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME: source_target_pairs = dense<{{\[\[}}2, 3]]>
// CHECK-SAME: (tensor<64x256xf32>) -> tensor<64x256xf32>
// CHECK: stablehlo.dynamic_update_slice
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME: source_target_pairs = dense<{{\[\[}}1, 0]]>
// CHECK: sdy.return {{.*}} : tensor<64x256xf32>
// CHECK-NOT: all_gather
func.func public @slice_moves_only_the_pieces(%x: tensor<64x3072xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<64x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  %0 = stablehlo.slice %x [0:64, 1024:2048] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<64x3072xf32>) -> tensor<64x1024xf32>
  return %0 : tensor<64x1024xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// A reverse along a split dim: each device reverses its block and sends it
// to the mirrored device.
// CHECK-LABEL: func.func public @reverse_mirrors_blocks
// CHECK: %[[R:.*]] = stablehlo.reverse %arg1, dims = [1] : tensor<8x16xf32>
// CHECK: "stablehlo.collective_permute"(%[[R]])
// CHECK-SAME: source_target_pairs = dense<{{\[\[}}0, 3], [1, 2], [2, 1], [3, 0]]>
func.func public @reverse_mirrors_blocks(%x: tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  %0 = stablehlo.reverse %x, dims = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// A convolution and its filter gradient read the same rows of the input (a
// one-row halo each way): the window is exchanged once and both use it.
// CHECK-LABEL: func.func public @forward_and_filter_gradient_share_the_window
// CHECK-COUNT-2: "stablehlo.collective_permute"
// CHECK: %[[WIN:.*]] = stablehlo.concatenate {{.*}} -> tensor<8x18x32x16xf32>
// CHECK-NOT: "stablehlo.collective_permute"
// CHECK: stablehlo.convolution(%[[WIN]], %{{.*}}){{.*}}pad = {{\[\[}}0, 0], [1, 1]]{{.*}} -> tensor<8x16x32x16xf32>
// CHECK-NOT: "stablehlo.collective_permute"
// CHECK: %[[PART:.*]] = stablehlo.convolution(%[[WIN]], %{{.*}}){{.*}} -> tensor<3x3x16x16xf32>
// CHECK-NOT: "stablehlo.collective_permute"
// CHECK: "stablehlo.all_reduce"(%[[PART]])
func.func public @forward_and_filter_gradient_share_the_window(%x: tensor<8x64x32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}, %k: tensor<3x3x16x16xf32>, %dy: tensor<8x64x32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}) -> (tensor<8x64x32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}, {}]>}, tensor<3x3x16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {}, {}]>}) {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}, {}]>]>} : (tensor<8x64x32x16xf32>, tensor<3x3x16x16xf32>) -> tensor<8x64x32x16xf32>
  %1 = stablehlo.convolution(%x, %dy) dim_numbers = [f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}, {}, {}]>]>} : (tensor<8x64x32x16xf32>, tensor<8x64x32x16xf32>) -> tensor<3x3x16x16xf32>
  return %0, %1 : tensor<8x64x32x16xf32>, tensor<3x3x16x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// Eight rows of padding before 64 rows split 8 ways: block i of the result
// (9 rows) is the input's rows [9i - 8, 9i + 1), from its neighbour's end
// and its own start, a per-device split. The halo every target can need (7
// rows, the end of each block: one static slice) comes in one permute; the
// window is cut from [fill, halo, block] at the device's offset, with no
// buffer of three blocks.
// CHECK-LABEL: func.func public @shifted_pad_cuts_its_window_from_one_run
// CHECK: %[[END:.*]] = stablehlo.slice %[[X:arg[0-9]+]] [0:4, 1:8, 0:8]
// CHECK: %[[HALO:.*]] = "stablehlo.collective_permute"(%[[END]])
// CHECK-SAME: source_target_pairs = dense<{{\[\[}}0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7]]>
// CHECK: %[[JOINED:.*]] = stablehlo.concatenate %{{.*}}, %[[HALO]], %[[X]], dim = 1 : (tensor<4x1x8xf32>, tensor<4x7x8xf32>, tensor<4x8x8xf32>) -> tensor<4x16x8xf32>
// CHECK: stablehlo.dynamic_slice %[[JOINED]], %{{.*}}, sizes = [4, 9, 8]
// CHECK-NOT: dynamic_update_slice
// CHECK-NOT: collective_permute
// CHECK: sdy.return
func.func public @shifted_pad_cuts_its_window_from_one_run(%x: tensor<4x64x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}]>}) -> (tensor<4x72x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}]>}) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.pad %x, %zero, low = [0, 8, 0], high = [0, 0, 0], interior = [0, 0, 0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}]>]>} : (tensor<4x64x8xf32>, tensor<f32>) -> tensor<4x72x8xf32>
  return %0 : tensor<4x72x8xf32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// jnp.roll(x, 3) along a dim split 8 ways (blocks of 8): the concatenate of
// the two slices is a rotation of x. Each block keeps its first 5 columns
// and takes 3 from the block before it, the first block from the last: one
// collective-permute around the ring, nothing gathered, and the slices are
// not made on their own.
// CHECK-LABEL: func.func public @roll_moves_one_piece_around_the_ring
// CHECK: %[[END:.*]] = stablehlo.slice %[[X:arg[0-9]+]] [0:4, 5:8]
// CHECK-NEXT: %[[IN:.*]] = "stablehlo.collective_permute"(%[[END]])
// CHECK-SAME: source_target_pairs = dense<{{\[\[}}7, 0], [0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7]]>
// CHECK: %[[BOTH:.*]] = stablehlo.concatenate %[[X]], %[[IN]], dim = 1
// CHECK: %[[HEAD:.*]] = stablehlo.slice %[[BOTH]] [0:4, 8:11]
// CHECK: %[[TAIL:.*]] = stablehlo.slice %[[BOTH]] [0:4, 0:5]
// CHECK: stablehlo.concatenate %[[HEAD]], %[[TAIL]], dim = 1 : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x8xf32>
// CHECK-NOT: collective_permute
// CHECK-NOT: all_gather
// CHECK: sdy.return
func.func public @roll_moves_one_piece_around_the_ring(%x: tensor<4x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<4x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  %0 = stablehlo.slice %x [0:4, 61:64] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<4x64xf32>) -> tensor<4x3xf32>
  %1 = stablehlo.slice %x [0:4, 0:61] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<4x64xf32>) -> tensor<4x61xf32>
  %2 = stablehlo.concatenate %0, %1, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<4x3xf32>, tensor<4x61xf32>) -> tensor<4x64xf32>
  return %2 : tensor<4x64xf32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// A small replicated operand of a concatenate along a split dim (3 rows at
// offset 61 of 64): each device cuts its block's window of it from the rows
// padded by at most one block (8) on each side; devices whose block lies
// wholly before the piece clamp onto that padding. Not padded to the whole
// dim (61 + 3 rows), which every device would hold. (%b, replicated as an
// argument, is cut to its blocks the same way.)
// CHECK-LABEL: func.func public @small_piece_of_a_split_concatenation
// CHECK: %[[EXT:.*]] = stablehlo.pad %arg2, %{{.*}}, low = [8, 0], high = [0, 0], interior = [0, 0] : (tensor<3x4xf32>, tensor<f32>) -> tensor<11x4xf32>
// CHECK: stablehlo.dynamic_slice %[[EXT]], %{{.*}}, %{{.*}}, sizes = [8, 4] : (tensor<11x4xf32>, tensor<i32>, tensor<i32>) -> tensor<8x4xf32>
// CHECK: sdy.return
func.func public @small_piece_of_a_split_concatenation(%a: tensor<3x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, %b: tensor<61x4xf32>) -> (tensor<64x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = sdy.sharding_constraint %b <@mesh, [{"x"}, {}]> : tensor<61x4xf32>
  %1 = stablehlo.concatenate %0, %a, dim = 0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<61x4xf32>, tensor<3x4xf32>) -> tensor<64x4xf32>
  return %1 : tensor<64x4xf32>
}

// -----
sdy.mesh @mesh = <["x"=4]>
// A stride-2 slice along the split dim (`x[:, 2::2]`, as jax's associative
// scan cuts its levels): each block needs one row from the next; the stride
// is taken from each piece of the window (the block from row 2, the received
// row), so what the program keeps is the 8 rows the slice keeps, not the
// 15-row window (the window's concatenation is left unused).
// CHECK-LABEL: func.func public @strided_slice_keeps_only_its_positions
// CHECK: %[[OWN:.*]] = stablehlo.slice %[[X:arg[0-9]+]] [0:4, 2:16, 0:8] : (tensor<4x16x8xf32>) -> tensor<4x14x8xf32>
// CHECK: %[[HIGH:.*]] = stablehlo.slice %[[X]] [0:4, 0:1, 0:8]
// CHECK: %[[NEXT:.*]] = "stablehlo.collective_permute"(%[[HIGH]])
// CHECK-SAME: source_target_pairs = dense<{{\[\[}}1, 0], [2, 1], [3, 2]]>
// CHECK: %[[KEPT:.*]] = stablehlo.slice %[[OWN]] [0:4, 0:13:2, 0:8] : (tensor<4x14x8xf32>) -> tensor<4x7x8xf32>
// CHECK: stablehlo.concatenate %[[KEPT]], %[[NEXT]], dim = 1 : (tensor<4x7x8xf32>, tensor<4x1x8xf32>) -> tensor<4x8x8xf32>
func.func public @strided_slice_keeps_only_its_positions(%x: tensor<4x64x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}]>}) -> (tensor<4x32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}, {}]>}) {
  %0 = stablehlo.slice %x [0:4, 2:64:2, 0:8] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}]>]>} : (tensor<4x64x8xf32>) -> tensor<4x31x8xf32>
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %1 = stablehlo.pad %0, %c, low = [0, 0, 0], high = [0, 1, 0], interior = [0, 0, 0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}]>]>} : (tensor<4x31x8xf32>, tensor<f32>) -> tensor<4x32x8xf32>
  return %1 : tensor<4x32x8xf32>
}
