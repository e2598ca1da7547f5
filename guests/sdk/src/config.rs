//! Parsing a provider's `spec.config`.
//!
//! The host validates the config against the provider's JSON Schema before
//! calling, but a provider must not trust that: [`parse`] reports every
//! problem as [`ProviderError::InvalidConfig`] with the JSON path of the
//! offending value, so the user sees where to look.

use core::fmt::{self, Write as _};

use crate::prelude::*;

use serde::de::DeserializeOwned;

use crate::types::ProviderError;

/// Deserializes `config` (a JSON document) into `T`.
///
/// Use `#[serde(deny_unknown_fields, rename_all = "camelCase")]` on `T` to
/// match a strict schema. Errors carry the JSON path of the value that did
/// not fit, such as `$.caCertHashes[1]`.
pub fn parse<T: DeserializeOwned>(config: &str) -> Result<T, ProviderError> {
    // Tracking the path costs on every value; only a config that does not
    // fit is parsed a second time, to say where.
    if let Ok(value) = serde_json::from_str(config) {
        return Ok(value);
    }
    let mut deserializer = serde_json::Deserializer::from_str(config);
    let value: T = serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let path = path_of(err.path());
        ProviderError::invalid_config(path.to_string(), err.into_inner().to_string())
    })?;
    deserializer.end().map_err(|err| {
        ProviderError::invalid_config(JsonPath::root().to_string(), err.to_string())
    })?;
    Ok(value)
}

fn path_of(path: &serde_path_to_error::Path) -> JsonPath {
    use serde_path_to_error::Segment;
    path.iter()
        .fold(JsonPath::root(), |acc, segment| match segment {
            Segment::Seq { index } => acc.index(*index),
            Segment::Map { key } => acc.key(key),
            Segment::Enum { variant } => acc.key(variant),
            Segment::Unknown => acc.key("?"),
        })
}

/// A JSON path (`$`, `$.token`, `$.labels['node.example/role']`), for
/// [`ProviderError::invalid_config`] in a provider's own validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonPath(String);

impl JsonPath {
    /// The whole document: `$`.
    pub fn root() -> Self {
        Self("$".to_owned())
    }

    /// A member of the object at this path.
    #[must_use]
    pub fn key(mut self, key: &str) -> Self {
        let plain = key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if plain {
            self.0.push('.');
            self.0.push_str(key);
        } else {
            self.0.push_str("['");
            for c in key.chars() {
                if c == '\'' || c == '\\' {
                    self.0.push('\\');
                }
                self.0.push(c);
            }
            self.0.push_str("']");
        }
        self
    }

    /// An element of the array at this path.
    #[must_use]
    pub fn index(mut self, index: usize) -> Self {
        let _ = write!(self.0, "[{index}]");
        self
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<JsonPath> for String {
    fn from(path: JsonPath) -> Self {
        path.0
    }
}

#[cfg(test)]
mod tests {
    use alloc::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Example {
        name: String,
        #[serde(default)]
        ports: Vec<u16>,
        #[serde(default)]
        labels: BTreeMap<String, u8>,
    }

    fn invalid_path(config: &str) -> String {
        match parse::<Example>(config) {
            Err(ProviderError::InvalidConfig(e)) => e.path,
            other => format!("not invalid-config: {other:?}"),
        }
    }

    #[test]
    fn parse_accepts_valid_config() {
        let parsed: Result<Example, _> = parse(r#"{"name": "a", "ports": [1, 2]}"#);
        assert!(matches!(parsed, Ok(e) if e.name == "a" && e.ports == [1, 2]));
    }

    #[test]
    fn parse_reports_path_of_wrong_type_in_array() {
        assert_eq!(
            invalid_path(r#"{"name": "a", "ports": [1, "x"]}"#),
            "$.ports[1]"
        );
    }

    #[test]
    fn parse_reports_path_of_map_value_with_odd_key() {
        assert_eq!(
            invalid_path(r#"{"name": "a", "labels": {"node.example/role": 300}}"#),
            "$.labels['node.example/role']"
        );
    }

    #[test]
    fn parse_reports_unknown_field_by_its_name() {
        assert_eq!(invalid_path(r#"{"name": "a", "extra": 1}"#), "$.extra");
    }

    #[test]
    fn parse_reports_missing_field_at_its_parent() {
        assert_eq!(invalid_path("{}"), "$");
    }

    #[test]
    fn parse_rejects_trailing_garbage_at_root() {
        assert_eq!(invalid_path(r#"{"name": "a"} x"#), "$");
    }

    #[test]
    fn json_path_escapes_quotes_in_keys() {
        assert_eq!(JsonPath::root().key("it's").to_string(), r"$['it\'s']");
    }
}
