//! Checking an object's `spec.config` against the JSON Schema its provider
//! exports, before any call; compiled schemas are kept by provider digest.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use jsonschema::Validator;
use serde_json::Value;

use crate::wasm::LoadedProvider;

/// Where and why a config does not satisfy its schema. Values are masked:
/// configs may hold secrets (join tokens, say).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// JSON path of the offending value (`$.token`, `$.caCertHashes[1]`, `$`).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "spec.config at {}: {}", self.path, self.message)
    }
}

/// Compiled config schemas by provider digest.
#[derive(Default)]
pub struct ConfigSchemas {
    compiled: Mutex<HashMap<String, Arc<Validator>>>,
}

impl ConfigSchemas {
    /// Checks `config` (absent: `{}`) against `provider`'s schema.
    pub fn check(
        &self,
        provider: &LoadedProvider,
        config: Option<&Value>,
    ) -> Result<(), ConfigError> {
        let validator = self.validator(provider)?;
        let empty = Value::Object(serde_json::Map::new());
        let config = config.unwrap_or(&empty);
        match validator.validate(config) {
            Ok(()) => Ok(()),
            Err(error) => Err(ConfigError {
                path: json_path(error.instance_path().as_str()),
                message: error.masked().to_string(),
            }),
        }
    }

    fn validator(&self, provider: &LoadedProvider) -> Result<Arc<Validator>, ConfigError> {
        let mut compiled = self.compiled.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(validator) = compiled.get(&provider.digest) {
            return Ok(validator.clone());
        }
        let validator = jsonschema::validator_for(&provider.config_schema)
            .map(Arc::new)
            .map_err(|e| ConfigError {
                path: "$".into(),
                message: format!(
                    "the provider's config schema cannot be used: {}",
                    e.masked()
                ),
            })?;
        compiled.insert(provider.digest.clone(), validator.clone());
        Ok(validator)
    }
}

/// A JSON Pointer (`/caCertHashes/1`) as the JSON path providers report (`$.caCertHashes[1]`).
fn json_path(pointer: &str) -> String {
    let mut path = String::from("$");
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            path.push('[');
            path.push_str(&segment);
            path.push(']');
        } else {
            path.push('.');
            path.push_str(&segment);
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_path_turns_pointers_into_provider_style_paths() {
        assert_eq!(json_path(""), "$");
        assert_eq!(json_path("/token"), "$.token");
        assert_eq!(json_path("/caCertHashes/1"), "$.caCertHashes[1]");
        assert_eq!(json_path("/nodeLabels/a~1b"), "$.nodeLabels.a/b");
    }
}
