//! `Machine` (`cluster.x-k8s.io/v1beta2`): one machine of a Cluster. capwasm's
//! own core serves it for the machines of MachinePools whose infrastructure
//! reports `status.infrastructureMachineKind` (MachinePool Machines): the
//! MachinePool controller makes one per InfraMachine, owned by the pool, and
//! the Machine controller finds its Node and, when it is deleted, drains
//! that Node before the InfraMachine (and so the instance) goes. Field names
//! and meanings are upstream's.

use k8s_openapi::api::core::v1::NodeSystemInfo;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::machinepool::Bootstrap;
use super::provider::MachineAddress;
use super::refs::ContractVersionedObjectReference;

/// The finalizer of the Machine controller (upstream's name).
pub const FINALIZER: &str = "machine.cluster.x-k8s.io";
/// Field manager of the Machine controller's writes.
pub const FIELD_MANAGER: &str = "capwasm-machine";
/// On a Machine: its Node is not drained when it is deleted (upstream's).
pub const EXCLUDE_NODE_DRAINING: &str = "machine.cluster.x-k8s.io/exclude-node-draining";

/// MachineSpec: which Cluster, which infrastructure.
// kube's printcolumn(..) entries repeat the same keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "Machine",
    doc = "One machine of a Cluster (Cluster API v1beta2); capwasm's core serves those of MachinePools.",
    plural = "machines",
    shortname = "ma",
    category = "cluster-api",
    namespaced,
    status = "MachineStatus",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterName",
        description = "Cluster"
    ),
    printcolumn(
        name = "NodeName",
        type_ = "string",
        json_path = ".status.nodeRef.name",
        description = "The Node of the machine"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#,
        description = "The machine's Node is Ready"
    ),
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Paused")].status"#,
        description = "Reconciliation paused",
        priority = 10
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Machine status such as Provisioning/Running/Deleting"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since creation"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.version",
        description = "Kubernetes version"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// The Cluster the machine belongs to. Immutable.
    #[schemars(length(min = 1, max = 63), extend("x-kubernetes-validations" = [
        {"rule": "self == oldSelf", "message": "clusterName is immutable"},
    ]))]
    pub cluster_name: String,

    /// Where its bootstrap data comes from; a MachinePool's machine has
    /// none of its own (its pool's config bootstraps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<Bootstrap>,

    /// The InfraMachine (a WasmMachine, say).
    pub infrastructure_ref: ContractVersionedObjectReference,

    /// The Kubernetes version it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub version: Option<String>,

    /// Its Node's `spec.providerID`, copied from the InfraMachine.
    #[serde(
        rename = "providerID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: Option<String>,

    /// Where it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub failure_domain: Option<String>,

    /// Timeouts of its deletion: the drain, the Node's deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<MachineDeletionSpec>,
}

/// Timeouts of a Machine's deletion; unset or 0, no timeout.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeletionSpec {
    /// How long the drain of its Node may take, from its start; past it,
    /// the Pods left are not evicted and the deletion goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub node_drain_timeout_seconds: Option<i32>,
    /// How long the deletion may retry deleting its Node, from the deletion
    /// request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub node_deletion_timeout_seconds: Option<i32>,
}

/// MachineStatus: what the Machine controller observed.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// Available, Ready, InfrastructureReady, NodeReady, NodeHealthy,
    /// Deleting, Paused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub conditions: Vec<Condition>,
    /// Milestones of its provisioning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<MachineInitializationStatus>,
    /// Its Node in the workload cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ref: Option<MachineNodeReference>,
    /// What its Node reports of itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_info: Option<NodeSystemInfo>,
    /// Pending, Provisioning, Provisioned, Running, Deleting, Deleted or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Its addresses, copied from the InfraMachine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub addresses: Vec<MachineAddress>,
    /// How its deletion went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<MachineDeletionStatus>,
    /// The generation last reconciled without error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Milestones of a Machine's provisioning: its bootstrap data exists (a
/// pool's machine: its pool's), its InfraMachine says it is provisioned.
pub type MachineInitializationStatus = super::machinepool::MachinePoolInitializationStatus;

/// A Machine's Node, by name.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MachineNodeReference {
    /// The Node's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// When a Machine's deletion began each of its waits.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeletionStatus {
    /// When the drain of its Node began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_drain_start_time: Option<Time>,
}

impl Machine {
    /// The MachinePool owning it (controller owner reference), by name.
    pub fn pool_owner(&self) -> Option<&str> {
        self.metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| {
                o.kind == "MachinePool"
                    && o.controller == Some(true)
                    && o.api_version.split('/').next() == Some(super::CLUSTER_API_GROUP)
            })
            .map(|o| o.name.as_str())
    }
}
