//! `ProviderModule` (`runtime.capwasm.dev/v1alpha1`, cluster-scoped): where a
//! provider component comes from, the digest it must have, the world it
//! implements, its limits and the authority it is granted. Provider objects
//! name it in `spec.provider`; changing it hot-swaps the code they run.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::wasm::World;

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
    /// The WIT world the component implements: `bootstrap` or `infrastructure`.
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

    /// Signatures an OCI image must carry before its code is compiled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,

    /// How a new version takes over from the one in service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
}

/// How a new version takes over: at once, or as a canary serving a share
/// of objects first (chosen by a hash of each object's UID), promoted after
/// enough calls that did not break, rolled back when too many broke.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// `Immediate` (the default) or `Canary`.
    #[serde(default)]
    pub strategy: RolloutStrategy,
    /// Share of objects a canary serves, percent. Default 25.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 99))]
    pub canary_percent: Option<u32>,
    /// Calls of the canary that did not break (trap, run out of time or
    /// memory, or return what the contract refuses), after which it serves
    /// every object. Default 20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000))]
    pub promote_after_calls: Option<u32>,
    /// Share of the canary's calls that may break, percent; past it the
    /// canary is rolled back. Default 20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub max_failure_percent: Option<u32>,
}

/// How a new version takes over.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum RolloutStrategy {
    /// It serves every object at once.
    #[default]
    Immediate,
    /// It serves a share of objects first.
    Canary,
}

/// Where a component comes from: exactly one of the fields.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "(has(self.configMap) ? 1 : 0) + (has(self.file) ? 1 : 0) + (has(self.oci) ? 1 : 0) == 1", "message": "set exactly one of configMap, file and oci"},
]))]
pub struct ModuleSource {
    /// A key of a ConfigMap's `binaryData`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapSource>,
    /// A file on the operator's filesystem (a mounted volume, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileSource>,
    /// An image in an OCI registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<OciSource>,
}

/// A component in an OCI registry: the Wasm artifact layout
/// (`application/vnd.wasm.config.v0+json` config, one `application/wasm`
/// layer) or any image of one layer holding the component.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OciSource {
    /// `REGISTRY/REPOSITORY:TAG`, `REGISTRY/REPOSITORY@sha256:DIGEST`, or
    /// both (the digest wins). A tag is resolved to a digest at each
    /// reconcile and every `intervalSeconds`; `status.image` says which.
    #[schemars(length(min = 3, max = 1024))]
    pub image: String,
    /// A `kubernetes.io/dockerconfigjson` Secret holding credentials for the
    /// registry, in the namespace the operator reads credentials from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<SecretReference>,
    /// Speak plain HTTP to the registry: for a registry on loopback only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub plain_http: bool,
    /// How often a tag is resolved again, in seconds. Default 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 5, max = 86_400))]
    pub interval_seconds: Option<u32>,
}

/// Signatures an image must carry: a cosign signature of its manifest
/// digest by one of the keys. (Keyless verification, against Fulcio and
/// Rekor, would be a sibling of `publicKeys`.)
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// cosign public keys (ECDSA P-256, PEM, as `cosign generate-key-pair` writes them).
    #[schemars(length(min = 1, max = 16))]
    pub public_keys: Vec<PublicKeySource>,
}

/// A public key: exactly one of the fields.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "(has(self.pem) ? 1 : 0) + (has(self.secret) ? 1 : 0) + (has(self.configMap) ? 1 : 0) == 1", "message": "set exactly one of pem, secret and configMap"},
]))]
pub struct PublicKeySource {
    /// The key itself, PEM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 8192))]
    pub pem: Option<String>,
    /// A key of a Secret in the namespace the operator reads credentials from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<KeySelector>,
    /// A key of a ConfigMap's `data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<KeySelector>,
}

/// One key of a Secret or ConfigMap.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct KeySelector {
    /// Its namespace.
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,
    /// Its name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key. Default `cosign.pub`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub key: Option<String>,
}

/// A component in a ConfigMap.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapSource {
    /// The ConfigMap's namespace.
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,
    /// The ConfigMap's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The `binaryData` key holding the component; defaults to `component.wasm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub key: Option<String>,
}

/// A component file.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FileSource {
    /// Absolute path on the operator's filesystem.
    #[schemars(length(min = 2, max = 4096), regex(pattern = "^/"))]
    pub path: String,
}

/// Per-call bounds; unset fields take the operator's defaults.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ModuleLimits {
    /// Linear memory an instance may grow to, in MiB.
    #[serde(rename = "memoryMiB", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4096))]
    pub memory_mib: Option<u32>,
    /// Wall-clock time a call may take, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 600_000))]
    pub timeout_millis: Option<u32>,
    /// Size of what a call may return, in KiB.
    #[serde(
        rename = "maxOutputKiB",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 65536))]
    pub max_output_kib: Option<u32>,
    /// Log lines a call may write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100_000))]
    pub max_log_lines: Option<u32>,
    /// Outgoing HTTP requests one call may send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10_000))]
    pub http_requests_per_call: Option<u32>,
    /// Outgoing HTTP requests one call may have open at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 256))]
    pub http_in_flight_per_call: Option<u32>,
    /// Outgoing HTTP requests all calls of the provider may have open at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub http_in_flight_per_provider: Option<u32>,
    /// Size of an outgoing request's body, in KiB.
    #[serde(
        rename = "httpMaxRequestBodyKiB",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 65_536))]
    pub http_max_request_body_kib: Option<u32>,
    /// Size of a response's body, in KiB.
    #[serde(
        rename = "httpMaxResponseBodyKiB",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 65_536))]
    pub http_max_response_body_kib: Option<u32>,
}

/// What a provider may reach, and with which credentials.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.requestAuth) || self.requestAuth.all(a, has(self.allowedHosts) && a.host in self.allowedHosts)", "message": "every requestAuth host must be one of allowedHosts"},
    {"rule": "!has(self.requestAuth) || has(self.credentialsSecret)", "message": "requestAuth takes its keys from credentialsSecret, which is not set"},
    {"rule": "!has(self.requestAuth) || self.requestAuth.all(a, self.requestAuth.exists_one(b, b.host == a.host))", "message": "one requestAuth rule per host"},
]))]
pub struct ModuleCapabilities {
    /// Hosts (`host` or `host:port`) outgoing HTTP may reach; none if empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 261)))]
    pub allowed_hosts: Vec<String>,
    /// A Secret holding the keys `requestAuth` uses. The provider never sees
    /// them unless `exposeCredentialsToGuest` says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret: Option<SecretReference>,
    /// How the host authenticates the provider's requests to a host, after
    /// the allow-list check and with keys of `credentialsSecret`: the
    /// provider sends them unauthenticated and never holds a key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub request_auth: Vec<RequestAuth>,
    /// Also hand every entry of `credentialsSecret` to each call
    /// (`credentials`). Weaker: a compromised provider then holds the keys
    /// and may send them to any host it can reach. For providers that must
    /// authenticate in a way `requestAuth` does not offer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expose_credentials_to_guest: bool,
}

/// How requests to one host are authenticated: exactly one scheme.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.awsSigV4) != has(self.bearer)", "message": "set exactly one of awsSigV4 and bearer"},
]))]
pub struct RequestAuth {
    /// The host (`host` or `host:port`, as written in `allowedHosts`).
    #[schemars(length(min = 1, max = 261))]
    pub host: String,
    /// AWS Signature Version 4.
    #[serde(rename = "awsSigV4", default, skip_serializing_if = "Option::is_none")]
    pub aws_sig_v4: Option<AwsSigV4>,
    /// `Authorization: Bearer <token>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer: Option<BearerToken>,
}

/// Signs with AWS Signature Version 4, from keys of the credentials Secret.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AwsSigV4 {
    /// The signing name of the service (`ec2`).
    #[schemars(length(min = 1, max = 64))]
    pub service: String,
    /// The region requests are signed for (`us-east-1`).
    #[schemars(length(min = 1, max = 64))]
    pub region: String,
    /// The Secret key holding the access key id. Default `AWS_ACCESS_KEY_ID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub access_key_id_key: Option<String>,
    /// The Secret key holding the secret access key. Default `AWS_SECRET_ACCESS_KEY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub secret_access_key_key: Option<String>,
    /// The Secret key holding a session token, if the credentials are temporary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub session_token_key: Option<String>,
}

/// A bearer token from a key of the credentials Secret.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BearerToken {
    /// The Secret key holding the token.
    #[schemars(length(min = 1, max = 253))]
    pub token_key: String,
}

/// A Secret by namespace and name.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SecretReference {
    /// Its namespace.
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,
    /// Its name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

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
    /// The verification key whose signature admitted the image.
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
