#!/usr/bin/env bash
# crane (go-containerregistry), built once from its pinned Go module; prints
# its directory. `crane registry serve` is the OCI registry the tests and the
# demo push providers to and pull them from, on loopback.
exec "$(dirname "${BASH_SOURCE[0]}")/../go-tool/build.sh" crane github.com/google/go-containerregistry/cmd/crane@v0.22.1
