#!/usr/bin/env bash
# Builds the Python providers into WebAssembly components with
# componentize-py (installed once into ~/.cache/capwasm by
# tests/pip-tool/install.sh), after running their unit tests with the
# machine's python3. A component is rebuilt only when a source is newer.
#
#   guests/python/build.sh OUT_DIR
set -euo pipefail

# shellcheck source=../component-build.sh
. "$(dirname "${BASH_SOURCE[0]}")/../component-build.sh"
bin=$("$root/tests/pip-tool/install.sh" componentize-py 0.25.1 'componentize-py==0.25.1' componentize-py)

# provider directory, WIT world
providers=(
  "kubeadm-bootstrap bootstrap-provider"
  "sim-infrastructure infrastructure-provider"
  "hostile bootstrap-provider"
)
for entry in "${providers[@]}"; do
  read -r name world <<<"$entry"
  target="$out/python-$name.wasm"
  if compgen -G "$here/$name/test_*.py" >/dev/null; then
    (cd "$here/$name" && PYTHONPATH="$here/sdk" python3 -m unittest -q 2>&1 | sed "s/^/$name: /" >&2)
  fi
  stale "$target" "$here/$name" "$here/sdk" "$root/wit/provider" || continue
  started=$(date +%s)
  # componentize-py's pre-initialisation sees only the directories it is
  # given: the provider is staged with its links (a schema shared with the
  # Rust provider) resolved, without its tests.
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  cp -rL "$here/$name/." "$stage/"
  rm -rf "$stage"/test_*.py "$stage/__pycache__"
  (cd "$stage" &&
    "$bin/componentize-py" -d "$root/wit/provider" -w "$world" componentize app \
      -p . -p "$here/sdk" -o "$target.tmp" >&2)
  rm -rf "$stage"
  mv "$target.tmp" "$target"
  printf 'python-%s: %s bytes in %ss\n' "$name" "$(stat -c %s "$target")" "$(($(date +%s) - started))" >&2
done
