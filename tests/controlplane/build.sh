#!/usr/bin/env bash
# Builds kube-apiserver and etcd from their pinned Go modules (no prebuilt
# downloads), once, into a cache outside the clone, and prints the directory
# holding them on stdout. Progress and errors go to stderr.
#
#   tests/controlplane/build.sh            build if missing, print the directory
#   tests/controlplane/build.sh --verbose  the same, then print the versions
#
# The cache key is the pinned versions plus a hash of every file that decides
# what gets built (go.mod, go.sum, the wrapper mains), so changing a pin or a
# wrapper builds a new pair beside the old one.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${CAPWASM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capwasm}/controlplane

fail() { printf 'controlplane: %s\n' "$*" >&2; exit 1; }

module_version() { # module dir, module path
  sed -nE "s#^[[:space:]]*(require[[:space:]]+)?$2[[:space:]]+(v[^[:space:]]+).*#\2#p" "$here/$1/go.mod" | head -n1
}
k8s_version=$(module_version kube-apiserver k8s.io/kubernetes)
etcd_version=$(module_version etcd go.etcd.io/etcd/server/v3)
[ -n "$k8s_version" ] && [ -n "$etcd_version" ] || fail "cannot read the pinned versions from the go.mod files under $here"

inputs_hash=$(cd "$here" && find . -name 'go.mod' -o -name 'go.sum' -o -name '*.go' | LC_ALL=C sort |
  xargs sha256sum | sha256sum | cut -c1-12)
dir="$cache_root/k8s-$k8s_version-etcd-$etcd_version-$inputs_hash"

report() {
  printf '%s\n' "$dir"
  if [ "${1:-}" = "--verbose" ]; then
    printf 'controlplane: kube-apiserver %s (%s)\n' "$("$dir/kube-apiserver" --version 2>&1 | awk '{print $2}')" "$dir/kube-apiserver" >&2
    printf 'controlplane: etcd %s (%s)\n' "$("$dir/etcd" --version 2>&1 | awk '/etcd Version/{print $3}')" "$dir/etcd" >&2
  fi
}

if [ -x "$dir/kube-apiserver" ] && [ -x "$dir/etcd" ]; then
  report "${1:-}"
  exit 0
fi

mkdir -p "$cache_root"
# One build at a time per cache: parallel test binaries wait for the first.
exec 9>"$cache_root/.build.lock"
flock 9
if [ -x "$dir/kube-apiserver" ] && [ -x "$dir/etcd" ]; then
  report "${1:-}"
  exit 0
fi

command -v go >/dev/null 2>&1 ||
  fail "Go is not installed: it is needed once to build kube-apiserver $k8s_version and etcd $etcd_version from their modules. Install Go >= 1.26 and retry."
go_version=$(go env GOVERSION)
case "$go_version" in
  go1.2[6-9]* | go1.[3-9][0-9]*) ;;
  *) fail "Go $go_version is too old: kube-apiserver $k8s_version needs Go >= 1.26." ;;
esac

staging=$(mktemp -d "$cache_root/.building-XXXXXX")
log="$cache_root/build.log"
trap 'rm -rf "$staging"' EXIT
: >"$log"

# Only the module proxy: a too-new go line fails fast instead of fetching a toolchain.
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0
export GOPROXY=${GOPROXY:-https://proxy.golang.org}
[ "$GOPROXY" = "https://proxy.golang.org,direct" ] && export GOPROXY=https://proxy.golang.org

# shellcheck source=stamp.sh
. "$here/stamp.sh"
stamp=$(k8s_stamp "$k8s_version")

started=$(date +%s)
printf 'controlplane: building etcd %s and kube-apiserver %s from Go modules into %s (first time only; log: %s)\n' \
  "$etcd_version" "$k8s_version" "$dir" "$log" >&2
(cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$staging/etcd" .) >>"$log" 2>&1 ||
  { tail -n 30 "$log" >&2; fail "building etcd $etcd_version failed (full log: $log)"; }
printf 'controlplane: etcd built in %ss\n' "$(($(date +%s) - started))" >&2
(cd "$here/kube-apiserver" && go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "-s -w$stamp" \
  -o "$staging/kube-apiserver" .) >>"$log" 2>&1 ||
  { tail -n 30 "$log" >&2; fail "building kube-apiserver $k8s_version failed (full log: $log)"; }
printf 'controlplane: both built in %ss\n' "$(($(date +%s) - started))" >&2

rm -rf "$dir"
mv "$staging" "$dir"
trap - EXIT
report "${1:-}"
