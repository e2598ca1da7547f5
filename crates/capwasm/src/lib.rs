//! capwasm: the Cluster API contracts for Cluster and MachinePool, with every
//! provider-specific step (bootstrap data, infrastructure, providerID mapping)
//! running in a sandboxed WebAssembly component.
//!
//! This crate is the `capwasm` command; its library hands on the crates it
//! is built from, as `kube` does with its own:
//!
//! | module | crate | what it is |
//! |---|---|---|
//! | [`wasm`] | `capwasm-runtime` | the provider runtime: no Kubernetes in it |
//! | [`api`] | `capwasm-api` | the Kubernetes kinds capwasm serves and reads |
//! | [`oci`] | `capwasm-oci` | providers in OCI registries, cosign signatures |
//! | [`simcloud`] | `capwasm-simcloud` | the simulated cloud of the tests and the demo |
//! | [`conformance`] | `capwasm-provider-tools` | provider authors' tools and scenarios |
//! | [`controllers`], [`workload`], [`webhook`], [`leader`], [`operator`] | `capwasm-operator` | the operator |
#![warn(missing_docs)]
// Input reaches every path of the operator: no unwrap, expect or panic on any of them.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod cli;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use capwasm_api as api;
pub use capwasm_oci as oci;
pub use capwasm_operator::{controllers, leader, operator, phases, readiness, webhook, workload};
pub use capwasm_provider_tools::{conformance, infrastructure_scenarios};
pub use capwasm_runtime as wasm;
pub use capwasm_runtime::report;
pub use capwasm_simcloud as simcloud;
