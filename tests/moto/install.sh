#!/usr/bin/env bash
# Installs moto's server (the AWS emulator the EC2 tests run against) from
# PyPI into a virtualenv in a cache outside the clone, once, and prints the
# directory holding `moto_server` on stdout; progress and errors go to stderr.
set -euo pipefail

version=5.2.5
cache_root=${CAPWASM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capwasm}
dir="$cache_root/moto-$version"

fail() { printf 'moto: %s\n' "$*" >&2; exit 1; }

if [ -x "$dir/bin/moto_server" ]; then
  printf '%s\n' "$dir/bin"
  exit 0
fi
mkdir -p "$cache_root"
exec 9>"$cache_root/.moto-install.lock"
flock 9
if [ -x "$dir/bin/moto_server" ]; then
  printf '%s\n' "$dir/bin"
  exit 0
fi
python=$(command -v python3 || true)
[ -n "$python" ] || fail "python3 is not installed: it is needed to run moto $version. Install Python >= 3.9 and retry."
"$python" -m venv --help >/dev/null 2>&1 ||
  fail "python3 has no venv module: install it (Debian: python3-venv) and retry."

started=$(date +%s)
printf 'moto: installing moto[server] %s into %s (first time only)\n' "$version" "$dir" >&2
# The virtualenv is made where it will live (its scripts name their
# interpreter by path); a half-made one has no moto_server and is made again.
rm -rf "$dir"
"$python" -m venv "$dir" >&2 || fail "could not create a virtualenv in $dir"
"$dir/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$version" >&2 || {
  rm -rf "$dir"
  fail "pip could not install moto[server]==$version (see above)"
}
[ -x "$dir/bin/moto_server" ] || { rm -rf "$dir"; fail "moto_server is missing after the install"; }
printf 'moto: installed in %ss\n' "$(($(date +%s) - started))" >&2
printf '%s\n' "$dir/bin"
