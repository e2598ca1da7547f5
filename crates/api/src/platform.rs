//! `PlatformCluster` and `ClusterTemplate` (`platform.capwasm.dev/v1alpha1`):
//! a cluster as a platform's users ask for it — a template's name, node
//! groups, a few values — composed into Cluster API objects by the
//! platform-provider component the template names.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::provider::ServedBy;

/// The API group of the platform kinds.
pub const GROUP: &str = "platform.capwasm.dev";
/// Their API version.
pub const API_VERSION: &str = "platform.capwasm.dev/v1alpha1";
/// The label on every object of a platform cluster: the cluster's name.
pub const CLUSTER_LABEL: &str = "platform.capwasm.dev/cluster";
/// The finalizer of PlatformClusters.
pub const FINALIZER: &str = "platform.capwasm.dev/cluster";
/// Field manager of the PlatformCluster controller's status writes; each
/// cluster applies its objects as a manager of its own ([`objects_manager`]).
pub const FIELD_MANAGER: &str = "capwasm-platform";
/// The creation record: written by the host only when it creates an object
/// for a platform cluster, naming that cluster. What proves an object is the
/// cluster's to update, prune and delete: unlike an owner reference it
/// survives a restore from backup (it names, not a UID), and unlike the
/// label it is never put on an object that existed before.
pub const CREATED_FOR_ANNOTATION: &str = "platform.capwasm.dev/created-for";

/// The field manager platform cluster `name` applies its objects as: one
/// per cluster (a name stays within its namespace, as the objects do), so
/// that no cluster takes fields another one set.
pub fn objects_manager(name: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(name.as_bytes());
    format!("capwasm-platform/{}", hex::encode(&digest[..8]))
}
/// How long a cluster may stay pending, reconciling or upgrading when its
/// template sets no timeout.
pub const DEFAULT_PHASE_TIMEOUT_SECONDS: u32 = 1800;

/// Phases: the provider's roll-up, plus `Deleting` and `Failed` (the host's).
pub mod phase {
    /// Waiting for its first objects.
    pub const PENDING: &str = "Pending";
    /// Objects being created or scaled.
    pub const RECONCILING: &str = "Reconciling";
    /// Nodes of more than one version.
    pub const UPGRADING: &str = "Upgrading";
    /// Everything as asked.
    pub const READY: &str = "Ready";
    /// Something is wrong, or a transitional phase outlasted its timeout.
    pub const UNHEALTHY: &str = "Unhealthy";
    /// The provider cannot tell.
    pub const UNKNOWN: &str = "Unknown";
    /// Being deleted.
    pub const DELETING: &str = "Deleting";
    /// Nothing can be composed until the spec, template or provider changes.
    pub const FAILED: &str = "Failed";
}

/// PlatformClusterSpec: which template, which node groups, which values.
// kube's printcolumn(..) entries repeat the same keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "platform.capwasm.dev",
    version = "v1alpha1",
    kind = "PlatformCluster",
    doc = "A cluster composed from a ClusterTemplate by its platform provider.",
    namespaced,
    plural = "platformclusters",
    shortname = "plc",
    category = "capwasm",
    status = "PlatformClusterStatus",
    printcolumn(
        name = "Template",
        type_ = "string",
        json_path = ".spec.templateName",
        description = "The ClusterTemplate"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".status.kubernetesVersion",
        description = "The Kubernetes version the cluster runs"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "The roll-up of every object of the cluster"
    ),
    printcolumn(
        name = "Nodes",
        type_ = "integer",
        json_path = ".status.nodeCount",
        description = "Nodes of the workload cluster"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since creation"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct PlatformClusterSpec {
    /// The ClusterTemplate the cluster is made from. Changing it is an
    /// upgrade, which the template's provider validates first.
    #[schemars(length(min = 1, max = 253))]
    pub template_name: String,
    /// The node groups: each becomes a pool of machines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub node_groups: Vec<NodeGroup>,
    /// Stop composing, applying and pruning until it is false again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Values over the template's own (`spec.values`); the provider's
    /// config schema checks the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::provider::free_form_object")]
    pub values: Option<Value>,
}

/// One node group: a fixed count, or autoscaling bounds.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroup {
    /// Its name, unique in the cluster (a DNS label).
    #[schemars(length(min = 1, max = 40))]
    pub name: String,
    /// Machines in the group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 1000))]
    pub count: Option<u32>,
    /// The autoscaler's lower bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 1000))]
    pub min_count: Option<u32>,
    /// The autoscaler's upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 1000))]
    pub max_count: Option<u32>,
    /// Values for this group alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::provider::free_form_object")]
    pub values: Option<Value>,
}

/// PlatformClusterStatus: the roll-up the provider computes, and what the host did.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlatformClusterStatus {
    /// `Ready`, `Paused`, `TemplateAccepted`, and the provider's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 48), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The generation last reconciled without error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pending, Reconciling, Upgrading, Ready, Unhealthy, Unknown, Deleting or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Why the cluster is in its phase, when it is not Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The phase the provider last reported (the phase shows Unhealthy
    /// instead once a transitional one outlasts the template's timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_phase: Option<String>,
    /// Since when the provider has reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_since: Option<Time>,
    /// The template the running objects were rendered from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_template: Option<String>,
    /// The Kubernetes version the cluster runs, as the provider reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// Nodes of the workload cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_count: Option<u32>,
    /// Each node group's machines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_groups: Vec<NodeGroupStatus>,
    /// Each node of the workload cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeStatus>,
    /// The provider code that composed the objects in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_by: Option<ServedBy>,
}

/// One node group's machines.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupStatus {
    /// The group.
    pub name: String,
    /// Machines asked for.
    pub desired: u32,
    /// Machines whose Node is ready.
    pub ready: u32,
    /// Its pool's phase.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
}

/// One node of the workload cluster.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// The Node's name.
    pub name: String,
    /// Its group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_group: String,
    /// Its kubelet's version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubelet_version: String,
    /// Whether it is Ready.
    pub ready: bool,
}

/// ClusterTemplateSpec: the provider composing clusters of the template, and its values.
// kube's printcolumn(..) entries repeat the same keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "platform.capwasm.dev",
    version = "v1alpha1",
    kind = "ClusterTemplate",
    doc = "A kind of platform cluster: the platform provider composing it, and its values.",
    plural = "clustertemplates",
    shortname = "ct",
    category = "capwasm",
    printcolumn(
        name = "Provider",
        type_ = "string",
        json_path = ".spec.provider",
        description = "The ProviderModule composing its clusters"
    ),
    printcolumn(
        name = "Deprecated",
        type_ = "boolean",
        json_path = ".spec.deprecated",
        description = "No new cluster may use it"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since creation"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterTemplateSpec {
    /// The ProviderModule (world `platform`) composing clusters of this template.
    #[schemars(length(min = 1, max = 253))]
    pub provider: String,
    /// For people choosing a template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub description: Option<String>,
    /// Values for the provider (a Kubernetes version, addons); a cluster's
    /// own values go over them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::provider::free_form_object")]
    pub values: Option<Value>,
    /// No new cluster may use it; clusters made from it keep running.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deprecated: bool,
    /// How long a cluster may stay Pending, Reconciling or Upgrading before
    /// it is Unhealthy (default 1800).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub phase_timeout_seconds: Option<u32>,
    /// The namespaces whose PlatformClusters may use it: `{}` for every
    /// namespace; left out, none. Its provider's ProviderModule must allow
    /// the namespace too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_namespaces: Option<super::tenancy::AllowedNamespaces>,
}
