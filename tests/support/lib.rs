//! A real Kubernetes control plane for capwasm's tests, started the way
//! controller-runtime's envtest does it: etcd and kube-apiserver (built from
//! their Go modules by `tests/controlplane/build.sh`) on free loopback ports,
//! with generated certificates, an admin client, and the CRDs from `crds/`.
//!
//! One etcd serves several API servers under sibling `--etcd-prefix`es, so a
//! second, fully independent API server (the workload cluster of a
//! MachinePool) costs only its own start. Everything a [`TestEnv`] or
//! [`ApiServer`] started is stopped and its directory removed on drop, panics
//! included; the processes also exit on their own when the test process dies,
//! because they watch the stdin pipe this process holds.
#![warn(missing_docs)]

mod apiserver;
mod binaries;
pub mod budget;
mod certs;
pub mod clusterctl;
mod crds;
pub mod diff;
pub mod ec2;
pub mod ec2_kubelet;
mod env;
mod error;
mod etcd;
pub mod flows;
pub mod hold;
pub mod hostile;
pub mod hostile_registry;
pub mod image;
pub mod install;
pub mod kustomize;
pub mod memory;
pub mod moto;
pub mod node;
pub mod operator;
pub mod pods;
mod ports;
mod probe;
mod process;
pub mod registry;
pub mod release;
mod rundir;
pub mod samples;
pub mod scoped;
pub mod sigstore;
mod stack;
pub mod upstream;
pub mod usage;

pub use apiserver::ApiServer;
pub use binaries::Binaries;
/// The built guest components, as the runtime tests find them.
pub use capwasm::testing::{KUBEADM_JOIN_CONFIG, guest_path};
pub use crds::install_crds;
pub use env::{Options, TestEnv};
pub use error::Error;
pub use process::is_running;
pub use stack::{CREDENTIALS_NAMESPACE, Stack};

/// The harness's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
