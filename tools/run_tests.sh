#!/usr/bin/env bash
# The whole check, as CI runs it: lint, format, types, pytest, lit.
# Usage: tools/run_tests.sh [extra pytest args, e.g. --fuzz-long]
#
#        tools/run_tests.sh --jax-installed [extra pytest args]
#   The suite against the jax that an interpreter already has (PYTHON, default
#   python3): installs meshjit into that interpreter's environment with
#   `pip install --no-deps --no-build-isolation -e .` (jax and jaxlib are kept
#   as they are; without setuptools there, with build isolation) and the test
#   tools it lacks (pytest, lit, filecheck,
#   hypothesis; with no package index they must be there already), then runs
#   pytest and lit on the Python source. For machines that cannot reach a
#   package index and for other jax versions (meshjit supports >=0.10.2,<0.13).
#   MESHJIT_TEST_DEVICES=N runs the suite on N virtual CPU devices (default
#   8); tests that need more are skipped, each saying so. With
#   JAX_PLATFORMS=cuda (or rocm) set, the tests run on that platform's devices.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
status=0
step() {
  echo "==> $*"
  "$@" || { echo "FAILED: $*"; status=1; }
}

if [[ "${1:-}" == "--jax-installed" ]]; then
  shift
  python=${PYTHON:-python3}
  if ! "$python" -c "import jax, jaxlib" 2>/dev/null; then
    echo "tools/run_tests.sh --jax-installed: $python has no jax; install jax and jaxlib (>=0.10.2,<0.13) first, or set PYTHON"
    exit 2
  fi
  "$python" -c "import jax, jaxlib, sys; print(f'==> {sys.executable}: Python {sys.version.split()[0]}, jax {jax.__version__}, jaxlib {jaxlib.__version__}')"
  # Offline the build tools must be there already (--no-build-isolation);
  # without setuptools pip fetches them into an isolated build environment.
  isolation=--no-build-isolation
  "$python" -c "import setuptools, wheel" 2>/dev/null || isolation=
  "$python" -m pip install --no-deps $isolation -e . || {
    echo "FAILED: pip install --no-deps $isolation -e . (offline, $python's environment needs setuptools>=68 and wheel)"
    exit 1
  }
  missing=()
  for tool in pytest lit filecheck hypothesis; do
    "$python" -c "import $tool" 2>/dev/null || missing+=("$tool")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    "$python" -m pip install "${missing[@]}" || {
      echo "FAILED: the test tools ${missing[*]} are missing and could not be installed"
      exit 1
    }
  fi
  bin=$(dirname "$("$python" -c 'import sys; print(sys.executable)')")
  export PATH="$bin:$PATH"
  export MESHJIT_NATIVE=0
  step "$python" -m pytest test/py "$@"
  step "$python" -c "import sys; from lit.main import main; sys.argv[0] = 'lit'; main()" -sv test/lit
  [ "$status" -ne 0 ] && echo "tools/run_tests.sh: some checks failed"
  exit "$status"
fi

python=${PYTHON:-$top/.venv/bin/python}
bin=$(dirname "$python")
export PATH="$bin:$PATH"
lint_paths=(meshjit compiler dialects frontend htmlreport passes test bench tools setup.py)
step "$python" -m ruff check "${lint_paths[@]}"
step "$python" -m ruff format --check "${lint_paths[@]}"
step tools/typecheck.sh
# With a fresh compiled build (meshjit-native build) the suite runs on the
# compiled modules, then once more on the Python source; without one, once.
native=$("$bin/meshjit-native" status)
echo "==> compiled modules: $native"
step "$python" -m pytest test/py "$@"
step "$bin/lit" -sv test/lit
if [[ "$native" == on:* ]]; then
  MESHJIT_NATIVE=0 step "$python" -m pytest test/py "$@"
  MESHJIT_NATIVE=0 step "$bin/lit" -sv test/lit
fi
if [ "$status" -ne 0 ]; then
  echo "tools/run_tests.sh: some checks failed"
fi
exit "$status"
