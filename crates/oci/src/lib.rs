//! Providers in OCI registries: references, pulls in the Wasm artifact
//! layout (or the single-layer form other tools push), cosign signatures
//! (Sigstore bundles and the older `.sig` layout) checked against a policy
//! of public keys, pushes for authors, and a record of what was
//! verified so a restart can serve a pinned digest with the registry down.
#![warn(missing_docs)]
// Input reaches every path of the operator: no unwrap, expect or panic on any of them.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod client;
mod cosign;
mod error;
mod pull;
mod push;
mod record;
mod reference;

pub use client::Puller;
pub use cosign::{
    Identity, Policy, Provenance, PublicKey, Signed, Signer, Subject, Trust, verify_signature,
};
pub use error::{Error, SignatureError};
pub use pull::{Artifact, Resolved, Session};
pub use push::{Pushed, push_component};
pub use record::{Record, Records};
pub use reference::{Auth, ImageRef};

/// The Wasm OCI artifact's config media type.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The artifact type of a Sigstore bundle stored as an OCI referrer
/// (cosign v3's signatures).
pub const BUNDLE_ARTIFACT_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The Wasm OCI artifact's layer media type.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
