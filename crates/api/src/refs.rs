//! References and endpoints shared by the kinds.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A reference to an object in the same namespace whose API version is
/// resolved at run time from the contract labels of its CRD (v1beta2 refs).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct ContractVersionedObjectReference {
    /// The group of the referenced object's kind, such as `infrastructure.cluster.x-k8s.io`.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN))]
    pub api_group: String,
    /// The referenced object's kind.
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$")
    )]
    pub kind: String,
    /// The referenced object's name, in the referring object's namespace.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN))]
    pub name: String,
}

impl ContractVersionedObjectReference {
    /// A reference to `kind` `name` in `api_group`.
    pub fn new(api_group: &str, kind: &str, name: &str) -> Self {
        Self {
            api_group: api_group.into(),
            kind: kind.into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for ContractVersionedObjectReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{} {:?}", self.kind, self.api_group, self.name)
    }
}

const DNS_SUBDOMAIN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// A network endpoint, such as a cluster's API server.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApiEndpoint {
    /// DNS name or IP address.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 512))]
    pub host: String,
    /// TCP port.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
}

impl ApiEndpoint {
    /// Both host and port are set (Cluster API's `IsValid`).
    pub fn is_valid(&self) -> bool {
        !self.host.is_empty() && self.port != 0
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &i32) -> bool {
    *n == 0
}
