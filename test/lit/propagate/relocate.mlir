// RUN: %opt %s -p 'propagate{relocate=cpu}' | filecheck %s
// RUN: %opt %s -p 'propagate{relocate=gpu}' | filecheck %s --check-prefix=GPU
// RUN: %opt %s -p propagate | filecheck %s --check-prefix=SHARDY
// RUN: %opt %s -p 'propagate{relocate=cpu}' --explain -o /dev/null 2>&1 | filecheck %s --check-prefix=EXPLAIN
// RUN: not %opt %s -p 'propagate{relocate=nowhere.json}' 2>&1 | filecheck %s --check-prefix=ERR
// An rfft along a split dim: the partitioner moves "x" to the rows by an
// all-to-all and transforms there. With relocate the spectrum takes the
// rows' split, and so does the filter that multiplies it (Shardy's
// propagation leaves both replicated: the partitioner would gather the
// spectrum and filter it on every device). The irfft's result keeps the
// output's split of the signal dim. Where the cost model prices the two
// all-to-alls above one gather and the whole transform, nothing moves:
// @small on "cpu" (1 KiB blocks: launches dominate), and on "gpu" even the
// 1 MiB signal (10 us a launch, 150 GB/s: the gather is cheaper).
sdy.mesh @mesh = <["x"=8]>

// CHECK-LABEL: func.func @spectral
// CHECK: stablehlo.fft %arg0, type = RFFT{{.*}}sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>
// CHECK: stablehlo.multiply {{.*}}sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>
// CHECK: stablehlo.fft {{.*}}type = IRFFT{{.*}}sdy.sharding_per_value<[<@mesh, [{?}, {"x", ?}]>]>
// GPU-LABEL: func.func @spectral
// GPU: stablehlo.fft %arg0, type = RFFT, length = [1024] : (
// SHARDY-LABEL: func.func @spectral
// SHARDY: stablehlo.fft %arg0, type = RFFT, length = [1024] : (
// SHARDY: stablehlo.multiply %0, %arg1 : tensor
// EXPLAIN: result of stablehlo.fft at {{.*}}relocate.mlir:[[# @LINE + 4]]:8: <@mesh, [{"x", ?}, {?}]>
// EXPLAIN-NEXT: dim 0 {"x"}:
// EXPLAIN-NEXT: <- relocated through stablehlo.fft at {{.*}}relocate.mlir:[[# @LINE + 2]]:8 from argument 0 of @spectral [relocation (axes an FFT moves to a batch dim)]
func.func @spectral(%x: tensor<256x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %k: tensor<256x513xcomplex<f32>>) -> (tensor<256x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  %0 = stablehlo.fft %x, type = RFFT, length = [1024] : (tensor<256x1024xf32>) -> tensor<256x513xcomplex<f32>>
  %1 = stablehlo.multiply %0, %k : tensor<256x513xcomplex<f32>>
  %2 = stablehlo.fft %1, type = IRFFT, length = [1024] : (tensor<256x513xcomplex<f32>>) -> tensor<256x1024xf32>
  return %2 : tensor<256x1024xf32>
}

// CHECK-LABEL: func.func @small
// CHECK: stablehlo.fft %arg0, type = RFFT, length = [128] : (
func.func @small(%x: tensor<16x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> tensor<16x65xf32> {
  %0 = stablehlo.fft %x, type = RFFT, length = [128] : (tensor<16x128xf32>) -> tensor<16x65xcomplex<f32>>
  %1 = stablehlo.abs %0 : (tensor<16x65xcomplex<f32>>) -> tensor<16x65xf32>
  return %1 : tensor<16x65xf32>
}

// A complex FFT's transformed dim needs replication and, in Shardy's
// propagation, passes its axes on to the result's dim; relocated, the
// result takes them on the rows instead. Where that does not pay (@csmall)
// they pass on as in Shardy.
// CHECK-LABEL: func.func @complex
// CHECK: stablehlo.fft %arg0, type = FFT{{.*}}sdy.sharding_per_value<[<@mesh, [{"x", ?}, {?}]>]>
// SHARDY-LABEL: func.func @complex
// SHARDY: stablehlo.fft %arg0, type = FFT{{.*}}sdy.sharding_per_value<[<@mesh, [{?}, {"x", ?}]>]>
func.func @complex(%x: tensor<256x1024xcomplex<f32>> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> tensor<256x1024xf32> {
  %0 = stablehlo.fft %x, type = FFT, length = [1024] : (tensor<256x1024xcomplex<f32>>) -> tensor<256x1024xcomplex<f32>>
  %1 = stablehlo.abs %0 : (tensor<256x1024xcomplex<f32>>) -> tensor<256x1024xf32>
  return %1 : tensor<256x1024xf32>
}

// CHECK-LABEL: func.func @csmall
// CHECK: stablehlo.fft %arg0, type = FFT{{.*}}sdy.sharding_per_value<[<@mesh, [{?}, {"x", ?}]>]>
func.func @csmall(%x: tensor<16x128xcomplex<f32>> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> tensor<16x128xf32> {
  %0 = stablehlo.fft %x, type = FFT, length = [128] : (tensor<16x128xcomplex<f32>>) -> tensor<16x128xcomplex<f32>>
  %1 = stablehlo.abs %0 : (tensor<16x128xcomplex<f32>>) -> tensor<16x128xf32>
  return %1 : tensor<16x128xf32>
}

// A closed result dim (the user's, on the op) takes nothing.
// CHECK-LABEL: func.func @closed
// CHECK: stablehlo.fft %arg0, type = RFFT{{.*}}sdy.sharding_per_value<[<@mesh, [{}, {}]>]>
// CHECK-NEXT: stablehlo.abs %0 : (
func.func @closed(%x: tensor<256x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) -> tensor<256x513xf32> {
  %0 = stablehlo.fft %x, type = RFFT, length = [1024] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (tensor<256x1024xf32>) -> tensor<256x513xcomplex<f32>>
  %1 = stablehlo.abs %0 : (tensor<256x513xcomplex<f32>>) -> tensor<256x513xf32>
  return %1 : tensor<256x513xf32>
}

// ERR: error: propagate: relocate:
