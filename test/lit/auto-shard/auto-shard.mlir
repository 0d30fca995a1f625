// RUN: %opt %s -p auto-shard --split-input-file | filecheck %s
// RUN: %opt %s -p auto-shard --split-input-file --explain -o /dev/null 2>&1 | filecheck %s --check-prefix=EXPLAIN

// A large batch and small weights: the batch is split, the weights stay
// whole (no collective at all), and every op says so.
sdy.mesh @mesh = <["x"=8]>
// CHECK-LABEL: func @large_batch_is_data_parallel
// CHECK-SAME: %arg0: tensor<4096x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}
// CHECK-SAME: %arg1: tensor<64x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: -> (tensor<4096x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
// EXPLAIN: auto-shard: optimal, estimated {{.*}} us per step; 4 decisions in 3 groups (1 follow their producer, 0 tied to an identical layer)
// EXPLAIN: argument 0 of @large_batch_is_data_parallel: chosen by auto-sharding: [{"x"}, {}], estimated 0.0 us; next best [{}, {}]
// EXPLAIN: dot_general at {{.*}}: chosen by auto-sharding: [{"x"}, {}] x [{}, {}] -> [{"x"}, {}], estimated {{.*}} us; next best
func.func @large_batch_is_data_parallel(%x: tensor<4096x64xf32>, %w: tensor<64x64xf32>) -> tensor<4096x64xf32> {
  // CHECK: stablehlo.dot_general {{.*}} {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>}
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4096x64xf32>, tensor<64x64xf32>) -> tensor<4096x64xf32>
  // CHECK: stablehlo.tanh {{.*}} {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>}
  %1 = stablehlo.tanh %0 : tensor<4096x64xf32>
  return %1 : tensor<4096x64xf32>
}

// -----

// The input is fixed whole and the result fixed in column blocks: the
// weight is split by columns (Megatron's column-parallel layer) and no
// collective is needed.
sdy.mesh @mesh = <["x"=8]>
// CHECK-LABEL: func @fixed_boundaries_pick_column_parallel
// CHECK-SAME: %arg1: tensor<1024x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}
// EXPLAIN-NOT: argument 0 of @fixed_boundaries_pick_column_parallel
// EXPLAIN: argument 1 of @fixed_boundaries_pick_column_parallel: chosen by auto-sharding: [{}, {"x"}]
func.func @fixed_boundaries_pick_column_parallel(%x: tensor<16x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, %w: tensor<1024x1024xf32>)
    -> (tensor<16x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  // CHECK: stablehlo.dot_general {{.*}} {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>}
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<16x1024xf32>, tensor<1024x1024xf32>) -> tensor<16x1024xf32>
  return %0 : tensor<16x1024xf32>
}

// -----

// Operands split along a long contracted dim: the dot runs on the blocks
// and its partial sums are reduce-scattered onto a dim of the open result
// (half the bytes of an all-reduce), instead of gathering the operands.
// Either dim costs the same (explain says so); the solver takes dim 0.
sdy.mesh @mesh = <["x"=8]>
// CHECK-LABEL: func @long_contraction_reduce_scatters
// CHECK-SAME: -> (tensor<64x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
// EXPLAIN: dot_general at {{.*}}: chosen by auto-sharding: [{}, {"x"}] x [{"x"}, {}] -> [{"x"}, {}] (reduce-scatter over x onto dim 0), estimated {{.*}}; next best [{}, {"x"}] (+0.0 us for the program)
func.func @long_contraction_reduce_scatters(
    %a: tensor<64x65536xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>},
    %b: tensor<65536x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<64x64xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<64x65536xf32>, tensor<65536x64xf32>) -> tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}

// -----

// A sharding constraint the program holds is kept: the ops before it take
// its layout, and it is not a decision.
sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-LABEL: func @constraints_are_kept
// CHECK-SAME: %arg0: tensor<64x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {"x"}]>}
// EXPLAIN-NOT: sharding_constraint at
func.func @constraints_are_kept(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  // CHECK: stablehlo.exponential {{.*}} {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y"}, {"x"}]>]>}
  %0 = stablehlo.exponential %x : tensor<64x64xf32>
  // CHECK: sdy.sharding_constraint {{.*}} <@mesh, [{"y"}, {"x"}]>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"y"}, {"x"}]> : tensor<64x64xf32>
  return %1 : tensor<64x64xf32>
}
