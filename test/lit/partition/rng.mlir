// rng_bit_generator with its bits split: generated whole on the replicated
// state, each device's block cut out (XLA fuses the cut into the generator,
// so only the block's elements are computed); the new state stays
// replicated. Nothing is gathered and no remark is made.
// RUN: %opt %s -p 'propagate,partition' --split-input-file | filecheck %s
// RUN: %opt %s -p 'propagate,partition' --split-input-file --collectives 2>&1 >/dev/null | filecheck %s --check-prefix=REPORT

sdy.mesh @mesh = <["x"=8]>
// CHECK-LABEL: func.func public @rows
// CHECK: manual_axes={"x"} (%[[STATE:arg[0-9]+]]: tensor<2xui64>)
// CHECK: %[[NEW:.*]], %[[BITS:.*]] = stablehlo.rng_bit_generator %[[STATE]], algorithm = PHILOX : (tensor<2xui64>) -> (tensor<2xui64>, tensor<16x8xui32>)
// CHECK: %[[BLOCK:.*]] = stablehlo.dynamic_slice %[[BITS]], %{{.*}}, %{{.*}}, sizes = [2, 8]
// CHECK: sdy.return %[[NEW]], %[[BLOCK]] : tensor<2xui64>, tensor<2x8xui32>
// REPORT: total: 0 collectives (none), 0 B per device
// REPORT-NOT: remark
func.func public @rows(%s: tensor<2xui64>) -> (tensor<2xui64>, tensor<16x8xui32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %st, %bits = stablehlo.rng_bit_generator %s, algorithm = PHILOX : (tensor<2xui64>) -> (tensor<2xui64>, tensor<16x8xui32>)
  return %st, %bits : tensor<2xui64>, tensor<16x8xui32>
}

// -----
sdy.mesh @mesh = <["x"=8]>
// CHECK-LABEL: func.func public @columns
// CHECK: stablehlo.rng_bit_generator %{{.*}}, algorithm = THREE_FRY : (tensor<2xui64>) -> (tensor<2xui64>, tensor<16x8xui32>)
// CHECK: stablehlo.dynamic_slice %{{.*}} sizes = [16, 1]
func.func public @columns(%s: tensor<2xui64>) -> (tensor<2xui64>, tensor<16x8xui32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  %st, %bits = stablehlo.rng_bit_generator %s, algorithm = THREE_FRY : (tensor<2xui64>) -> (tensor<2xui64>, tensor<16x8xui32>)
  return %st, %bits : tensor<2xui64>, tensor<16x8xui32>
}
