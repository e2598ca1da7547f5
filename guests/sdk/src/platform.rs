//! Writing a platform provider (WIT world `platform-provider` of the package
//! `capwasm:platform`): it composes a platform cluster's objects from its
//! template, rolls their state up, and judges spec changes. Objects cross
//! as JSON documents; the host applies, prunes and deletes them.

pub use crate::bindings::platform::exports::capwasm::platform::composition::{
    ClusterSummary, Condition, ConditionStatus, GeneratedSecret, NodeGroupSummary, NodeSummary,
    Phase, RenderRequest, Rendered, StatusRequest, ValidateRequest, Verdict,
};

use crate::prelude::*;
use crate::types::ProviderError;

/// A platform provider. Implement it on a unit struct and export it with
/// [`export_platform_provider!`](crate::export_platform_provider).
///
/// Every call runs in a fresh instance, with no network: keep no state
/// between calls, and read everything from the request.
pub trait PlatformProvider {
    /// A JSON Schema document (draft 2020-12) for the values: the
    /// template's `spec.values` overlaid with the cluster's.
    fn config_schema() -> String;

    /// The objects of the cluster for its spec, template and values.
    fn render(request: RenderRequest) -> Result<Rendered, ProviderError>;

    /// The cluster's phase, conditions and summaries from its objects and Nodes.
    fn status(request: StatusRequest) -> Result<ClusterSummary, ProviderError>;

    /// Whether a change of the cluster's spec (a new template) is safe.
    fn validate(request: ValidateRequest) -> Result<Verdict, ProviderError>;
}

/// Exports a [`PlatformProvider`] as the component's `platform-provider`
/// world, as [`export_bootstrap_provider!`](crate::export_bootstrap_provider)
/// does for its world (`name = "..."` and a trailing `std` alike).
#[macro_export]
macro_rules! export_platform_provider {
    ($ty:ident) => {
        $crate::export_platform_provider!($ty, name = ::core::env!("CARGO_PKG_NAME"));
    };
    ($ty:ident, std) => {
        $crate::export_platform_provider!($ty, name = ::core::env!("CARGO_PKG_NAME"), std);
    };
    ($ty:ident, name = $name:expr, std) => {
        $crate::export_platform_provider!(@export $ty, $name);
    };
    ($ty:ident, name = $name:expr) => {
        $crate::export_platform_provider!(@export $ty, $name);
        $crate::no_std_runtime!();
    };
    (@export $ty:ident, $name:expr) => {
        const _: () = {
            use $crate::bindings::platform::exports::capwasm::platform::composition as __wit;
            use $crate::platform::PlatformProvider as __Provider;
            use $crate::types::ProviderError as __Error;

            impl $crate::bindings::platform::Guest for $ty {
                fn info() -> $crate::types::ProviderInfo {
                    $crate::types::ProviderInfo {
                        name: $name.into(),
                        version: ::core::env!("CARGO_PKG_VERSION").into(),
                    }
                }

                fn config_schema() -> $crate::prelude::String {
                    <$ty as __Provider>::config_schema()
                }
            }

            impl __wit::Guest for $ty {
                fn render(request: __wit::RenderRequest) -> ::core::result::Result<__wit::Rendered, __Error> {
                    <$ty as __Provider>::render(request)
                }

                fn status(request: __wit::StatusRequest) -> ::core::result::Result<__wit::ClusterSummary, __Error> {
                    <$ty as __Provider>::status(request)
                }

                fn validate(request: __wit::ValidateRequest) -> ::core::result::Result<__wit::Verdict, __Error> {
                    <$ty as __Provider>::validate(request)
                }
            }
        };

        $crate::bindings::platform::export_platform_world!($ty with_types_in $crate::bindings::platform);
    };
}
