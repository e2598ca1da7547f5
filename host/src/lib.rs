//! capwasm: the Cluster API contracts for Cluster and MachinePool, with every
//! provider-specific step (bootstrap data, infrastructure, providerID mapping)
//! running in a sandboxed WebAssembly component.
#![warn(missing_docs)]

pub mod cli;
