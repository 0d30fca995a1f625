// A memory budget: the weight (4 MiB) does not fit whole beside the rest,
// so it is split, at a cost; below the smallest peak any layout reaches,
// the pass says what that peak is.
// RUN: %opt %s -p 'auto-shard{memory-budget=2MiB}' --explain 2>&1 | filecheck %s
// RUN: not %opt %s -p 'auto-shard{memory-budget=64KiB}' 2>&1 | filecheck %s --check-prefix=TOO-SMALL

sdy.mesh @mesh = <["x"=8]>
// CHECK: auto-shard: optimal, {{.*}} peak per device {{1\.[0-9]+ MiB|[0-9.]+ KiB}} at {{.*}} (budget 2.00 MiB)
// CHECK: argument 1 of @main: chosen by auto-sharding: [{}, {"x"}], estimated 0.0 us; next best [{"x"}, {}] (+{{[0-9.]+}} us for the program)
// TOO-SMALL: error: auto-shard: no layout fits the memory budget of 64.00 KiB per device; the smallest peak of live values the solver found is {{[0-9.]+}} KiB per device; raise memory-budget to at least that (or use a larger mesh)
func.func @main(%x: tensor<64x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>},
                %w: tensor<1024x1024xf32>) -> tensor<64x1024xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<64x1024xf32>, tensor<1024x1024xf32>) -> tensor<64x1024xf32>
  return %0 : tensor<64x1024xf32>
}
