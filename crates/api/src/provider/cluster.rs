//! WasmCluster: a cluster's shared infrastructure, from an
//! infrastructure-provider component.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{InfrastructureInitialization, ProviderStatus, free_form_object};
use crate::cluster::FailureDomain;
use crate::refs::ApiEndpoint;

/// WasmClusterSpec: which provider provisions the cluster's shared infrastructure.
// kube's printcolumn(..) entries repeat the same keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "WasmCluster",
    doc = "A cluster's shared infrastructure, provisioned by an infrastructure-provider component.",
    plural = "wasmclusters",
    shortname = "wcl",
    category = "cluster-api",
    namespaced,
    status = "WasmClusterStatus",
    // v1beta2 only: its failureDomains is the v1beta2 list, which the v1beta1 contract reads as a map.
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
    printcolumn(name = "Cluster", type_ = "string", json_path = ".metadata.labels.cluster\\.x-k8s\\.io/cluster-name", description = "Cluster"),
    printcolumn(name = "Provider", type_ = "string", json_path = ".spec.provider", description = "ProviderModule"),
    printcolumn(name = "Endpoint", type_ = "string", json_path = ".spec.controlPlaneEndpoint.host", description = "Control-plane endpoint"),
    printcolumn(name = "Provisioned", type_ = "boolean", json_path = ".status.initialization.provisioned", description = "Infrastructure provisioned"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp", description = "Time since creation")
)]
#[serde(rename_all = "camelCase")]
pub struct WasmClusterSpec {
    /// The ProviderModule (an infrastructure-provider component) that provisions the cluster.
    #[schemars(length(min = 1, max = 253))]
    pub provider: String,
    /// The provider's configuration, validated against its config schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form_object")]
    pub config: Option<serde_json::Value>,
    /// Where the control plane answers; set by the provider unless given here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
}

/// WasmClusterStatus, per the infrastructure cluster contract.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WasmClusterStatus {
    /// Provisioned (v1beta1 contract).
    #[serde(default)]
    pub ready: bool,
    /// v1beta2 contract milestones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<InfrastructureInitialization>,
    /// Failure domains machines may be placed in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub failure_domains: Vec<FailureDomain>,
    /// What every provider object reports.
    #[serde(flatten)]
    pub common: ProviderStatus,
}
