//! Fixtures for tests of capwasm and of providers: valid values by default,
//! each changed by the test that needs something else.

pub mod ec2;
mod guests;

/// Requests into providers (the conformance scenarios' own).
pub use crate::conformance::requests;
/// Builders of the API's objects.
pub use capwasm_api::testing as objects;

pub use guests::{KUBEADM_JOIN_CONFIG, SIM_PLATFORM_KINDS, guest_path};
