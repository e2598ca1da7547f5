#!/usr/bin/env bash
# The CNCF distribution registry, built once from its pinned Go module;
# prints its directory. The tests run it with htpasswd authentication: a
# registry that asks for the credentials a pull Secret holds.
exec "$(dirname "${BASH_SOURCE[0]}")/../go-tool/build.sh" registry github.com/distribution/distribution/v3/cmd/registry@v3.1.2
