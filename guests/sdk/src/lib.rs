//! Write capwasm cluster providers (Cluster API bootstrap, infrastructure
//! and control-plane providers) as WebAssembly components.
//!
//! A provider is a `cdylib` crate built for `wasm32-wasip2`. It implements
//! [`bootstrap::BootstrapProvider`],
//! [`infrastructure::InfrastructureProvider`] or
//! [`control_plane::ControlPlaneProvider`] on a unit struct and exports it
//! with one macro ([`export_bootstrap_provider!`],
//! [`export_infrastructure_provider!`], [`export_control_plane_provider!`]):
//!
//! ```ignore
//! #![no_std]
//! extern crate alloc;
//!
//! use capwasm_provider_sdk::prelude::*;
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
//! (infrastructure and control-plane providers only).
//!
//! Because instances never outlive a call, the SDK installs a bump arena
//! (64 KiB, then dlmalloc) as the global allocator of wasm builds; disable
//! the default `arena` feature to bring another one.
//!
//! The SDK and providers are `no_std` (with `alloc`; [`prelude`] brings
//! what the standard library's prelude would): the standard library makes
//! a component import a dozen `wasi:cli` and `wasi:io` interfaces for its
//! panic output and environment, which the host pays for on every
//! instantiation. A panic's message goes to the host, which reports it
//! with the trap, and the call aborts. A provider that needs the standard
//! library (a dependency that is not `no_std`) says so to the export macro,
//! `export_bootstrap_provider!(Hello, std)`, which then leaves the panic
//! handler and `cabi_realloc` to the standard library.
#![no_std]
#![warn(missing_docs)]

extern crate alloc;
// Native builds (unit tests) have the standard library and its test harness.
#[cfg(not(target_arch = "wasm32"))]
extern crate std;

#[doc(hidden)]
pub mod bindings;

#[cfg(any(test, all(target_arch = "wasm32", feature = "arena")))]
mod arena;
pub mod bootstrap;
pub mod config;
pub mod control_plane;
pub mod http;
pub mod infrastructure;
pub mod log;
pub mod platform;
#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod runtime;
pub mod types;

/// What the standard library's prelude brings and `no_std` code lacks:
/// `use capwasm_provider_sdk::prelude::*;`.
pub mod prelude {
    pub use alloc::borrow::ToOwned;
    pub use alloc::boxed::Box;
    pub use alloc::string::{String, ToString};
    pub use alloc::vec::Vec;
    pub use alloc::{format, vec};
}

/// Defines what a `no_std` component needs from its crate: the panic
/// handler and `cabi_realloc` (see `runtime`). The export macros use it.
#[doc(hidden)]
#[macro_export]
macro_rules! no_std_runtime {
    () => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            #[panic_handler]
            fn panic(info: &::core::panic::PanicInfo<'_>) -> ! {
                $crate::runtime::panic(info)
            }

            /// The canonical ABI's allocator.
            ///
            /// # Safety
            ///
            /// See `capwasm_provider_sdk::runtime::cabi_realloc`.
            // Exporting a symbol is unsafe by definition.
            #[allow(unsafe_code)]
            #[unsafe(no_mangle)]
            unsafe extern "C" fn cabi_realloc(
                old_ptr: *mut u8,
                old_len: usize,
                align: usize,
                new_len: usize,
            ) -> *mut u8 {
                // SAFETY: the caller's contract is passed on.
                unsafe { $crate::runtime::cabi_realloc(old_ptr, old_len, align, new_len) }
            }
        };
    };
}

/// Exports a [`bootstrap::BootstrapProvider`] as the component's
/// `bootstrap-provider` world. Use it once, at the crate root, with the
/// name of a type. The provider's name and version in `info()` are its
/// crate's package name and version.
///
/// The crate is `no_std` unless the macro is told otherwise:
/// `export_bootstrap_provider!(Hello, std)` for a provider that links the
/// standard library.
#[macro_export]
macro_rules! export_bootstrap_provider {
    ($ty:ident) => {
        $crate::export_bootstrap_provider!($ty, std);
        $crate::no_std_runtime!();
    };
    ($ty:ident, std) => {
        const _: () = {
            impl $crate::bindings::bootstrap::Guest for $ty {
                fn info() -> $crate::types::ProviderInfo {
                    $crate::types::ProviderInfo {
                        name: ::core::env!("CARGO_PKG_NAME").into(),
                        version: ::core::env!("CARGO_PKG_VERSION").into(),
                    }
                }

                fn config_schema() -> $crate::prelude::String {
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
/// a second package building the same provider). As with
/// [`export_bootstrap_provider!`], a trailing `std` says the crate links the
/// standard library.
#[macro_export]
macro_rules! export_infrastructure_provider {
    ($ty:ident) => {
        $crate::export_infrastructure_provider!($ty, name = ::core::env!("CARGO_PKG_NAME"));
    };
    ($ty:ident, std) => {
        $crate::export_infrastructure_provider!($ty, name = ::core::env!("CARGO_PKG_NAME"), std);
    };
    ($ty:ident, name = $name:expr, std) => {
        $crate::export_infrastructure_provider!(@export $ty, $name);
    };
    ($ty:ident, name = $name:expr) => {
        $crate::export_infrastructure_provider!(@export $ty, $name);
        $crate::no_std_runtime!();
    };
    (@export $ty:ident, $name:expr) => {
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

                fn config_schema() -> $crate::prelude::String {
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

            impl __wit::pool_machines::Guest for $ty {
                fn remove(
                    request: $crate::infrastructure::PoolRemoveRequest,
                ) -> ::core::result::Result<$crate::infrastructure::PoolState, __Error> {
                    <$ty as __Provider>::remove_instances(request)
                }
            }

            impl __wit::node_shapes::Guest for $ty {
                fn describe(
                    request: $crate::infrastructure::NodeDescribeRequest,
                ) -> ::core::result::Result<$crate::infrastructure::NodeShape, __Error> {
                    <$ty as __Provider>::describe_nodes(request)
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
                    config: $crate::prelude::String,
                    instance: $crate::types::Instance,
                ) -> ::core::result::Result<$crate::prelude::String, __Error> {
                    <$ty as __Provider>::provider_id(&config, instance)
                }

                fn owns(provider_id: $crate::prelude::String) -> bool {
                    <$ty as __Provider>::owns(&provider_id)
                }
            }
        };

        $crate::bindings::infrastructure::export_infrastructure_world!($ty with_types_in $crate::bindings::infrastructure);
    };
}
