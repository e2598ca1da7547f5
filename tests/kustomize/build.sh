#!/usr/bin/env bash
# kustomize, built once from its pinned Go module; prints its directory.
# The deploy/ tests render the kustomizations with it, as `kubectl apply -k` does.
exec "$(dirname "${BASH_SOURCE[0]}")/../go-tool/build.sh" kustomize sigs.k8s.io/kustomize/kustomize/v5@v5.8.1
