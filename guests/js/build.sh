#!/usr/bin/env bash
# Builds the JavaScript and TypeScript providers into WebAssembly
# components. First, for every run: jco 1.35.0 writes TypeScript
# declarations of each WIT world (`jco guest-types`) into a stage, tsc
# 7.0.2 type-checks each TypeScript provider and the SDK against its world
# (strict, no output), and each provider's `*.test.ts` runs under
# `node --test`, bundled by esbuild first (Node 20 cannot run TypeScript).
# Then each provider's `app.ts` or `app.js` is bundled with the SDK by
# esbuild (componentize-js takes one module; esbuild strips the types) and
# componentized by componentize-js 0.23.0, rebuilt only when a source is
# newer. The npm tools are installed once into ~/.cache/capwasm by
# tests/npm-tool/install.sh.
#
#   guests/js/build.sh OUT_DIR
set -euo pipefail

# shellcheck source=../component-build.sh
. "$(dirname "${BASH_SOURCE[0]}")/../component-build.sh"
tools=$("$root/tests/npm-tool/install.sh" componentize-js 0.23.0 node_modules/.bin/tsc \
  @bytecodealliance/componentize-js@0.23.0 esbuild@0.28.2 @bytecodealliance/jco@1.35.0 typescript@7.0.2)
bin=$tools/node_modules/.bin

# provider directory, WIT world
providers=(
  "sim-infrastructure infrastructure-provider"
  "kubeadm-bootstrap bootstrap-provider"
  "hostile bootstrap-provider"
)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# jco reads WIT inside a WASI sandbox whose filesystem has no preopened
# directory (preview2-shim 0.26): jco-preopen.mjs preopens the working
# directory, the WIT package, for it.
for world in bootstrap-provider infrastructure-provider; do
  (cd "$root/wit/provider" &&
    node --import "$here/jco-preopen.mjs" "$bin/jco" guest-types . -n "$world" -o "$stage/types/$world" -q >&2)
done

# typecheck WHAT WORLD FILE...: the engine is SpiderMonkey with web APIs
# (TextEncoder, ...), which TypeScript's webworker library describes best.
typecheck() {
  local what=$1 world=$2
  shift 2
  "$bin/tsc" --noEmit --strict --target es2022 --lib es2023,esnext.disposable,webworker \
    --module esnext --moduleResolution bundler --resolveJsonModule false --allowImportingTsExtensions \
    --verbatimModuleSyntax --noUnusedLocals --noUnusedParameters --noFallthroughCasesInSwitch \
    "$@" "$here/sdk/modules.d.ts" "$stage/types/$world/$world.d.ts" >&2 ||
    { printf '%s: does not type-check against the %s world (above)\n' "$what" "$world" >&2; exit 1; }
}

# The SDK against the world with the most imports; each provider's
# modules (and the SDK modules they import) against its own.
typecheck sdk infrastructure-provider "$here"/sdk/*.ts
for entry in "${providers[@]}"; do
  read -r name world <<<"$entry"
  sources=()
  for file in "$here/$name"/*.ts; do
    [[ -e $file && $file != *.test.ts ]] && sources+=("$file")
  done
  [ ${#sources[@]} -eq 0 ] || typecheck "$name" "$world" "${sources[@]}"
  tests=("$here/$name"/*.test.ts)
  [ -e "${tests[0]}" ] || continue
  # Source maps, so that a failure points into the .ts sources.
  "$bin/esbuild" "${tests[@]}" --bundle --platform=node --format=esm --sourcemap=inline \
    --outdir="$stage/tests/$name" --out-extension:.js=.mjs --log-level=warning >&2
  node --enable-source-maps --test --test-reporter=dot "$stage/tests/$name"/*.mjs 2>&1 | sed "s/^/$name: /" >&2
done

for entry in "${providers[@]}"; do
  read -r name world <<<"$entry"
  target="$out/js-$name.wasm"
  stale "$target" "$here/$name" "$here/sdk" "$root/wit/provider" || continue
  started=$(date +%s)
  main=("$here/$name"/app.[jt]s)
  # The bootstrap world grants no HTTP: leave out the engine's fetch.
  disable=(fetch-event)
  [ "$world" = infrastructure-provider ] || disable+=(http)
  "$bin/esbuild" "${main[0]}" --bundle --format=esm \
    --loader:.json=text --external:'wasi:*' --external:'capwasm:*' \
    --outfile="$stage/$name.js" --log-level=warning >&2
  "$bin/componentize-js" "$stage/$name.js" -w "$root/wit/provider" \
    -n "$world" -d "${disable[@]}" -o "$target.tmp" >&2
  mv "$target.tmp" "$target"
  printf 'js-%s: %s bytes in %ss\n' "$name" "$(stat -c %s "$target")" "$(($(date +%s) - started))" >&2
done
