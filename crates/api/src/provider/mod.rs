//! The generic Wasm provider kinds. Each names the ProviderModule that
//! serves it and carries a free-form `spec.config` the provider's own JSON
//! Schema validates. Their status fields follow the Cluster API provider
//! contracts (v1beta1 `ready`, v1beta2 `initialization`), so upstream core
//! controllers can use them too.

mod bootstrap;
mod cluster;
mod control_plane;
mod machinepool;
mod strategy;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use bootstrap::{
    BootstrapInitialization, WasmBootstrapConfig, WasmBootstrapConfigSpec,
    WasmBootstrapConfigStatus,
};
pub use cluster::{WasmCluster, WasmClusterSpec, WasmClusterStatus};
pub use control_plane::{
    ControlPlaneInitialization, WasmControlPlane, WasmControlPlaneSpec, WasmControlPlaneStatus,
};
pub use machinepool::{
    InstanceState, InstanceStatus, MachineAddress, NodeInfo, WasmMachinePool, WasmMachinePoolSpec,
    WasmMachinePoolStatus,
};
pub use strategy::{DeletePolicy, MachinePoolStrategy, RollingUpdate, StrategyType};

/// Finalizer of the WasmMachinePool controller.
pub const MACHINE_POOL_FINALIZER: &str = "wasmmachinepool.infrastructure.cluster.x-k8s.io";
/// Finalizer of the WasmCluster controller.
pub const CLUSTER_FINALIZER: &str = "wasmcluster.infrastructure.cluster.x-k8s.io";
/// Finalizer of the WasmControlPlane controller.
pub const CONTROL_PLANE_FINALIZER: &str = "wasmcontrolplane.controlplane.cluster.x-k8s.io";
/// Field manager of the WasmControlPlane controller.
pub const CONTROL_PLANE_FIELD_MANAGER: &str = "capwasm-control-plane";
/// The group of WasmControlPlane.
pub const CONTROL_PLANE_GROUP: &str = "controlplane.cluster.x-k8s.io";
/// Field manager of the WasmBootstrapConfig controller.
pub const BOOTSTRAP_FIELD_MANAGER: &str = "capwasm-bootstrap";
/// Field manager of the WasmMachinePool and WasmCluster controllers.
pub const INFRASTRUCTURE_FIELD_MANAGER: &str = "capwasm-infrastructure";
/// The group of WasmBootstrapConfig.
pub const BOOTSTRAP_GROUP: &str = "bootstrap.cluster.x-k8s.io";
/// The group of WasmMachinePool and WasmCluster.
pub const INFRASTRUCTURE_GROUP: &str = "infrastructure.cluster.x-k8s.io";
/// The version of the provider kinds' API.
pub const VERSION: &str = "v1alpha1";

/// v1beta2 infrastructure contract milestones.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureInitialization {
    /// The infrastructure is provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// Status fields every provider object has.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProviderStatus {
    /// `Ready` and `Paused`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// A terminal failure, as a CamelCase token (v1beta1 contract).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// A terminal failure, for people (v1beta1 contract).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// The generation last reconciled without error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The provider code that served the last successful call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_by: Option<ServedBy>,
}

/// Which provider code answered.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServedBy {
    /// `sha256:<hex>` of the component.
    pub digest: String,
    /// The version the provider reports of itself.
    pub version: String,
}

/// A JSON object of any shape: the provider's schema, not the CRD's, validates it.
pub(crate) fn free_form_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// The status of a provider kind: its contract fields plus [`ProviderStatus`].
pub trait HasProviderStatus {
    /// What every provider object reports.
    fn common(&mut self) -> &mut ProviderStatus;
    /// The same, to read.
    fn common_ref(&self) -> &ProviderStatus;
}

macro_rules! has_provider_status {
    ($($status:ty),*) => {$(
        impl HasProviderStatus for $status {
            fn common(&mut self) -> &mut ProviderStatus {
                &mut self.common
            }
            fn common_ref(&self) -> &ProviderStatus {
                &self.common
            }
        }
    )*};
}

has_provider_status!(
    WasmBootstrapConfigStatus,
    WasmMachinePoolStatus,
    WasmClusterStatus,
    WasmControlPlaneStatus
);
