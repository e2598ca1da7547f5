//! A module's OCI source: its tag resolved to a digest, that digest's
//! cosign signature checked before anything is compiled, the component
//! pulled (or taken from the precompiled cache by the record of what was
//! verified), and, with the registry down, what was verified before.
//!
//! This file holds what a fetch gives the rest of the controller; asking the
//! registry, with the pull's credentials, is in `fetch`, the verification
//! keys and what a refused signature means in `verification`, and what was
//! verified before, kept and served from with the registry down, in
//! `offline`.

mod fetch;
mod offline;
mod verification;

use std::time::Duration;

use crate::oci::Record;
use crate::wasm::ProviderSource;

pub(super) use fetch::fetch;
pub(super) use offline::remember;

/// A component to load, and where it came from.
pub(super) struct Fetched {
    /// Its bytes, or the precompiled cache's copy.
    pub source: ProviderSource,
    /// `sha256:<hex>` of the component.
    pub digest: String,
    /// The image it came from, for OCI sources.
    pub origin: Option<Origin>,
}

/// The image a component came from.
pub(super) struct Origin {
    /// `REGISTRY/REPOSITORY@sha256:...`.
    pub image: String,
    /// What to remember of it once it is in service.
    pub record: Record,
    /// The key whose signature admitted it.
    pub signed_by: Option<String>,
    /// Why the registry was not asked, if it was not.
    pub offline: Option<String>,
    /// When to resolve the tag again, if the image names one.
    pub refresh: Option<Duration>,
}

fn hex_of(digest: &str) -> String {
    digest.strip_prefix("sha256:").unwrap_or(digest).to_owned()
}

/// The names of the keys that `signed`, for `status.signedBy`.
fn names(signed: &[crate::oci::Signed]) -> Option<String> {
    let names: Vec<&str> = signed.iter().map(|s| s.key.as_str()).collect();
    (!names.is_empty()).then(|| names.join(", "))
}
