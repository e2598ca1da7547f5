# capwasm — the commands. `make test` is what CI runs (.ci/run).
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

CARGO ?= cargo
CONTROLPLANE := tests/controlplane/build.sh
# Guests are their own workspace; keep their build products beside the host's
# when CARGO_TARGET_DIR moves those (CI keeps them outside the clone).
GUEST_TARGET_DIR ?= $(if $(CARGO_TARGET_DIR),$(CARGO_TARGET_DIR)/guests,$(CURDIR)/guests/target)
GUEST_CARGO := cd guests && $(CARGO)
HOST_TRIPLE = $(shell rustc -vV | sed -n 's/^host: //p')
export CAPWASM_GUESTS_DIR := $(GUEST_TARGET_DIR)/wasm32-wasip2/release

.PHONY: help demo toolchain controlplane upstream-capi clusterctl node image release guests lint test bench ec2-bench fleet-bench fault-suite startup-bench

help:
	@echo "make demo          capwasm end to end on this machine: control planes, cloud, operator, a cluster"
	@echo "                   (EC2=1: then a Cluster and pool on EC2 as moto emulates it)"
	@echo "make test          fmt, clippy, unit and integration tests (installs what is missing)"
	@echo "make guests        build the provider components (guests/: Rust for wasm32-wasip2, Python with componentize-py, JS with componentize-js)"
	@echo "make controlplane  build kube-apiserver and etcd from Go modules into ~/.cache/capwasm (once)"
	@echo "make upstream-capi build upstream Cluster API's core manager from its Go module into ~/.cache/capwasm (once)"
	@echo "make clusterctl    build upstream's clusterctl (the same release) from its Go module into ~/.cache/capwasm (once)"
	@echo "make node          the one-node Kubernetes of the tests: kubelet and the rest from Go modules, containerd from Debian (once)"
	@echo "make image         the operator's OCI image, without Docker: a static binary, reproducible (image/build.sh)"
	@echo "make release VERSION=x.y.z [IMAGE_LAYOUT=dir | IMAGE=ref] [PUSH=repo] [KEY=cosign.key]"
	@echo "                   a release: clusterctl's artifacts (components, metadata, cluster templates) in a"
	@echo "                   local repository under ~/.cache/capwasm/release, and its assets (those, the"
	@echo "                   capwasm CLI, SHA256SUMS) under capwasm/v<version>/; the image pushed and the"
	@echo "                   sums and image signed with PUSH and KEY (deploy/clusterctl/release.sh)"
	@echo "make bench         provider runtime figures (call latency, compile, precompiled load, memory)"
	@echo "make ec2-bench     the aws-ec2 provider against moto: size, compile, EC2 requests and time per reconcile"
	@echo "make fleet-bench   the fleet race, capwasm against upstream core: time to Running, deletion, writes, CPU, memory"
	@echo "make fault-suite   the fault suite in full (FAULTS_POOLS=60): kills, pauses, a failing cloud, a hot swap; then an inventory"
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

upstream-capi:
	@tests/upstream-capi/build.sh --verbose

clusterctl:
	@tests/clusterctl/build.sh --verbose

node:
	@tests/node/build.sh --verbose

image: toolchain
	@image/build.sh --archive

# The image of IMAGE_LAYOUT (image/build.sh prints one), else of this tree
# (built by `make image`'s recipe), by digest; IMAGE names one by reference
# instead. PUSH pushes the layout to that repository; KEY (a cosign key,
# COSIGN_PASSWORD in the environment) signs the sums and the pushed image.
release:
	@test -n "$(VERSION)" || { echo "make release VERSION=x.y.z [IMAGE_LAYOUT=dir | IMAGE=ref] [PUSH=repo] [KEY=cosign.key]" >&2; exit 2; }
	@layout="$(IMAGE_LAYOUT)"; \
	if [ -z "$$layout" ] && [ -z "$(IMAGE)" ]; then layout=$$(image/build.sh --archive) || exit 1; fi; \
	deploy/clusterctl/release.sh "$(VERSION)" \
	  $${layout:+--image-layout "$$layout"} $(if $(IMAGE),--image "$(IMAGE)") \
	  $(if $(PUSH),--push "$(PUSH)") $(if $(KEY),--key "$(KEY)") \
	  $(if $(RELEASE_DIR),--output "$(RELEASE_DIR)")

guests: toolchain
	$(GUEST_CARGO) build --release --locked --target-dir $(GUEST_TARGET_DIR)
	guests/python/build.sh $(CAPWASM_GUESTS_DIR)
	guests/js/build.sh $(CAPWASM_GUESTS_DIR)
	@ls -1 $(CAPWASM_GUESTS_DIR)/*.wasm

lint: toolchain
	for src in crates/*/src; do .ci/import-cycles $$src || exit 1; done
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(GUEST_CARGO) fmt --all -- --check
	$(GUEST_CARGO) clippy --release --workspace --locked --target-dir $(GUEST_TARGET_DIR) -- -D warnings
	$(GUEST_CARGO) clippy --workspace --tests --locked --target $(HOST_TRIPLE) --target-dir $(GUEST_TARGET_DIR) -- -D warnings

# Ends with one line adding up every test binary's result.
test: lint guests
	@log=$$(mktemp) && trap 'rm -f "$$log"' EXIT && \
	  assets=$$($(CONTROLPLANE) --verbose) && \
	  tests/upstream-capi/build.sh --verbose >/dev/null && \
	  tests/clusterctl/build.sh >/dev/null && \
	  tests/kustomize/build.sh >/dev/null && \
	  tests/moto/install.sh >/dev/null && \
	  tests/registry/build.sh >/dev/null && tests/registry/build-referrers.sh >/dev/null && \
	  tests/distribution/build.sh >/dev/null && \
	  tests/cosign/build.sh >/dev/null && tests/cosign/build-v2.sh >/dev/null && \
	  tests/sigstore/build.sh >/dev/null && \
	  tests/promtool/build.sh >/dev/null && \
	  tests/node/build.sh >/dev/null && \
	  release_image=$$(image/build.sh --archive --release) && \
	  { ( $(GUEST_CARGO) test --workspace --locked --target $(HOST_TRIPLE) --target-dir $(GUEST_TARGET_DIR) ) && \
	    image=$$(image/build.sh --archive --test) && \
	    KUBEBUILDER_ASSETS="$$assets" CAPWASM_IMAGE="$$image" CAPWASM_RELEASE_IMAGE="$$release_image" \
	      tests/run-tests.py -- --workspace --locked; } 2>&1 | tee "$$log" && \
	  awk '/^test result:/ { passed += $$4; failed += $$6 } END { printf "make test: %d passed, %d failed\n", passed, failed }' "$$log"

# Builds what it needs (guests, kube-apiserver and etcd the first time), then
# runs the demo; EC2=1 adds a leg on EC2 as moto emulates it.
demo: guests
	@assets=$$($(CONTROLPLANE) --verbose) && \
	  tests/registry/build.sh >/dev/null && tests/cosign/build.sh >/dev/null && tests/cosign/build-v2.sh >/dev/null && \
	  $(if $(EC2),tests/moto/install.sh >/dev/null &&) \
	  KUBEBUILDER_ASSETS="$$assets" $(CARGO) run --locked -q -p capwasm-tests --example demo $(if $(EC2),-- --ec2)

bench: guests
	@$(CARGO) bench --locked -p capwasm --features testing --bench guest_call

ec2-bench: guests
	@tests/moto/install.sh >/dev/null && \
	  $(CARGO) run --release --locked -q -p capwasm-tests --example ec2-figures

# The fleet race, capwasm standalone against upstream's core with capwasm's
# providers. Clusters, pools and replicas: FLEET="50 2 3" (the default).
fleet-bench: guests
	@assets=$$($(CONTROLPLANE)) && \
	  tests/upstream-capi/build.sh >/dev/null && \
	  $(CARGO) build --release --locked -q -p capwasm --bin capwasm && \
	  KUBEBUILDER_ASSETS="$$assets" $(CARGO) run --release --locked -q -p capwasm-tests --example fleet -- $(FLEET)

# The fault suite with a larger fleet than make test runs it with.
fault-suite: guests
	@assets=$$($(CONTROLPLANE)) && \
	  $(CARGO) build --locked -q -p capwasm --bin capwasm && \
	  FAULTS_POOLS=$${FAULTS_POOLS:-200} FAULTS_SHARDS=$${FAULTS_SHARDS:-3} KUBEBUILDER_ASSETS="$$assets" \
	  $(CARGO) test --locked -q -p capwasm-tests --test faults -- --nocapture

startup-bench: toolchain
	@assets=$$($(CONTROLPLANE)) && \
	  KUBEBUILDER_ASSETS="$$assets" $(CARGO) run --release --locked -p capwasm-tests --example controlplane-startup
