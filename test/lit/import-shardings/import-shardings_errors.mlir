// RUN: not %opt %s -p import-shardings --split-input-file 2>&1 | filecheck %s
sdy.mesh @mesh = <["x"=2, "y"=4]>
// The sdy verifier rejects unknown meshes and axes while parsing.
// CHECK: [[# @LINE + 1]]:1: error: 'func.func' op arg 0 - unknown mesh: @other
func.func @unknown_mesh(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@other, [{"x"}, {}]>}) -> tensor<8x16xf32> {
  return %a : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK: [[# @LINE + 1]]:1: error: 'func.func' op arg 0 - unknown axis name: "z"
func.func @unknown_axis(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"z"}]>}) -> tensor<8x16xf32> {
  return %a : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK: [[# @LINE + 1]]:1: error: 'func.func' op arg 0 - duplicate axis ref: "x"
func.func @axis_twice(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"x"}]>}) -> tensor<8x16xf32> {
  return %a : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
func.func @bad_constraint(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: [[# @LINE + 1]]:8: error: 'sdy.sharding_constraint' op unknown axis name: "q"
  %0 = sdy.sharding_constraint %a <@mesh, [{"q"}, {}]> : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK: [[# @LINE + 1]]:1: error: cannot express mhlo.sharding '{devices=[3,1]<=[3]}' on argument 0 of @gspmd_not_on_mesh over mesh @mesh
func.func @gspmd_not_on_mesh(%a: tensor<6x16xf32> {mhlo.sharding = "{devices=[3,1]<=[3]}"}) -> tensor<6x16xf32> {
  return %a : tensor<6x16xf32>
}
