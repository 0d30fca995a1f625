// An rfft, a filter and an irfft along the split signal dim (1 MiB).
// Propagation with relocate gives the spectrum the rows' split that the
// rfft's all-to-all makes, so the filter runs on each device's rows and the
// irfft moves the signal dim back: two all-to-alls. Without relocate the
// spectrum is replicated: the rfft still moves its operand to the rows, then
// gathers the spectrum (919 KB a device) for a filter on every device.
// RUN: %opt %s -p 'propagate{relocate=cpu},partition' --collectives 2>&1 >/dev/null | filecheck %s
// RUN: %opt %s -p 'propagate,partition' --collectives 2>&1 >/dev/null | filecheck %s --check-prefix=GATHER
// RUN: %opt %s -p spmd-pipeline --collectives 2>&1 >/dev/null | filecheck %s

sdy.mesh @mesh = <["x"=8]>
// CHECK: all-to-all axes {"x"} 114688 B {{.*}} stablehlo.fft at {{.*}}fft_relocate.mlir:[[# @LINE + 8]]:8: operand 0: [{}, {"x"}] -> [{"x"}, {}]
// CHECK-NEXT: all-to-all axes {"x"} 114688 B {{.*}} stablehlo.fft at {{.*}}fft_relocate.mlir:[[# @LINE + 10]]:8: result: [{"x"}, {}] -> [{}, {"x"}]
// CHECK-NEXT: total: 2 collectives (all-to-all x2), 229376 B per device
// GATHER: all-to-all
// GATHER-NEXT: all-gather axes {"x"} 919296 B {{.*}} stablehlo.fft at {{.*}}fft_relocate.mlir:[[# @LINE + 4]]:8: result: [{"x"}, {}] -> [{}, {}]
// GATHER-NEXT: all-to-all
// GATHER-NEXT: total: 3 collectives (all-gather x1, all-to-all x2), 1148672 B per device
func.func @main(%x: tensor<256x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %k: tensor<513xcomplex<f32>> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) -> (tensor<256x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  %0 = stablehlo.fft %x, type = RFFT, length = [1024] : (tensor<256x1024xf32>) -> tensor<256x513xcomplex<f32>>
  %1 = stablehlo.broadcast_in_dim %k, dims = [1] : (tensor<513xcomplex<f32>>) -> tensor<256x513xcomplex<f32>>
  %2 = stablehlo.multiply %0, %1 : tensor<256x513xcomplex<f32>>
  %3 = stablehlo.fft %2, type = IRFFT, length = [1024] : (tensor<256x513xcomplex<f32>>) -> tensor<256x1024xf32>
  return %3 : tensor<256x1024xf32>
}
