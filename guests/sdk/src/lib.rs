//! Write capwasm cluster providers (Cluster API bootstrap and infrastructure
//! providers) as WebAssembly components.
//!
//! A provider is a `cdylib` crate built for `wasm32-wasip2`. It implements
//! [`bootstrap::BootstrapProvider`] or
//! [`infrastructure::InfrastructureProvider`] on a unit struct and exports
//! it with one macro:
//!
//! ```ignore
//! use capwasm_provider_sdk::bootstrap::{BootstrapProvider, GenerateRequest};
//! use capwasm_provider_sdk::types::{BootstrapData, BootstrapFormat, ProviderError};
//!
//! struct Hello;
//!
//! impl BootstrapProvider for Hello {
//!     fn config_schema() -> String {
//!         r#"{"type": "object", "additionalProperties": false}"#.to_owned()
//!     }
//!
//!     fn generate(request: GenerateRequest) -> Result<BootstrapData, ProviderError> {
//!         let script = format!("#!/bin/sh\necho joining {}\n", request.cluster.name);
//!         Ok(BootstrapData { format: BootstrapFormat::ShellScript, value: script.into_bytes() })
//!     }
//! }
//!
//! capwasm_provider_sdk::export_bootstrap_provider!(Hello);
//! ```
//!
//! Every call runs in a fresh instance with a memory cap and a deadline, so
//! a provider keeps no state between calls: what must persist goes back to
//! the host in the call's result. Helpers: [`config::parse`] for
//! `spec.config`, [`log`] for structured logs, [`http`] for outgoing HTTP
//! (infrastructure providers only).
//!
//! Because instances never outlive a call, the SDK installs a bump arena
//! (64 KiB, then the standard allocator) as the global allocator of wasm
//! builds; disable the default `arena` feature to bring another one.
#![warn(missing_docs)]

#[doc(hidden)]
pub mod bindings;

#[cfg(any(test, all(target_arch = "wasm32", feature = "arena")))]
mod arena;
pub mod bootstrap;
pub mod config;
pub mod http;
pub mod infrastructure;
pub mod log;
pub mod types;

/// Exports a [`bootstrap::BootstrapProvider`] as the component's
/// `bootstrap-provider` world. Use it once, at the crate root, with the
/// name of a type. The provider's name and version in `info()` are its
/// crate's package name and version.
#[macro_export]
macro_rules! export_bootstrap_provider {
    ($ty:ident) => {
        const _: () = {
            impl $crate::bindings::bootstrap::Guest for $ty {
                fn info() -> $crate::types::ProviderInfo {
                    $crate::types::ProviderInfo {
                        name: ::core::env!("CARGO_PKG_NAME").into(),
                        version: ::core::env!("CARGO_PKG_VERSION").into(),
                    }
                }

                fn config_schema() -> ::std::string::String {
                    <$ty as $crate::bootstrap::BootstrapProvider>::config_schema()
                }
            }

            impl $crate::bindings::bootstrap::exports::capwasm::provider::bootstrap::Guest for $ty {
                fn generate(
                    request: $crate::bootstrap::GenerateRequest,
                ) -> ::core::result::Result<$crate::types::BootstrapData, $crate::types::ProviderError>
                {
                    <$ty as $crate::bootstrap::BootstrapProvider>::generate(request)
                }
            }
        };

        $crate::bindings::bootstrap::export_bootstrap_world!($ty with_types_in $crate::bindings::bootstrap);
    };
}

/// Exports an [`infrastructure::InfrastructureProvider`] as the component's
/// `infrastructure-provider` world. Use it once, at the crate root, with the
/// name of a type. The provider's name and version in `info()` are its
/// crate's package name and version; `name = "..."` sets another name (for
/// a second package building the same provider).
#[macro_export]
macro_rules! export_infrastructure_provider {
    ($ty:ident) => {
        $crate::export_infrastructure_provider!($ty, name = ::core::env!("CARGO_PKG_NAME"));
    };
    ($ty:ident, name = $name:expr) => {
        const _: () = {
            use $crate::bindings::infrastructure::exports::capwasm::provider as __wit;
            use $crate::infrastructure::InfrastructureProvider as __Provider;
            use $crate::types::{DeleteOutcome as __DeleteOutcome, ProviderError as __Error};

            impl $crate::bindings::infrastructure::Guest for $ty {
                fn info() -> $crate::types::ProviderInfo {
                    $crate::types::ProviderInfo {
                        name: $name.into(),
                        version: ::core::env!("CARGO_PKG_VERSION").into(),
                    }
                }

                fn config_schema() -> ::std::string::String {
                    <$ty as __Provider>::config_schema()
                }
            }

            impl __wit::machine_pools::Guest for $ty {
                fn reconcile(
                    request: $crate::infrastructure::PoolReconcileRequest,
                ) -> ::core::result::Result<$crate::infrastructure::PoolState, __Error> {
                    <$ty as __Provider>::reconcile_machine_pool(request)
                }

                fn delete(
                    request: $crate::infrastructure::PoolDeleteRequest,
                ) -> ::core::result::Result<__DeleteOutcome, __Error> {
                    <$ty as __Provider>::delete_machine_pool(request)
                }
            }

            impl __wit::clusters::Guest for $ty {
                fn reconcile(
                    request: $crate::infrastructure::ClusterRequest,
                ) -> ::core::result::Result<$crate::infrastructure::ClusterState, __Error> {
                    <$ty as __Provider>::reconcile_cluster(request)
                }

                fn delete(
                    request: $crate::infrastructure::ClusterRequest,
                ) -> ::core::result::Result<__DeleteOutcome, __Error> {
                    <$ty as __Provider>::delete_cluster(request)
                }
            }

            impl __wit::provider_ids::Guest for $ty {
                fn provider_id(
                    config: ::std::string::String,
                    instance: $crate::types::Instance,
                ) -> ::core::result::Result<::std::string::String, __Error> {
                    <$ty as __Provider>::provider_id(&config, instance)
                }

                fn owns(provider_id: ::std::string::String) -> bool {
                    <$ty as __Provider>::owns(&provider_id)
                }
            }
        };

        $crate::bindings::infrastructure::export_infrastructure_world!($ty with_types_in $crate::bindings::infrastructure);
    };
}
