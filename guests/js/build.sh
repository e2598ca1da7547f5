#!/usr/bin/env bash
# Builds the JavaScript providers into WebAssembly components: each
# provider's `app.js` is bundled with the SDK by esbuild (componentize-js
# takes one module), then componentized by componentize-js 0.23.0. Both are
# installed once into ~/.cache/capwasm by tests/npm-tool/install.sh. A
# component is rebuilt only when a source is newer.
#
#   guests/js/build.sh OUT_DIR
set -euo pipefail

# shellcheck source=../component-build.sh
. "$(dirname "${BASH_SOURCE[0]}")/../component-build.sh"
tools=$("$root/tests/npm-tool/install.sh" componentize-js 0.23.0 node_modules/.bin/esbuild \
  @bytecodealliance/componentize-js@0.23.0 esbuild@0.28.2)

# provider directory, WIT world
providers=(
  "sim-infrastructure infrastructure-provider"
)
for entry in "${providers[@]}"; do
  read -r name world <<<"$entry"
  target="$out/js-$name.wasm"
  stale "$target" "$here/$name" "$here/sdk" "$root/wit/provider" || continue
  started=$(date +%s)
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  "$tools/node_modules/.bin/esbuild" "$here/$name/app.js" --bundle --format=esm \
    --loader:.json=text --external:'wasi:*' --external:'capwasm:*' \
    --outfile="$stage/app.js" --log-level=warning >&2
  "$tools/node_modules/.bin/componentize-js" "$stage/app.js" -w "$root/wit/provider" \
    -n "$world" -d fetch-event -o "$target.tmp" >&2
  rm -rf "$stage"
  mv "$target.tmp" "$target"
  printf 'js-%s: %s bytes in %ss\n' "$name" "$(stat -c %s "$target")" "$(($(date +%s) - started))" >&2
done
