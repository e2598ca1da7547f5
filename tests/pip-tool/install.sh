#!/usr/bin/env bash
# Installs a Python tool from PyPI into a virtualenv in a cache outside the
# clone, once, and prints the directory holding its executable on stdout;
# progress and errors go to stderr.
#
#   tests/pip-tool/install.sh NAME VERSION REQUIREMENT EXECUTABLE
#
# The virtualenv is ~/.cache/capwasm/NAME-VERSION/; REQUIREMENT is what pip
# installs (such as `moto[server]==5.2.5`), EXECUTABLE what must exist after.
set -euo pipefail

[ $# -eq 4 ] || { printf 'usage: %s NAME VERSION REQUIREMENT EXECUTABLE\n' "$0" >&2; exit 2; }
name=$1
version=$2
requirement=$3
executable=$4
# shellcheck source=../tool-cache.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tool-cache.sh"
dir="$cache_root/$name-$version"
reuse_or_lock "$dir/bin/$executable" "$dir/bin"
python=$(command -v python3 || true)
[ -n "$python" ] || fail "python3 is not installed: it is needed for $name $version. Install Python >= 3.10 and retry."
"$python" -m venv --help >/dev/null 2>&1 ||
  fail "python3 has no venv module: install it (Debian: python3-venv) and retry."

started=$(date +%s)
printf '%s: installing %s into %s (first time only)\n' "$name" "$requirement" "$dir" >&2
# The virtualenv is made where it will live (its scripts name their
# interpreter by path); a half-made one lacks the executable and is made again.
rm -rf "$dir"
"$python" -m venv "$dir" >&2 || fail "could not create a virtualenv in $dir"
"$dir/bin/pip" install --quiet --disable-pip-version-check "$requirement" >&2 || {
  rm -rf "$dir"
  fail "pip could not install $requirement (see above)"
}
[ -x "$dir/bin/$executable" ] || { rm -rf "$dir"; fail "$executable is missing after the install"; }
printf '%s: installed in %ss\n' "$name" "$(($(date +%s) - started))" >&2
printf '%s\n' "$dir/bin"
