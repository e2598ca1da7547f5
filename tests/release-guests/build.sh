#!/usr/bin/env bash
# A release's Rust providers as its users have them: built from the release's
# commit (`git archive`, so a clone without tags can do it too), once, into
# ~/.cache/capwasm/release-guests-<commit>/; prints the directory holding the
# .wasm files. The upgrade test serves the release's own modules, then keeps
# serving them from this tree's operator: a user upgrading the operator keeps
# the modules they run.
#
#   tests/release-guests/build.sh COMMIT
set -euo pipefail

name=release-guests
# shellcheck source=../tool-cache.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tool-cache.sh"
[ $# -eq 1 ] || fail "usage: tests/release-guests/build.sh COMMIT"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
revision=$(git -C "$repo" rev-parse --verify --quiet "$1^{commit}") ||
  fail "no commit $1 in this clone (a shallow clone? fetch its history)"
dir="$cache_root/$name-$revision"
wasm="$dir/target/wasm32-wasip2/release"
reuse_or_lock "$dir/built" "$wasm"

rm -rf "$dir"
mkdir -p "$dir/src"
git -C "$repo" archive --format=tar "$revision" guests wit | tar --extract --file=- --directory "$dir/src"
started=$(date +%s)
printf '%s: building the Rust providers of %s (first time only)\n' "$name" "$revision" >&2
(cd "$dir/src/guests" && cargo build --release --locked --target wasm32-wasip2 --target-dir "$dir/target" \
  -p kubeadm-bootstrap -p sim-infrastructure) >&2 || fail "building the providers of $revision failed (see above)"
printf '%s: built in %ss\n' "$name" "$(($(date +%s) - started))" >&2
touch "$dir/built"
chmod +x "$dir/built"
printf '%s\n' "$wasm"
