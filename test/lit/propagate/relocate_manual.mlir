// RUN: %opt %s -p 'propagate{relocate=cpu}' --split-input-file | filecheck %s
// RUN: %opt %s -p propagate --split-input-file | filecheck %s --check-prefix=SHARDY
// RUN: %opt %s -p 'propagate{relocate=cpu}' --split-input-file --explain -o /dev/null 2>&1 | filecheck %s --check-prefix=EXPLAIN
// RUN: %opt %s -p 'propagate{relocate=cpu},partition' --split-input-file --collectives 2>&1 >/dev/null | filecheck %s --check-prefix=PART
// Tokens laid out over ("data", "expert") for a body manual over "expert"
// (expert parallelism with the groups split data-major). No prefix of the
// operand's dim agrees with the in_sharding's {"expert"}, so Shardy's
// propagation carries no free axis in: the body runs replicated over "data"
// (its operand gathered there). Under relocation the in_sharding's dim takes
// "data" minor to "expert": the partitioner reorders the blocks by one
// collective-permute and the body runs split over "data"; its result leaves
// as ("expert", "data") and one more permute lays it out as the function
// returns it.
sdy.mesh @mesh = <["data"=2, "expert"=4]>
// CHECK-LABEL: func.func @data_major
// CHECK: sdy.manual_computation
// CHECK-SAME{LITERAL}: in_shardings=[<@mesh, [{"expert", "data", ?}, {?}]>] out_shardings=[<@mesh, [{"expert", "data", ?}, {?}]>]
// CHECK: stablehlo.multiply {{.*}}sdy.sharding_per_value<[<@mesh, [{"data", ?}, {?}]>]>
// SHARDY-LABEL: func.func @data_major
// SHARDY: sdy.manual_computation
// SHARDY-SAME{LITERAL}: in_shardings=[<@mesh, [{"expert", ?}, {?}]>] out_shardings=[<@mesh, [{"expert", ?}, {?}]>]
// SHARDY: stablehlo.multiply %arg1, %arg1 : tensor<4x32xf32>{{$}}
// EXPLAIN: in_shardings[0] of sdy.manual_computation at {{.*}}relocate_manual.mlir:[[# @LINE + 7]]:8: <@mesh, [{"expert", "data", ?}, {?}]>
// EXPLAIN: reordered through sdy.manual_computation (boundary of operand 0) at {{.*}}relocate_manual.mlir:[[# @LINE + 6]]:8 from argument 0 of @data_major [relocation (free axes a manual computation's operand reorders)]
// PART: collective-permute axes {} 256 B {{.*}} sdy.manual_computation at {{.*}}relocate_manual.mlir:[[# @LINE + 5]]:8: operand 0: [{"data", "expert"}, {}] -> [{"expert", "data"}, {}]
// PART-NEXT: collective-permute axes {} 256 B {{.*}} func.return at {{.*}}: function result 0: [{"expert", "data"}, {}] -> [{"data", "expert"}, {}]
// PART-NEXT: total: 2 collectives (collective-permute x2), 512 B per device
func.func @data_major(%x: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data", "expert"}, {}]>})
    -> (tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data", "expert"}, {}]>}) {
  %0 = sdy.manual_computation(%x) in_shardings=[<@mesh, [{"expert", ?}, {?}]>] out_shardings=[<@mesh, [{"expert", ?}, {?}]>] manual_axes={"expert"} (%a: tensor<4x32xf32>) {
    %1 = stablehlo.multiply %a, %a : tensor<4x32xf32>
    sdy.return %1 : tensor<4x32xf32>
  } : (tensor<16x32xf32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}
// -----
// Not reordered: a closed in_sharding (the user asked for "expert" alone),
// and a body that already uses "data" on another dim.
sdy.mesh @mesh = <["data"=2, "expert"=4]>
// CHECK-LABEL: func.func @closed
// CHECK: sdy.manual_computation
// CHECK-SAME{LITERAL}: in_shardings=[<@mesh, [{"expert"}, {?}]>]
// CHECK: stablehlo.multiply %arg1, %arg1 : tensor<4x32xf32>{{$}}
// PART: all-gather axes {"data","expert"} {{.*}} operand 0: [{"data", "expert"}, {}] -> [{"expert"}, {}]
func.func @closed(%x: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data", "expert"}, {}]>}) -> tensor<16x32xf32> {
  %0 = sdy.manual_computation(%x) in_shardings=[<@mesh, [{"expert"}, {?}]>] out_shardings=[<@mesh, [{"expert", ?}, {?}]>] manual_axes={"expert"} (%a: tensor<4x32xf32>) {
    %1 = stablehlo.multiply %a, %a : tensor<4x32xf32>
    sdy.return %1 : tensor<4x32xf32>
  } : (tensor<16x32xf32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}
// -----
sdy.mesh @mesh = <["data"=2, "expert"=4]>
// CHECK-LABEL: func.func @body_uses_data
// CHECK: sdy.manual_computation
// CHECK-SAME{LITERAL}: in_shardings=[<@mesh, [{"expert", ?}, {"data", ?}]>]
func.func @body_uses_data(%x: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data", "expert"}, {}]>}) -> tensor<16x32xf32> {
  %0 = sdy.manual_computation(%x) in_shardings=[<@mesh, [{"expert", ?}, {?}]>] out_shardings=[<@mesh, [{"expert", ?}, {?}]>] manual_axes={"expert"} (%a: tensor<4x32xf32>) {
    %1 = sdy.sharding_constraint %a <@mesh, [{}, {"data"}]> : tensor<4x32xf32>
    sdy.return %1 : tensor<4x32xf32>
  } : (tensor<16x32xf32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}
// -----
// Not reordered either: the body all-gathers the dim over "expert" (its
// only use needs the dim whole), so "data" would be gathered at once after
// a permute; the operand is resharded to {"expert"} as before, by one
// all-gather (over both axes, then a local cut: one launch).
sdy.mesh @mesh = <["data"=2, "expert"=4]>
// CHECK-LABEL: func.func @body_gathers_the_dim
// CHECK: sdy.manual_computation
// CHECK-SAME{LITERAL}: in_shardings=[<@mesh, [{"expert", ?}, {?}]>]
// PART: all-gather axes {"data","expert"} 1792 B {{.*}}relocate_manual.mlir:[[# @LINE + 3]]:8: operand 0: [{"data", "expert"}, {}] -> [{"expert"}, {}]
// PART-NEXT: total: 1 collectives (all-gather x1)
func.func @body_gathers_the_dim(%x: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data", "expert"}, {}]>}) -> (tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %0 = sdy.manual_computation(%x) in_shardings=[<@mesh, [{"expert", ?}, {?}]>] out_shardings=[<@mesh, [{}, {?}]>] manual_axes={"expert"} (%a: tensor<4x32xf32>) {
    %1 = "stablehlo.all_gather"(%a) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, use_global_device_ids}> : (tensor<4x32xf32>) -> tensor<16x32xf32>
    sdy.return %1 : tensor<16x32xf32>
  } : (tensor<16x32xf32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}
