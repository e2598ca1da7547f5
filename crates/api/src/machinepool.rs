//! `MachinePool` (`cluster.x-k8s.io/v1beta2`): a group of machines of one
//! Cluster, scaled together by an infrastructure provider. Field names and
//! meanings are upstream's; validation the upstream webhook does is said in
//! the schema (CEL) wherever a CRD can say it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::cluster::{FailureFields, StatusVersion, V1Beta1Condition};
use super::refs::ContractVersionedObjectReference;

/// The finalizer of the MachinePool controller (upstream's name).
pub const FINALIZER: &str = "machinepool.cluster.x-k8s.io";
/// Field manager of the MachinePool controller's writes.
pub const FIELD_MANAGER: &str = "capwasm-machinepool";

/// MachinePoolSpec: how many machines, built how.
// kube's printcolumn(..) entries repeat the same keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "MachinePool",
    doc = "A group of machines of one Cluster, scaled together by an infrastructure provider (Cluster API v1beta2).",
    plural = "machinepools",
    shortname = "mp",
    category = "cluster-api",
    namespaced,
    status = "MachinePoolStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas"
    ),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterName",
        description = "Cluster"
    ),
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "The desired number of machines"
    ),
    printcolumn(
        name = "Current",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "The number of machines"
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "The number of machines whose Node is Ready"
    ),
    printcolumn(
        name = "Available",
        type_ = "integer",
        json_path = ".status.availableReplicas",
        description = "The number of machines Ready for at least minReadySeconds"
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
        description = "MachinePool status such as Pending/Provisioning/Running/ScalingUp/Deleting"
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
        json_path = ".spec.template.spec.version",
        description = "Kubernetes version"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.clusterName == self.template.spec.clusterName", "message": "spec.template.spec.clusterName must equal spec.clusterName"},
]))]
pub struct MachinePoolSpec {
    /// The Cluster this pool belongs to. Immutable.
    #[schemars(length(min = 1, max = 63), extend("x-kubernetes-validations" = [
        {"rule": "self == oldSelf", "message": "clusterName is immutable"},
    ]))]
    pub cluster_name: String,

    /// How many machines the pool should have. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 1))]
    pub replicas: Option<i32>,

    /// How each machine is made.
    pub template: MachineTemplateSpec,

    /// The providerIDs of the pool's machines, copied from the
    /// infrastructure object by the MachinePool controller.
    #[serde(
        rename = "providerIDList",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(length(max = 10000), inner(length(min = 1, max = 512)))]
    pub provider_id_list: Vec<String>,

    /// Failure domains machines may be placed in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100), inner(length(min = 1, max = 256)))]
    pub failure_domains: Vec<String>,
}

/// The machine template of a pool.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineTemplateSpec {
    /// Labels and annotations for the machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    /// The machines' spec.
    pub spec: MachineSpec,
}

/// Labels and annotations of a template.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// MachineSpec, as far as a MachinePool uses it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// The Cluster the machines belong to (equal to the pool's).
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,

    /// Where the machines' bootstrap data comes from.
    pub bootstrap: Bootstrap,

    /// The infrastructure pool object (a WasmMachinePool, say). Required.
    pub infrastructure_ref: ContractVersionedObjectReference,

    /// The Kubernetes version the machines run, such as `v1.36.3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 256),
        regex(pattern = r"^v?[0-9]+\.[0-9]+\.[0-9]+([-+].*)?$")
    )]
    pub version: Option<String>,

    /// Seconds a Node must have been Ready to count as available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_ready_seconds: Option<i32>,

    /// Timeouts of machine deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub deletion: Option<MachineDeletionSpec>,
}

/// Where bootstrap data comes from: a config object, or a Secret the user made.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.configRef) || has(self.dataSecretName)", "message": "expected either configRef or dataSecretName to be populated"},
]))]
pub struct Bootstrap {
    /// The bootstrap config object (a WasmBootstrapConfig, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_ref: Option<ContractVersionedObjectReference>,
    /// The Secret with the bootstrap data (key `value`). Copied from the
    /// config once it is ready; set it yourself to use your own data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 0, max = 253))]
    pub data_secret_name: Option<String>,
}

/// Timeouts of machine deletion.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeletionSpec {
    /// How long deletion may wait for the pool's Nodes to be deleted in the
    /// workload cluster, from the deletion request; 0 waits for ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 10))]
    pub node_deletion_timeout_seconds: Option<i32>,
}

/// MachinePoolStatus: what the MachinePool controller observed.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolStatus {
    /// `Available`, `Paused`, `BootstrapConfigReady`, `InfrastructureReady`, `ReplicasReady`, `Deleting`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// Provisioning milestones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<MachinePoolInitializationStatus>,

    /// The workload-cluster Nodes of the pool's machines, in providerIDList order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10000))]
    pub node_refs: Vec<ObjectReference>,

    /// Machines the infrastructure provider reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Machines whose Node is Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,

    /// Machines whose Node has been Ready for at least minReadySeconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,

    /// Machines built from the current template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,

    /// The kubelet versions of the pool's Nodes, with how many run each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 100), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["version"]))]
    pub versions: Vec<StatusVersion>,

    /// `Pending`, `Provisioning`, `Provisioned`, `Running`, `ScalingUp`, `ScalingDown`, `Scaling`, `Deleting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,

    /// The generation the status was last computed for without error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,

    /// Fields of the v1beta1 API, kept for tools that read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<MachinePoolDeprecatedStatus>,
}

/// MachinePool provisioning milestones.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolInitializationStatus {
    /// The bootstrap data Secret exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_data_secret_created: Option<bool>,
    /// The infrastructure object reports itself provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
}

/// v1beta1 fields of the MachinePool status.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolDeprecatedStatus {
    /// v1beta1 fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta1: Option<MachinePoolV1Beta1Status>,
}

/// The node-based counters, failure fields and conditions of the v1beta1 API.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolV1Beta1Status {
    /// Conditions in the v1beta1 form, as clients of `cluster.x-k8s.io/v1beta1` write them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<V1Beta1Condition>,
    /// Terminal failure copied from a referenced object.
    #[serde(flatten)]
    pub failure: FailureFields,
    /// Machines whose Node is Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Machines whose Node has been Ready for minReadySeconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// `status.replicas` minus available (may be negative, as upstream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_replicas: Option<i32>,
}

impl MachinePool {
    /// `spec.replicas`, 1 when unset (the API server defaults it).
    pub fn desired_replicas(&self) -> i32 {
        self.spec.replicas.unwrap_or(1)
    }

    /// Whether the `cluster.x-k8s.io/paused` annotation is present (any value).
    pub fn has_paused_annotation(&self) -> bool {
        self.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(super::annotations::PAUSED))
    }
}
