//! WasmMachine: one instance of a WasmMachinePool, as the InfraMachine of
//! the Cluster API contract for MachinePool Machines. The WasmMachinePool
//! controller makes one per instance of a provider that removes instances
//! one by one (`pool-machines`, WIT 0.1.2), and Cluster API core a Machine
//! for each; deleting that Machine drains the Node and then deletes the
//! WasmMachine, whose instance the pool's provider then removes.

use base64::Engine as _;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::provider::{
    InfrastructureInitialization, InstanceState, MachineAddress, ProviderStatus,
};

/// Finalizer on WasmMachines: the pool's controller removes it once the
/// provider has removed the instance.
pub const MACHINE_FINALIZER: &str = "wasmmachine.infrastructure.cluster.x-k8s.io";

/// WasmMachineSpec: which instance of its pool it is.
// kube's printcolumn(..) entries repeat the same keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "WasmMachine",
    doc = "One instance of a WasmMachinePool: the infrastructure machine of a MachinePool Machine.",
    plural = "wasmmachines",
    shortname = "wm",
    category = "cluster-api",
    namespaced,
    status = "WasmMachineStatus",
    // v1beta2 only: its failure domain is in status, where v1beta2 reads it.
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
    printcolumn(name = "Cluster", type_ = "string", json_path = ".metadata.labels.cluster\\.x-k8s\\.io/cluster-name", description = "Cluster"),
    printcolumn(name = "Pool", type_ = "string", json_path = ".metadata.labels.cluster\\.x-k8s\\.io/pool-name", description = "MachinePool"),
    printcolumn(name = "ProviderID", type_ = "string", json_path = ".spec.providerID", description = "The instance's providerID"),
    printcolumn(name = "State", type_ = "string", json_path = ".status.state", description = "The instance's state"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp", description = "Time since creation")
)]
#[serde(rename_all = "camelCase")]
pub struct WasmMachineSpec {
    /// The provider's id of the instance in its pool.
    #[serde(rename = "instanceID")]
    #[schemars(length(min = 1, max = 256))]
    pub instance_id: String,
    /// The providerID the instance's Node reports (InfraMachine contract).
    #[serde(
        rename = "providerID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: Option<String>,
}

/// WasmMachineStatus, per the InfraMachine contract.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WasmMachineStatus {
    /// The instance runs (v1beta1 contract).
    #[serde(default)]
    pub ready: bool,
    /// v1beta2 contract milestones: provisioned once the instance runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<InfrastructureInitialization>,
    /// The instance's state as its provider last reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<InstanceState>,
    /// Where it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    /// Its addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub addresses: Vec<MachineAddress>,
    /// What every provider object reports.
    #[serde(flatten)]
    pub common: ProviderStatus,
}

impl WasmMachine {
    /// The WasmMachinePool owning it, by owner reference.
    pub fn pool_owner(
        &self,
    ) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
        self.metadata.owner_references.iter().flatten().find(|o| {
            o.kind == "WasmMachinePool"
                && o.api_version
                    .starts_with("infrastructure.cluster.x-k8s.io/")
        })
    }
}

/// The value of the `cluster.x-k8s.io/pool-name` label for MachinePool
/// `name`, as Cluster API writes it: the name when it is a valid label
/// value, else `hash_<base64url of its FNV-1a 32>_z` (upstream's
/// `format.MustFormatValue`, which core lists InfraMachines by).
pub fn pool_name_label(name: &str) -> String {
    if is_label_value(name) {
        return name.to_owned();
    }
    let hash = name.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    });
    format!(
        "hash_{}_z",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash.to_be_bytes())
    )
}

/// A valid Kubernetes label value: at most 63 characters of `[A-Za-z0-9._-]`,
/// beginning and ending alphanumeric, or empty.
fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    bytes.is_empty()
        || (bytes.len() <= 63
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(b))
            && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
            && bytes.last().is_some_and(u8::is_ascii_alphanumeric))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_names_that_are_label_values_are_kept_and_others_hashed_as_upstream_does() {
        assert_eq!(pool_name_label("pool-a"), "pool-a");
        assert_eq!(pool_name_label(""), "");
        // What Go's format.MustFormatValue answers for these.
        assert_eq!(pool_name_label(&"p".repeat(64)), "hash_X-hqxQ_z");
        assert_eq!(pool_name_label("-a"), "hash_ZM2IGw_z");
        assert_eq!(pool_name_label(&"p".repeat(63)), "p".repeat(63));
    }
}
