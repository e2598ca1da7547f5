//! `Cluster` (`cluster.x-k8s.io/v1beta2`): upstream's fields for what
//! capwasm implements — references to infrastructure and control plane, the
//! control-plane endpoint, pausing, and the status the Cluster controller
//! derives. Topology (ClusterClass) is not served.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::refs::{ApiEndpoint, ContractVersionedObjectReference};

/// The finalizer of the Cluster controller (upstream's name).
pub const FINALIZER: &str = "cluster.cluster.x-k8s.io";
/// Field manager of the Cluster controller's writes.
pub const FIELD_MANAGER: &str = "capwasm-cluster";

/// ClusterSpec: what the cluster should be.
// kube's printcolumn(..) entries repeat the same keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "Cluster",
    doc = "A Kubernetes cluster: its infrastructure, control plane and endpoint (Cluster API v1beta2).",
    plural = "clusters",
    shortname = "cl",
    category = "cluster-api",
    namespaced,
    status = "ClusterStatus",
    printcolumn(
        name = "Available",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Available")].status"#,
        description = "Cluster pass all availability checks"
    ),
    printcolumn(
        name = "Endpoint",
        type_ = "string",
        json_path = ".spec.controlPlaneEndpoint.host",
        description = "Control-plane endpoint",
        priority = 10
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
        description = "Cluster status such as Pending/Provisioning/Provisioned/Deleting"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since creation"
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

    /// Where the control plane answers. Copied from the infrastructure
    /// object once it is provisioned, unless set here already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,

    /// The object providing the control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_ref: Option<ContractVersionedObjectReference>,

    /// The object providing the cluster's infrastructure (a WasmCluster, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ContractVersionedObjectReference>,
}

/// Network settings of a cluster.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetwork {
    /// The port the API server listens on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub api_server_port: Option<i32>,
    /// Service addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<NetworkRanges>,
    /// Pod addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<NetworkRanges>,
    /// The cluster's DNS domain for Services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub service_domain: Option<String>,
}

/// A list of CIDR blocks.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkRanges {
    /// The CIDR blocks.
    #[schemars(length(max = 100))]
    pub cidr_blocks: Vec<String>,
}

/// ClusterStatus: what the Cluster controller observed.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// `Available`, `Paused`, `InfrastructureReady`, `ControlPlaneInitialized`, `Deleting`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// Milestones of provisioning; once true they stay true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<ClusterInitializationStatus>,

    /// Failure domains, as the infrastructure object reports them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub failure_domains: Vec<FailureDomain>,

    /// The replica counts of the cluster's MachinePools, summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<WorkersStatus>,

    /// `Pending`, `Provisioning`, `Provisioned`, `Deleting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,

    /// The generation the status was last computed for without error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub observed_generation: Option<i64>,

    /// Fields of the v1beta1 API, kept for tools that read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<ClusterDeprecatedStatus>,
}

/// Cluster provisioning milestones.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInitializationStatus {
    /// The infrastructure object reported itself provisioned (or there is none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
    /// The control plane answered for the first time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_initialized: Option<bool>,
}

/// A failure domain (v1beta2 list form).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    /// Its name.
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// Whether control-plane machines may be placed in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// Provider-specific attributes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// Replica counts summed over a cluster's MachinePools.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WorkersStatus {
    /// Sum of `spec.replicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_replicas: Option<i32>,
    /// Sum of `status.replicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Sum of `status.readyReplicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Sum of `status.availableReplicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// Sum of `status.upToDateReplicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,
    /// The pools' `status.versions`, aggregated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 32), extend("x-kubernetes-list-type" = "atomic"))]
    pub versions: Vec<StatusVersion>,
}

/// How many replicas run a Kubernetes version.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StatusVersion {
    /// The Kubernetes version, as a Node's kubelet reports it.
    #[schemars(length(min = 1, max = 256))]
    pub version: String,
    /// Replicas at this version.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 1))]
    pub replicas: i32,
}

/// A Kubernetes version: `v1.31.2` or, as Cluster API allows, `1.31.2`,
/// with what semantic versioning lets follow (`-rc.0`, `+k3s1`).
pub fn parse_version(text: &str) -> Option<semver::Version> {
    semver::Version::parse(text.strip_prefix('v').unwrap_or(text)).ok()
}

// serde's skip_serializing_if passes a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &i32) -> bool {
    *n == 0
}

impl StatusVersion {
    /// `versions` summed by version, lowest version first (upstream's
    /// order: by semantic version, then as text, then as first seen; what
    /// does not parse after all that does); empty versions are skipped.
    pub fn aggregate(versions: impl IntoIterator<Item = StatusVersion>) -> Vec<StatusVersion> {
        let mut summed: Vec<StatusVersion> = Vec::new();
        for v in versions.into_iter().filter(|v| !v.version.is_empty()) {
            match summed.iter_mut().find(|s| s.version == v.version) {
                Some(s) => s.replicas = s.replicas.saturating_add(v.replicas),
                None => summed.push(v),
            }
        }
        // Stable: equal keys keep the order they were first seen in.
        summed.sort_by(
            |a, b| match (parse_version(&a.version), parse_version(&b.version)) {
                (Some(x), Some(y)) => x.cmp(&y).then_with(|| a.version.cmp(&b.version)),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => a.version.cmp(&b.version),
            },
        );
        summed
    }
}

/// v1beta1 fields of the Cluster status.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDeprecatedStatus {
    /// v1beta1 fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta1: Option<ClusterV1Beta1Status>,
}

/// The failure fields and conditions of the v1beta1 Cluster status.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterV1Beta1Status {
    /// Conditions in the v1beta1 form, as clients of `cluster.x-k8s.io/v1beta1` write them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<V1Beta1Condition>,
    /// Terminal failure copied from the infrastructure object.
    #[serde(flatten)]
    pub failure: FailureFields,
}

/// The terminal failure fields of the v1beta1 contract.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FailureFields {
    /// A short CamelCase token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// For people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
}

/// A condition in the v1beta1 form (Cluster API's own type, with a
/// severity), kept in `status.deprecated.v1beta1.conditions` so that
/// `cluster.x-k8s.io/v1beta1` clients read back what they wrote.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct V1Beta1Condition {
    /// CamelCase, or `foo.example.com/CamelCase`.
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = 256))]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// `Error`, `Warning` or `Info`; only with status `False`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub severity: Option<String>,
    /// When the status last changed.
    pub last_transition_time: Time,
    /// A CamelCase token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub reason: Option<String>,
    /// For people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 10240))]
    pub message: Option<String>,
}

impl Cluster {
    /// `spec.paused` is true.
    pub fn is_paused(&self) -> bool {
        self.spec.paused == Some(true)
    }

    /// The control-plane endpoint, once both host and port are known.
    pub fn endpoint(&self) -> Option<&ApiEndpoint> {
        self.spec
            .control_plane_endpoint
            .as_ref()
            .filter(|e| e.is_valid())
    }

    /// `status.initialization.infrastructureProvisioned`.
    pub fn infrastructure_provisioned(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.infrastructure_provisioned)
            == Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(version: &str, replicas: i32) -> StatusVersion {
        StatusVersion {
            version: version.to_owned(),
            replicas,
        }
    }

    #[test]
    fn versions_are_summed_lowest_first_and_what_does_not_parse_last() {
        let summed = StatusVersion::aggregate([
            at("v1.31.2", 1),
            at("weird", 1),
            at("v1.30.4", 2),
            at("", 4),
            at("v1.31.2", 1),
            at("v1.31.2-rc.0", 1),
            at("v1.9.0", 1),
        ]);
        assert_eq!(
            summed,
            [
                at("v1.9.0", 1),
                at("v1.30.4", 2),
                at("v1.31.2-rc.0", 1),
                at("v1.31.2", 2),
                at("weird", 1),
            ]
        );
        assert!(StatusVersion::aggregate([]).is_empty());
    }
}
