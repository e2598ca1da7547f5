//! cosign's layout before v3: a `sha256-<hex>.sig` manifest beside the
//! image, each layer a simple-signing payload naming the digest and the
//! repository it signs, with its signature in the layer's annotation.
//!
//! The repository is checked as well as the digest, as containers/image
//! (podman, CRI-O) checks it and cosign's own `verify` does not: a
//! signature of a digest in one repository says nothing of the same
//! digest pushed to another, whose tags someone else may move.

use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::OciImageManifest;
use serde::Deserialize;

use super::{Found, MAX_SIGNATURE_BYTES, MAX_SIGNATURES, PublicKey, Verdict};
use crate::{Error, ImageRef, Session, SignatureError};

/// The annotation holding a layer's signature, base64.
const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";

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

/// The signatures of the `.sig` manifest of `digest`, none if there is none.
pub(super) async fn fetch(
    session: &Session<'_>,
    digest: &str,
) -> Result<Vec<Found>, SignatureError> {
    let (registry, image) = (&session.registry, session.registry.image);
    let fetch = |source: Error| super::fetch_failed(image, digest, source);
    let tag = format!("{}.sig", digest.replacen(':', "-", 1));
    let manifest = match registry.manifest(&image.tagged(&tag)).await {
        Ok((bytes, _)) => bytes,
        Err(error) if is_not_found(&error) => return Ok(Vec::new()),
        Err(error) => return Err(fetch(error)),
    };
    let Ok(manifest) = serde_json::from_slice::<OciImageManifest>(&manifest) else {
        return Ok(vec![Found::Unreadable(format!(
            "the signature manifest {}:{tag} does not parse",
            image.repository()
        ))]);
    };
    let mut found = Vec::new();
    for layer in manifest.layers.iter().take(MAX_SIGNATURES) {
        let Some(signature) = layer
            .annotations
            .as_ref()
            .and_then(|a| a.get(SIGNATURE_ANNOTATION))
        else {
            continue;
        };
        let payload = registry
            .blob(layer, MAX_SIGNATURE_BYTES)
            .await
            .map_err(fetch)?;
        found.push(Found::Legacy {
            signature: signature.clone(),
            payload,
        });
    }
    Ok(found)
}

/// What `signature` over `payload` says of `key` and `digest` in `image`'s
/// repository.
pub(super) fn verdict(
    image: &ImageRef,
    digest: &str,
    key: &PublicKey,
    signature: &str,
    payload: &[u8],
) -> Verdict {
    if !key.signed(payload, signature) {
        return Verdict::Silent;
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
    if signed_digest != Some(digest) {
        return Verdict::Refuses(SignatureError::DigestMismatch {
            image: image.by_digest(digest),
            key: key.name().to_owned(),
            signed: signed_digest
                .unwrap_or("a payload naming no digest")
                .to_owned(),
        });
    }
    if !signed_repository.is_some_and(|r| image.is_repository(r)) {
        return Verdict::Refuses(SignatureError::RepositoryMismatch {
            image: image.by_digest(digest),
            key: key.name().to_owned(),
            signed: signed_repository.unwrap_or("(none named)").to_owned(),
        });
    }
    Verdict::Admits
}

/// Whether the registry answered that there is no such manifest.
pub(super) fn is_not_found(error: &Error) -> bool {
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
