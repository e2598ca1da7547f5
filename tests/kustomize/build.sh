#!/usr/bin/env bash
# Builds kustomize from its pinned Go module (no prebuilt downloads), once,
# into a cache outside the clone, and prints the directory holding it on
# stdout; progress and errors go to stderr. The deploy/ tests render the
# kustomizations with it, as `kubectl apply -k` does.
set -euo pipefail

version=v5.8.1
cache_root=${CAPWASM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capwasm}
dir="$cache_root/kustomize-$version"

fail() { printf 'kustomize: %s\n' "$*" >&2; exit 1; }

if [ -x "$dir/kustomize" ]; then
  printf '%s\n' "$dir"
  exit 0
fi
mkdir -p "$cache_root"
exec 9>"$cache_root/.kustomize-build.lock"
flock 9
if [ -x "$dir/kustomize" ]; then
  printf '%s\n' "$dir"
  exit 0
fi
command -v go >/dev/null 2>&1 ||
  fail "Go is not installed: it is needed once to build kustomize $version from its module. Install Go >= 1.24 and retry."

# Only the module proxy: a too-new go line fails fast instead of fetching a toolchain.
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOPROXY=${GOPROXY:-https://proxy.golang.org}
[ "$GOPROXY" = "https://proxy.golang.org,direct" ] && export GOPROXY=https://proxy.golang.org

staging=$(mktemp -d "$cache_root/.building-kustomize-XXXXXX")
trap 'rm -rf "$staging"' EXIT
started=$(date +%s)
printf 'kustomize: building %s from its Go module into %s (first time only)\n' "$version" "$dir" >&2
GOBIN="$staging" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@$version" >&2 ||
  fail "building kustomize $version failed (see above)"
printf 'kustomize: built in %ss\n' "$(($(date +%s) - started))" >&2
rm -rf "$dir"
mv "$staging" "$dir"
trap - EXIT
printf '%s\n' "$dir"
