#!/usr/bin/env bash
# Installs npm packages into a prefix in a cache outside the clone, once,
# and prints the prefix on stdout; progress and errors go to stderr.
#
#   tests/npm-tool/install.sh NAME VERSION CHECK PACKAGE@VERSION...
#
# The prefix is ~/.cache/capwasm/NAME-VERSION/; CHECK is a path in it that
# exists once the install is complete (such as node_modules/.bin/esbuild).
set -euo pipefail

[ $# -ge 4 ] || { printf 'usage: %s NAME VERSION CHECK PACKAGE@VERSION...\n' "$0" >&2; exit 2; }
name=$1
version=$2
check=$3
shift 3
# shellcheck source=../tool-cache.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tool-cache.sh"
dir="$cache_root/$name-$version"
reuse_or_lock "$dir/$check" "$dir"
command -v npm >/dev/null 2>&1 ||
  fail "npm is not installed: it is needed for $name $version. Install Node.js >= 20 with npm and retry."

started=$(date +%s)
printf '%s: installing %s into %s (first time only)\n' "$name" "$*" "$dir" >&2
rm -rf "$dir"
mkdir -p "$dir"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$@" >&2 || {
  rm -rf "$dir"
  fail "npm could not install $* (see above)"
}
[ -e "$dir/$check" ] || { rm -rf "$dir"; fail "$check is missing after the install"; }
printf '%s: installed in %ss\n' "$name" "$(($(date +%s) - started))" >&2
printf '%s\n' "$dir"
