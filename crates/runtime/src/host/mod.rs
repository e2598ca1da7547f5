//! The host interfaces a provider imports, one file each.

pub(crate) mod auth;
pub(crate) mod http;
mod log;
pub(crate) mod stderr;
