// RUN: not %opt %s -p auto-shard --split-input-file 2>&1 | filecheck %s
// RUN: not %opt %s -p 'auto-shard{memory-budget=lots}' 2>&1 | filecheck %s --check-prefix=UNITS
// RUN: not %opt %s -p 'auto-shard{time-limit=0}' 2>&1 | filecheck %s --check-prefix=TIME
// RUN: not %opt %s -p 'auto-shard{share-layers=maybe}' 2>&1 | filecheck %s --check-prefix=SHARE

// UNITS: error: auto-shard: memory-budget 'lots' is not a size; write bytes, optionally with a unit: 512MiB, 2GB, 1e9
// TIME: error: auto-shard: time-limit must be positive (seconds)
// SHARE: option 'share-layers' of pass 'auto-shard' expects one of auto, true, false, got 'maybe'

// CHECK: error: auto-shard needs exactly one sdy.mesh with axes to shard over; the module has none
func.func @no_mesh(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

sdy.mesh @a = <["x"=8]>
sdy.mesh @b = <["y"=8]>
// CHECK: error: auto-shard needs exactly one sdy.mesh with axes to shard over; the module has @a, @b
func.func @two_meshes(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

sdy.mesh @mesh = <["x"=8]>
// CHECK: error: auto-shard needs a function @main (or exactly one public function) to shard; the module has 2 functions and none is @main
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}
func.func @g(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}
