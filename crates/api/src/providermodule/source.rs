//! Where a provider component comes from, and the signatures an image
//! must carry.

use schemars::JsonSchema;

use super::SecretReference;
use serde::{Deserialize, Serialize};

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

/// Signatures an image must carry: cosign signatures of its manifest
/// digest, as Sigstore bundles (cosign v3) or in the `.sig` layout before
/// it, by the signers this policy names: public keys, or keyless identities
/// certified by a Fulcio of `trustedRoot`. `publicKeys` admits a signature
/// by any one key; `allOf` and `anyOf` say "each of these" and "at least
/// `minimumMatches` of these", together if both are given.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.publicKeys) || has(self.allOf) || has(self.anyOf) || has(self.provenance)", "message": "name publicKeys, allOf, anyOf or provenance"},
    {"rule": "!(has(self.publicKeys) && has(self.anyOf))", "message": "publicKeys is anyOf with minimumMatches 1: give one of them"},
]))]
pub struct Verification {
    /// cosign public keys (ECDSA P-256, PEM, as `cosign generate-key-pair`
    /// writes them): a signature by any one of them admits the image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 16))]
    pub public_keys: Vec<Signer>,
    /// Signers each of which must have signed the image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 16))]
    pub all_of: Vec<Signer>,
    /// Signers of which at least `minimumMatches` must have signed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub any_of: Option<AnyOf>,
    /// The Sigstore trust root keyless signers are checked against (a
    /// `trusted_root.json`: Fulcio certificate authorities, timestamp
    /// authorities, transparency and certificate-transparency logs), from a
    /// ConfigMap in the credentials namespace; its key defaults to
    /// `trusted_root.json`. Without it, the operator's `--trusted-root`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted_root: Option<KeySelector>,
    /// What the image's SLSA provenance attestation (`cosign attest
    /// --type slsaprovenance1`) must say, beside its signatures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<ProvenanceRule>,
}

/// A rule on an image's SLSA provenance: attested by `signer`, built by
/// `builderId` from `sourceRepository`. An image without such an
/// attestation is refused as one without its signature is.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProvenanceRule {
    /// Who must have signed the attestation.
    pub signer: Signer,
    /// The builder (`runDetails.builder.id`), exactly.
    #[schemars(length(min = 1, max = 1024))]
    pub builder_id: String,
    /// The source repository (the workflow's `repository`, or a resolved
    /// dependency's URI without `git+` and `@ref`), exactly.
    #[schemars(length(min = 1, max = 1024))]
    pub source_repository: String,
}

impl Verification {
    /// Every signer it names.
    pub fn signers(&self) -> impl Iterator<Item = &Signer> {
        let any = self.any_of.iter().flat_map(|a| &a.signers);
        let provenance = self.provenance.iter().map(|p| &p.signer);
        self.public_keys
            .iter()
            .chain(&self.all_of)
            .chain(any)
            .chain(provenance)
    }

    /// The signers of `anyOf`, or `publicKeys` (any one of them), with how
    /// many of them must have signed.
    pub fn any_of(&self) -> (&[Signer], u32) {
        match &self.any_of {
            Some(any) => (&any.signers, any.minimum_matches.unwrap_or(1)),
            None => (&self.public_keys, 1),
        }
    }
}

/// Signers of which at least `minimumMatches` must have signed an image.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.minimumMatches) || self.minimumMatches <= size(self.signers)", "message": "minimumMatches is more than the signers listed"},
]))]
pub struct AnyOf {
    /// How many of the signers must have signed. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 16))]
    pub minimum_matches: Option<u32>,
    /// The signers.
    #[schemars(length(min = 1, max = 16))]
    pub signers: Vec<Signer>,
}

/// A signer: a public key (`pem`, `secret` or `configMap`) or a keyless
/// identity; exactly one of them.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "(has(self.pem) ? 1 : 0) + (has(self.secret) ? 1 : 0) + (has(self.configMap) ? 1 : 0) + (has(self.keyless) ? 1 : 0) == 1", "message": "set exactly one of pem, secret, configMap and keyless"},
]))]
pub struct Signer {
    /// What messages and the status call the signer (say, whose key it
    /// is). Default: where its key is read from, or its identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub name: Option<String>,
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
    /// An identity certified by a Fulcio of the trust root: the OIDC
    /// issuer that vouched for it and its subject (the certificate's SAN:
    /// an email, or a URI such as a CI workflow's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyless: Option<KeylessIdentity>,
}

/// A keyless signer: the OIDC issuer, exactly, and the subject, exactly
/// or by prefix (one of them).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "(has(self.subject) ? 1 : 0) + (has(self.subjectPrefix) ? 1 : 0) == 1", "message": "set exactly one of subject and subjectPrefix"},
]))]
pub struct KeylessIdentity {
    /// The OIDC issuer (the certificate's issuer extension), e.g.
    /// `https://token.actions.githubusercontent.com`.
    #[schemars(length(min = 1, max = 1024))]
    pub issuer: String,
    /// The subject, exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub subject: Option<String>,
    /// The subject's beginning, e.g. `https://github.com/acme/providers/`.
    /// A prefix ending mid-name also admits names that continue it: end it
    /// with `/` or `@`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub subject_prefix: Option<String>,
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
