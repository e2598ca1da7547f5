#!/usr/bin/env bash
# cosign v2, built once from its pinned Go module; prints its directory.
# v2 is the newest line that signs in the layout before bundles (a
# `sha256-<hex>.sig` manifest of simple-signing payloads), which the
# operator still reads and release.sh still writes.
exec "$(dirname "${BASH_SOURCE[0]}")/../go-tool/build.sh" cosign github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5
