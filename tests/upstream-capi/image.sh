#!/usr/bin/env bash
# Packs the core manager tests/upstream-capi/build.sh builds (a static Go
# binary) as an OCI image with image/pack.sh, the packer of capwasm's own
# image, and writes an OCI archive of it beside the layout; prints the
# layout directory (holding `digest`) on stdout. Progress goes to stderr.
#
#   tests/upstream-capi/image.sh
#
# Reused while the manager, this script and pack.sh are unchanged: the
# layout is named by their checksum.
set -euo pipefail

version=v1.14.2
name="localhost/capwasm-tests/cluster-api-controller:$version"
# Upstream's manager Deployment runs as 65532.
user_id=65532
# Nothing in the image has a date of its own; a fixed one keeps the digest
# the same from run to run.
epoch=0
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache_root=${CAPWASM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capwasm}

build=$("$here/build.sh")
manager="$build/manager"
[ -x "$manager" ] || { printf 'upstream-capi: no manager in %s\n' "$build" >&2; exit 1; }
sum=$(cat "$manager" "$here/image.sh" "$repo/image/pack.sh" | sha256sum | cut -c1-16)
out="$cache_root/image/cluster-api-$version-$sum"

if [ -s "$out/digest" ] && [ -s "$out.tar" ]; then
  printf '%s\n' "$out"
  exit 0
fi
mkdir -p "$cache_root/image"
exec 9>"$cache_root/.cluster-api-image.lock"
flock 9
if [ -s "$out/digest" ] && [ -s "$out.tar" ]; then
  printf '%s\n' "$out"
  exit 0
fi

rootfs=$(mktemp -d)
layout=$(mktemp -d -p "$cache_root/image")
trap 'rm -rf "$rootfs" "$layout" "$layout.tar"' EXIT
chmod 0755 "$rootfs"
install -m 0755 "$manager" "$rootfs/manager"
# controller-runtime's default webhook certificate directory is under /tmp.
install -d -m 1777 "$rootfs/tmp"
"$repo/image/pack.sh" "$rootfs" "$layout" "$name" /manager "$user_id" "$epoch" \
  '"org.opencontainers.image.title":"cluster-api-controller","org.opencontainers.image.version":"'"$version"'"'
chmod 0755 "$layout"
tar --create --file "$layout.tar" --directory "$layout" --sort=name --owner=0 --group=0 --numeric-owner \
  --mtime="@$epoch" oci-layout index.json blobs
# Images of an earlier manager are not used again.
rm -rf "$cache_root/image/cluster-api-$version-"*
mv "$layout.tar" "$out.tar"
mv "$layout" "$out"
trap 'rm -rf "$rootfs"' EXIT
printf 'upstream-capi: %s@%s in %s\n' "$name" "$(cat "$out/digest")" "$out" >&2
printf '%s\n' "$out"
