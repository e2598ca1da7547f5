#!/usr/bin/env bash
# Builds a Go program from its pinned module (no prebuilt downloads), once,
# into a cache outside the clone, and prints the directory holding it on
# stdout; progress and errors go to stderr.
#
#   tests/go-tool/build.sh NAME PACKAGE@VERSION
#
# The binary is NAME in ~/.cache/capwasm/NAME-VERSION/. GO_BUILD_TAGS, when
# set, is passed to `go install -tags`.
set -euo pipefail

[ $# -eq 2 ] || { printf 'usage: %s NAME PACKAGE@VERSION\n' "$0" >&2; exit 2; }
name=$1
package=$2
version=${package##*@}
# shellcheck source=../tool-cache.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tool-cache.sh"
dir="$cache_root/$name-$version"
reuse_or_lock "$dir/$name" "$dir"
command -v go >/dev/null 2>&1 ||
  fail "Go is not installed: it is needed once to build $name $version from its module. Install Go >= 1.25 and retry."

# Only the module proxy: a too-new go line fails fast instead of fetching a toolchain.
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOPROXY=${GOPROXY:-https://proxy.golang.org}
[ "$GOPROXY" = "https://proxy.golang.org,direct" ] && export GOPROXY=https://proxy.golang.org

staging=$(mktemp -d "$cache_root/.building-$name-XXXXXX")
trap 'rm -rf "$staging"' EXIT
started=$(date +%s)
printf '%s: building %s from its Go module into %s (first time only)\n' "$name" "$package" "$dir" >&2
GOBIN="$staging" go install -trimpath -ldflags "-s -w" ${GO_BUILD_TAGS:+-tags "$GO_BUILD_TAGS"} "$package" >&2 ||
  fail "building $package failed (see above)"
[ -x "$staging/$name" ] || fail "$package did not install a program named $name"
printf '%s: built in %ss\n' "$name" "$(($(date +%s) - started))" >&2
rm -rf "$dir"
mv "$staging" "$dir"
trap - EXIT
printf '%s\n' "$dir"
