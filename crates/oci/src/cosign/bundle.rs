//! A Sigstore bundle (v0.1 to v0.3) as cosign v3 signs an image: a DSSE
//! envelope of an in-toto statement whose subject is the manifest digest
//! and whose predicate type says it is a signature. With a public key it is
//! checked here over the envelope's pre-authentication encoding, as
//! `cosign verify --key --insecure-ignore-tlog` does: its log entries and
//! timestamps are not read. Signed with a certificate, it goes to
//! [`super::keyless`].
//!
//! The statement names no repository (cosign v3's does not): a bundle
//! binds the digest only, wherever it is stored.

use base64::Engine as _;
use serde::Deserialize;

use super::keyless::{Identity, Trust};
use super::{PublicKey, Signer, Verdict};
use crate::{ImageRef, SignatureError};

/// The media types of Sigstore bundles start so.
const BUNDLE_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle";
/// The payload type of an in-toto statement in a DSSE envelope.
const IN_TOTO: &str = "application/vnd.in-toto+json";
/// The predicate type of cosign's image signature.
const COSIGN_SIGNATURE: &str = "https://sigstore.dev/cosign/sign/v1";
/// The predicate types of SLSA provenance start so.
const SLSA_PROVENANCE: &str = "https://slsa.dev/provenance/";
/// The most signatures of one envelope looked at.
const MAX_ENVELOPE_SIGNATURES: usize = 8;

/// A bundle's envelope, read and checked for shape.
#[derive(Debug)]
pub(super) struct Bundle {
    /// Where it was found, for messages.
    source: String,
    /// The bundle as stored, for a keyless check.
    raw: Vec<u8>,
    /// Signed with a certificate, not a key.
    keyless: bool,
    payload_type: String,
    payload: Vec<u8>,
    signatures: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    media_type: String,
    #[serde(default)]
    verification_material: serde_json::Map<String, serde_json::Value>,
    dsse_envelope: Option<Envelope>,
    message_signature: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    payload: String,
    payload_type: String,
    signatures: Vec<EnvelopeSignature>,
}

#[derive(Deserialize)]
struct EnvelopeSignature {
    sig: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Statement {
    subject: Vec<Subject>,
    predicate_type: String,
    #[serde(default)]
    predicate: serde_json::Value,
}

#[derive(Deserialize)]
struct Subject {
    #[serde(default)]
    digest: std::collections::BTreeMap<String, String>,
}

impl Bundle {
    /// The bundle `bytes` found at `source`, or why it is not one cosign
    /// signs images with.
    pub(super) fn parse(source: String, bytes: &[u8]) -> Result<Self, String> {
        let not = |why: String| format!("{source}: {why}");
        let wire: Wire = serde_json::from_slice(bytes)
            .map_err(|e| not(format!("not a Sigstore bundle: {e}")))?;
        if !wire.media_type.starts_with(BUNDLE_MEDIA_TYPE) {
            return Err(not(format!(
                "the media type {:?} is not a Sigstore bundle's",
                wire.media_type
            )));
        }
        let Some(envelope) = wire.dsse_envelope else {
            return Err(not(if wire.message_signature.is_some() {
                "a message signature, not the DSSE envelope cosign signs images with".to_owned()
            } else {
                "a bundle with no signature".to_owned()
            }));
        };
        let payload = base64::engine::general_purpose::STANDARD
            .decode(envelope.payload.trim())
            .map_err(|e| not(format!("the envelope's payload is not base64: {e}")))?;
        if envelope.signatures.is_empty() {
            return Err(not("the envelope carries no signature".to_owned()));
        }
        let material = &wire.verification_material;
        super::chain::check(material).map_err(not)?;
        Ok(Self {
            source,
            raw: bytes.to_vec(),
            keyless: material.contains_key("certificate")
                || material.contains_key("x509CertificateChain"),
            payload_type: envelope.payload_type,
            payload,
            signatures: envelope
                .signatures
                .into_iter()
                .take(MAX_ENVELOPE_SIGNATURES)
                .map(|s| s.sig)
                .collect(),
        })
    }

    /// What this bundle says of `key` and `digest`.
    pub(super) fn verdict(&self, image: &ImageRef, digest: &str, key: &PublicKey) -> Verdict {
        if !self.signed_by(key) {
            return Verdict::Silent;
        }
        match self.statement() {
            Err(why) => Verdict::Refuses(SignatureError::Malformed {
                image: image.by_digest(digest),
                why: format!("{}, signed by {}: {why}", self.source, key.name()),
            }),
            // An attestation by the same key is not a signature.
            Ok(None) => Verdict::Silent,
            Ok(Some(subjects)) => {
                let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
                if subjects.iter().any(|s| s.eq_ignore_ascii_case(hex)) {
                    return Verdict::Admits;
                }
                Verdict::Refuses(SignatureError::DigestMismatch {
                    image: image.by_digest(digest),
                    key: key.name().to_owned(),
                    signed: subjects.first().map_or_else(
                        || "a statement naming no sha256 digest".to_owned(),
                        |s| format!("sha256:{s}"),
                    ),
                })
            }
        }
    }

    /// What this bundle says of keyless signer `identity` and `digest`,
    /// checked against `trust`.
    pub(super) fn verdict_keyless(
        &self,
        image: &ImageRef,
        digest: &str,
        identity: &Identity,
        trust: &Trust,
    ) -> Verdict {
        // Not a certificate's, or not a signature: nothing to say.
        if !self.keyless || !matches!(self.statement(), Ok(Some(_))) {
            return Verdict::Silent;
        }
        match trust.check(
            &image.by_digest(digest),
            digest,
            &self.source,
            &self.raw,
            identity,
        ) {
            Ok(()) => Verdict::Admits,
            Err(refusal) => Verdict::Refuses(refusal),
        }
    }

    /// The predicate of this bundle, if it is an SLSA provenance
    /// attestation `signer` signed; an error if it is one of another digest
    /// or its signature does not verify against `trust`.
    pub(super) fn provenance(
        &self,
        image: &ImageRef,
        digest: &str,
        signer: &Signer,
        trust: Option<&Trust>,
    ) -> Option<Result<serde_json::Value, SignatureError>> {
        if self.payload_type != IN_TOTO {
            return None;
        }
        let statement = serde_json::from_slice::<Statement>(&self.payload).ok()?;
        if !statement.predicate_type.starts_with(SLSA_PROVENANCE) {
            return None;
        }
        match signer {
            Signer::Key(key) => {
                if !self.signed_by(key) {
                    return None;
                }
            }
            Signer::Keyless(identity) => {
                if !self.keyless {
                    return None;
                }
                let checked = trust?.check(
                    &image.by_digest(digest),
                    digest,
                    &self.source,
                    &self.raw,
                    identity,
                );
                if let Err(refusal) = checked {
                    return Some(Err(refusal));
                }
            }
        }
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        let subjects: Vec<&str> = statement
            .subject
            .iter()
            .filter_map(|s| s.digest.get("sha256").map(String::as_str))
            .collect();
        if !subjects.iter().any(|s| s.eq_ignore_ascii_case(hex)) {
            return Some(Err(SignatureError::DigestMismatch {
                image: image.by_digest(digest),
                key: signer.name().to_owned(),
                signed: subjects
                    .first()
                    .map_or_else(|| "no sha256 digest".to_owned(), |s| format!("sha256:{s}")),
            }));
        }
        Some(Ok(statement.predicate))
    }

    /// Whether `key` made one of the envelope's signatures (a bundle signed
    /// with a certificate is no key's).
    fn signed_by(&self, key: &PublicKey) -> bool {
        let message = pae(&self.payload_type, &self.payload);
        !self.keyless && self.signatures.iter().any(|s| key.signed(&message, s))
    }

    /// The sha256 digests the statement signs, if it is cosign's signing
    /// statement (`None`: another predicate, an attestation).
    fn statement(&self) -> Result<Option<Vec<String>>, String> {
        if self.payload_type != IN_TOTO {
            return Err(format!(
                "the payload type {:?} is not an in-toto statement",
                self.payload_type
            ));
        }
        let statement = serde_json::from_slice::<Statement>(&self.payload)
            .map_err(|_| "the in-toto statement does not parse".to_owned())?;
        if statement.predicate_type != COSIGN_SIGNATURE {
            return Ok(None);
        }
        Ok(Some(
            statement
                .subject
                .into_iter()
                .filter_map(|mut s| s.digest.remove("sha256"))
                .collect(),
        ))
    }
}

/// DSSE's pre-authentication encoding of `payload` of `payload_type`: what
/// the envelope's signatures sign.
fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut signed = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    signed.extend_from_slice(payload);
    signed
}
