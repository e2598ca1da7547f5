//! The operator: the Cluster API controllers for Cluster and MachinePool,
//! the Wasm provider kinds, ProviderModules and platform clusters; the
//! workload clusters they read Nodes from; the conversion webhook; leader
//! election and shards. Provider calls go through [`wasm`], the sandboxed
//! runtime; the objects are [`api`]'s.
#![warn(missing_docs)]
// Input reaches every path of the operator: no unwrap, expect or panic on any of them.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod controllers;
pub mod leader;
pub mod operator;
pub mod platform;
pub mod readiness;
pub mod webhook;
pub mod workload;

pub use capwasm_api as api;
pub use capwasm_oci as oci;
pub use capwasm_runtime as wasm;
use capwasm_runtime::report;
