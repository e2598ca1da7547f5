# capwasm — the commands. `make test` is what CI runs (.ci/run).
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

CARGO ?= cargo
CONTROLPLANE := tests/controlplane/build.sh

.PHONY: help toolchain controlplane lint test startup-bench

help:
	@echo "make test          fmt, clippy, unit and integration tests (installs what is missing)"
	@echo "make controlplane  build kube-apiserver and etcd from Go modules into ~/.cache/capwasm (once)"
	@echo "make startup-bench time from nothing to ready management + workload API servers"

# The Rust pieces a fresh machine may lack.
toolchain:
	@command -v $(CARGO) >/dev/null || { echo "cargo is not installed: install Rust with rustup (https://rustup.rs)" >&2; exit 1; }
	@if command -v rustup >/dev/null; then \
	  rustup component list --installed | grep -q '^rustfmt' || rustup component add rustfmt; \
	  rustup component list --installed | grep -q '^clippy' || rustup component add clippy; \
	  rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2; \
	fi

controlplane:
	@$(CONTROLPLANE) --verbose

lint: toolchain
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

test: lint
	@assets=$$($(CONTROLPLANE) --verbose) && \
	  KUBEBUILDER_ASSETS="$$assets" $(CARGO) test --workspace --all-targets --locked

startup-bench: toolchain
	@assets=$$($(CONTROLPLANE)) && \
	  KUBEBUILDER_ASSETS="$$assets" $(CARGO) run --release --locked -p capwasm-tests --example controlplane-startup
