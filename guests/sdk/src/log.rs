//! Structured logging into the host's log (WIT `capwasm:provider/log`).
//!
//! Never log credentials or bootstrap data.

pub use crate::bindings::infrastructure::capwasm::provider::log::Level;
use crate::prelude::*;

/// Writes one log line with key/value fields.
pub fn log(level: Level, message: &str, fields: &[(&str, &str)]) {
    let fields: Vec<(String, String)> = fields
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    emit(level, message, &fields);
}

#[cfg(target_arch = "wasm32")]
fn emit(level: Level, message: &str, fields: &[(String, String)]) {
    crate::bindings::infrastructure::capwasm::provider::log::log(level, message, fields);
}

// Native builds exist only for unit tests; there is no host to log to.
#[cfg(not(target_arch = "wasm32"))]
fn emit(level: Level, message: &str, fields: &[(String, String)]) {
    std::eprintln!("{level:?} {message} {fields:?}");
}

/// Logs at trace level.
pub fn trace(message: &str, fields: &[(&str, &str)]) {
    log(Level::Trace, message, fields);
}

/// Logs at debug level.
pub fn debug(message: &str, fields: &[(&str, &str)]) {
    log(Level::Debug, message, fields);
}

/// Logs at info level.
pub fn info(message: &str, fields: &[(&str, &str)]) {
    log(Level::Info, message, fields);
}

/// Logs at warn level.
pub fn warn(message: &str, fields: &[(&str, &str)]) {
    log(Level::Warn, message, fields);
}

/// Logs at error level.
pub fn error(message: &str, fields: &[(&str, &str)]) {
    log(Level::Error, message, fields);
}
