//! `MachinePool` (`cluster.x-k8s.io/v1beta1`): upstream's v1beta1 fields for
//! what capwasm's v1beta2 MachinePool holds. `minReadySeconds` sits at pool
//! level and the deletion timeout is a duration string, as in upstream's
//! v1beta1; the status keeps the v1beta1 counters, flags, failure fields and
//! conditions, and the v1beta2 conditions and counters under `v1beta2`.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition as MetaCondition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Condition, Duration};
use crate::cluster::FailureFields;
use crate::machinepool::TemplateMetadata;

/// MachinePoolSpec (v1beta1).
// kube's printcolumn(..) entries repeat the same keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "MachinePool",
    doc = "A group of machines of one Cluster, scaled together by an infrastructure provider (Cluster API v1beta1, deprecated).",
    plural = "machinepools",
    shortname = "mp",
    category = "cluster-api",
    namespaced,
    status = "MachinePoolStatus",
    deprecated = "cluster.x-k8s.io/v1beta1 MachinePool is deprecated; use cluster.x-k8s.io/v1beta2 MachinePool",
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
        description = "Total number of machines desired by this MachinePool",
        priority = 10
    ),
    printcolumn(
        name = "Replicas",
        type_ = "string",
        json_path = ".status.replicas",
        description = "MachinePool replicas count"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "MachinePool status such as Terminating/Pending/Provisioning/Running/Failed etc"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of MachinePool"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.template.spec.version",
        description = "Kubernetes version associated with this MachinePool"
    )
)]
#[serde(rename_all = "camelCase")]
// Validation runs against the version a request is made in: v1beta1 writes
// keep the rules the v1beta2 schema states.
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

    /// Seconds a Node must have been Ready to count as available (v1beta2
    /// `spec.template.spec.minReadySeconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_ready_seconds: Option<i32>,

    /// The providerIDs of the pool's machines.
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

/// The machine template of a pool (v1beta1).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineTemplateSpec {
    /// Labels and annotations for the machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    /// The machines' spec.
    pub spec: MachineSpec,
}

/// MachineSpec (v1beta1), as far as a MachinePool uses it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// The Cluster the machines belong to (equal to the pool's).
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: String,

    /// Where the machines' bootstrap data comes from.
    pub bootstrap: Bootstrap,

    /// The infrastructure pool object, in the pool's namespace. Required.
    pub infrastructure_ref: ObjectReference,

    /// The Kubernetes version the machines run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub version: Option<String>,

    /// How long deletion may wait for the pool's Nodes to be deleted, as a
    /// duration (`10s`); whole seconds in v1beta2
    /// (`deletion.nodeDeletionTimeoutSeconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_deletion_timeout: Option<Duration>,
}

/// Where bootstrap data comes from (v1beta1).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.configRef) || has(self.dataSecretName)", "message": "expected either configRef or dataSecretName to be populated"},
]))]
pub struct Bootstrap {
    /// The bootstrap config object, in the pool's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_ref: Option<ObjectReference>,
    /// The Secret with the bootstrap data (key `value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 0, max = 253))]
    pub data_secret_name: Option<String>,
}

/// MachinePoolStatus (v1beta1).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolStatus {
    /// The workload-cluster Nodes of the pool's machines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10000))]
    pub node_refs: Vec<ObjectReference>,

    /// Machines the infrastructure provider reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Machines whose Node is Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,

    /// Machines whose Node has been Ready for minReadySeconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,

    /// `replicas` minus available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_replicas: Option<i32>,

    /// Terminal failure copied from a referenced object.
    #[serde(flatten)]
    pub failure: FailureFields,

    /// `Pending`, `Provisioning`, `Provisioned`, `Running`, `ScalingUp`, `ScalingDown`, `Scaling`, `Deleting`, `Failed`, `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,

    /// The bootstrap data Secret exists (v1beta2 `initialization.bootstrapDataSecretCreated`).
    #[serde(default)]
    pub bootstrap_ready: bool,

    /// The infrastructure is provisioned (v1beta2 `initialization.infrastructureProvisioned`).
    #[serde(default)]
    pub infrastructure_ready: bool,

    /// The generation the status was last computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Conditions in the v1beta1 form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// The v1beta2 conditions and counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<MachinePoolV1Beta2Status>,
}

/// The v1beta2 part of a v1beta1 MachinePool status.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolV1Beta2Status {
    /// The v1beta2 conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<MetaCondition>,
    /// Machines whose Node is Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Machines whose Node has been Ready for at least minReadySeconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// Machines built from the current template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,
}
