//! The host interfaces a provider imports, one file each.

pub(crate) mod auth;
mod bootstrap_tokens;
pub(crate) mod http;
mod log;
pub(crate) mod stderr;
