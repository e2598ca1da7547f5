#!/usr/bin/env bash
# Builds the Python SDK's wheel into OUT_DIR, with the WIT package it builds
# against inside, from a staged copy (setuptools writes build/ and
# *.egg-info beside its sources). pip fetches setuptools from the index
# (PyPI) into an isolated build environment, once per pip cache.
#
#   guests/python/sdk/package.sh OUT_DIR [PYTHON]
set -euo pipefail

[ $# -ge 1 ] && [ $# -le 2 ] || { printf 'usage: %s OUT_DIR [PYTHON]\n' "$0" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
python=${2:-python3}
mkdir -p "$1"
out=$(cd "$1" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -L "$here/pyproject.toml" "$here/README.md" "$stage/"
cp -rL "$here/capwasm_provider" "$stage/"
rm -rf "$stage/capwasm_provider/__pycache__"
cp -rL "$root/wit/provider" "$stage/capwasm_provider/wit"
"$python" -m pip wheel --quiet --disable-pip-version-check --no-deps \
  --wheel-dir "$out" "$stage" >&2
ls "$out"/capwasm_provider_sdk-*.whl
