//! cosign signatures of an image's manifest digest, checked against a
//! policy of public keys. Both of cosign's layouts are read: the Sigstore
//! bundles cosign v3 stores as OCI referrers of the image ([`referrers`],
//! [`bundle`]), and the `sha256-<hex>.sig` manifest of simple-signing
//! payloads cosign wrote before ([`legacy`]).
//!
//! A policy names signers of which all must have signed (`allOf`) and
//! signers of which at least a number must have (`anyOf`); a signer is a
//! public key or a keyless identity ([`keyless`]). The verdict names every
//! signer whose signature admitted the image.

mod bundle;
mod chain;
mod key;
mod keyless;
mod legacy;
mod referrers;

use std::sync::Arc;

pub use key::PublicKey;
pub use keyless::{Identity, Subject, Trust};

use super::{ImageRef, Session, SignatureError};

/// The most signatures read of one image, in each layout.
const MAX_SIGNATURES: usize = 32;
/// The largest signature payload or bundle read.
const MAX_SIGNATURE_BYTES: u64 = 64 << 10;

/// Who may sign: a key, or an identity a Fulcio certifies.
#[derive(Clone, Debug)]
pub enum Signer {
    /// A public key.
    Key(PublicKey),
    /// A keyless identity.
    Keyless(Identity),
}

impl Signer {
    /// What messages and the status call it.
    pub fn name(&self) -> &str {
        match self {
            Self::Key(key) => key.name(),
            Self::Keyless(identity) => identity.name(),
        }
    }

    /// What a record of a verification keeps of it: a key's fingerprint,
    /// an identity's issuer and subject.
    pub fn id(&self) -> &str {
        match self {
            Self::Key(key) => key.fingerprint(),
            Self::Keyless(identity) => identity.id(),
        }
    }
}

/// What an image's SLSA provenance must say: attested by `signer`, built
/// by `builder_id` from `source_repository`.
#[derive(Clone, Debug)]
pub struct Provenance {
    signer: Signer,
    builder_id: String,
    source_repository: String,
}

impl Provenance {
    /// Attested by `signer`, built by `builder_id` (the predicate's
    /// `runDetails.builder.id`, exactly) from `source_repository` (its
    /// workflow's repository or a resolved dependency's URI, without
    /// `git+` and `@ref`, exactly).
    pub fn new(signer: Signer, builder_id: String, source_repository: String) -> Self {
        Self {
            signer,
            builder_id,
            source_repository,
        }
    }

    /// Who must have signed the attestation.
    pub fn signer(&self) -> &Signer {
        &self.signer
    }

    /// Whether a provenance of `found` says what this asks.
    fn check(
        &self,
        image: &ImageRef,
        digest: &str,
        found: &[Found],
        trust: Option<&Trust>,
    ) -> Result<(), SignatureError> {
        let mut seen = Vec::new();
        for bundle in found.iter().filter_map(|f| match f {
            Found::Bundle(bundle) => Some(bundle),
            _ => None,
        }) {
            match bundle.provenance(image, digest, &self.signer, trust) {
                None => {}
                Some(Err(refusal)) => seen.push(refusal.to_string()),
                Some(Ok(predicate)) => {
                    let builder = predicate
                        .pointer("/runDetails/builder/id")
                        .and_then(serde_json::Value::as_str);
                    let sources = sources(&predicate);
                    if builder == Some(self.builder_id.as_str())
                        && sources.contains(&self.source_repository)
                    {
                        return Ok(());
                    }
                    seen.push(format!(
                        "its provenance names builder {:?} and sources {sources:?}",
                        builder.unwrap_or("(none)")
                    ));
                }
            }
        }
        Err(SignatureError::Provenance {
            image: image.by_digest(digest),
            wanted: format!(
                "built by {:?} from {:?}, attested by {}",
                self.builder_id,
                self.source_repository,
                self.signer.name()
            ),
            why: if seen.is_empty() {
                "no SLSA provenance attestation by that signer refers to it".to_owned()
            } else {
                seen.join("; ")
            },
        })
    }
}

/// The source repositories an SLSA v1 predicate names: its workflow's, and
/// its resolved dependencies' (`git+URL@ref` as `URL`).
fn sources(predicate: &serde_json::Value) -> Vec<String> {
    let workflow = predicate
        .pointer("/buildDefinition/externalParameters/workflow/repository")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    let dependencies = predicate
        .pointer("/buildDefinition/resolvedDependencies")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|d| d.get("uri").and_then(serde_json::Value::as_str))
        .map(|uri| {
            let uri = uri.strip_prefix("git+").unwrap_or(uri);
            uri.split_once('@').map_or(uri, |(u, _)| u).to_owned()
        });
    workflow.into_iter().chain(dependencies).take(64).collect()
}

/// Which signers must have signed an image, and what its provenance must say.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    all_of: Vec<Signer>,
    any_of: Vec<Signer>,
    minimum_matches: usize,
    trust: Option<Arc<Trust>>,
    provenance: Option<Provenance>,
}

impl Policy {
    /// Every signer of `all_of`, and at least `minimum_matches` (one when
    /// 0) of `any_of` when it names any; keyless signers checked against
    /// `trust`.
    pub fn new(
        all_of: Vec<Signer>,
        any_of: Vec<Signer>,
        minimum_matches: usize,
        trust: Option<Arc<Trust>>,
    ) -> Self {
        Self {
            all_of,
            any_of,
            minimum_matches: minimum_matches.max(1),
            trust,
            provenance: None,
        }
    }

    /// The same, asking for `provenance` too.
    #[must_use]
    pub fn with_provenance(mut self, provenance: Provenance) -> Self {
        self.provenance = Some(provenance);
        self
    }

    /// Whether it asks for no signature at all.
    pub fn is_empty(&self) -> bool {
        self.all_of.is_empty() && self.any_of.is_empty() && self.provenance.is_none()
    }

    /// The policy's signers whose ids are among `ids` (of the signers of
    /// an image before), if they are what it asks for.
    pub fn satisfied_by(&self, ids: &[impl AsRef<str>]) -> Option<Vec<Signed>> {
        let signed = |signer: &&Signer| ids.iter().any(|f| f.as_ref() == signer.id());
        let any = self.any_of.iter().filter(signed).count();
        let satisfied = self.all_of.iter().all(|s| signed(&s))
            && (self.any_of.is_empty() || any >= self.minimum_matches);
        if !satisfied {
            return None;
        }
        let mut signers: Vec<Signed> = Vec::new();
        for signer in self.all_of.iter().chain(&self.any_of).filter(signed) {
            if !signers.iter().any(|k| k.fingerprint == signer.id()) {
                signers.push(Signed {
                    key: signer.name().to_owned(),
                    fingerprint: signer.id().to_owned(),
                });
            }
        }
        Some(signers)
    }

    /// What it asks, for people.
    fn describe(&self) -> String {
        let names = |signers: &[Signer]| {
            signers
                .iter()
                .map(Signer::name)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let all = (!self.all_of.is_empty()).then(|| format!("all of [{}]", names(&self.all_of)));
        let any = (!self.any_of.is_empty())
            .then(|| format!("{} of [{}]", self.minimum_matches, names(&self.any_of)));
        all.into_iter().chain(any).collect::<Vec<_>>().join(" and ")
    }
}

/// A signer whose signature admitted an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed {
    /// The signer's name.
    pub key: String,
    /// Its id ([`Signer::id`]).
    pub fingerprint: String,
}

/// A signature found beside an image, in either layout.
enum Found {
    /// A simple-signing payload and its base64 signature (`.sig` layout).
    Legacy { signature: String, payload: Vec<u8> },
    /// A Sigstore bundle (referrer layout).
    Bundle(bundle::Bundle),
    /// Something stored as a signature that is not one: why.
    Unreadable(String),
}

/// What one signature says of one key.
enum Verdict {
    /// The key signed this digest in this repository.
    Admits,
    /// Not the key's signature, or not a signature of an image.
    Silent,
    /// The key's signature, of something else.
    Refuses(SignatureError),
}

impl Found {
    fn verdict(
        &self,
        image: &ImageRef,
        digest: &str,
        signer: &Signer,
        trust: Option<&Trust>,
    ) -> Verdict {
        match (self, signer) {
            (Self::Legacy { signature, payload }, Signer::Key(key)) => {
                legacy::verdict(image, digest, key, signature, payload)
            }
            (Self::Bundle(bundle), Signer::Key(key)) => bundle.verdict(image, digest, key),
            (Self::Bundle(bundle), Signer::Keyless(identity)) => trust
                .map_or(Verdict::Silent, |t| {
                    bundle.verdict_keyless(image, digest, identity, t)
                }),
            _ => Verdict::Silent,
        }
    }
}

/// The signers whose signatures of the manifest `digest` of the session's
/// repository satisfy `policy`.
pub async fn verify_signature(
    session: &Session<'_>,
    digest: &str,
    policy: &Policy,
) -> Result<Vec<Signed>, SignatureError> {
    let mut found = legacy::fetch(session, digest).await?;
    found.extend(referrers::fetch(session, digest).await?);
    judge(session.registry.image, digest, &found, policy)
}

/// The verdict of `policy` on the signatures `found` of `digest`.
fn judge(
    image: &ImageRef,
    digest: &str,
    found: &[Found],
    policy: &Policy,
) -> Result<Vec<Signed>, SignatureError> {
    let by_digest = image.by_digest(digest);
    if found.is_empty() {
        return Err(SignatureError::NotSigned { image: by_digest });
    }
    let trust = policy.trust.as_deref();
    let mut admitted: Vec<&Signer> = Vec::new();
    let mut refusals = Vec::new();
    for signer in policy.all_of.iter().chain(&policy.any_of) {
        if admitted.iter().any(|k| k.id() == signer.id()) {
            continue;
        }
        for signature in found {
            match signature.verdict(image, digest, signer, trust) {
                Verdict::Admits => {
                    admitted.push(signer);
                    break;
                }
                Verdict::Refuses(refusal) => refusals.push(refusal),
                Verdict::Silent => {}
            }
        }
    }
    let ids: Vec<&str> = admitted.iter().map(|k| k.id()).collect();
    if let Some(signed) = policy.satisfied_by(&ids) {
        if let Some(provenance) = &policy.provenance {
            provenance.check(image, digest, found, trust)?;
        }
        return Ok(signed);
    }
    let unreadable: Vec<String> = found
        .iter()
        .filter_map(|f| match f {
            Found::Unreadable(why) => Some(why.clone()),
            _ => None,
        })
        .collect();
    // What a signer signed that is not this image says most about a refusal.
    if admitted.is_empty() && !refusals.is_empty() {
        return Err(refusals.swap_remove(0));
    }
    if admitted.is_empty() && unreadable.len() == found.len() {
        return Err(SignatureError::Malformed {
            image: by_digest,
            why: unreadable.join("; "),
        });
    }
    let names: Vec<&str> = admitted.iter().map(|k| k.name()).collect();
    let why: Vec<String> = refusals.iter().map(ToString::to_string).collect();
    Err(SignatureError::Unsatisfied {
        image: by_digest,
        policy: policy.describe(),
        signed: if names.is_empty() {
            "none of them".to_owned()
        } else {
            names.join(", ")
        },
        signatures: found.len(),
        why: if why.is_empty() {
            String::new()
        } else {
            format!("; {}", why.join("; "))
        },
    })
}

/// Reading the signatures of `image` at `digest` failed with `source`.
fn fetch_failed(image: &ImageRef, digest: &str, source: super::Error) -> SignatureError {
    SignatureError::Fetch {
        image: image.by_digest(digest),
        source: Box::new(source),
    }
}

#[cfg(test)]
pub(crate) mod tests;
