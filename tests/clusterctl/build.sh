#!/usr/bin/env bash
# Builds upstream's clusterctl from its pinned Go module (no prebuilt
# downloads), the same Cluster API release the tests run (v1.14.2), once,
# into a cache outside the clone, and prints the directory holding it on
# stdout. Progress and errors go to stderr. Beside it, what `clusterctl
# init` reads besides capwasm's own release, from Go modules too:
#
#   repository/cluster-api/v1.14.2/   the core provider's core-components.yaml
#       as upstream's release makes it (kustomize build core/config/default,
#       the image set to the release's) and its metadata.yaml
#   cert-manager-crds/                cert-manager's CRDs, of the version this
#       clusterctl installs (v1.21.1)
#
#   tests/clusterctl/build.sh            build if missing, print the directory
#   tests/clusterctl/build.sh --verbose  the same, then print its version
#
# As in tests/upstream-capi/build.sh: the release's root go.mod replaces
# sigs.k8s.io/cluster-api/api with ./api, a separate module its zip does not
# hold, so the module is copied out of the module cache and the replace
# pointed at the api module of the same version there. The version is linked
# in as upstream's release build does, so `clusterctl version` names it.
set -euo pipefail

version=v1.14.2
cert_manager_version=v1.21.1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${CAPWASM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capwasm}
script_hash=$(sha256sum "$here/build.sh" | cut -c1-12)
dir="$cache_root/clusterctl-$version-$script_hash"

fail() { printf 'clusterctl: %s\n' "$*" >&2; exit 1; }

report() {
  printf '%s\n' "$dir"
  if [ "${1:-}" = "--verbose" ]; then
    printf 'clusterctl: %s (%s)\n' "$("$dir/clusterctl" version -o short 2>/dev/null)" "$dir/clusterctl" >&2
  fi
}

built() { [ -x "$dir/clusterctl" ] && [ -s "$dir/repository/cluster-api/$version/core-components.yaml" ] && [ -d "$dir/cert-manager-crds" ]; }
built && { report "${1:-}"; exit 0; }

mkdir -p "$cache_root"
# One build at a time per cache: parallel test binaries wait for the first.
exec 9>"$cache_root/.clusterctl-build.lock"
flock 9
built && { report "${1:-}"; exit 0; }

command -v go >/dev/null 2>&1 ||
  fail "Go is not installed: it is needed once to build clusterctl $version from its module. Install Go >= 1.24 and retry."

staging=$(mktemp -d "$cache_root/.building-clusterctl-XXXXXX")
log="$cache_root/clusterctl-build.log"
trap 'chmod -R u+w "$staging" 2>/dev/null; rm -rf "$staging"' EXIT
: >"$log"

# shellcheck source=../go-module.sh
. "$here/../go-module.sh"

started=$(date +%s)
printf 'clusterctl: building clusterctl %s from its Go module into %s (first time only; log: %s)\n' \
  "$version" "$dir" "$log" >&2
root=$(module_dir "sigs.k8s.io/cluster-api@$version") || true
api=$(module_dir "sigs.k8s.io/cluster-api/api@$version") || true
cert_manager=$(module_dir "github.com/cert-manager/cert-manager@$cert_manager_version") || true
[ -n "$root" ] && [ -n "$api" ] && [ -n "$cert_manager" ] ||
  fail "cannot download sigs.k8s.io/cluster-api@$version, its api module and github.com/cert-manager/cert-manager@$cert_manager_version from $GOPROXY"
cp -r "$root" "$staging/src"
chmod -R u+w "$staging/src"
major=${version#v}
minor=${major#*.}
minor=${minor%%.*}
major=${major%%.*}
pkg=sigs.k8s.io/cluster-api/version
ldflags="-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
(
  cd "$staging/src"
  go mod edit -replace "sigs.k8s.io/cluster-api/api=$api"
  go build -trimpath -ldflags "$ldflags" -o "$staging/clusterctl" ./cmd/clusterctl
) >>"$log" 2>&1 ||
  { tail -n 30 "$log" >&2; fail "building clusterctl $version failed (full log: $log)"; }
core="$staging/repository/cluster-api/$version"
mkdir -p "$core"
kustomize="$("$here/../kustomize/build.sh")/kustomize"
"$kustomize" build "$staging/src/core/config/default" |
  sed "s|image: gcr.io/k8s-staging-cluster-api/cluster-api-controller:main|image: registry.k8s.io/cluster-api/cluster-api-controller:$version|" \
    >"$core/core-components.yaml" ||
  fail "kustomize build of Cluster API $version's core/config/default failed"
grep -q "image: registry.k8s.io/cluster-api/cluster-api-controller:$version" "$core/core-components.yaml" ||
  fail "Cluster API $version's core/config/default no longer names the image this script replaces"
cp "$staging/src/metadata.yaml" "$core/metadata.yaml"
cp -r "$cert_manager/deploy/crds" "$staging/cert-manager-crds"
chmod -R u+w "$staging/src" "$staging/cert-manager-crds" "$staging/repository"
rm -rf "$staging/src" "$staging/cert-manager-crds/README.md"
printf 'clusterctl: built in %ss\n' "$(($(date +%s) - started))" >&2

rm -rf "$dir"
mv "$staging" "$dir"
trap - EXIT
report "${1:-}"
