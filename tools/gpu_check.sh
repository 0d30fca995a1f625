#!/usr/bin/env bash
# The GPU checks of one run on a machine with a GPU and jax's CUDA plugin
# already installed (no package index needed if pytest, lit, filecheck and
# hypothesis are there too; pure-Python wheels of lit and filecheck can be
# carried and installed with `pip install --no-index --target DIR` first),
# cheapest and most wanted first, so that a run cut short still says most:
#   1. the per-call rows on one GPU against jax.jit (python -m bench.dispatch),
#      with two-matmul MLP steps of 4096 and 8192;
#   2. the demo on a 1x1 mesh on the GPU;
#   3. the suite on the GPU's devices (tests that need 8 devices are skipped,
#      each saying so): tools/run_tests.sh --jax-installed with JAX_PLATFORMS=cuda;
#      then on 8 virtual CPU devices with the machine's jax (JAX_PLATFORMS=cpu),
#      which checks that jax release where CI does not run;
#   4. the bench's workloads on one GPU against jax.jit, written to
#      ${OUT:-bench}/results_gpu.md.
# The lent machines have no package index: carry lit and filecheck as wheels
# (`pip download --no-deps lit filecheck` into an ignored folder such as .whl/,
# then `python3 -m pip install --no-index --no-deps .whl/*.whl` there first).
# Usage: tools/gpu_check.sh [PYTHON]   (default python3)
set -uo pipefail
cd "$(dirname "$0")/.."
python=${1:-${PYTHON:-python3}}
out=${OUT:-bench}
export JAX_PLATFORMS=${JAX_PLATFORMS:-cuda} XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
status=0
"$python" -c "import jax; print('devices:', jax.devices())" || exit 1
"$python" -m pip install -q --no-deps --no-build-isolation -e . || exit 1
echo "==> per-call overhead"
MESHJIT_NATIVE=0 "$python" -m bench.dispatch --one-device --mlp 4096 --mlp 8192 |
  tee "$out/dispatch_gpu.txt" || status=1
echo "==> demo"
MESHJIT_NATIVE=0 "$python" -m meshjit.demo || status=1
echo "==> suite (one device)"
# pytest-benchmark, where installed, turns its own warning into an error under -W error
"$python" -c "import pytest_benchmark" 2>/dev/null && plugins=(-p no:benchmark) || plugins=()
# pytest-xdist, where installed, runs the suite in workers: on a 16-core lent
# machine the whole suite on 8 virtual CPU devices took 50-60 s with 14
# workers (2026-11-26), the GPU suite about 40 s with 8
workers() { "$python" -c "import xdist" 2>/dev/null && echo "-n $1"; }
# shellcheck disable=SC2046
MESHJIT_TEST_DEVICES=1 PYTHON=$python tools/run_tests.sh --jax-installed -rf "${plugins[@]}" $(workers 8) || status=1
echo "==> suite (8 CPU devices, this machine's jax)"
# shellcheck disable=SC2046
JAX_PLATFORMS=cpu PYTHON=$python tools/run_tests.sh --jax-installed -rf "${plugins[@]}" $(workers 14) || status=1
echo "==> bench --one-device"
MESHJIT_NATIVE=0 "$python" -m bench --one-device --no-scaling --no-dispatch --out "$out/results_gpu.md" || status=1
exit "$status"
