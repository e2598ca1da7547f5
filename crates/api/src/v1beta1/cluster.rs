//! `Cluster` (`cluster.x-k8s.io/v1beta1`): upstream's v1beta1 fields for
//! what capwasm's v1beta2 Cluster holds. References are `ObjectReference`s
//! with an `apiVersion`; the status keeps the v1beta1 flags, failure fields
//! and conditions, and the v1beta2 conditions and counters under `v1beta2`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition as MetaCondition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;
use crate::cluster::{ClusterNetwork, FailureFields, WorkersStatus};

/// ClusterSpec (v1beta1).
// kube's printcolumn(..) entries repeat the same keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "Cluster",
    doc = "A Kubernetes cluster: its infrastructure, control plane and endpoint (Cluster API v1beta1, deprecated).",
    plural = "clusters",
    shortname = "cl",
    category = "cluster-api",
    namespaced,
    status = "ClusterStatus",
    deprecated = "cluster.x-k8s.io/v1beta1 Cluster is deprecated; use cluster.x-k8s.io/v1beta2 Cluster",
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Cluster status such as Pending/Provisioning/Provisioned/Deleting/Failed"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of Cluster"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// Stops the reconciliation of this Cluster and of every object belonging to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,

    /// The cluster's network settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_network: Option<ClusterNetwork>,

    /// Where the control plane answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,

    /// The object providing the control plane, in the Cluster's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_ref: Option<ObjectReference>,

    /// The object providing the cluster's infrastructure, in the Cluster's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ObjectReference>,
}

/// A network endpoint in the v1beta1 form: both fields always written, empty
/// when unknown (Go clients send `{"host": "", "port": 0}`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApiEndpoint {
    /// DNS name or IP address.
    #[serde(default)]
    #[schemars(length(max = 512))]
    pub host: String,
    /// TCP port.
    #[serde(default)]
    pub port: i32,
}

/// ClusterStatus (v1beta1).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// Failure domains by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failure_domains: BTreeMap<String, FailureDomainSpec>,

    /// Terminal failure of the cluster.
    #[serde(flatten)]
    pub failure: FailureFields,

    /// `Pending`, `Provisioning`, `Provisioned`, `Deleting`, `Failed`, `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,

    /// The infrastructure is provisioned (v1beta2 `initialization.infrastructureProvisioned`).
    #[serde(default)]
    pub infrastructure_ready: bool,

    /// The control plane is initialized (v1beta2 `initialization.controlPlaneInitialized`).
    #[serde(default)]
    pub control_plane_ready: bool,

    /// Conditions in the v1beta1 form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// The generation the status was last computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// The v1beta2 conditions and counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<ClusterV1Beta2Status>,
}

/// A failure domain (v1beta1 map form, keyed by name).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomainSpec {
    /// Whether control-plane machines may be placed in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// Provider-specific attributes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// The v1beta2 part of a v1beta1 Cluster status.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterV1Beta2Status {
    /// The v1beta2 conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<MetaCondition>,
    /// The replica counts of the cluster's MachinePools, summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<WorkersStatus>,
}
