//! Writing a bootstrap provider (WIT world `bootstrap-provider`).

pub use crate::bindings::bootstrap::capwasm::provider::bootstrap_tokens::BootstrapToken;
pub use crate::bindings::bootstrap::exports::capwasm::provider::bootstrap::GenerateRequest;

/// The bootstrap token the host made in the workload cluster for this
/// call's config (`id.secret` is what `kubeadm join --token` takes), or
/// none when it has no workload cluster to make it in. Only call it when
/// the token is needed: a token no call asked for is deleted at once.
pub fn join_token() -> Option<BootstrapToken> {
    crate::bindings::bootstrap::capwasm::provider::bootstrap_tokens::join_token()
}

use crate::prelude::*;
use crate::types::{BootstrapData, ProviderError};

/// A bootstrap provider. Implement it on a unit struct and export it with
/// [`export_bootstrap_provider!`](crate::export_bootstrap_provider).
///
/// Every call runs in a fresh instance: keep no state between calls.
pub trait BootstrapProvider {
    /// A JSON Schema document (draft 2020-12) for `spec.config`.
    fn config_schema() -> String;

    /// Produces the bootstrap data for the machines of
    /// `request.owner_name`. Return [`ProviderError::retry_after`] while
    /// something the data needs (such as the control-plane endpoint) is not
    /// known yet.
    fn generate(request: GenerateRequest) -> Result<BootstrapData, ProviderError>;
}
