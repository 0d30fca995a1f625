// A fused projection split 4 ways (blocks of 96 columns) cut into q, k, v
// (128 columns each, blocks of 32), and the gradient's way back. Each block
// of q, k and v lies inside one block of the projection, so a device needs
// at most 3 pieces of 32 columns, one of them usually its own: instead of
// gathering the whole projection (3 blocks of 96 per device), every device
// contributes the 2 pieces others take, and one all-gather of those serves
// all three slices. The concatenate back sends the same pieces the other
// way: one all-gather of 2 pieces of 32 instead of 3 gathers of 3 x 32.
// RUN: %opt %s -p partition --split-input-file --collectives 2>&1 >/dev/null | filecheck %s
// RUN: %opt %s -p partition --split-input-file | filecheck %s --check-prefix=IR

sdy.mesh @mesh = <["x"=4]>
func.func public @qkv(%p: tensor<8x384xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<8x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, tensor<8x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, tensor<8x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  // CHECK: fused_pieces.mlir:[[# @LINE + 1]]:8: remark: 3 slices of one value along its dim 1: one all-gather of every slice's pieces (estimated {{.*}} us, 6.00 KiB per device) rather than a gather of the dim for all of them or permutes for each ({{.*}} us, 9.00 KiB)
  %q = stablehlo.slice %p [0:8, 0:128] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<8x384xf32>) -> tensor<8x128xf32>
  %k = stablehlo.slice %p [0:8, 128:256] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<8x384xf32>) -> tensor<8x128xf32>
  %v = stablehlo.slice %p [0:8, 256:384] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<8x384xf32>) -> tensor<8x128xf32>
  return %q, %k, %v : tensor<8x128xf32>, tensor<8x128xf32>, tensor<8x128xf32>
}
// CHECK: collectives inserted by partition (bytes sent per device):
// CHECK-NEXT: all-gather {{ +}}axes {"x"} {{ +}}6144 B {{.*}} stablehlo.slice at {{.*}}: 3 slices along dim 1: 64 along dim 1, the pieces from blocks -2, -1, +1, +2
// CHECK-NEXT: total: 1 collectives (all-gather x1), 6144 B per device

// Block 0 holds q0 q1 q2 and sends q1 and q2 (to blocks 1 and 2); block 1
// holds q3 k0 k1 and sends k0 and q3; block 2 (k2 k3 v0) sends v0 and k3;
// block 3 (v1 v2 v3) sends v2 and v1: two slots of 32 columns, each cut at
// a per-device offset, one all-gather.
// IR-LABEL: func.func public @qkv
// IR: %[[AT0:.+]] = stablehlo.constant dense<[64, 0, 32, 32]> : tensor<4xi32>
// IR: %[[AT1:.+]] = stablehlo.constant dense<[32, 32, 64, 0]> : tensor<4xi32>
// IR: %[[MINE:.+]] = stablehlo.concatenate {{.*}} -> tensor<8x64xf32>
// IR: %[[ALL:.+]] = "stablehlo.all_gather"(%[[MINE]]) {{.*}} : (tensor<8x64xf32>) -> tensor<8x256xf32>
// IR: %[[SOURCE:.+]] = stablehlo.concatenate %arg1, %[[ALL]], dim = 1 : (tensor<8x96xf32>, tensor<8x256xf32>) -> tensor<8x352xf32>
// Each result block is one cut of the device's block and the gathered
// pieces: q0 from block 0's own columns, q1 from block 0's first slot, ...
// IR: stablehlo.constant dense<[0, 128, 96, 160]> : tensor<4xi32>
// IR: %[[Q:.+]] = stablehlo.dynamic_slice %[[SOURCE]], {{.*}} sizes = [8, 32]
// IR: %[[K:.+]] = stablehlo.dynamic_slice %[[SOURCE]], {{.*}} sizes = [8, 32]
// IR: %[[V:.+]] = stablehlo.dynamic_slice %[[SOURCE]], {{.*}} sizes = [8, 32]
// IR-NOT: all_gather
// IR: sdy.return %[[Q]], %[[K]], %[[V]]

// -----

sdy.mesh @mesh = <["x"=4]>
func.func public @grad(%q: tensor<8x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %k: tensor<8x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %v: tensor<8x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> (tensor<8x384xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  // CHECK: fused_pieces.mlir:[[# @LINE + 1]]:8: remark: stablehlo.concatenate along dim 1: one all-gather of every operand's pieces (estimated {{.*}} us, 6.00 KiB per device) rather than each operand's window its own way ({{.*}} us, 9.00 KiB)
  %0 = stablehlo.concatenate %q, %k, %v, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<8x128xf32>, tensor<8x128xf32>, tensor<8x128xf32>) -> tensor<8x384xf32>
  return %0 : tensor<8x384xf32>
}
// CHECK: collectives inserted by partition (bytes sent per device):
// CHECK-NEXT: all-gather {{ +}}axes {"x"} {{ +}}6144 B {{.*}} stablehlo.concatenate at {{.*}}: operands along dim 1: 64 along dim 1, the pieces from blocks -2, -1, +1, +2
// CHECK-NEXT: total: 1 collectives (all-gather x1), 6144 B per device

// Each device's contribution picks, per slot, the operand block it sends
// there; the result block (96 columns) is three cuts of the device's own
// operand blocks and the gathered pieces, side by side (block 0: dq0 of its
// own, dq1 and dq2 from the gathered).
// IR-LABEL: func.func public @grad
// IR: %[[MINE:.+]] = stablehlo.concatenate {{.*}} -> tensor<8x64xf32>
// IR: %[[ALL:.+]] = "stablehlo.all_gather"(%[[MINE]]) {{.*}} -> tensor<8x256xf32>
// IR: %[[SOURCE:.+]] = stablehlo.concatenate %arg3, %arg4, %arg5, %[[ALL]], dim = 1 : {{.*}} -> tensor<8x352xf32>
// IR: stablehlo.constant dense<[0, 288, 32, 192]> : tensor<4xi32>
// IR: %[[A:.+]] = stablehlo.dynamic_slice %[[SOURCE]], {{.*}} sizes = [8, 32]
// IR: %[[B:.+]] = stablehlo.dynamic_slice %[[SOURCE]], {{.*}} sizes = [8, 32]
// IR: %[[C:.+]] = stablehlo.dynamic_slice %[[SOURCE]], {{.*}} sizes = [8, 32]
// IR: %[[BLOCK:.+]] = stablehlo.concatenate %[[A]], %[[B]], %[[C]], dim = 1 : {{.*}} -> tensor<8x96xf32>
// IR: sdy.return %[[BLOCK]] : tensor<8x96xf32>
