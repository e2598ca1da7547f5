//! The Sigstore bundles that refer to an image, as cosign v3 stores them:
//! each an OCI manifest whose `subject` is the image's and whose one layer
//! is the bundle. Found through the registry's referrers API, or, for a
//! registry without it, through the referrers tag (`sha256-<hex>`), the
//! image index cosign keeps up to date there instead.

use oci_client::manifest::OciImageManifest;
use serde::Deserialize;

use super::bundle::Bundle;
use super::legacy::is_not_found;
use super::{Found, MAX_SIGNATURE_BYTES, MAX_SIGNATURES};
use crate::{BUNDLE_ARTIFACT_TYPE, Error, Session, SignatureError};

#[derive(Deserialize)]
struct Index {
    #[serde(default)]
    manifests: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    digest: String,
    #[serde(default)]
    artifact_type: Option<String>,
}

/// The bundles referring to `digest`, each read or why it cannot be.
pub(super) async fn fetch(
    session: &Session<'_>,
    digest: &str,
) -> Result<Vec<Found>, SignatureError> {
    let (registry, image) = (&session.registry, session.registry.image);
    let fetch = |source: Error| super::fetch_failed(image, digest, source);
    let index = if let Some(index) = registry.referrers(digest).await.map_err(fetch)? {
        index
    } else {
        let tag = digest.replacen(':', "-", 1);
        match registry.manifest(&image.tagged(&tag)).await {
            Ok((index, _)) => index,
            Err(error) if is_not_found(&error) => return Ok(Vec::new()),
            Err(error) => return Err(fetch(error)),
        }
    };
    let Ok(index) = serde_json::from_slice::<Index>(&index) else {
        return Ok(vec![Found::Unreadable(format!(
            "the referrers index of {digest} does not parse"
        ))]);
    };
    let mut found = Vec::new();
    // Other referrers (SBOMs, attestations of other kinds) are not signatures.
    let bundles = index
        .manifests
        .iter()
        .filter(|e| e.artifact_type.as_deref() == Some(BUNDLE_ARTIFACT_TYPE))
        .take(MAX_SIGNATURES);
    for entry in bundles {
        let source = format!("the referrer {}", entry.digest);
        if !crate::reference::is_sha256(&entry.digest) {
            found.push(Found::Unreadable(format!("{source}: not a sha256 digest")));
            continue;
        }
        let (manifest, _) = registry
            .manifest(&image.at(&entry.digest))
            .await
            .map_err(fetch)?;
        let manifest = match serde_json::from_slice::<OciImageManifest>(&manifest) {
            Ok(manifest) => manifest,
            Err(e) => {
                found.push(Found::Unreadable(format!(
                    "{source}: not an image manifest: {e}"
                )));
                continue;
            }
        };
        if manifest.subject.as_ref().map(|s| s.digest.as_str()) != Some(digest) {
            found.push(Found::Unreadable(format!(
                "{source}: refers to another image than {digest}"
            )));
            continue;
        }
        let Some(layer) = manifest
            .layers
            .iter()
            .find(|l| l.media_type == BUNDLE_ARTIFACT_TYPE)
        else {
            found.push(Found::Unreadable(format!(
                "{source}: has no layer of media type {BUNDLE_ARTIFACT_TYPE}"
            )));
            continue;
        };
        let bytes = registry
            .blob(layer, MAX_SIGNATURE_BYTES)
            .await
            .map_err(fetch)?;
        found.push(match Bundle::parse(source, &bytes) {
            Ok(bundle) => Found::Bundle(bundle),
            Err(why) => Found::Unreadable(why),
        });
    }
    Ok(found)
}
