//! The Kubernetes API capwasm serves and reads: the Cluster API core kinds
//! `Cluster` and `MachinePool` (`cluster.x-k8s.io/v1beta2`, upstream field
//! names and semantics), the generic Wasm provider kinds, and
//! `ProviderModule`, and the platform kinds `PlatformCluster` and
//! `ClusterTemplate`. The names of finalizers, labels, annotations and field
//! managers live here, next to the types they belong to. `v1beta1` holds the
//! deprecated version of Cluster and MachinePool and its conversion.
#![warn(missing_docs)]
// Input reaches every path of the operator: no unwrap, expect or panic on any of them.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod cluster;
pub mod conditions;
mod crds;
pub mod machine;
pub mod machinepool;
pub mod platform;
pub mod provider;
pub mod providermodule;
mod refs;
pub mod status;
pub mod tenancy;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod v1beta1;
pub mod wasmmachine;

pub use cluster::{Cluster, ClusterSpec, ClusterStatus};
pub use conditions::{ConditionStatus, ConditionType, Reason};
pub use crds::{
    ConversionWebhook, WEBHOOK_PATH, WebhookClient, all as crds, conversion as crd_conversion,
    installed_webhook, kustomization as crds_kustomization, published as published_crds,
    to_yaml as crds_yaml, with_conversion_webhook, with_v1beta1 as crds_with_v1beta1,
};
pub use machine::Machine;
pub use machinepool::{MachinePool, MachinePoolSpec, MachinePoolStatus};
pub use platform::{ClusterTemplate, PlatformCluster};
pub use provider::{WasmBootstrapConfig, WasmCluster, WasmControlPlane, WasmMachinePool};
pub use providermodule::ProviderModule;
pub use refs::{ApiEndpoint, ContractVersionedObjectReference};
pub use status::{HasStatus, ObjectStatus};
pub use wasmmachine::WasmMachine;

/// The Cluster API group of `Cluster` and `MachinePool`.
pub const CLUSTER_API_GROUP: &str = "cluster.x-k8s.io";
/// Their API version.
pub const CLUSTER_API_VERSION: &str = "cluster.x-k8s.io/v1beta2";

/// Labels and annotations of the Cluster API contract.
pub mod labels {
    /// The Cluster an object belongs to (on MachinePools, provider objects, Secrets).
    pub const CLUSTER_NAME: &str = "cluster.x-k8s.io/cluster-name";
    /// The MachinePool a Machine or InfraMachine belongs to, as
    /// [`crate::wasmmachine::pool_name_label`] writes its name.
    pub const POOL_NAME: &str = "cluster.x-k8s.io/pool-name";
    /// On a CRD: which of its versions implement the v1beta1 provider contract (`v1alpha1_v1beta1`).
    pub const CONTRACT_V1BETA1: &str = "cluster.x-k8s.io/v1beta1";
    /// On a CRD: which of its versions implement the v1beta2 provider contract.
    pub const CONTRACT_V1BETA2: &str = "cluster.x-k8s.io/v1beta2";
}

/// Annotations of the Cluster API contract.
pub mod annotations {
    /// On a Machine: delete it first when its pool scales down.
    pub const DELETE_MACHINE: &str = "cluster.x-k8s.io/delete-machine";
    /// Present (any value): the object is paused.
    pub const PAUSED: &str = "cluster.x-k8s.io/paused";
    /// Present with any value but `"false"`: an external autoscaler owns the replica count.
    pub const REPLICAS_MANAGED_BY: &str = "cluster.x-k8s.io/replicas-managed-by";
    /// On workload Nodes: the Cluster they belong to.
    pub const NODE_CLUSTER_NAME: &str = "cluster.x-k8s.io/cluster-name";
    /// On workload Nodes: that Cluster's namespace.
    pub const NODE_CLUSTER_NAMESPACE: &str = "cluster.x-k8s.io/cluster-namespace";
    /// On workload Nodes: the kind of the owner (`MachinePool`).
    pub const NODE_OWNER_KIND: &str = "cluster.x-k8s.io/owner-kind";
    /// On workload Nodes: the owner's name.
    pub const NODE_OWNER_NAME: &str = "cluster.x-k8s.io/owner-name";
    /// On a Cluster or MachinePool read as v1beta1: what of its v1beta2 form
    /// v1beta1 cannot hold, restored when it is written back (upstream's name).
    pub const CONVERSION_DATA: &str = "cluster.x-k8s.io/conversion-data";
}

/// The taint a Node carries until Cluster API has seen it.
pub const NODE_UNINITIALIZED_TAINT: &str = "node.cluster.x-k8s.io/uninitialized";

/// The type of the Secrets Cluster API reads and writes (kubeconfig, bootstrap data).
pub const CLUSTER_SECRET_TYPE: &str = "cluster.x-k8s.io/secret";
