//! The compiled provider components under test, and requests for them.

use std::path::PathBuf;

/// The path of a built guest component, such as `kubeadm_bootstrap.wasm`.
///
/// `make test` builds them first and says where in `CAPWASM_GUESTS_DIR`;
/// otherwise they are looked for in `guests/target`.
pub fn guest_path(file: &str) -> PathBuf {
    let dir = std::env::var_os("CAPWASM_GUESTS_DIR").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../guests/target/wasm32-wasip2/release"
            ))
        },
        PathBuf::from,
    );
    dir.join(file)
}

/// A valid kubeadm-bootstrap join configuration.
pub const KUBEADM_JOIN_CONFIG: &str = r#"{
  "mode": "join",
  "token": "abcdef.0123456789abcdef",
  "caCertHashes": ["sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"]
}"#;

/// What `sim-platform` renders, by API group and kind: its module's
/// `capabilities.allowedKinds`.
pub const SIM_PLATFORM_KINDS: &[(&str, &str)] = &[
    ("cluster.x-k8s.io", "Cluster"),
    ("cluster.x-k8s.io", "MachinePool"),
    ("infrastructure.cluster.x-k8s.io", "WasmCluster"),
    ("infrastructure.cluster.x-k8s.io", "WasmMachinePool"),
    ("bootstrap.cluster.x-k8s.io", "WasmBootstrapConfig"),
    ("", "Secret"),
];
