#!/usr/bin/env bash
# cosign, built once from its pinned Go module; prints its directory. The
# tests sign providers with it, so the verifier is checked against the
# reference signer's own format: v3 stores a Sigstore bundle as an OCI
# referrer of the image.
exec "$(dirname "${BASH_SOURCE[0]}")/../go-tool/build.sh" cosign github.com/sigstore/cosign/v3/cmd/cosign@v3.1.3
