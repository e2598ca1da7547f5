//! Writing a bootstrap provider (WIT world `bootstrap-provider`).

pub use crate::bindings::bootstrap::exports::capwasm::provider::bootstrap::GenerateRequest;

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
