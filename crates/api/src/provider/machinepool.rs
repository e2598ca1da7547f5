//! WasmMachinePool: the machines of a MachinePool, from an
//! infrastructure-provider component, and the instances it reports.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{InfrastructureInitialization, MachinePoolStrategy, ProviderStatus, free_form_object};

/// WasmMachinePoolSpec: which provider runs the pool's machines.
// kube's printcolumn(..) entries repeat the same keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "WasmMachinePool",
    doc = "The machines of a MachinePool, provisioned by an infrastructure-provider component.",
    plural = "wasmmachinepools",
    shortname = "wmp",
    category = "cluster-api",
    namespaced,
    status = "WasmMachinePoolStatus",
    label("cluster.x-k8s.io/v1beta1", "v1alpha1"),
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
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
        name = "Replicas",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "Instances"
    ),
    printcolumn(
        name = "Ready",
        type_ = "boolean",
        json_path = ".status.ready",
        description = "Every desired instance is running"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since creation"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct WasmMachinePoolSpec {
    /// The ProviderModule (an infrastructure-provider component) that runs the pool.
    #[schemars(length(min = 1, max = 253))]
    pub provider: String,
    /// The provider's configuration, validated against its config schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form_object")]
    pub config: Option<serde_json::Value>,
    /// The providerIDs of the pool's instances (infrastructure contract).
    #[serde(
        rename = "providerIDList",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(length(max = 10000), inner(length(min = 1, max = 512)))]
    pub provider_id_list: Vec<String>,
    /// How instances made before a change of the pool's version, bootstrap
    /// config or `config` are replaced (CAPZ's AzureMachinePool shape).
    /// Only providers that remove chosen instances (`pool-machines`) roll
    /// out; with others, the old instances run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<MachinePoolStrategy>,
}

/// WasmMachinePoolStatus, per the infrastructure machine pool contract.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WasmMachinePoolStatus {
    /// Every desired instance is running (v1beta1 contract).
    #[serde(default)]
    pub ready: bool,
    /// v1beta2 contract milestones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<InfrastructureInitialization>,
    /// Instances the pool has (terminating ones excluded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// `WasmMachine` while the provider removes instances one by one: each
    /// instance is then a WasmMachine, and core makes a Machine of each
    /// (the contract for MachinePool Machines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_machine_kind: Option<String>,
    /// Instances up that were made from the pool's current version,
    /// bootstrap config and `config` (upstream's v1beta2 counter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,
    /// What a node of the pool offers, as a Node's `status.capacity`
    /// (`cpu`, `memory`, ...), from the provider's `node-shapes` before any
    /// node exists: the cluster-autoscaler scales a pool up from zero by it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 32))]
    pub capacity: BTreeMap<String, Quantity>,
    /// The architecture and operating system of the pool's nodes, with
    /// `capacity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_info: Option<NodeInfo>,
    /// A digest of the `config` and the provider code `CapacityKnown` was
    /// last settled for: the provider is asked again when either changes,
    /// and a scale, which changes neither, asks nothing. Set by the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub capacity_revision: Option<String>,
    /// The instances as the provider last reported them; handed back to it on the next call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10000))]
    pub instances: Vec<InstanceStatus>,
    /// What every provider object reports.
    #[serde(flatten)]
    pub common: ProviderStatus,
}

/// What the nodes of a pool run on (upstream's `NodeInfo` of the
/// autoscaling-from-zero contract).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    /// As Go names it: `amd64`, `arm64`.
    #[schemars(length(max = 32))]
    pub architecture: String,
    /// As Go names it: `linux`, `windows`.
    #[schemars(length(max = 32))]
    pub operating_system: String,
}

/// One instance of a pool.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    /// The provider's id for it.
    pub id: String,
    /// The providerID its Node reports.
    #[serde(
        rename = "providerID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub provider_id: String,
    /// `Pending`, `Running`, `Failed` or `Terminating`.
    pub state: InstanceState,
    /// Where it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    /// Its addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,
    /// The idempotency token it was created with (opaque; handed back to the provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_token: Option<String>,
    /// The pool's revision when the host first saw the instance: a digest
    /// of the version, bootstrap config and `config` it was made from. Set
    /// by the host, never by the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub revision: Option<String>,
}

/// Lifecycle state of an instance.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum InstanceState {
    /// Being created or booting.
    #[default]
    Pending,
    /// Running.
    Running,
    /// Failed; it will not become a Node.
    Failed,
    /// Being removed.
    Terminating,
}

/// An address of a machine (upstream's MachineAddress).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MachineAddress {
    /// `Hostname`, `ExternalIP`, `InternalIP`, `ExternalDNS` or `InternalDNS`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The address.
    pub address: String,
}
