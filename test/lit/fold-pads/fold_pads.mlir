// RUN: %opt %s -p fold-pads --split-input-file | filecheck %s
// RUN: %opt %s -p fold-pads --split-input-file | filecheck %s --check-prefix=KEPT
// A causal convolution as jnp.pad writes it: the pad sits in a private
// function (its value an i32 0 passed in and converted). The call is
// inlined, the pad folded into the convolution's padding ([[7, 0]]: the
// low 7 rows), the wrapper erased. Along a split time dim the partitioner
// then exchanges the 7-row halo the window reads instead of moving the
// shifted blocks of the pad (`test/lit/partition/fold_pads.mlir`).

// CHECK-LABEL: func.func public @causal
// CHECK-NOT: call
// CHECK-NOT: stablehlo.pad
// CHECK: stablehlo.convolution(%arg0, %arg1) {{.*}} window = {stride = [1], pad = {{\[\[}}7, 0]], lhs_dilate = [1], rhs_dilate = [7]
// CHECK-SAME: (tensor<2x64x8xf32>, tensor<2x8x8xf32>) -> tensor<2x64x8xf32>
// CHECK-NOT: func.func private @_pad
sdy.mesh @mesh = <["x"=8]>
func.func public @causal(%arg0: tensor<2x64x8xf32>, %arg1: tensor<2x8x8xf32>) -> tensor<2x64x8xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0 = call @_pad(%arg0, %c) : (tensor<2x64x8xf32>, tensor<i32>) -> tensor<2x71x8xf32>
  %1 = stablehlo.convolution(%0, %arg1) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [1], pad = [[0, 0]], lhs_dilate = [1], rhs_dilate = [7]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x71x8xf32>, tensor<2x8x8xf32>) -> tensor<2x64x8xf32>
  return %1 : tensor<2x64x8xf32>
}
func.func private @_pad(%arg0: tensor<2x64x8xf32>, %arg1: tensor<i32>) -> tensor<2x71x8xf32> {
  %0 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<f32>
  %1 = stablehlo.pad %arg0, %0, low = [0, 7, 0], high = [0, 0, 0], interior = [0, 0, 0] : (tensor<2x64x8xf32>, tensor<f32>) -> tensor<2x71x8xf32>
  return %1 : tensor<2x71x8xf32>
}

// -----
// A pad in the caller with a padding already there: the amounts add up
// ([[1, 1], [2, 3]] + the pad's [[1, 0], [0, 2]]). The pad has another
// user, so it stays for it.
// CHECK-LABEL: func.func public @adds_up
// CHECK: %[[PAD:.*]] = stablehlo.pad %arg0
// CHECK: stablehlo.convolution(%arg0, %arg1) {{.*}} pad = {{\[\[}}2, 1], [2, 5]]
// CHECK: return %{{.*}}, %[[PAD]]
sdy.mesh @mesh = <["x"=8]>
func.func public @adds_up(%arg0: tensor<4x16x16x3xf32>, %arg1: tensor<3x3x3x8xf32>) -> (tensor<4x17x21x8xf32>, tensor<4x17x18x3xf32>) {
  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %0 = stablehlo.pad %arg0, %z, low = [0, 1, 0, 0], high = [0, 0, 2, 0], interior = [0, 0, 0, 0] : (tensor<4x16x16x3xf32>, tensor<f32>) -> tensor<4x17x18x3xf32>
  %1 = stablehlo.convolution(%0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [2, 3]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<4x17x18x3xf32>, tensor<3x3x3x8xf32>) -> tensor<4x17x21x8xf32>
  return %1, %0 : tensor<4x17x21x8xf32>, tensor<4x17x18x3xf32>
}

// -----
// A max pool after a -inf pad (its init value): the pad becomes the
// reduce_window's padding, on every dim it pads.
// CHECK-LABEL: func.func public @max_pool
// CHECK-NOT: stablehlo.pad
// CHECK: "stablehlo.reduce_window"(%arg0, %{{.*}}) <{padding = dense<{{\[\[}}0, 0], [1, 1], [1, 1], [0, 0]]> : tensor<4x2xi64>, window_dimensions = array<i64: 1, 3, 3, 1>, window_strides = array<i64: 1, 2, 2, 1>}>
sdy.mesh @mesh = <["x"=8]>
func.func public @max_pool(%arg0: tensor<2x16x16x4xf32>) -> tensor<2x8x8x4xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = stablehlo.pad %arg0, %ninf, low = [0, 1, 1, 0], high = [0, 1, 1, 0], interior = [0, 0, 0, 0] : (tensor<2x16x16x4xf32>, tensor<f32>) -> tensor<2x18x18x4xf32>
  %1 = "stablehlo.reduce_window"(%0, %ninf) <{window_dimensions = array<i64: 1, 3, 3, 1>, window_strides = array<i64: 1, 2, 2, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<2x18x18x4xf32>, tensor<f32>) -> tensor<2x8x8x4xf32>
  return %1 : tensor<2x8x8x4xf32>
}

// -----
// Not folded: a pad value the op does not pad with (1.0 before a
// convolution; 0.0 before a max pool whose init is -inf), a pad on the
// feature dim, interior padding, a negative (cropping) amount, and a
// convolution with lhs dilation on the padded dim.
// CHECK-LABEL: func.func public @kept
// CHECK-NOT: pad = {{\[\[}}
// CHECK-NOT: padding = dense
// CHECK: return
// KEPT-LABEL: func.func public @kept
// KEPT-COUNT-6: stablehlo.pad %arg0
sdy.mesh @mesh = <["x"=8]>
func.func public @kept(%arg0: tensor<2x16x4xf32>, %w: tensor<3x4x4xf32>, %w5: tensor<3x5x4xf32>) -> (tensor<2x15x4xf32>, tensor<2x14x4xf32>, tensor<2x29x4xf32>, tensor<2x13x4xf32>, tensor<2x31x4xf32>, tensor<2x16x4xf32>) {
  %one = stablehlo.constant dense<1.000000e+00> : tensor<f32>
  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p0 = stablehlo.pad %arg0, %one, low = [0, 1, 0], high = [0, 0, 0], interior = [0, 0, 0] : (tensor<2x16x4xf32>, tensor<f32>) -> tensor<2x17x4xf32>
  %c0 = stablehlo.convolution(%p0, %w) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x17x4xf32>, tensor<3x4x4xf32>) -> tensor<2x15x4xf32>
  %p1 = stablehlo.pad %arg0, %z, low = [0, 0, 1], high = [0, 0, 0], interior = [0, 0, 0] : (tensor<2x16x4xf32>, tensor<f32>) -> tensor<2x16x5xf32>
  %c1 = stablehlo.convolution(%p1, %w5) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x16x5xf32>, tensor<3x5x4xf32>) -> tensor<2x14x4xf32>
  %p2 = stablehlo.pad %arg0, %z, low = [0, 0, 0], high = [0, 0, 0], interior = [0, 1, 0] : (tensor<2x16x4xf32>, tensor<f32>) -> tensor<2x31x4xf32>
  %c2 = stablehlo.convolution(%p2, %w) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x31x4xf32>, tensor<3x4x4xf32>) -> tensor<2x29x4xf32>
  %p3 = stablehlo.pad %arg0, %z, low = [0, -1, 0], high = [0, 0, 0], interior = [0, 0, 0] : (tensor<2x16x4xf32>, tensor<f32>) -> tensor<2x15x4xf32>
  %c3 = stablehlo.convolution(%p3, %w) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x15x4xf32>, tensor<3x4x4xf32>) -> tensor<2x13x4xf32>
  %p4 = stablehlo.pad %arg0, %z, low = [0, 1, 0], high = [0, 0, 0], interior = [0, 0, 0] : (tensor<2x16x4xf32>, tensor<f32>) -> tensor<2x17x4xf32>
  %c4 = stablehlo.convolution(%p4, %w) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [1], lhs_dilate = [2]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x17x4xf32>, tensor<3x4x4xf32>) -> tensor<2x31x4xf32>
  %p5 = stablehlo.pad %arg0, %z, low = [0, 1, 0], high = [0, 1, 0], interior = [0, 0, 0] : (tensor<2x16x4xf32>, tensor<f32>) -> tensor<2x18x4xf32>
  %r5 = "stablehlo.reduce_window"(%p5, %ninf) <{window_dimensions = array<i64: 1, 3, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<2x18x4xf32>, tensor<f32>) -> tensor<2x16x4xf32>
  return %c0, %c1, %c2, %c3, %c4, %r5 : tensor<2x15x4xf32>, tensor<2x14x4xf32>, tensor<2x29x4xf32>, tensor<2x13x4xf32>, tensor<2x31x4xf32>, tensor<2x16x4xf32>
}

// -----
// Not inlined: a wrapper call whose result carries a sharding (it would be
// lost with the call).
// CHECK-LABEL: func.func public @sharded_call
// CHECK: call @_pad_s
// CHECK: func.func private @_pad_s
sdy.mesh @mesh = <["x"=8]>
func.func public @sharded_call(%arg0: tensor<2x64x8xf32>, %arg1: tensor<2x8x8xf32>) -> tensor<2x64x8xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0 = call @_pad_s(%arg0, %c) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}]>]>} : (tensor<2x64x8xf32>, tensor<i32>) -> tensor<2x65x8xf32>
  %1 = stablehlo.convolution(%0, %arg1) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [1], pad = [[0, 0]], lhs_dilate = [1], rhs_dilate = [1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x65x8xf32>, tensor<2x8x8xf32>) -> tensor<2x64x8xf32>
  return %1 : tensor<2x64x8xf32>
}
func.func private @_pad_s(%arg0: tensor<2x64x8xf32>, %arg1: tensor<i32>) -> tensor<2x65x8xf32> {
  %0 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<f32>
  %1 = stablehlo.pad %arg0, %0, low = [0, 1, 0], high = [0, 0, 0], interior = [0, 0, 0] : (tensor<2x64x8xf32>, tensor<f32>) -> tensor<2x65x8xf32>
  return %1 : tensor<2x65x8xf32>
}

// -----
// Not folded: a pad that carries a sharding (a module propagated before).
// CHECK-LABEL: func.func public @sharded_pad
// CHECK: stablehlo.pad
sdy.mesh @mesh = <["x"=8]>
func.func public @sharded_pad(%arg0: tensor<2x64x8xf32>, %arg1: tensor<2x8x8xf32>) -> tensor<2x64x8xf32> {
  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %0 = stablehlo.pad %arg0, %z, low = [0, 1, 0], high = [0, 0, 0], interior = [0, 0, 0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}, {}]>]>} : (tensor<2x64x8xf32>, tensor<f32>) -> tensor<2x65x8xf32>
  %1 = stablehlo.convolution(%0, %arg1) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [1], pad = [[0, 0]], lhs_dilate = [1], rhs_dilate = [1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x65x8xf32>, tensor<2x8x8xf32>) -> tensor<2x64x8xf32>
  return %1 : tensor<2x64x8xf32>
}

// -----
// Complex values (the bindings give no splat value of a complex type; its
// text is read): a sum pool after a 0j pad folds, one after a (1, 0) pad
// does not.
// CHECK-LABEL: func.func public @complex_pools
// CHECK: "stablehlo.reduce_window"(%arg0, %{{.*}}) <{padding = dense<{{\[\[}}1, 1], [0, 0]]> : tensor<2x2xi64>
// CHECK: stablehlo.pad %arg0
// CHECK: "stablehlo.reduce_window"(%{{[0-9]+}}, %{{.*}}) <{window_dimensions
sdy.mesh @mesh = <["x"=8]>
func.func public @complex_pools(%arg0: tensor<16x4xcomplex<f32>>) -> (tensor<8x4xcomplex<f32>>, tensor<8x4xcomplex<f32>>) {
  %z = stablehlo.constant dense<(0.000000e+00,0.000000e+00)> : tensor<complex<f32>>
  %one = stablehlo.constant dense<(1.000000e+00,0.000000e+00)> : tensor<complex<f32>>
  %0 = stablehlo.pad %arg0, %z, low = [1, 0], high = [1, 0], interior = [0, 0] : (tensor<16x4xcomplex<f32>>, tensor<complex<f32>>) -> tensor<18x4xcomplex<f32>>
  %1 = "stablehlo.reduce_window"(%0, %z) <{window_dimensions = array<i64: 3, 1>, window_strides = array<i64: 2, 1>}> ({
  ^bb0(%a: tensor<complex<f32>>, %b: tensor<complex<f32>>):
    %s = stablehlo.add %a, %b : tensor<complex<f32>>
    stablehlo.return %s : tensor<complex<f32>>
  }) : (tensor<18x4xcomplex<f32>>, tensor<complex<f32>>) -> tensor<8x4xcomplex<f32>>
  %2 = stablehlo.pad %arg0, %one, low = [1, 0], high = [1, 0], interior = [0, 0] : (tensor<16x4xcomplex<f32>>, tensor<complex<f32>>) -> tensor<18x4xcomplex<f32>>
  %3 = "stablehlo.reduce_window"(%2, %z) <{window_dimensions = array<i64: 3, 1>, window_strides = array<i64: 2, 1>}> ({
  ^bb0(%a: tensor<complex<f32>>, %b: tensor<complex<f32>>):
    %s = stablehlo.add %a, %b : tensor<complex<f32>>
    stablehlo.return %s : tensor<complex<f32>>
  }) : (tensor<18x4xcomplex<f32>>, tensor<complex<f32>>) -> tensor<8x4xcomplex<f32>>
  return %1, %3 : tensor<8x4xcomplex<f32>>, tensor<8x4xcomplex<f32>>
}
