#!/usr/bin/env bash
# The GPU checks of one run on a machine with a GPU and jax's CUDA plugin
# already installed (no package index needed if pytest, lit, filecheck and
# hypothesis are there too):
#   1. the suite on the GPU's devices (tests that need 8 devices are skipped,
#      each saying so): tools/run_tests.sh --jax-installed with JAX_PLATFORMS=cuda;
#   2. the demo on a 1x1 mesh on the GPU;
#   3. the bench's workloads on one GPU against jax.jit, written to
#      ${OUT:-bench}/results_gpu.md.
# Usage: tools/gpu_check.sh [PYTHON]   (default python3)
set -uo pipefail
cd "$(dirname "$0")/.."
python=${1:-${PYTHON:-python3}}
out=${OUT:-bench}
export JAX_PLATFORMS=${JAX_PLATFORMS:-cuda}
status=0
"$python" -c "import jax; print('devices:', jax.devices())" || exit 1
PYTHON=$python tools/run_tests.sh --jax-installed -rs || status=1
echo "==> demo"
MESHJIT_NATIVE=0 "$python" -m meshjit.demo || status=1
echo "==> bench --one-device"
MESHJIT_NATIVE=0 "$python" -m bench --one-device --no-scaling --out "$out/results_gpu.md" || status=1
exit "$status"
