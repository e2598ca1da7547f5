#!/usr/bin/env bash
# promtool, built once from Prometheus's pinned Go module; prints its
# directory. The tests check deploy/monitoring's rules with it and run
# their unit tests (`promtool check rules`, `promtool test rules`), which
# need none of Prometheus's service discoveries: leaving them out
# (`remove_all_sd`, as Prometheus's README describes) leaves out the cloud
# SDKs they pull in, most of the build.
GO_BUILD_TAGS=remove_all_sd exec "$(dirname "${BASH_SOURCE[0]}")/../go-tool/build.sh" promtool github.com/prometheus/prometheus/cmd/promtool@v0.316.0
