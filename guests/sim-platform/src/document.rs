//! Reading the host's JSON documents.

use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::ProviderError;
use serde_json::Value;

/// `text` as JSON; the host sends only documents, so anything else is terminal.
pub fn parse(text: &str, what: &str) -> Result<Value, ProviderError> {
    serde_json::from_str(text)
        .map_err(|e| ProviderError::terminal("InvalidDocument", format!("{what}: {e}")))
}

/// The string at `path` under `value`, if there is one.
pub fn text<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(value, path)?.as_str()
}

/// The value at `path` under `value`.
pub fn at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, key| v.get(key))
}

/// The object's kind and name.
pub fn kind_and_name(value: &Value) -> (&str, &str) {
    (
        text(value, &["kind"]).unwrap_or_default(),
        text(value, &["metadata", "name"]).unwrap_or_default(),
    )
}

/// The number at `path`, if it is a non-negative integer that fits.
pub fn count(value: &Value, path: &[&str]) -> Option<u32> {
    at(value, path)?
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
}
