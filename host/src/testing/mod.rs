//! Fixtures for tests of capwasm and of providers: valid values by default,
//! each changed by the test that needs something else.

pub mod requests;
