#!/usr/bin/env bash
# mypy --strict on the meshjit package. The four component folders are mapped
# into `meshjit` by pyproject.toml; mypy cannot follow setuptools' editable
# finder, so this lays the same package out with symlinks in a temp folder.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$top/.venv/bin/python}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/meshjit"
for f in "$top"/meshjit/*; do ln -s "$f" "$stage/meshjit/"; done
for d in compiler dialects frontend htmlreport passes; do ln -s "$top/$d" "$stage/meshjit/$d"; done
cd "$stage"
"$python" -m mypy --config-file "$top/pyproject.toml" --cache-dir "$top/.mypy_cache" -p meshjit
