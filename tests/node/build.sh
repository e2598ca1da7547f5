#!/usr/bin/env bash
# Everything a one-node Kubernetes needs beside kube-apiserver and etcd
# (tests/controlplane/build.sh): containerd, runc, the CNI plugins and
# iptables from Debian's packages; kubelet, kube-controller-manager,
# kube-scheduler and kube-proxy built from the same pinned k8s.io/kubernetes
# module as kube-apiserver; and the pause image, built here since nothing can
# be pulled. Prints the directory holding them on stdout; progress and errors
# go to stderr. Built once into a cache outside the clone.
#
#   tests/node/build.sh            build if missing, print the directory
#   tests/node/build.sh --verbose  the same, then print the versions
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache_root=${CAPWASM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capwasm}/node
components="$here/components"

fail() { printf 'node: %s\n' "$*" >&2; exit 1; }

"$repo/tests/apt-install.sh" containerd runc containernetworking-plugins iptables

k8s_version=$(sed -nE 's#^[[:space:]]*k8s.io/kubernetes[[:space:]]+(v[^[:space:]]+).*#\1#p' "$components/go.mod" | head -n1)
[ -n "$k8s_version" ] || fail "cannot read the pinned k8s.io/kubernetes version from $components/go.mod"
inputs_hash=$(cd "$here" && find . "$repo/tests/controlplane/parentwatch" -name 'go.mod' -o -name 'go.sum' -o -name '*.go' |
  LC_ALL=C sort | xargs sha256sum | sed "s# $repo/# #" | sha256sum | cut -c1-12)
dir="$cache_root/k8s-$k8s_version-$inputs_hash"
programs=(kubelet kube-controller-manager kube-scheduler kube-proxy)

report() {
  printf '%s\n' "$dir"
  if [ "${1:-}" = "--verbose" ]; then
    local program
    for program in "${programs[@]}"; do
      printf 'node: %s %s\n' "$program" "$("$dir/$program" --version 2>&1 | awk '{print $2}')" >&2
    done
    printf 'node: %s, %s\n' "$(containerd --version | awk '{print "containerd " $3}')" "$(runc --version | head -n1)" >&2
  fi
}
built() {
  local program
  for program in "${programs[@]}"; do [ -x "$dir/$program" ] || return 1; done
  [ -s "$dir/pause.tar" ]
}

built && { report "${1:-}"; exit 0; }
mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
flock 9
built && { report "${1:-}"; exit 0; }

command -v go >/dev/null 2>&1 ||
  fail "Go is not installed: it is needed once to build the node's components $k8s_version from their module. Install Go >= 1.26 and retry."
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0
export GOPROXY=${GOPROXY:-https://proxy.golang.org}
[ "$GOPROXY" = "https://proxy.golang.org,direct" ] && export GOPROXY=https://proxy.golang.org
# shellcheck source=../controlplane/stamp.sh
. "$repo/tests/controlplane/stamp.sh"
stamp=$(k8s_stamp "$k8s_version")

staging=$(mktemp -d "$cache_root/.building-XXXXXX")
log="$cache_root/build.log"
trap 'rm -rf "$staging"' EXIT
: >"$log"
started=$(date +%s)
printf 'node: building %s %s from the Go module into %s (first time only; log: %s)\n' \
  "${programs[*]}" "$k8s_version" "$dir" "$log" >&2
for program in "${programs[@]}"; do
  (cd "$components" && go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "-s -w$stamp" \
    -o "$staging/$program" "./$program") >>"$log" 2>&1 ||
    { tail -n 30 "$log" >&2; fail "building $program $k8s_version failed (full log: $log)"; }
  printf 'node: %s built at %ss\n' "$program" "$(($(date +%s) - started))" >&2
done

# The pause image: one static program in a one-layer image.
rootfs="$staging/pause-rootfs"
mkdir -p "$rootfs"
chmod 0755 "$rootfs"
(cd "$components" && go build -trimpath -ldflags "-s -w" -o "$rootfs/pause" ./pause) >>"$log" 2>&1 ||
  { tail -n 30 "$log" >&2; fail "building the pause program failed (full log: $log)"; }
"$repo/image/pack.sh" "$rootfs" "$staging/pause" "registry.k8s.io/pause:capwasm" /pause 65535 0
tar --create --file "$staging/pause.tar" --directory "$staging/pause" oci-layout index.json blobs
rm -rf "$rootfs" "$staging/pause"

rm -rf "$dir"
mv "$staging" "$dir"
trap - EXIT
printf 'node: built in %ss\n' "$(($(date +%s) - started))" >&2
report "${1:-}"
