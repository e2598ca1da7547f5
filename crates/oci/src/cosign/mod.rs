//! cosign signatures of an image's manifest digest, checked against a
//! policy of public keys. Both of cosign's layouts are read: the Sigstore
//! bundles cosign v3 stores as OCI referrers of the image ([`referrers`],
//! [`bundle`]), and the `sha256-<hex>.sig` manifest of simple-signing
//! payloads cosign wrote before ([`legacy`]).
//!
//! A policy names keys of which all must have signed (`allOf`) and keys of
//! which at least a number must have (`anyOf`); the verdict names every
//! key whose signature admitted the image.

mod bundle;
mod key;
mod legacy;
mod referrers;

pub use key::PublicKey;

use super::{ImageRef, Session, SignatureError};

/// The most signatures read of one image, in each layout.
const MAX_SIGNATURES: usize = 32;
/// The largest signature payload or bundle read.
const MAX_SIGNATURE_BYTES: u64 = 64 << 10;

/// Which keys must have signed an image.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    all_of: Vec<PublicKey>,
    any_of: Vec<PublicKey>,
    minimum_matches: usize,
}

impl Policy {
    /// Every key of `all_of`, and at least `minimum_matches` (one when 0)
    /// of `any_of` when it names any.
    pub fn new(all_of: Vec<PublicKey>, any_of: Vec<PublicKey>, minimum_matches: usize) -> Self {
        Self {
            all_of,
            any_of,
            minimum_matches: minimum_matches.max(1),
        }
    }

    /// Whether it asks for no signature at all.
    pub fn is_empty(&self) -> bool {
        self.all_of.is_empty() && self.any_of.is_empty()
    }

    /// The policy's keys whose fingerprints are among `fingerprints` (the
    /// keys that signed an image), if they are what it asks for.
    pub fn satisfied_by(&self, fingerprints: &[impl AsRef<str>]) -> Option<Vec<Signed>> {
        let signed =
            |key: &&PublicKey| fingerprints.iter().any(|f| f.as_ref() == key.fingerprint());
        let any = self.any_of.iter().filter(signed).count();
        let satisfied = self.all_of.iter().all(|k| signed(&k))
            && (self.any_of.is_empty() || any >= self.minimum_matches);
        if !satisfied {
            return None;
        }
        let mut keys: Vec<Signed> = Vec::new();
        for key in self.all_of.iter().chain(&self.any_of).filter(signed) {
            if !keys.iter().any(|k| k.fingerprint == key.fingerprint()) {
                keys.push(Signed {
                    key: key.name().to_owned(),
                    fingerprint: key.fingerprint().to_owned(),
                });
            }
        }
        Some(keys)
    }

    /// What it asks, for people.
    fn describe(&self) -> String {
        let names = |keys: &[PublicKey]| {
            keys.iter()
                .map(PublicKey::name)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let all = (!self.all_of.is_empty()).then(|| format!("all of [{}]", names(&self.all_of)));
        let any = (!self.any_of.is_empty())
            .then(|| format!("{} of [{}]", self.minimum_matches, names(&self.any_of)));
        all.into_iter().chain(any).collect::<Vec<_>>().join(" and ")
    }
}

/// A key whose signature admitted an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed {
    /// The key's name.
    pub key: String,
    /// The key's fingerprint.
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
    fn verdict(&self, image: &ImageRef, digest: &str, key: &PublicKey) -> Verdict {
        match self {
            Self::Legacy { signature, payload } => {
                legacy::verdict(image, digest, key, signature, payload)
            }
            Self::Bundle(bundle) => bundle.verdict(image, digest, key),
            Self::Unreadable(_) => Verdict::Silent,
        }
    }
}

/// The keys whose signatures of the manifest `digest` of the session's
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
    let mut admitted: Vec<&PublicKey> = Vec::new();
    let mut refusals = Vec::new();
    for key in policy.all_of.iter().chain(&policy.any_of) {
        if admitted
            .iter()
            .any(|k| k.fingerprint() == key.fingerprint())
        {
            continue;
        }
        for signature in found {
            match signature.verdict(image, digest, key) {
                Verdict::Admits => {
                    admitted.push(key);
                    break;
                }
                Verdict::Refuses(refusal) => refusals.push(refusal),
                Verdict::Silent => {}
            }
        }
    }
    let fingerprints: Vec<&str> = admitted.iter().map(|k| k.fingerprint()).collect();
    if let Some(signed) = policy.satisfied_by(&fingerprints) {
        return Ok(signed);
    }
    let unreadable: Vec<String> = found
        .iter()
        .filter_map(|f| match f {
            Found::Unreadable(why) => Some(why.clone()),
            _ => None,
        })
        .collect();
    // What a key signed that is not this image says most about a refusal.
    if admitted.is_empty()
        && let Some(refusal) = refusals.into_iter().next()
    {
        return Err(refusal);
    }
    if admitted.is_empty() && unreadable.len() == found.len() {
        return Err(SignatureError::Malformed {
            image: by_digest,
            why: unreadable.join("; "),
        });
    }
    Err(SignatureError::Unsatisfied {
        image: by_digest,
        policy: policy.describe(),
        signed: if admitted.is_empty() {
            "none of them".to_owned()
        } else {
            admitted
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        },
        signatures: found.len(),
    })
}

#[cfg(test)]
pub(crate) mod tests;
