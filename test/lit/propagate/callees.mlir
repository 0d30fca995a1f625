// RUN: %opt %s -p 'propagate{callees=copies}' --split-input-file | filecheck %s --check-prefix=COPIES
// RUN: %opt %s -p 'propagate{callees=shared}' --split-input-file | filecheck %s --check-prefix=SHARED
// RUN: %opt %s -p 'propagate' --split-input-file | filecheck %s --check-prefix=WRITTEN
// Private functions called with func.call. Propagation reads a callee once
// per call site; how the answer is written:
// - callees=copies (Shardy's propagation pipeline): a copy per call site,
//   named in post-order (calls inside a callee first; the first copy keeps the
//   name, later ones get _N), copies with equal argument and result shardings
//   merged onto the first call's, unused copies dropped;
// - callees=shared (dedup-functions-fully): one body, the first call's
//   shardings, signature written;
// - as written (default): one body, the signature as the user wrote it.
sdy.mesh @mesh = <["a"=2, "b"=2]>

// Two calls of @bar find different shardings: two copies. The call inside
// @foo is copied first (post-order), so it keeps the name.
// COPIES-LABEL: func @main(
// COPIES:       call @foo(%{{.*}}) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", ?}, {?}]>]>}
// COPIES:       call @bar_0(%{{.*}}) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>}
// COPIES-LABEL: func private @bar(
// COPIES-SAME:  %arg0: tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}) -> (tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", ?}, {?}]>})
// COPIES:       stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", ?}, {?}]>]>}
// COPIES-LABEL: func private @foo(
// COPIES:       call @bar(
// COPIES-LABEL: func private @bar_0(
// COPIES-SAME:  %arg0: tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> (tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>})
// COPIES:       stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>}

// SHARED-LABEL: func @main(
// SHARED:       call @bar(
// SHARED-LABEL: func private @bar(
// SHARED-SAME:  {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}) -> (tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", ?}, {?}]>})
// SHARED-LABEL: func private @foo(
// SHARED-NOT:   func private @bar_0

// WRITTEN-LABEL: func private @bar(
// WRITTEN-SAME:  %arg0: tensor<8x2xi32>) -> tensor<8x2xi32> {
// WRITTEN:       stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", ?}, {?}]>]>}
func.func @main(%arg0: tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x2xi32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<8x2xi32>
  %c = sdy.sharding_constraint %0 <@mesh, [{"a"}, {}]> : tensor<8x2xi32>
  %1 = call @foo(%c) : (tensor<8x2xi32>) -> tensor<8x2xi32>
  %2 = call @bar(%c) : (tensor<8x2xi32>) -> tensor<8x2xi32>
  return %2 : tensor<8x2xi32>
}
func.func private @bar(%arg0: tensor<8x2xi32>) -> tensor<8x2xi32> {
  %0 = stablehlo.negate %arg0 : tensor<8x2xi32>
  return %0 : tensor<8x2xi32>
}
func.func private @foo(%arg0: tensor<8x2xi32>) -> tensor<8x2xi32> {
  %0 = sdy.sharding_constraint %arg0 <@mesh, [{"b"}, {}]> : tensor<8x2xi32>
  %1 = call @bar(%0) : (tensor<8x2xi32>) -> tensor<8x2xi32>
  return %1 : tensor<8x2xi32>
}

// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>

// Two calls that find the same shardings share one function: the copy of
// the first call in module order (main's). Copies are named in post-order
// (the call inside @foo got @bar, main's @bar_0), so both calls use @bar_0
// and @bar goes, as in Shardy's pipeline.
// COPIES-LABEL: func @main(
// COPIES:       call @foo(
// COPIES:       call @bar_0(
// COPIES-LABEL: func private @foo(
// COPIES:       call @bar_0(
// COPIES-LABEL: func private @bar_0(
// COPIES-SAME:  {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>})
// COPIES-NOT:   func private @bar(
// A copy differs where a sharding differs, closed or open included: with
// %arg0 passed straight to @foo, @foo's @bar would take the argument's closed
// [{"a"}, {}] and main's the open one @foo returns (two copies).
func.func @main(%arg0: tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x2xi32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<8x2xi32>
  %1 = call @foo(%0) : (tensor<8x2xi32>) -> tensor<8x2xi32>
  %2 = call @bar(%1) : (tensor<8x2xi32>) -> tensor<8x2xi32>
  return %2 : tensor<8x2xi32>
}
func.func private @foo(%arg0: tensor<8x2xi32>) -> tensor<8x2xi32> {
  %1 = call @bar(%arg0) : (tensor<8x2xi32>) -> tensor<8x2xi32>
  return %1 : tensor<8x2xi32>
}
func.func private @bar(%arg0: tensor<8x2xi32>) -> tensor<8x2xi32> {
  %0 = stablehlo.abs %arg0 : tensor<8x2xi32>
  return %0 : tensor<8x2xi32>
}

// -----
// A copy's name avoids every symbol of the module, meshes included.
sdy.mesh @bar_0 = <["a"=2, "b"=2]>
// COPIES-LABEL: func @main(
// COPIES: call @bar(
// COPIES: call @bar_1(
// COPIES-LABEL: func private @bar(
// COPIES-LABEL: func private @bar_1(
func.func @main(%arg0: tensor<8x2xi32> {sdy.sharding = #sdy.sharding<@bar_0, [{"a"}, {}]>}) -> tensor<8x2xi32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<8x2xi32>
  %c = sdy.sharding_constraint %0 <@bar_0, [{"b"}, {}]> : tensor<8x2xi32>
  %1 = call @bar(%arg0) : (tensor<8x2xi32>) -> tensor<8x2xi32>
  %2 = call @bar(%c) : (tensor<8x2xi32>) -> tensor<8x2xi32>
  return %2 : tensor<8x2xi32>
}
func.func private @bar(%arg0: tensor<8x2xi32>) -> tensor<8x2xi32> {
  %0 = stablehlo.negate %arg0 : tensor<8x2xi32>
  return %0 : tensor<8x2xi32>
}
