//! capwasm: the Cluster API contracts for Cluster and MachinePool, with every
//! provider-specific step (bootstrap data, infrastructure, providerID mapping)
//! running in a sandboxed WebAssembly component.
#![warn(missing_docs)]
// Input reaches every path of the operator: no unwrap, expect or panic on any of them.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod api;
pub mod cli;
pub mod conformance;
pub mod controllers;
mod files;
pub mod leader;
pub mod oci;
pub mod operator;
pub mod report;
pub mod simcloud;
pub mod wasm;
pub mod webhook;
pub mod workload;

#[cfg(any(test, feature = "testing"))]
pub mod testing;
