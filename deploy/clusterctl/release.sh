#!/usr/bin/env bash
# Writes capwasm's release artifacts for clusterctl, rendered from deploy/
# and crds/ (through deploy/clusterctl/'s kustomizations) and the files
# beside this script, into a clusterctl local repository outside the clone,
# and prints that repository's directory on stdout (progress on stderr):
#
#   <repository>/infrastructure-capwasm/v<version>/
#       infrastructure-components.yaml  metadata.yaml
#       cluster-template.yaml  cluster-template-aws-ec2.yaml
#       cluster-template-machinepool-autoscaler.yaml
#   <repository>/bootstrap-capwasm/v<version>/
#       bootstrap-components.yaml  metadata.yaml
#
#   <repository>/capwasm/v<version>/
#       the release's assets, flat, as a GitHub release holds them: the
#       files above, capwasm-<os>-<arch> (the CLI, the image's own static
#       binary; with --image-layout), SHA256SUMS of them all, and
#       SHA256SUMS.sigstore.json, its signature as a Sigstore bundle
#       (with --key)
#
# Each version gets its own directories, so the repository keeps every
# release made into it (what `clusterctl upgrade plan` lists).
#
#   deploy/clusterctl/release.sh VERSION [--image-layout DIR [--push REPO] | --image REF]
#                                [--key COSIGN_KEY] [--output DIR]
#
# VERSION: x.y.z (semantic; its x.y must be a series of metadata.yaml).
# --image-layout: an OCI layout `image/build.sh` printed; the operator's
#   image is named by its digest (the layout's `digest` file).
# --push: the image repository (registry.example/capwasm/capwasm) the
#   layout is pushed to by digest (crane); the components name it there.
#   With --key the digest is signed (cosign) before the tag VERSION is
#   moved to it, so the tag never names an unsigned image.
# --image: the image reference itself (by digest, preferably).
# Neither: ghcr.io/capwasm/capwasm:VERSION, by tag.
# --key: a cosign private key (COSIGN_PASSWORD in the environment): signs
#   SHA256SUMS (`cosign verify-blob --bundle`) and the pushed image (`cosign
#   verify`, a bundle stored as a referrer), with cosign v3. Offline
#   signatures: a signing config naming no transparency log or timestamp
#   authority.
# --output: the repository (default ~/.cache/capwasm/release).
#
# The same sources and image give the same bytes: kustomize's output is
# sorted, and nothing else written depends on the time or the machine.
# (Signatures differ each time: ECDSA signs with a random nonce; what they
# sign is the same.)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache_root=${CAPWASM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capwasm}
image_name=ghcr.io/capwasm/capwasm

fail() { printf 'release: %s\n' "$*" >&2; exit 1; }
usage() { fail "usage: release.sh VERSION [--image-layout DIR [--push REPO] | --image REF] [--key COSIGN_KEY] [--output DIR]"; }

[ $# -ge 1 ] || usage
version=${1#v}
shift
image=""
layout=""
push=""
key=""
output="$cache_root/release"
while [ $# -gt 0 ]; do
  case "$1" in
    --image-layout)
      [ $# -ge 2 ] || usage
      [ -s "$2/digest" ] || fail "$2 is not an image layout of image/build.sh (no digest file)"
      digest=$(tr -d '[:space:]' <"$2/digest")
      [[ $digest =~ ^sha256:[0-9a-f]{64}$ ]] || fail "$2/digest holds no sha256 digest"
      layout=$(cd "$2" && pwd)
      shift
      ;;
    --push)
      [ $# -ge 2 ] && [ -n "$2" ] || usage
      push=$2
      shift
      ;;
    --key)
      [ $# -ge 2 ] && [ -s "$2" ] || fail "--key needs a cosign private key file"
      key=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
      shift
      ;;
    --image)
      [ $# -ge 2 ] && [ -n "$2" ] || usage
      image=$2
      shift
      ;;
    --output)
      [ $# -ge 2 ] && [ -n "$2" ] || usage
      output=$2
      shift
      ;;
    *) usage ;;
  esac
  shift
done

# clusterctl takes a version directory only if it parses as semantic.
[[ $version =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] ||
  fail "version '$version' is not x.y.z (semantic)"
major=${BASH_REMATCH[1]}
minor=${BASH_REMATCH[2]}
# The series must be declared, or clusterctl init refuses the release.
awk -v major="$major" -v minor="$minor" '
  /^[[:space:]]*- major:/ { m = $3 }
  /^[[:space:]]*minor:/ && m == major && $2 == minor { found = 1 }
  END { exit !found }' "$here/metadata.yaml" ||
  fail "no release series $major.$minor in deploy/clusterctl/metadata.yaml: add it with its contract"
[ -z "$layout" ] || [ -z "$image" ] || fail "give --image-layout or --image, not both"
[ -z "$push" ] || [ -n "$layout" ] || fail "--push needs the layout to push (--image-layout)"
if [ -n "$push" ]; then
  [[ $push =~ ^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+$ ]] ||
    fail "--push takes a repository (host[:port]/path, no tag or digest), not '$push'"
fi
if [ -n "$layout" ]; then
  image="${push:-$image_name}@$digest"
elif [ -z "$image" ]; then
  image="$image_name:$version"
  printf 'release: naming the image by tag (%s): give --image-layout or --image to pin its digest\n' "$image" >&2
fi
case "$image" in *[[:space:]\$\{\}\|\&\\]*) fail "image '$image' is not an image reference" ;; esac

kustomize="$("$repo/tests/kustomize/build.sh")/kustomize"
mkdir -p "$output"
staging=$(mktemp -d "$output/.release-XXXXXX")
trap 'rm -rf "$staging"' EXIT
infra="$staging/infrastructure-capwasm/v$version"
bootstrap="$staging/bootstrap-capwasm/v$version"
mkdir -p "$infra" "$bootstrap"

"$kustomize" build "$here/infrastructure" >"$staging/infrastructure.yaml" ||
  fail "kustomize build deploy/clusterctl/infrastructure failed"
"$kustomize" build "$here/bootstrap" >"$bootstrap/bootstrap-components.yaml" ||
  fail "kustomize build deploy/clusterctl/bootstrap failed"
# The operator's image: exactly one place.
[ "$(grep -c '@IMAGE@' "$staging/infrastructure.yaml")" = 1 ] ||
  fail "deploy/clusterctl/infrastructure must name @IMAGE@ exactly once"
sed "s|@IMAGE@|$image|" "$staging/infrastructure.yaml" >"$infra/infrastructure-components.yaml"
rm "$staging/infrastructure.yaml"
cp "$here/templates/"cluster-template*.yaml "$infra/"
cp "$here/metadata.yaml" "$infra/metadata.yaml"
cp "$here/metadata.yaml" "$bootstrap/metadata.yaml"
chmod 0644 "$infra"/* "$bootstrap"/*

# The release's assets, flat: clusterctl's files, the CLI, their sums.
assets="$staging/capwasm/v$version"
mkdir -p "$assets"
cp "$infra"/* "$assets/"
cp "$bootstrap/bootstrap-components.yaml" "$assets/"
if [ -n "$layout" ]; then
  platform=$("$repo/image/extract.py" "$layout" /capwasm "$assets/capwasm") ||
    fail "no /capwasm binary in $layout"
  mv "$assets/capwasm" "$assets/capwasm-$platform"
fi
(cd "$assets" && LC_ALL=C sha256sum -- * >"$staging/SHA256SUMS" && mv "$staging/SHA256SUMS" SHA256SUMS)

# Pushing and signing talk to a registry: a loopback one speaks plain HTTP.
crane="" cosign="" registry_flags=() crane_flags=()
if [ -n "$push" ] || [ -n "$key" ]; then
  cosign="$("$repo/tests/cosign/build.sh")/cosign"
  signing_config="$staging/signing-config.json"
  printf '%s\n' '{"mediaType":"application/vnd.dev.sigstore.signingconfig.v0.2+json","rekorTlogConfig":{},"tsaConfig":{}}' >"$signing_config"
fi
if [ -n "$push" ]; then
  crane="$("$repo/tests/registry/build.sh")/crane"
  case "${push%%/*}" in
    127.0.0.1:* | localhost:* | 127.0.0.1 | localhost)
      crane_flags=(--insecure)
      registry_flags=(--allow-http-registry --allow-insecure-registry)
      ;;
  esac
fi
if [ -n "$key" ]; then
  "$cosign" sign-blob --yes --key "$key" --signing-config "$signing_config" \
    --bundle "$assets/SHA256SUMS.sigstore.json" "$assets/SHA256SUMS" >/dev/null ||
    fail "cosign could not sign SHA256SUMS with $key"
  chmod 0644 "$assets/SHA256SUMS.sigstore.json"
fi
if [ -n "$push" ]; then
  "$crane" push "${crane_flags[@]}" "$layout" "$image" >/dev/null ||
    fail "crane could not push $layout to $image"
  if [ -n "$key" ]; then
    "$cosign" sign --yes --key "$key" --signing-config "$signing_config" "${registry_flags[@]}" "$image" ||
      fail "cosign could not sign $image with $key"
  fi
  "$crane" tag "${crane_flags[@]}" "$image" "$version" || fail "crane could not tag $image as $version"
  printf 'release: pushed %s%s, tagged %s\n' "$image" "${key:+ (signed)}" "$version" >&2
fi

for provider in infrastructure-capwasm bootstrap-capwasm capwasm; do
  mkdir -p "$output/$provider"
  rm -rf "${output:?}/$provider/v$version"
  mv "$staging/$provider/v$version" "$output/$provider/v$version"
done
output=$(cd "$output" && pwd)
printf 'release: capwasm v%s (image %s) for clusterctl in %s; its clusterctl.yaml:\n' "$version" "$image" "$output" >&2
printf 'providers:\n  - name: capwasm\n    type: InfrastructureProvider\n    url: file://%s/infrastructure-capwasm/v%s/infrastructure-components.yaml\n  - name: capwasm\n    type: BootstrapProvider\n    url: file://%s/bootstrap-capwasm/v%s/bootstrap-components.yaml\n' \
  "$output" "$version" "$output" "$version" >&2
printf '%s\n' "$output"
