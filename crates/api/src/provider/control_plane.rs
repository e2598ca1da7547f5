//! WasmControlPlane: a cluster's control plane, from a control-plane-provider
//! component, per Cluster API's v1beta2 control-plane contract.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ProviderStatus, free_form_object};
use crate::refs::ApiEndpoint;

/// WasmControlPlaneSpec: which provider runs the control plane, at which
/// version and size.
// kube's printcolumn(..) entries repeat the same keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "controlplane.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "WasmControlPlane",
    doc = "A cluster's control plane, run by a control-plane-provider component.",
    plural = "wasmcontrolplanes",
    shortname = "wcp",
    category = "cluster-api",
    namespaced,
    status = "WasmControlPlaneStatus",
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels.cluster\\.x-k8s\\.io/cluster-name",
        description = "Cluster"
    ),
    printcolumn(
        name = "Provider",
        type_ = "string",
        json_path = ".spec.provider",
        description = "ProviderModule"
    ),
    printcolumn(
        name = "Initialized",
        type_ = "boolean",
        json_path = ".status.initialization.controlPlaneInitialized",
        description = "The API server has served"
    ),
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Replicas asked for"
    ),
    printcolumn(
        name = "Available",
        type_ = "integer",
        json_path = ".status.availableReplicas",
        description = "Replicas serving the API"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".status.version",
        description = "The oldest version running"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since creation"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct WasmControlPlaneSpec {
    /// The ProviderModule (a control-plane-provider component) that runs the control plane.
    #[schemars(length(min = 1, max = 253))]
    pub provider: String,
    /// The provider's configuration, validated against its config schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form_object")]
    pub config: Option<serde_json::Value>,
    /// How many replicas of the control plane to run: odd, since etcd's
    /// quorum gains nothing from an even member. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 7), extend("default" = 1, "x-kubernetes-validations" = [
        {"rule": "self % 2 == 1", "message": "replicas must be odd: an even etcd membership tolerates no more failures than one fewer"},
    ]))]
    pub replicas: Option<i32>,
    /// The Kubernetes version to run, such as `v1.36.3`.
    #[schemars(
        length(min = 6, max = 64),
        regex(pattern = r"^v\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]+)?$")
    )]
    pub version: String,
    /// Where the API server answers; set from the provider unless given here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
}

impl WasmControlPlaneSpec {
    /// The replicas asked for (1 when unset).
    pub fn replicas(&self) -> u32 {
        self.replicas
            .and_then(|r| u32::try_from(r).ok())
            .unwrap_or(1)
    }
}

/// v1beta2 control-plane contract milestones.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneInitialization {
    /// The API server has served once: workers may join.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_initialized: Option<bool>,
}

/// WasmControlPlaneStatus, per the control-plane contract.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WasmControlPlaneStatus {
    /// v1beta2 contract milestones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<ControlPlaneInitialization>,
    /// Replicas that exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Replicas whose components run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Replicas serving the API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// Replicas at the asked version and config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,
    /// The label selector of its replicas, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// The oldest Kubernetes version among its replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The control plane has no Nodes in the cluster (it is hosted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_managed_control_plane: Option<bool>,
    /// What every provider object reports.
    #[serde(flatten)]
    pub common: ProviderStatus,
}
