#!/usr/bin/env bash
# cosign, built once from its pinned Go module; prints its directory. The
# tests sign providers with it, so the verifier is checked against the
# reference signer's own format. v2 is the newest line whose signatures are
# the OCI-stored simple-signing form offline key verification reads.
exec "$(dirname "${BASH_SOURCE[0]}")/../go-tool/build.sh" cosign github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5
