#!/usr/bin/env bash
# crane (go-containerregistry) serving the OCI 1.1 referrers API, built once
# from its pinned Go module with referrers.patch beside this script; prints
# its directory on stdout, progress and errors on stderr.
#
# `crane registry serve` has no switch for the referrers API its registry
# package implements, and that package lists a referrer's artifactType as its
# config's media type, where the distribution spec takes the manifest's own
# `artifactType` first (cosign v3's bundles set it, with an empty config). The
# patch adds `--referrers` and takes the artifactType as the spec says.
# Without the flag, the patched crane serves what the pinned one does.
#
# The directory is ~/.cache/capwasm/crane-referrers-<version>-<hash of this
# script and the patch>. Once the module is in the Go module cache (it is
# after tests/registry/build.sh) this builds in about 40s on 2 cores.
set -euo pipefail

version=v0.22.1
name=crane-referrers
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../tool-cache.sh
. "$here/../tool-cache.sh"
inputs_hash=$(cat "$here/build-referrers.sh" "$here/referrers.patch" | sha256sum | cut -c1-12)
dir="$cache_root/$name-$version-$inputs_hash"
reuse_or_lock "$dir/crane" "$dir"

command -v go >/dev/null 2>&1 ||
  fail "Go is not installed: it is needed once to build crane $version from its module. Install Go >= 1.25 and retry."
command -v patch >/dev/null 2>&1 ||
  fail "patch is not installed: it applies $here/referrers.patch"

staging=$(mktemp -d "$cache_root/.building-$name-XXXXXX")
log="$cache_root/$name-build.log"
trap 'chmod -R u+w "$staging" 2>/dev/null; rm -rf "$staging"' EXIT
: >"$log"

# shellcheck source=../go-module.sh
. "$here/../go-module.sh"

started=$(date +%s)
printf '%s: building crane %s with the referrers API into %s (first time only; log: %s)\n' "$name" "$version" "$dir" "$log" >&2
src=$(module_dir "github.com/google/go-containerregistry@$version" 2>>"$log") || true
[ -n "$src" ] || { tail -n 20 "$log" >&2; fail "cannot download github.com/google/go-containerregistry@$version from $GOPROXY"; }
cp -r "$src" "$staging/src"
chmod -R u+w "$staging/src"
patch -d "$staging/src" -p1 --forward --no-backup-if-mismatch <"$here/referrers.patch" >>"$log" 2>&1 ||
  { tail -n 20 "$log" >&2; fail "referrers.patch no longer applies to go-containerregistry $version"; }
(cd "$staging/src" && go build -mod=readonly -trimpath -ldflags "-s -w" -o "$staging/crane" ./cmd/crane) >>"$log" 2>&1 ||
  { tail -n 30 "$log" >&2; fail "building crane failed (full log: $log)"; }
rm -rf "$staging/src"
printf '%s: built in %ss\n' "$name" "$(($(date +%s) - started))" >&2

rm -rf "$dir"
mv "$staging" "$dir"
trap - EXIT
printf '%s\n' "$dir"
