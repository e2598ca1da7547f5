//! What was verified before: the record kept of each image once it is in
//! service, and, with the registry down or slow, the component last
//! resolved (or pinned) served from it, if today's policy admits the keys that verified it and its
//! compilation is cached. Apart because it asks no registry, and its checks
//! are what stands between an unreachable registry and an unverified
//! component.

use super::{Fetched, Origin, hex_of, names};
use crate::api::Reason;
use crate::api::providermodule::ProviderModuleStatus;
use crate::controllers::context::Context;
use crate::controllers::outcome::Wait;
use crate::controllers::providermodule::FETCH_RETRY;
use crate::oci::{ImageRef, Policy, Records};
use crate::wasm::ProviderSource;

/// Remembers what was verified of the image now in service.
pub(in crate::controllers::providermodule) fn remember(ctx: &Context, origin: &Origin) {
    let Some(records) = records(ctx) else {
        return;
    };
    if records.get(&origin.record.manifest_digest).as_ref() == Some(&origin.record) {
        return;
    }
    if let Err(error) = records.put(&origin.record) {
        // Serving works without it; a restart with the registry down does not.
        tracing::warn!(
            error = &error as &dyn std::error::Error,
            "cannot record the verified image"
        );
    }
}

/// The records of verified images, beside the precompiled components.
pub(super) fn records(ctx: &Context) -> Option<Records> {
    ctx.runtime.cache_dir().map(|d| Records::new(d.join("oci")))
}

/// With the registry down: the digest last resolved (or pinned), if it
/// was verified with the keys today's policy asks for and its compilation
/// is cached.
pub(super) fn offline(
    ctx: &Context,
    image: &ImageRef,
    known: Option<String>,
    policy: &Policy,
    records: Option<&Records>,
    (reason, why): (Reason, &str),
) -> Result<Fetched, Wait> {
    let unavailable = |what: String| Wait::after(reason, format!("{why}, and {what}"), FETCH_RETRY);
    let Some(digest) = known else {
        return Err(unavailable(format!("{image} was never resolved here")));
    };
    let Some(record) = records.and_then(|r| r.get(&digest)) else {
        return Err(unavailable(format!(
            "no verified copy of {} is cached",
            image.by_digest(&digest)
        )));
    };
    let signed = policy.satisfied_by(&record.signed_by);
    if !policy.is_empty() && signed.is_none() {
        return Err(unavailable(format!(
            "the cached {} was not verified with the keys today's policy asks for",
            image.by_digest(&digest)
        )));
    }
    if !ctx.runtime.is_precompiled(&record.component_digest) {
        return Err(unavailable(format!(
            "the compilation of {} is not cached",
            image.by_digest(&digest)
        )));
    }
    Ok(Fetched {
        source: ProviderSource::Precompiled(hex_of(&record.component_digest)),
        digest: record.component_digest.clone(),
        origin: Some(Origin {
            image: image.by_digest(&digest),
            signed_by: signed.as_deref().and_then(names),
            record,
            offline: Some(format!("{why}; serving what was verified before")),
            refresh: Some(FETCH_RETRY),
        }),
    })
}

/// The digest this module last served of `image`'s repository, or the one
/// `image` pins.
pub(super) fn known_digest(image: &ImageRef, status: &ProviderModuleStatus) -> Option<String> {
    if let Some(digest) = image.digest() {
        return Some(digest.to_owned());
    }
    let served = status.image.as_deref()?;
    let (repository, digest) = served.split_once('@')?;
    (repository == image.repository()).then(|| digest.to_owned())
}
