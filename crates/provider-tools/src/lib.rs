//! The tools of provider authors, without a cluster: `capwasm provider
//! new|inspect|test|conformance|push` (Kubewarden's `kwctl` for capwasm), and the
//! conformance scenarios they run against the simulated cloud.
#![warn(missing_docs)]
// Input reaches every path of the operator: no unwrap, expect or panic on any of them.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod cli;
pub mod conformance;

use capwasm_oci as oci;
use capwasm_runtime as wasm;
use capwasm_runtime::report;
use capwasm_simcloud as simcloud;

/// How a command ended without an error of its own (those exit 1).
pub enum Exit {
    /// Exit 0.
    Success,
    /// A documented code for an outcome that is not capwasm's failure, such
    /// as a provider's typed error in `capwasm provider test`.
    Code(u8),
}
