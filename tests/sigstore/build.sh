#!/usr/bin/env bash
# Builds a private Sigstore for keyless signing in the tests, from pinned Go
# modules (no prebuilt downloads), once, into a cache outside the clone, and
# prints the directory holding it on stdout; progress and errors go to
# stderr:
#
#   fulcio             Fulcio (github.com/sigstore/fulcio), the certificate
#                      authority for OIDC identities (run with an ephemeral CA)
#   timestamp-server   the RFC 3161 timestamp authority
#                      (github.com/sigstore/timestamp-authority/v2)
#   rekor-server       Rekor v2, the transparency log
#                      (github.com/sigstore/rekor-tiles/v2), its POSIX
#                      backend: tiles and checkpoints in a local directory
#
# Fulcio and the timestamp authority are patched (fulcio-loopback.patch,
# tsa-loopback.patch beside this script) so that they listen on loopback
# only: upstream binds its metrics servers on all interfaces (Fulcio
# ":<--metrics-port>", the timestamp authority a hard-coded ":2112", and
# ":6060" for pprof). Rekor v2 needs no patch: its HTTP, gRPC and metrics
# servers bind --http-address and --grpc-address, 127.0.0.1 by default. So
# the modules are copied out of the module cache, patched, and built there
# with the pins of their own go.sum (-mod=readonly: upstream's go.sum is
# complete, so nothing is resolved anew).
#
# The directory is ~/.cache/capwasm/sigstore-<fulcio>-<tsa>-<rekor>-<hash of
# this script and the patches>, so changing a pin or a patch builds anew
# beside the old one.
#
# Cold (empty Go module and build caches) Fulcio and the timestamp
# authority took 4m17s on 2 cores that other builds were also using:
# timestamp-server 175s, the module downloads included, then fulcio 82s
# more. rekor-server alone, from an empty build cache with its modules
# downloaded, took 1m46s; after the other two (their build cache warm,
# ~15 modules of its own to download), 28s. With both caches warm (the same
# modules built before), all three take 12s; once built, it prints the
# directory at once.
set -euo pipefail

fulcio_version=v1.8.8
tsa_version=v2.1.3
rekor_version=v2.3.0
name=sigstore
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../tool-cache.sh
. "$here/../tool-cache.sh"
inputs_hash=$(cat "$here/build.sh" "$here/fulcio-loopback.patch" "$here/tsa-loopback.patch" | sha256sum | cut -c1-12)
dir="$cache_root/sigstore-$fulcio_version-$tsa_version-$rekor_version-$inputs_hash"
# All three are moved into place together, so one present means all are.
reuse_or_lock "$dir/fulcio" "$dir"

command -v go >/dev/null 2>&1 ||
  fail "Go is not installed: it is needed once to build Fulcio $fulcio_version, timestamp-authority $tsa_version and rekor-tiles $rekor_version from their modules. Install Go >= 1.26 and retry."
command -v patch >/dev/null 2>&1 ||
  fail "patch is not installed: it applies the loopback patches under $here"

staging=$(mktemp -d "$cache_root/.building-$name-XXXXXX")
log="$cache_root/$name-build.log"
trap 'chmod -R u+w "$staging" 2>/dev/null; rm -rf "$staging"' EXIT
: >"$log"

# shellcheck source=../go-module.sh
. "$here/../go-module.sh"

# build SOURCE-DIR PATCH OUTPUT PACKAGE: the module in SOURCE-DIR, copied
# and patched (unless PATCH is empty), its PACKAGE built as OUTPUT in the
# staging directory.
build() {
  local src="$staging/src-$3"
  cp -r "$1" "$src"
  chmod -R u+w "$src"
  if [ -n "$2" ]; then
    patch -d "$src" -p1 --forward --no-backup-if-mismatch <"$here/$2" >>"$log" 2>&1 ||
      { tail -n 20 "$log" >&2; fail "$2 no longer applies to $1"; }
  fi
  (cd "$src" && go build -mod=readonly -trimpath -ldflags "-s -w" -o "$staging/$3" "$4") >>"$log" 2>&1 ||
    { tail -n 30 "$log" >&2; fail "building $3 failed (full log: $log)"; }
  rm -rf "$src"
}

started=$(date +%s)
printf '%s: building Fulcio %s, timestamp-authority %s and rekor-tiles %s from their Go modules into %s (first time only; log: %s)\n' \
  "$name" "$fulcio_version" "$tsa_version" "$rekor_version" "$dir" "$log" >&2
fulcio_src=$(module_dir "github.com/sigstore/fulcio@$fulcio_version" 2>>"$log") || true
tsa_src=$(module_dir "github.com/sigstore/timestamp-authority/v2@$tsa_version" 2>>"$log") || true
rekor_src=$(module_dir "github.com/sigstore/rekor-tiles/v2@$rekor_version" 2>>"$log") || true
[ -n "$fulcio_src" ] && [ -n "$tsa_src" ] && [ -n "$rekor_src" ] ||
  { tail -n 20 "$log" >&2; fail "cannot download github.com/sigstore/fulcio@$fulcio_version, github.com/sigstore/timestamp-authority/v2@$tsa_version and github.com/sigstore/rekor-tiles/v2@$rekor_version from $GOPROXY"; }
build "$tsa_src" tsa-loopback.patch timestamp-server ./cmd/timestamp-server
printf '%s: timestamp-server built in %ss\n' "$name" "$(($(date +%s) - started))" >&2
build "$fulcio_src" fulcio-loopback.patch fulcio .
printf '%s: fulcio built in %ss\n' "$name" "$(($(date +%s) - started))" >&2
build "$rekor_src" "" rekor-server ./cmd/rekor-server/posix
printf '%s: all three built in %ss\n' "$name" "$(($(date +%s) - started))" >&2

rm -rf "$dir"
mv "$staging" "$dir"
trap - EXIT
printf '%s\n' "$dir"
