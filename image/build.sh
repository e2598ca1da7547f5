#!/usr/bin/env bash
# Builds capwasm's operator image without Docker or a base image: one static
# (musl) binary, CA certificates and a passwd entry for the non-root user,
# packed as an OCI image layout. Prints the layout directory on stdout;
# progress goes to stderr.
#
#   image/build.sh              build (or reuse) the image of the working tree
#   image/build.sh --archive    also write <layout>.tar, an OCI archive
#                               `ctr images import` and `crane push` read
#   image/build.sh --release [VERSION]
#                               the image of a release in image/releases
#                               (the newest by default), built from its
#                               commit; kept once built
#   image/build.sh --test       the working tree's test image: the
#                               development build the tests run (host
#                               target, with the glibc it links against),
#                               packed in seconds; `make test` runs deploy/
#                               in the one-node Kubernetes with it
#
# Reproducible (all but --test): the same tracked sources, Cargo.lock, Rust toolchain and
# certifi version give the same image digest on any machine and from any
# clone, because
#   - the sources are copied to one fixed directory before building and every
#     path rustc embeds is remapped (the clone's, Cargo's home), so panic
#     locations and debug paths do not name the machine;
#   - the binary is stripped and linked statically (no host libc in it);
#   - the CA bundle is certifi's, a pinned PyPI release, not the host's;
#   - every file in the layer has owner 0:0, a fixed mode and the commit's
#     time as mtime; the tar is sorted by name and gzip writes no timestamp;
#   - the config's `created` is the commit's time, not the build's.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cache_root=${CAPWASM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capwasm}
target=x86_64-unknown-linux-musl
certifi_version=2026.10.19.post1
user_id=65532

fail() { printf 'image: %s\n' "$*" >&2; exit 1; }
archive=false
release=""
test_image=false
while [ $# -gt 0 ]; do
  case "$1" in
    --archive) archive=true ;;
    --release)
      release=newest
      case "${2:-}" in -* | "") ;; *) release=$2; shift ;; esac
      ;;
    --test) test_image=true ;;
    *) fail "unknown argument $1 (--archive, --release [VERSION], --test)" ;;
  esac
  shift
done

# What is built: the working tree (HEAD, marked modified when tracked files
# differ from it), or a release's commit as image/releases names it.
if [ -n "$release" ]; then
  line=$(grep -vE '^(#|$)' "$here/releases" | if [ "$release" = newest ]; then tail -n1; else awk -v v="$release" '$1 == v'; fi)
  [ -n "$line" ] || fail "no release $release in image/releases"
  read -r version revision release_digest release_rustc <<<"$line"
  git -C "$repo" cat-file -e "$revision^{commit}" 2>/dev/null ||
    fail "release $version's commit $revision is not in this clone (a shallow clone? fetch its history or tag v$version)"
  file_version=$(git -C "$repo" show "$revision:Cargo.toml" | sed -nE 's/^version = "([^"]+)"/\1/p' | head -n1)
  [ "$file_version" = "$version" ] || fail "release $version's commit builds version '$file_version'"
  epoch=$(git -C "$repo" log -1 --format=%ct "$revision")
else
  version=$(sed -nE 's/^version = "([^"]+)"/\1/p' "$repo/Cargo.toml" | head -n1)
  [ -n "$version" ] || fail "cannot read the workspace version from Cargo.toml"
  revision=$(git -C "$repo" rev-parse HEAD)
  [ -z "$(git -C "$repo" status --porcelain --untracked-files=no)" ] || revision="$revision-modified"
  epoch=$(git -C "$repo" log -1 --format=%ct)
fi
if [ -n "$release" ] && $test_image; then fail "--release and --test build different images: choose one"; fi
out="$cache_root/image/capwasm-$version"
$test_image && out="$out-test"

# A release's image never changes: once built it is kept (its layout names
# the commit it came from).
if [ -n "$release" ] && [ "$(cat "$out/revision" 2>/dev/null)" = "$revision" ] &&
  { ! $archive || [ -s "$out.tar" ]; }; then
  printf 'image: release %s (%s) already built: %s\n' "$version" "$revision" "$out" >&2
  printf '%s\n' "$out"
  exit 0
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.image-build.lock"
flock 9

# certifi's bundle, from its pinned wheel.
certs="$cache_root/certifi-$certifi_version/cacert.pem"
if [ ! -s "$certs" ]; then
  printf 'image: fetching certifi %s from PyPI for the CA bundle (first time only)\n' "$certifi_version" >&2
  wheel_dir=$(mktemp -d)
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$wheel_dir" "certifi==$certifi_version" >&2 || fail "pip could not download certifi $certifi_version"
  mkdir -p "$(dirname "$certs")"
  python3 - "$wheel_dir"/certifi-*.whl "$certs" <<'PY' || fail "no cacert.pem in the certifi wheel"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    data = wheel.read("certifi/cacert.pem")
with open(sys.argv[2], "wb") as out:
    out.write(data)
PY
  rm -rf "$wheel_dir"
fi

# The static binary of the image deploy/ names: musl, release profile, the
# sources at one fixed path.
static_binary() {
  # The Rust pieces: the musl target (static linking without host libraries)
  # and musl's C compiler for the crates with C inside (ring, zstd).
  "$repo/tests/apt-install.sh" musl-tools rsync
  if command -v rustup >/dev/null; then
    rustup target list --installed | grep -qx "$target" || rustup target add "$target" >&2
  fi

  # The sources at one fixed path: the tracked files as they are in the working
  # tree, or a release's commit. Only files whose content changed are written,
  # so a fresh clone of the same sources rebuilds nothing (cargo goes by mtimes).
  src="$cache_root/image/src"
  staged="$cache_root/image/staged"
  rm -rf "$staged"
  mkdir -p "$src" "$staged"
  if [ -n "$release" ]; then
    git -C "$repo" archive --format=tar "$revision" | tar --extract --file=- --directory "$staged"
  else
    (cd "$repo" && git ls-files -z | tar --null --files-from=- --create --file=-) | tar --extract --file=- --directory "$staged"
  fi
  rsync --recursive --checksum --delete --links --perms "$staged/" "$src/"
  rm -rf "$staged"

  cargo_home=${CARGO_HOME:-$HOME/.cargo}
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
  export CARGO_PROFILE_RELEASE_STRIP=symbols
  export RUSTFLAGS="-C target-feature=+crt-static --remap-path-prefix=$src=/capwasm --remap-path-prefix=$cargo_home=/cargo"
  started=$(date +%s)
  printf 'image: building capwasm %s for %s (release; the first build takes a while)\n' "$version" "$target" >&2
  (cd "$src" && cargo build --locked --release --target "$target" -p capwasm --bin capwasm) >&2 ||
    fail "the static build failed (see above)"
  binary="$CARGO_TARGET_DIR/$target/release/capwasm"
  printf 'image: binary built in %ss\n' "$(($(date +%s) - started))" >&2
}

# The test image's binary: the development build `cargo test` uses, stripped;
# the libraries it links come from this machine (Debian's glibc), so the
# image is not reproducible across machines, and is never released.
test_binary() {
  (cd "$repo" && cargo build --locked -p capwasm --bin capwasm) >&2 || fail "the development build failed (see above)"
  binary="${CARGO_TARGET_DIR:-$repo/target}/debug/capwasm"
  binary_sum=$(sha256sum "$binary" | cut -d' ' -f1)
  # Packing takes a while for a binary this size: the same binary is the
  # same image.
  if [ "$(cat "$out/binary-sha256" 2>/dev/null)" = "$binary_sum" ] && { ! $archive || [ -s "$out.tar" ]; }; then
    printf 'image: test image of the same build already packed: %s\n' "$out" >&2
    printf '%s\n' "$out"
    exit 0
  fi
}

if $test_image; then test_binary; else static_binary; fi

# The root filesystem of the one layer.
rootfs=$(mktemp -d)
layout=$(mktemp -d)
trap 'rm -rf "$rootfs" "$layout"' EXIT
chmod 0755 "$rootfs"
install -d -m 0755 "$rootfs/etc/ssl/certs" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
if $test_image; then
  strip --strip-debug -o "$rootfs/capwasm" "$binary"
  chmod 0755 "$rootfs/capwasm"
  # The loader and libraries it names, at the paths it names them by.
  for library in $(ldd "$binary" | grep -oE '/[^ ]+'); do
    install -D -m 0755 "$(readlink -f "$library")" "$rootfs$library"
  done
else
  install -m 0755 "$binary" "$rootfs/capwasm"
fi
install -m 0644 "$certs" "$rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%s:%s:nonroot:/home/nonroot:/sbin/nologin\n' "$user_id" "$user_id" >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:%s:\n' "$user_id" >"$rootfs/etc/group"
chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"

labels=$(printf '"org.opencontainers.image.revision":"%s","org.opencontainers.image.source":"https://github.com/capwasm/capwasm","org.opencontainers.image.title":"capwasm","org.opencontainers.image.version":"%s"' "$revision" "$version")
"$here/pack.sh" "$rootfs" "$layout" "ghcr.io/capwasm/capwasm:$version" /capwasm "$user_id" "$epoch" "$labels"
manifest_digest=$(cat "$layout/digest")
layer_size=$(du -b "$layout/blobs" | tail -n1 | cut -f1)

# A release rebuilt with the rustc that built it is the image it was: the
# same digest, or the build is not reproducible.
if [ -n "$release" ]; then
  rustc_version=$(rustc --version | cut -d' ' -f2)
  if [ "$rustc_version" = "$release_rustc" ]; then
    [ "$manifest_digest" = "$release_digest" ] ||
      fail "release $version rebuilt from $revision as $manifest_digest, not $release_digest: the build is not reproducible"
  else
    printf 'image: release %s was built by rustc %s, this is %s: its digest is %s, not %s\n' \
      "$version" "$release_rustc" "$rustc_version" "$manifest_digest" "$release_digest" >&2
  fi
fi

rm -rf "$out" "$out.tar"
mkdir -p "$(dirname "$out")"
printf '%s\n' "$revision" >"$layout/revision"
if $test_image; then printf '%s\n' "$binary_sum" >"$layout/binary-sha256"; fi
mv "$layout" "$out"
chmod 0755 "$out"
if $archive; then
  tar --create --file "$out.tar" --directory "$out" --sort=name --owner=0 --group=0 --numeric-owner \
    --mtime="@$epoch" oci-layout index.json blobs
fi
printf 'image: ghcr.io/capwasm/capwasm:%s@%s (%s bytes of blobs) in %s\n' \
  "$version" "$manifest_digest" "$layer_size" "$out" >&2
printf '%s\n' "$out"
