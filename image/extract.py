#!/usr/bin/env python3
"""Copies one file out of an OCI image layout `image/pack.sh` wrote.

    image/extract.py LAYOUT PATH OUT

LAYOUT holds one image (index.json names one manifest); PATH is the file's
path inside it (`/capwasm`); OUT receives its bytes, mode 0755. Prints the
image's platform, `<os>-<architecture>` (`linux-amd64`), on stdout.
"""

import json
import os
import sys
import tarfile


def fail(message):
    print(f"extract: {message}", file=sys.stderr)
    sys.exit(1)


def blob(layout, digest):
    algorithm, _, hex_digest = digest.partition(":")
    if algorithm != "sha256" or len(hex_digest) != 64:
        fail(f"{digest} is not a sha256 digest")
    return os.path.join(layout, "blobs", "sha256", hex_digest)


def json_blob(layout, digest):
    with open(blob(layout, digest), "rb") as file:
        return json.load(file)


def main():
    if len(sys.argv) != 4:
        fail("usage: extract.py LAYOUT PATH OUT")
    layout, wanted, out = sys.argv[1:]
    with open(os.path.join(layout, "index.json"), "rb") as file:
        manifests = json.load(file).get("manifests", [])
    if len(manifests) != 1:
        fail(f"{layout} holds {len(manifests)} images, not one")
    manifest = json_blob(layout, manifests[0]["digest"])
    config = json_blob(layout, manifest["config"]["digest"])
    platform = f"{config['os']}-{config['architecture']}"
    name = "./" + wanted.lstrip("/")
    # The last layer holding the file wins, as in the running container.
    found = None
    for layer in manifest["layers"]:
        with tarfile.open(blob(layout, layer["digest"]), "r:*") as archive:
            try:
                member = archive.getmember(name)
            except KeyError:
                continue
            if not member.isfile():
                fail(f"{wanted} is not a regular file in {layout}")
            data = archive.extractfile(member)
            found = data.read() if data else None
    if found is None:
        fail(f"no {wanted} in {layout}")
    partial = out + ".partial"
    with open(partial, "wb") as file:
        file.write(found)
    os.chmod(partial, 0o755)
    os.replace(partial, out)
    print(platform)


if __name__ == "__main__":
    main()
