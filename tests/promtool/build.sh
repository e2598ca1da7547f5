#!/usr/bin/env bash
# promtool, built once from Prometheus's pinned Go module; prints its
# directory. The tests check deploy/monitoring's rules with it and run
# their unit tests (`promtool check rules`, `promtool test rules`).
exec "$(dirname "${BASH_SOURCE[0]}")/../go-tool/build.sh" promtool github.com/prometheus/prometheus/cmd/promtool@v0.316.0
