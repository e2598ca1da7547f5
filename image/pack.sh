#!/usr/bin/env bash
# Packs a root filesystem as a one-layer OCI image layout, reproducibly: the
# same files, name, entrypoint, user, time and labels give the same digest.
#
#   image/pack.sh ROOTFS OUT NAME ENTRYPOINT USER EPOCH [LABELS]
#
# ROOTFS is packed as it is (owner 0:0, mtime EPOCH, sorted; gzip writes no
# timestamp); OUT (an empty directory) receives oci-layout, index.json,
# blobs/ and `digest`, the manifest's digest. NAME (a full reference) is
# annotated for `ctr images import`; LABELS is the inside of a JSON object.
set -euo pipefail

[ $# -ge 6 ] || { printf 'usage: %s ROOTFS OUT NAME ENTRYPOINT USER EPOCH [LABELS]\n' "$0" >&2; exit 2; }
rootfs=$1 out=$2 name=$3 entrypoint=$4 user=$5 epoch=$6 labels=${7:-}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
blobs="$out/blobs/sha256"
mkdir -p "$blobs"

layer="$out/layer.tar"
tar --create --file "$layer" --directory "$rootfs" --sort=name --format=posix \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  --owner=0 --group=0 --numeric-owner --mtime="@$epoch" .
diff_id=$(sha256sum "$layer" | cut -d' ' -f1)
gzip -n -9 "$layer"
layer_digest=$(sha256sum "$layer.gz" | cut -d' ' -f1)
layer_size=$(stat -c %s "$layer.gz")
mv "$layer.gz" "$blobs/$layer_digest"

# Writes a JSON document as a blob; prints "digest size" once it is in
# place (the caller reads it from a process substitution, which bash does
# not wait for).
put_blob() {
  local file digest size
  file=$(mktemp -p "$out")
  printf '%s' "$1" >"$file"
  digest=$(sha256sum "$file" | cut -d' ' -f1)
  size=$(stat -c %s "$file")
  chmod 0644 "$file"
  mv "$file" "$blobs/$digest"
  printf '%s %s\n' "$digest" "$size"
}

config=$(printf '{"architecture":"amd64","config":{"Entrypoint":["%s"],"Env":["PATH=/","SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"],"Labels":{%s},"User":"%s:%s","WorkingDir":"/"},"created":"%s","os":"linux","rootfs":{"diff_ids":["sha256:%s"],"type":"layers"}}' \
  "$entrypoint" "$labels" "$user" "$user" "$created" "$diff_id")
read -r config_digest config_size < <(put_blob "$config")
manifest=$(printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}],"annotations":{"org.opencontainers.image.created":"%s"}}' \
  "$config_digest" "$config_size" "$layer_digest" "$layer_size" "$created")
read -r manifest_digest manifest_size < <(put_blob "$manifest")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest_digest" "$manifest_size" "$name" "${name##*:}" >"$out/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$out/oci-layout"
printf 'sha256:%s\n' "$manifest_digest" >"$out/digest"
