// Where a partial sum (a dot over a split contracting dim) is reduced: where it
// is made, unless deferring it past linear ops pays: the tensor shrinks down
// the chain (one reduction of a smaller tensor) or meets another partial sum
// (one reduction for both). A reduction moved past elementwise ops saves
// nothing and splits XLA's fusions, so it stays at the dot, as XLA puts it.
// RUN: %opt %s -p partition --split-input-file | filecheck %s

sdy.mesh @mesh = <["x"=4]>

// An SGD update: the weight gradient is reduced right after its dot, before
// the scale and the subtract (they then fuse in one kernel).
// CHECK-LABEL: func.func public @sgd
// CHECK: %[[G:.*]] = stablehlo.dot_general
// CHECK-NEXT: %[[R:.*]] = "stablehlo.all_reduce"(%[[G]])
// CHECK: stablehlo.transpose %[[R]]
// CHECK: stablehlo.multiply
// CHECK: stablehlo.subtract
// CHECK-NOT: all_reduce
func.func @sgd(%x: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %dy: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %w: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %g = stablehlo.dot_general %x, %dy, contracting_dims = [0] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %t = stablehlo.transpose %g, dims = [1, 0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %c = stablehlo.constant dense<0.01> : tensor<8x8xf32>
  %s = stablehlo.multiply %c, %t {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : tensor<8x8xf32>
  %u = stablehlo.subtract %w, %s {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : tensor<8x8xf32>
  return %u : tensor<8x8xf32>
}

// -----

sdy.mesh @mesh = <["x"=4]>

// Two partial sums meet in an add: one all-reduce, after the add.
// CHECK-LABEL: func.func public @meet
// CHECK: stablehlo.dot_general
// CHECK-NOT: all_reduce
// CHECK: stablehlo.dot_general
// CHECK-NOT: all_reduce
// CHECK: %[[S:.*]] = stablehlo.add
// CHECK-NEXT: "stablehlo.all_reduce"(%[[S]])
// CHECK-NOT: all_reduce
func.func @meet(%a: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %b: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %g = stablehlo.dot_general %a, %b, contracting_dims = [0] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %h = stablehlo.dot_general %b, %a, contracting_dims = [0] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %s = stablehlo.add %g, %h {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}

// -----

sdy.mesh @mesh = <["x"=4]>

// The tensor shrinks down the chain (a reduce after a scale): reduced once,
// on the small result.
// CHECK-LABEL: func.func public @shrink
// CHECK: stablehlo.dot_general
// CHECK-NOT: all_reduce
// CHECK: stablehlo.multiply
// CHECK-NOT: all_reduce
// CHECK: %[[R:.*]] = stablehlo.reduce
// CHECK: "stablehlo.all_reduce"(%[[R]])
// CHECK: }) : (tensor<8xf32>) -> tensor<8xf32>
func.func @shrink(%a: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %b: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
  %g = stablehlo.dot_general %a, %b, contracting_dims = [0] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %c = stablehlo.constant dense<2.0> : tensor<8x8xf32>
  %m = stablehlo.multiply %g, %c {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : tensor<8x8xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%m init: %z) applies stablehlo.add across dimensions = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}]>]>} : (tensor<8x8xf32>, tensor<f32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

sdy.mesh @mesh = <["x"=4]>

// A convert to a type at least as wide passes a partial sum on (the sum is
// then taken no less precisely): one reduction, of the reduced row.
// CHECK-LABEL: func.func public @widening_convert
// CHECK: stablehlo.dot_general
// CHECK-NOT: all_reduce
// CHECK: stablehlo.convert %{{.*}} : (tensor<8x8xbf16>) -> tensor<8x8xf32>
// CHECK: stablehlo.reduce
// CHECK: "stablehlo.all_reduce"
// CHECK: }) : (tensor<8xf32>) -> tensor<8xf32>
func.func @widening_convert(%x: tensor<16x8xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %y: tensor<16x8xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
  %g = stablehlo.dot_general %x, %y, contracting_dims = [0] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<16x8xbf16>, tensor<16x8xbf16>) -> tensor<8x8xbf16>
  %f = stablehlo.convert %g {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<8x8xbf16>) -> tensor<8x8xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%f init: %z) applies stablehlo.add across dimensions = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}]>]>} : (tensor<8x8xf32>, tensor<f32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

sdy.mesh @mesh = <["x"=4]>

// A narrowing convert does not: the partial sums are added up before it, in
// the wider type.
// CHECK-LABEL: func.func public @narrowing_convert
// CHECK: %[[G:.*]] = stablehlo.dot_general
// CHECK-NEXT: "stablehlo.all_reduce"(%[[G]])
// CHECK: }) : (tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK: stablehlo.convert %{{.*}} : (tensor<8x8xf32>) -> tensor<8x8xbf16>
func.func @narrowing_convert(%x: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %y: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<8xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
  %g = stablehlo.dot_general %x, %y, contracting_dims = [0] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %f = stablehlo.convert %g {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<8x8xf32>) -> tensor<8x8xbf16>
  %z = stablehlo.constant dense<0.0> : tensor<bf16>
  %r = stablehlo.reduce(%f init: %z) applies stablehlo.add across dimensions = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}]>]>} : (tensor<8x8xbf16>, tensor<bf16>) -> tensor<8xbf16>
  return %r : tensor<8xbf16>
}
