//! What a ProviderModule reports: the code in service, a canary, how the
//! last load went.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A canary: its digest, the share of objects it serves, its calls.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStatus {
    /// Its digest.
    pub digest: String,
    /// Share of objects it serves, percent.
    pub percent: u32,
    /// Its calls so far.
    pub calls: u32,
    /// Of those, the ones that broke.
    pub failures: u32,
    /// The ProviderModule generation it ran under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
}

/// `status.phase` of a module with a version in service.
pub const PHASE_READY: &str = "Ready";

/// ProviderModuleStatus: which code is in service and how the last load went.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProviderModuleStatus {
    /// `Loading`, `Ready` (a version is in service and the last load succeeded) or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Why the last load failed, or what is in service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Digest of the code in service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_digest: Option<String>,
    /// Digest of the code it replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_digest: Option<String>,
    /// The image in service, by digest (`REGISTRY/REPOSITORY@sha256:...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The verification keys whose signatures admitted the image, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
    /// The new version serving a share of objects, while it is a canary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryStatus>,
    /// The last canary rolled back: it is not tried again until the
    /// ProviderModule changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<CanaryStatus>,
    /// The name the provider reports of itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_name: Option<String>,
    /// The version the provider reports of itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// How long the last successful load took, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_time_millis: Option<u64>,
    /// Whether it came from the precompiled cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_cache: Option<bool>,
    /// When the code in service was loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_at: Option<Time>,
    /// `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The generation last loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
