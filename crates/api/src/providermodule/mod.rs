//! `ProviderModule` (`runtime.capwasm.dev/v1alpha1`, cluster-scoped): where a
//! provider component comes from, the digest it must have, the world it
//! implements, its limits and the authority it is granted. Provider objects
//! name it in `spec.provider`; changing it hot-swaps the code they run.

mod capabilities;
mod limits;
mod rollout;
mod source;
mod status;

use kube::CustomResource;

use super::tenancy::AllowedNamespaces;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use capabilities::{
    AllowedKind, AwsSigV4, BearerToken, ModuleCapabilities, RequestAuth, SecretReference,
};
pub use limits::ModuleLimits;
pub use rollout::{Rollout, RolloutStrategy};
pub use source::{
    AnyOf, ConfigMapSource, FileSource, KeySelector, KeylessIdentity, ModuleSource, OciSource,
    ProvenanceRule, Signer, Verification,
};
pub use status::{CanaryStatus, PHASE_READY, ProviderModuleStatus};

pub use capwasm_runtime::World;

/// Field manager of the ProviderModule controller.
pub const FIELD_MANAGER: &str = "capwasm-providermodule";

/// ProviderModuleSpec: the component and what it may do.
// kube's printcolumn(..) entries repeat the same keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "runtime.capwasm.dev",
    version = "v1alpha1",
    kind = "ProviderModule",
    doc = "A provider component: where its code comes from, its digest, world, limits and capabilities.",
    plural = "providermodules",
    shortname = "pm",
    category = "capwasm",
    status = "ProviderModuleStatus",
    printcolumn(
        name = "World",
        type_ = "string",
        json_path = ".spec.world",
        description = "The WIT world the component implements"
    ),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Loading, Ready or Failed"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".status.version",
        description = "The version the provider reports"
    ),
    printcolumn(
        name = "Digest",
        type_ = "string",
        json_path = ".status.activeDigest",
        description = "Digest of the code in service",
        priority = 10
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since creation"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.verification) || has(self.source.oci)", "message": "verification checks signatures stored in an OCI registry: it needs source.oci"},
]))]
pub struct ProviderModuleSpec {
    /// The WIT world the component implements: `bootstrap`, `infrastructure`, `platform` or `controlPlane`.
    pub world: World,

    /// Where the component's bytes come from.
    pub source: ModuleSource,

    /// The component's sha256 digest (`sha256:<hex>` or `<hex>`). Bytes with
    /// another digest are refused and the version in service stays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(sha256:)?[a-fA-F0-9]{64}$"))]
    pub sha256: Option<String>,

    /// Bounds on each call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ModuleLimits>,

    /// Authority beyond computing on its inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<ModuleCapabilities>,

    /// The namespaces whose objects it may serve (and whose objects its
    /// credentials may be used for): `{}` for every namespace; left out,
    /// none. An object of another namespace naming it gets a condition
    /// (`NamespaceNotAllowed`) and no call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_namespaces: Option<AllowedNamespaces>,

    /// Signatures an OCI image must carry before its code is compiled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,

    /// How a new version takes over from the one in service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
}
