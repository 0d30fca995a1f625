// RUN: %opt %s -p import-shardings --split-input-file | filecheck %s

// A sharding that writes its mesh inline names a module-level mesh instead,
// as Shardy's import lifts it: a new @mesh where the module has none.
// CHECK: sdy.mesh @mesh = <["a"=2, "b"=2]>
// CHECK-LABEL: func @inlined_mesh(
// CHECK-SAME: %arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}
// CHECK: sdy.sharding_constraint %arg1 <@mesh, [{}, {"a"}]>
func.func @inlined_mesh(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<mesh<["a"=2, "b"=2]>, [{"a"}, {"b"}]>}, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = sdy.sharding_constraint %arg1 <mesh<["a"=2, "b"=2]>, [{}, {"a"}]> : tensor<8x8xf32>
  %1 = stablehlo.add %arg0, %0 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}

// -----
// The module's own mesh with the same definition is reused; a name that is
// taken gets a suffix.
sdy.mesh @mesh = <["x"=4]>
sdy.mesh @other = <["a"=2]>
// CHECK: sdy.mesh @mesh_0 = <["b"=2]>
// CHECK: sdy.mesh @mesh = <["x"=4]>
// CHECK-LABEL: func @reused_and_new(
// CHECK-SAME: %arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@other, [{"a"}]>}
// CHECK-SAME: %arg1: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh_0, [{"b"}]>}
func.func @reused_and_new(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<mesh<["a"=2]>, [{"a"}]>}, %arg1: tensor<8xf32> {sdy.sharding = #sdy.sharding<mesh<["b"=2]>, [{"b"}]>}) -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}
