//! The provider's `spec.config`.

use capwasm_provider_sdk::config::{self, JsonPath};
use capwasm_provider_sdk::http::{encode_component, is_base_url};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::ProviderError;
use serde::Deserialize;

/// spec.config; `schema.json` describes the same shape for the host.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// Base URL of the simulated cloud's API, such as `http://127.0.0.1:8080`.
    pub endpoint: String,
}

impl Config {
    /// Where the cloud serves control plane `name` (one path segment, its
    /// `/` encoded).
    pub fn control_plane_url(&self, name: &str) -> String {
        format!(
            "{}/v1/control-planes/{}",
            self.endpoint.trim_end_matches('/'),
            encode_component(name)
        )
    }
}

/// Parses `json` and checks what the types alone do not.
pub fn parse(json: &str) -> Result<Config, ProviderError> {
    let config: Config = config::parse(json)?;
    if !is_base_url(&config.endpoint) {
        return Err(ProviderError::invalid_config(
            JsonPath::root().key("endpoint"),
            "must be an http or https URL with a host and no query, such as http://127.0.0.1:8080",
        ));
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid_path(json: &str) -> String {
        match parse(json) {
            Err(ProviderError::InvalidConfig(e)) => e.path,
            other => format!("not invalid-config: {other:?}"),
        }
    }

    #[test]
    fn control_plane_url_is_one_encoded_segment_under_the_endpoint() {
        let config = parse(r#"{"endpoint": "http://127.0.0.1:8080/"}"#).expect("valid");
        assert_eq!(
            config.control_plane_url("ns/cp"),
            "http://127.0.0.1:8080/v1/control-planes/ns%2Fcp"
        );
    }

    #[test]
    fn parse_rejects_bad_fields_at_their_paths() {
        assert_eq!(invalid_path(r#"{"endpoint": "ftp://h"}"#), "$.endpoint");
        assert_eq!(
            invalid_path(r#"{"endpoint": "http://h?x=1"}"#),
            "$.endpoint"
        );
        assert_eq!(
            invalid_path(r#"{"endpoint": "http://h", "region": "r"}"#),
            "$.region"
        );
        assert_eq!(invalid_path("{}"), "$");
    }
}
