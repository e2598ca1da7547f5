//! What a provider may reach, and how the host authenticates its
//! requests with keys the provider never holds.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    /// The providerIDs an infrastructure provider's instances carry: their
    /// scheme and what follows it (`aws:///`, `sim://region-1/`). A
    /// providerID the provider reports outside it is refused
    /// (`InvalidProviderResult`), so that no pool claims a Node of another
    /// cloud or account; without it a provider may report none.
    #[serde(
        rename = "providerIDPrefix",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(min = 4, max = 253), regex(pattern = r"^[a-z][a-z0-9+.-]*://"))]
    pub provider_id_prefix: Option<String>,
    /// The kinds a platform provider may render (and the host apply, watch
    /// and prune for it), only ever in the platform cluster's namespace.
    /// None if empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub allowed_kinds: Vec<AllowedKind>,
}

/// A kind by API group and name.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AllowedKind {
    /// The API group (`cluster.x-k8s.io`); empty for the core group (`Secret`).
    #[serde(default)]
    #[schemars(length(max = 253))]
    pub group: String,
    /// The kind (`MachinePool`).
    #[schemars(length(min = 1, max = 63))]
    pub kind: String,
}

/// How requests to one host are authenticated: exactly one scheme.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.awsSigV4) != has(self.bearer)", "message": "set exactly one of awsSigV4 and bearer"},
]))]
pub struct RequestAuth {
    /// The host (`host` or `host:port`, as written in `allowedHosts`).
    /// Only requests to exactly this scheme, host and port get the keys;
    /// without a port, HTTPS's 443 (80 with `plainHttp`). Any other
    /// request to the host (plain HTTP, another port) is refused.
    #[schemars(length(min = 1, max = 261))]
    pub host: String,
    /// Authenticate plain-HTTP requests rather than HTTPS ones: the keys
    /// then cross the network in clear text. For an endpoint on loopback
    /// (tests, an emulator); off by default.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub plain_http: bool,
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
