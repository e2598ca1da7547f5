#!/usr/bin/env bash
# Builds upstream Cluster API's core manager from its pinned Go module (no
# prebuilt downloads), once, into a cache outside the clone, beside its CRDs,
# and prints the directory holding them on stdout. Progress and errors go to
# stderr.
#
#   tests/upstream-capi/build.sh            build if missing, print the directory
#   tests/upstream-capi/build.sh --verbose  the same, then print the version
#
# The release's root go.mod replaces sigs.k8s.io/cluster-api/api with ./api,
# a separate module its zip does not hold, so `go install ...@version` refuses
# it. The module is copied out of the module cache and the replace pointed at
# the api module of the same version there; the manager's main package is
# core/ in this release.
set -euo pipefail

version=v1.14.2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${CAPWASM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capwasm}
script_hash=$(sha256sum "$here/build.sh" | cut -c1-12)
dir="$cache_root/cluster-api-$version-$script_hash"

fail() { printf 'upstream-capi: %s\n' "$*" >&2; exit 1; }

report() {
  printf '%s\n' "$dir"
  if [ "${1:-}" = "--verbose" ]; then
    printf 'upstream-capi: cluster-api %s manager (%s), %s CRDs\n' "$version" "$dir/manager" \
      "$(find "$dir/crds" -name '*.yaml' | wc -l)" >&2
  fi
}

if [ -x "$dir/manager" ] && [ -d "$dir/crds" ] && [ -s "$dir/webhooks.yaml" ]; then
  report "${1:-}"
  exit 0
fi

mkdir -p "$cache_root"
# One build at a time per cache: parallel test binaries wait for the first.
exec 9>"$cache_root/.cluster-api-build.lock"
flock 9
if [ -x "$dir/manager" ] && [ -d "$dir/crds" ] && [ -s "$dir/webhooks.yaml" ]; then
  report "${1:-}"
  exit 0
fi

command -v go >/dev/null 2>&1 ||
  fail "Go is not installed: it is needed once to build Cluster API $version's manager from its module. Install Go >= 1.24 and retry."

staging=$(mktemp -d "$cache_root/.building-cluster-api-XXXXXX")
log="$cache_root/cluster-api-build.log"
trap 'chmod -R u+w "$staging" 2>/dev/null; rm -rf "$staging"' EXIT
: >"$log"

# shellcheck source=../go-module.sh
. "$here/../go-module.sh"

started=$(date +%s)
printf 'upstream-capi: building Cluster API %s core manager from its Go module into %s (first time only; log: %s)\n' \
  "$version" "$dir" "$log" >&2
root=$(module_dir "sigs.k8s.io/cluster-api@$version") || true
api=$(module_dir "sigs.k8s.io/cluster-api/api@$version") || true
[ -n "$root" ] && [ -n "$api" ] ||
  fail "cannot download sigs.k8s.io/cluster-api@$version and its api module from $GOPROXY"
cp -r "$root" "$staging/src"
chmod -R u+w "$staging/src"
(
  cd "$staging/src"
  go mod edit -replace "sigs.k8s.io/cluster-api/api=$api"
  go build -trimpath -ldflags "-s -w" -o "$staging/manager" ./core
) >>"$log" 2>&1 ||
  { tail -n 30 "$log" >&2; fail "building Cluster API $version's manager failed (full log: $log)"; }
cp -r "$staging/src/core/config/crd/bases" "$staging/crds"
# Its generated admission webhook configurations, which a clusterctl install
# applies with the CRDs.
cp "$staging/src/core/config/webhook/manifests.yaml" "$staging/webhooks.yaml"
chmod -R u+w "$staging/src"
rm -rf "$staging/src"
printf 'upstream-capi: built in %ss\n' "$(($(date +%s) - started))" >&2

rm -rf "$dir"
mv "$staging" "$dir"
trap - EXIT
report "${1:-}"
