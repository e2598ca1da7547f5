#!/usr/bin/env bash
# Packs the TypeScript SDK into OUT_DIR as an npm tarball
# (capwasm-provider-sdk-VERSION.tgz), printing its path: the SDK's modules,
# the WIT package capwasm:provider@0.1.2 and each world's declarations as
# jco 1.35.0 writes them (tools from tests/npm-tool/install.sh, as
# guests/js/build.sh uses them).
#
#   guests/js/sdk/pack.sh OUT_DIR
set -euo pipefail

[ $# -eq 1 ] || { printf 'usage: %s OUT_DIR\n' "$0" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
tools=$("$root/tests/npm-tool/install.sh" componentize-js 0.23.0 node_modules/.bin/tsc \
  @bytecodealliance/componentize-js@0.23.0 esbuild@0.28.2 @bytecodealliance/jco@1.35.0 typescript@7.0.2)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -L "$here"/*.ts "$here/package.json" "$here/README.md" "$stage/"
cp -rL "$root/wit/provider" "$stage/wit"
# jco reads WIT with the working directory preopened (see ../jco-preopen.mjs).
for world in bootstrap-provider infrastructure-provider; do
  (cd "$stage/wit" &&
    node --import "$here/../jco-preopen.mjs" "$tools/node_modules/.bin/jco" guest-types . \
      -n "$world" -o "$stage/types/$world" -q >&2)
done
(cd "$stage" && npm pack --silent --pack-destination "$out" >/dev/null)
version=$(node -p 'require(process.argv[1]).version' "$here/package.json")
printf '%s\n' "$out/capwasm-provider-sdk-$version.tgz"
