//! cosign signatures checked with public keys: the `sha256-<hex>.sig`
//! manifest cosign stores beside an image, each layer a simple-signing
//! payload naming the digest and the repository it signs, with an ECDSA
//! P-256 signature of it in the layer's annotation. Keyless (Fulcio
//! certificates, Rekor entries) needs those services, which this design
//! leaves room for but does not reach.
//!
//! The repository is checked as well as the digest, as containers/image
//! (podman, CRI-O) checks it and cosign's own `verify` does not: a
//! signature of a digest in one repository says nothing of the same
//! digest pushed to another, whose tags someone else may move.

use base64::Engine as _;
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::OciImageManifest;
use p256::ecdsa::signature::Verifier as _;
use p256::ecdsa::{Signature, VerifyingKey};
use p256::pkcs8::{DecodePublicKey as _, EncodePublicKey as _};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::{Error, ImageRef, Session, SignatureError};

/// The annotation holding a layer's signature, base64.
const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The largest signature payload read.
const MAX_PAYLOAD_BYTES: u64 = 64 << 10;
/// The most signatures checked for one image.
const MAX_SIGNATURES: usize = 32;

/// A verification key: ECDSA P-256 (what `cosign generate-key-pair` makes).
#[derive(Clone, Debug)]
pub struct PublicKey {
    name: String,
    key: VerifyingKey,
    fingerprint: String,
}

impl PublicKey {
    /// The key in PEM (`-----BEGIN PUBLIC KEY-----`), called `name` in messages.
    pub fn from_pem(name: impl Into<String>, pem: &str) -> Result<Self, SignatureError> {
        let name = name.into();
        let invalid = |why: String| SignatureError::Key {
            name: name.clone(),
            why,
        };
        let key = VerifyingKey::from_public_key_pem(pem.trim()).map_err(|e| {
            invalid(format!(
                "not an ECDSA P-256 public key in PEM ({e}); cosign's keys are"
            ))
        })?;
        let der = key
            .to_public_key_der()
            .map_err(|e| invalid(format!("cannot encode it: {e}")))?;
        let fingerprint = format!("sha256:{}", hex::encode(Sha256::digest(der.as_bytes())));
        Ok(Self {
            name,
            key,
            fingerprint,
        })
    }

    /// What messages call it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// sha256 of its DER encoding: what a record of a verification keeps.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

/// Who signed an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed {
    /// The key's name.
    pub key: String,
    /// The key's fingerprint.
    pub fingerprint: String,
}

#[derive(Deserialize)]
struct Payload {
    critical: Critical,
}

#[derive(Deserialize)]
struct Critical {
    identity: Option<Identity>,
    image: SignedImage,
}

#[derive(Deserialize)]
struct Identity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

#[derive(Deserialize)]
struct SignedImage {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// Which of `keys` signed the manifest `digest` of the session's repository.
pub async fn verify_signature(
    session: &Session<'_>,
    digest: &str,
    keys: &[PublicKey],
) -> Result<Signed, SignatureError> {
    let (registry, image) = (&session.registry, session.registry.image);
    let by_digest = image.by_digest(digest);
    let fetch = |source: Error| SignatureError::Fetch {
        image: by_digest.clone(),
        source: Box::new(source),
    };
    let tag = format!("{}.sig", digest.replacen(':', "-", 1));
    let manifest = match registry.manifest(&image.tagged(&tag)).await {
        Ok((bytes, _)) => bytes,
        Err(error) if is_not_found(&error) => {
            return Err(SignatureError::NotSigned { image: by_digest });
        }
        Err(error) => return Err(fetch(error)),
    };
    let manifest: OciImageManifest = serde_json::from_slice(&manifest).map_err(|e| {
        fetch(Error::Layout {
            image: format!("{}:{tag}", image.repository()),
            why: format!("the signature manifest does not parse: {e}"),
        })
    })?;
    let mut signatures = Vec::new();
    for layer in manifest.layers.iter().take(MAX_SIGNATURES) {
        let Some(signature) = layer
            .annotations
            .as_ref()
            .and_then(|a| a.get(SIGNATURE_ANNOTATION))
        else {
            continue;
        };
        let payload = registry
            .blob(layer, MAX_PAYLOAD_BYTES)
            .await
            .map_err(fetch)?;
        signatures.push((signature.clone(), payload));
    }
    if signatures.is_empty() {
        return Err(SignatureError::NotSigned { image: by_digest });
    }
    check(image, digest, &signatures, keys)
}

/// The verdict on `signatures` (base64 signature, payload) of `digest` in
/// `image`'s repository.
fn check(
    image: &ImageRef,
    digest: &str,
    signatures: &[(String, Vec<u8>)],
    keys: &[PublicKey],
) -> Result<Signed, SignatureError> {
    let by_digest = image.by_digest(digest);
    let mut mismatch = None;
    for (signature, payload) in signatures {
        let Some(signature) = decode(signature) else {
            continue;
        };
        for key in keys {
            if key.key.verify(payload, &signature).is_err() {
                continue;
            }
            let critical = serde_json::from_slice::<Payload>(payload)
                .ok()
                .map(|p| p.critical);
            let signed_digest = critical
                .as_ref()
                .map(|c| c.image.docker_manifest_digest.as_str());
            let signed_repository = critical
                .as_ref()
                .and_then(|c| c.identity.as_ref())
                .map(|i| i.docker_reference.as_str());
            let refusal = if signed_digest != Some(digest) {
                SignatureError::DigestMismatch {
                    image: by_digest.clone(),
                    key: key.name.clone(),
                    signed: signed_digest
                        .unwrap_or("a payload naming no digest")
                        .to_owned(),
                }
            } else if !signed_repository.is_some_and(|r| image.is_repository(r)) {
                SignatureError::RepositoryMismatch {
                    image: by_digest.clone(),
                    key: key.name.clone(),
                    signed: signed_repository.unwrap_or("(none named)").to_owned(),
                }
            } else {
                return Ok(Signed {
                    key: key.name.clone(),
                    fingerprint: key.fingerprint.clone(),
                });
            };
            mismatch.get_or_insert(refusal);
        }
    }
    Err(mismatch.unwrap_or(SignatureError::WrongKey {
        image: by_digest,
        keys: keys.len(),
        signatures: signatures.len(),
    }))
}

fn decode(signature: &str) -> Option<Signature> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(signature.trim())
        .ok()?;
    Signature::from_der(&bytes)
        .or_else(|_| Signature::from_slice(&bytes))
        .ok()
}

fn is_not_found(error: &Error) -> bool {
    let Error::Registry { source, .. } = error else {
        return false;
    };
    match source {
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NotFound | OciErrorCode::NameUnknown
            )
        }),
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use p256::ecdsa::SigningKey;
    use p256::ecdsa::signature::Signer as _;

    use super::*;

    fn key(seed: u8) -> (SigningKey, PublicKey) {
        let signing = SigningKey::from_slice(&[seed; 32]).unwrap_or_else(|e| panic!("{e}"));
        let pem = signing
            .verifying_key()
            .to_public_key_pem(p256::pkcs8::LineEnding::LF)
            .unwrap_or_else(|e| panic!("{e}"));
        let public =
            PublicKey::from_pem(format!("key{seed}"), &pem).unwrap_or_else(|e| panic!("{e}"));
        (signing, public)
    }

    /// What cosign signs for `digest` in `repository`.
    fn sign_in(key: &SigningKey, repository: &str, digest: &str) -> (String, Vec<u8>) {
        let payload = format!(
            r#"{{"critical":{{"identity":{{"docker-reference":"{repository}"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
        )
        .into_bytes();
        let signature: Signature = key.sign(&payload);
        (
            base64::engine::general_purpose::STANDARD.encode(signature.to_der()),
            payload,
        )
    }

    const REPOSITORY: &str = "registry.example/providers/sim";

    fn sign(key: &SigningKey, digest: &str) -> (String, Vec<u8>) {
        sign_in(key, REPOSITORY, digest)
    }

    fn image() -> ImageRef {
        ImageRef::parse(&format!("{REPOSITORY}:v1"), false).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_signature_by_one_of_the_keys_for_this_digest_admits() {
        let (signing, public) = key(7);
        let (_, other) = key(9);
        let signed = check(
            &image(),
            "sha256:d1",
            &[sign(&signing, "sha256:d1")],
            &[other, public.clone()],
        )
        .expect("signed by the second key");
        assert_eq!(signed.key, "key7");
        assert_eq!(signed.fingerprint, public.fingerprint());
        // cosign may name the repository with a tag or a digest.
        let tagged = sign_in(&signing, &format!("{REPOSITORY}:v1"), "sha256:d1");
        assert!(check(&image(), "sha256:d1", &[tagged], &[public]).is_ok());
    }

    #[test]
    fn a_wrong_key_or_another_digest_is_named() {
        let (signing, _) = key(7);
        let (_, other) = key(9);
        assert!(matches!(
            check(
                &image(),
                "sha256:d1",
                &[sign(&signing, "sha256:d1")],
                &[other]
            ),
            Err(SignatureError::WrongKey {
                keys: 1,
                signatures: 1,
                ..
            })
        ));
        let (signing, public) = key(7);
        let error = check(
            &image(),
            "sha256:d1",
            &[sign(&signing, "sha256:d2")],
            &[public],
        )
        .expect_err("signs another digest");
        assert!(error.to_string().contains("is for sha256:d2"), "{error}");
        let garbage = vec![("bm90IGEgc2lnbmF0dXJl".to_owned(), b"{}".to_vec())];
        let (_, public) = key(7);
        assert!(matches!(
            check(&image(), "sha256:d1", &garbage, &[public]),
            Err(SignatureError::WrongKey { .. })
        ));
    }

    #[test]
    fn a_signature_of_this_digest_in_another_repository_is_refused() {
        let (signing, public) = key(7);
        let elsewhere = sign_in(&signing, "registry.example/providers/other", "sha256:d1");
        let error = check(
            &image(),
            "sha256:d1",
            std::slice::from_ref(&elsewhere),
            std::slice::from_ref(&public),
        )
        .expect_err("signs the digest in another repository");
        assert!(
            matches!(&error, SignatureError::RepositoryMismatch { signed, .. } if signed == "registry.example/providers/other"),
            "{error}"
        );
        assert!(
            error
                .to_string()
                .contains("is for the repository registry.example/providers/other"),
            "{error}"
        );
        // A payload naming no repository is no better.
        let payload = br#"{"critical":{"image":{"docker-manifest-digest":"sha256:d1"},"type":"cosign container image signature"}}"#.to_vec();
        let signature: Signature = signing.sign(&payload);
        let anonymous = (
            base64::engine::general_purpose::STANDARD.encode(signature.to_der()),
            payload,
        );
        assert!(matches!(
            check(
                &image(),
                "sha256:d1",
                &[anonymous],
                std::slice::from_ref(&public)
            ),
            Err(SignatureError::RepositoryMismatch { .. })
        ));
        // Beside a signature made for this repository, it does no harm.
        assert!(
            check(
                &image(),
                "sha256:d1",
                &[elsewhere, sign(&signing, "sha256:d1")],
                &[public]
            )
            .is_ok()
        );
    }

    #[test]
    fn keys_that_are_not_p256_public_keys_are_refused_by_name() {
        let error = PublicKey::from_pem(
            "inline[0]",
            "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
        )
        .expect_err("not a key");
        assert!(
            error
                .to_string()
                .starts_with("verification key inline[0]: not an ECDSA P-256"),
            "{error}"
        );
    }
}
