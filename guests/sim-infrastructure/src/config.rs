//! The provider's `spec.config`, shared by WasmCluster and WasmMachinePool
//! objects; each uses the fields that concern it.

use alloc::collections::{BTreeMap, BTreeSet};

use capwasm_provider_sdk::config::{self, JsonPath};
use capwasm_provider_sdk::http::is_base_url;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{ApiEndpoint, ProviderError};
use serde::Deserialize;

const DEFAULT_REGION: &str = "local-1";
const DEFAULT_CONTROL_PLANE_PORT: u16 = 6443;
const DEFAULT_POLL_SECONDS: u32 = 10;
/// The longest wait between looks; a longer one would only delay the pool.
const MAX_POLL_SECONDS: u32 = 600;

/// spec.config; `schema.json` describes the same shape for the host.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// Base URL of the simulated cloud's API, such as `http://127.0.0.1:8080`.
    pub endpoint: String,
    #[serde(default = "default_region")]
    pub region: String,
    /// Instance type for new instances (pools).
    #[serde(default)]
    pub instance_type: Option<String>,
    /// Failure domains: reported for clusters, spread over by pools.
    #[serde(default)]
    pub failure_domains: Vec<String>,
    /// Labels the simulated kubelet registers new Nodes with (pools).
    #[serde(default)]
    pub node_labels: BTreeMap<String, String>,
    /// Control-plane endpoint host (clusters); the endpoint's host if unset.
    #[serde(default)]
    pub control_plane_host: Option<String>,
    /// Control-plane endpoint port (clusters); 6443 if unset.
    #[serde(default)]
    pub control_plane_port: Option<u16>,
    /// How soon to look at the cloud again while instances start or
    /// terminate.
    #[serde(default = "default_poll_seconds")]
    pub poll_seconds: u32,
}

fn default_poll_seconds() -> u32 {
    DEFAULT_POLL_SECONDS
}

fn default_region() -> String {
    DEFAULT_REGION.to_owned()
}

/// The instance type of instances created without one.
pub const DEFAULT_INSTANCE_TYPE: &str = "small";

impl Config {
    /// Where the cloud describes the instance type new instances get.
    pub fn instance_type_url(&self) -> String {
        let name = self
            .instance_type
            .as_deref()
            .unwrap_or(DEFAULT_INSTANCE_TYPE);
        format!(
            "{}/v1/instance-types/{name}",
            self.endpoint.trim_end_matches('/')
        )
    }

    /// The API base for this config's region, without a trailing slash.
    pub fn region_url(&self) -> String {
        format!(
            "{}/v1/regions/{}",
            self.endpoint.trim_end_matches('/'),
            self.region
        )
    }

    /// The providerID of instance `id`.
    pub fn provider_id(&self, id: &str) -> String {
        format!("sim://{}/{id}", self.region)
    }

    /// Where the cluster's API server is reached.
    pub fn control_plane_endpoint(&self) -> ApiEndpoint {
        ApiEndpoint {
            host: self
                .control_plane_host
                .clone()
                .unwrap_or_else(|| endpoint_host(&self.endpoint)),
            port: self
                .control_plane_port
                .unwrap_or(DEFAULT_CONTROL_PLANE_PORT),
        }
    }
}

/// Parses `json` and checks what the types alone do not.
pub fn parse(json: &str) -> Result<Config, ProviderError> {
    let config: Config = config::parse(json)?;
    validate(&config)?;
    Ok(config)
}

fn validate(config: &Config) -> Result<(), ProviderError> {
    let root = JsonPath::root;
    if !is_base_url(&config.endpoint) {
        return Err(ProviderError::invalid_config(
            root().key("endpoint"),
            "must be an http or https URL with a host and no query, such as http://127.0.0.1:8080",
        ));
    }
    if !is_name(&config.region, false) {
        return Err(ProviderError::invalid_config(
            root().key("region"),
            "must be lowercase alphanumerics and '-', at most 63 characters",
        ));
    }
    if config
        .instance_type
        .as_deref()
        .is_some_and(|t| !is_name(t, true))
    {
        return Err(ProviderError::invalid_config(
            root().key("instanceType"),
            "must be lowercase alphanumerics, '-' and '.', at most 63 characters",
        ));
    }
    if !(1..=MAX_POLL_SECONDS).contains(&config.poll_seconds) {
        return Err(ProviderError::invalid_config(
            root().key("pollSeconds"),
            "must be 1 to 600",
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, domain) in config.failure_domains.iter().enumerate() {
        if !is_name(domain, false) {
            return Err(ProviderError::invalid_config(
                root().key("failureDomains").index(i),
                "must be lowercase alphanumerics and '-', at most 63 characters",
            ));
        }
        if !seen.insert(domain) {
            return Err(ProviderError::invalid_config(
                root().key("failureDomains").index(i),
                "is listed twice",
            ));
        }
    }
    for (key, value) in &config.node_labels {
        if key.is_empty() || key.len() > 317 || value.len() > 63 {
            return Err(ProviderError::invalid_config(
                root().key("nodeLabels").key(key),
                "label keys must be 1-317 characters and values at most 63",
            ));
        }
    }
    if config
        .control_plane_host
        .as_deref()
        .is_some_and(str::is_empty)
    {
        return Err(ProviderError::invalid_config(
            root().key("controlPlaneHost"),
            "must not be empty",
        ));
    }
    if config.control_plane_port == Some(0) {
        return Err(ProviderError::invalid_config(
            root().key("controlPlanePort"),
            "must be between 1 and 65535",
        ));
    }
    Ok(())
}

/// A DNS-label-like name (with dots if `dots`): it goes into URL paths and
/// providerIDs as is.
fn is_name(name: &str, dots: bool) -> bool {
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            bytes.len() <= 63
                && (first.is_ascii_lowercase() || first.is_ascii_digit())
                && (last.is_ascii_lowercase() || last.is_ascii_digit())
                && bytes.iter().all(|b| {
                    b.is_ascii_lowercase()
                        || b.is_ascii_digit()
                        || *b == b'-'
                        || (dots && *b == b'.')
                })
        }
        _ => false,
    }
}

/// The host of a base URL, without port or IPv6 brackets.
fn endpoint_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or_default();
    if let Some(bracketed) = authority.strip_prefix('[') {
        return bracketed.split(']').next().unwrap_or_default().to_owned();
    }
    authority.split(':').next().unwrap_or_default().to_owned()
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
    fn parse_applies_defaults() {
        let config = parse(r#"{"endpoint": "http://127.0.0.1:8080/"}"#).expect("valid");
        assert_eq!(config.region, "local-1");
        assert_eq!(
            config.region_url(),
            "http://127.0.0.1:8080/v1/regions/local-1"
        );
        assert_eq!(config.provider_id("i-1"), "sim://local-1/i-1");
        let endpoint = config.control_plane_endpoint();
        assert_eq!((endpoint.host.as_str(), endpoint.port), ("127.0.0.1", 6443));
    }

    #[test]
    fn control_plane_endpoint_prefers_config_and_strips_ipv6_brackets() {
        let config =
            parse(r#"{"endpoint": "http://[::1]:8080", "controlPlanePort": 443}"#).expect("valid");
        let endpoint = config.control_plane_endpoint();
        assert_eq!((endpoint.host.as_str(), endpoint.port), ("::1", 443));
        let config =
            parse(r#"{"endpoint": "http://h", "controlPlaneHost": "api.example"}"#).expect("valid");
        assert_eq!(config.control_plane_endpoint().host, "api.example");
    }

    #[test]
    fn parse_rejects_bad_fields_at_their_paths() {
        assert_eq!(invalid_path(r#"{"endpoint": "ftp://h"}"#), "$.endpoint");
        assert_eq!(
            invalid_path(r#"{"endpoint": "http://h?x=1"}"#),
            "$.endpoint"
        );
        assert_eq!(
            invalid_path(r#"{"endpoint": "http://h", "region": "Local/1"}"#),
            "$.region"
        );
        assert_eq!(
            invalid_path(r#"{"endpoint": "http://h", "failureDomains": ["a", "a"]}"#),
            "$.failureDomains[1]"
        );
        assert_eq!(
            invalid_path(r#"{"endpoint": "http://h", "extra": true}"#),
            "$.extra"
        );
        assert_eq!(invalid_path(r#"{"region": "r"}"#), "$");
        assert_eq!(
            invalid_path(r#"{"endpoint": "http://h", "pollSeconds": 0}"#),
            "$.pollSeconds"
        );
        assert_eq!(
            invalid_path(r#"{"endpoint": "http://h", "controlPlanePort": 0}"#),
            "$.controlPlanePort"
        );
    }
}
