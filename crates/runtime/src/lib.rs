//! The WebAssembly provider runtime: one engine, a registry of loaded
//! providers that can be swapped while calls run, and bounded calls into them.
//!
//! Guests are pure functions of their inputs plus declared capabilities:
//! every call gets a fresh instance (from a pre-instantiated component and a
//! pooling allocator) with a memory cap, a deadline and a cap on what it
//! returns, and no filesystem, environment, sockets or inherited stdio.
//! Outgoing HTTP reaches only the hosts its provider may call. Nothing here
//! talks to Kubernetes; callers pass plain values generated from the WIT.
//!
//! The crate depends on nothing of Kubernetes (no `kube`, no `k8s-openapi`):
//! `tests/crate_arrows.rs` fails if it ever does.
#![warn(missing_docs)]
// Input reaches every path of the operator: no unwrap, expect or panic on any of them.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod bindings;
pub mod bounds;
mod cache;
mod call;
pub mod checks;
pub mod composed;
mod composed_meta;
mod control_plane;
mod credentials;
mod engine;
mod error;
mod exports;
mod fairness;
pub mod files;
mod host;
mod limits;
mod linkers;
mod load;
mod memory;
mod metrics;
mod platform;
mod provider;
mod registry;
pub mod report;
mod runtime;
pub mod schema;
mod state;
pub mod text;
mod world;

pub use bindings::types;
pub use bindings::{
    bootstrap, bootstrap_tokens, clusters, composition, control_planes, machine_pools, node_shapes,
    pool_machines,
};
pub use cache::PrecompiledCache;
pub use composed::ObjectKind;
pub use error::{CallError, Error, Wall, Whose};
pub use fairness::Throttled;
pub use host::auth::{AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AuthError, HostAuth, Keys, Scheme};
pub use limits::{Capabilities, HttpLimits, Limits};
pub use load::{ProviderSource, ProviderSpec};
pub use memory::MemoryBound;
pub use metrics::Metrics;
pub use provider::LoadedProvider;
pub use registry::{Canary, CanaryPolicy, Registry, RolledBack};
pub use runtime::{Runtime, RuntimeSettings};
pub use world::World;

/// The WIT package version this host implements. Components built against
/// another major (for 0.x: another minor) version are refused.
pub const WIT_PACKAGE: &str = "capwasm:provider@0.1.2";

/// The WIT package of the platform world, versioned on its own so that
/// adding it changed nothing for components of `capwasm:provider`.
pub const PLATFORM_WIT_PACKAGE: &str = "capwasm:platform@0.1.0";

/// `sha256:<hex>` of a component's bytes, as [`LoadedProvider::digest`] names it.
pub fn digest_of(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}
