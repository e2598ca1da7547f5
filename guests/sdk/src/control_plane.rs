//! Writing a control-plane provider (WIT world `control-plane-provider`):
//! it brings a cluster's control plane up, on machines or hosted, and keeps
//! it at the version and size asked for. The host does the Cluster API
//! control-plane contract (endpoint, initialization, replica counts,
//! conditions, deletion order) from the [`ControlPlaneState`] returned.
//! [`crate::http`] works here as it does for infrastructure providers.

pub use crate::bindings::control_plane::exports::capwasm::provider::control_planes::{
    ControlPlaneRequest, ControlPlaneState,
};

use crate::prelude::*;
use crate::types::{DeleteOutcome, ProviderError};

/// A control-plane provider. Implement it on a unit struct and export it
/// with [`export_control_plane_provider!`](crate::export_control_plane_provider).
///
/// Every call runs in a fresh instance: keep no state between calls. What
/// the provider's side holds is found again from the request
/// (`request.idempotency_key` or the object's namespace and name).
pub trait ControlPlaneProvider {
    /// A JSON Schema document (draft 2020-12) for `spec.config`.
    fn config_schema() -> String;

    /// Brings the control plane towards `request.version` and
    /// `request.replicas` and reports where it is. Must be safe to repeat
    /// after a crash at any point. Set `requeue_after_seconds` while it is
    /// still moving: the host cannot watch the provider's side.
    fn reconcile_control_plane(
        request: ControlPlaneRequest,
    ) -> Result<ControlPlaneState, ProviderError>;

    /// Removes the control plane; returns [`DeleteOutcome::InProgress`]
    /// until it is gone. The host calls it once the cluster's workers are
    /// gone.
    fn delete_control_plane(request: ControlPlaneRequest) -> Result<DeleteOutcome, ProviderError>;
}

/// Exports a [`ControlPlaneProvider`] as the component's
/// `control-plane-provider` world, as
/// [`export_infrastructure_provider!`](crate::export_infrastructure_provider)
/// does for its world (`name = "..."` and a trailing `std` alike).
#[macro_export]
macro_rules! export_control_plane_provider {
    ($ty:ident) => {
        $crate::export_control_plane_provider!($ty, name = ::core::env!("CARGO_PKG_NAME"));
    };
    ($ty:ident, std) => {
        $crate::export_control_plane_provider!($ty, name = ::core::env!("CARGO_PKG_NAME"), std);
    };
    ($ty:ident, name = $name:expr, std) => {
        $crate::export_control_plane_provider!(@export $ty, $name);
    };
    ($ty:ident, name = $name:expr) => {
        $crate::export_control_plane_provider!(@export $ty, $name);
        $crate::no_std_runtime!();
    };
    (@export $ty:ident, $name:expr) => {
        const _: () = {
            use $crate::bindings::control_plane::exports::capwasm::provider::control_planes as __wit;
            use $crate::control_plane::ControlPlaneProvider as __Provider;
            use $crate::types::{DeleteOutcome as __DeleteOutcome, ProviderError as __Error};

            impl $crate::bindings::control_plane::Guest for $ty {
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
                fn reconcile(
                    request: __wit::ControlPlaneRequest,
                ) -> ::core::result::Result<__wit::ControlPlaneState, __Error> {
                    <$ty as __Provider>::reconcile_control_plane(request)
                }

                fn delete(
                    request: __wit::ControlPlaneRequest,
                ) -> ::core::result::Result<__DeleteOutcome, __Error> {
                    <$ty as __Provider>::delete_control_plane(request)
                }
            }
        };

        $crate::bindings::control_plane::export_control_plane_world!($ty with_types_in $crate::bindings::control_plane);
    };
}
