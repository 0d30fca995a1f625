#!/usr/bin/env bash
# The whole check, as CI runs it: lint, format, types, pytest, lit.
# Usage: tools/run_tests.sh [extra pytest args, e.g. --fuzz-long]
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
python=${PYTHON:-$top/.venv/bin/python}
bin=$(dirname "$python")
export PATH="$bin:$PATH"
status=0
step() {
  echo "==> $*"
  "$@" || { echo "FAILED: $*"; status=1; }
}
lint_paths=(meshjit compiler dialects frontend passes test bench tools setup.py)
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
