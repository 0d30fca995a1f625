// The partition pass's cost model is a platform name or a calibrated file.
// RUN: not %opt %s -p 'partition{cost=/no/such/model.json}' 2>&1 | filecheck %s
// CHECK: error: partition: cost model '/no/such/model.json' is neither a platform (cpu, gpu) nor a readable JSON file
sdy.mesh @mesh = <["x"=2]>
func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
