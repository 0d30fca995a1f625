// The partitioner chooses each op's factors by estimated time: compute share
// plus collectives (a fixed latency each, and bytes over bandwidth).
// RUN: %opt %s -p partition --split-input-file | filecheck %s
// RUN: %opt %s -p partition --split-input-file --collectives 2>&1 >/dev/null | filecheck %s --check-prefix=BYTES

sdy.mesh @mesh = <["x"=8]>
// A weight gradient returned replicated: propagation split its rows (as its
// input's), but the value only ends up returned. Gathering the small input
// (2 x 4096) costs less than computing split and gathering the large
// gradient (4096 x 256): the dot runs on the gathered input.
// BYTES: all-gather {{ +}}axes {"x"} {{ +}}28672 B {{ +}}{{[0-9.]+}} us  stablehlo.dot_general at {{.*}}: operand 0: [{}, {"x"}] -> [{}, {}]
// BYTES-NEXT: total: 1 collectives (all-gather x1), 28672 B per device, estimated {{[0-9.]+}} us
// CHECK-LABEL: func.func public @weight_gradient_gathers_the_small_operand
// CHECK: stablehlo.dot_general {{.*}} : (tensor<2x4096xf32>, tensor<2x256xf32>) -> tensor<4096x256xf32>
func.func public @weight_gradient_gathers_the_small_operand(%a: tensor<2x4096xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %g: tensor<2x256xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) -> (tensor<4096x256xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %0 = stablehlo.dot_general %a, %g, contracting_dims = [0] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<2x4096xf32>, tensor<2x256xf32>) -> tensor<4096x256xf32>
  %c = stablehlo.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} dense<0.5> : tensor<4096x256xf32>
  %1 = stablehlo.multiply %0, %c {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : tensor<4096x256xf32>
  return %1 : tensor<4096x256xf32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// The same with a large batch: the dot's work is worth splitting, so it runs
// split and its (smaller than the input) result is gathered.
// BYTES: all-gather {{ +}}axes {"x"} {{ +}}57344 B {{ +}}{{[0-9.]+}} us  stablehlo.dot_general at {{.*}}: result: [{"x"}, {}] -> [{}, {}]
// CHECK-LABEL: func.func public @large_batch_splits_the_dot
// CHECK: stablehlo.dot_general {{.*}} : (tensor<512x128xf32>, tensor<512x16xf32>) -> tensor<128x16xf32>
func.func public @large_batch_splits_the_dot(%a: tensor<512x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %g: tensor<512x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) -> (tensor<1024x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %0 = stablehlo.dot_general %a, %g, contracting_dims = [0] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>} : (tensor<512x1024xf32>, tensor<512x16xf32>) -> tensor<1024x16xf32>
  return %0 : tensor<1024x16xf32>
}

// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// A loop's result returned in another layout: the loop keeps carrying its
// own (split) layout and the result is gathered once, after the loop, not
// at the end of every iteration.
// CHECK-LABEL: func.func public @loop_carry_keeps_its_layout
// CHECK: stablehlo.while{{.*}} : tensor<i32>, tensor<4x4xf32>
// CHECK-NOT: all_gather
// CHECK: }
// CHECK: "stablehlo.all_gather"
func.func public @loop_carry_keeps_its_layout(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%i = %c0, %v = %a) : tensor<i32>, tensor<8x16xf32> attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, []>, <@mesh, [{"x"}, {"y"}]>]>}
  cond {
    %c10 = stablehlo.constant dense<10> : tensor<i32>
    %p = stablehlo.compare LT, %i, %c10 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %c1 : tensor<i32>
    %w = stablehlo.tanh %v {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>} : tensor<8x16xf32>
    stablehlo.return %j, %w : tensor<i32>, tensor<8x16xf32>
  }
  return %0#1 : tensor<8x16xf32>
}
