//! The provider's `spec.config`, shared by WasmCluster and WasmMachinePool
//! objects; each uses the fields that concern it. `schema.json` describes
//! the same shape for the host.

use alloc::collections::{BTreeMap, BTreeSet};

use capwasm_provider_sdk::config::{self, JsonPath};
use capwasm_provider_sdk::http::is_base_url;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::ProviderError;
use serde::Deserialize;

use crate::cidr::Ipv4Net;

const DEFAULT_INSTANCE_TYPE: &str = "t3.medium";
const DEFAULT_VPC_CIDR: &str = "10.0.0.0/16";
const DEFAULT_API_SERVER_PORT: u16 = 6443;
const MAX_ZONES: usize = 6;
const MAX_API_SERVER_CIDRS: usize = 16;
const MAX_TAGS: usize = 16;
/// EC2's limits on tag keys and values, in characters.
const MAX_TAG_KEY: usize = 128;
const MAX_TAG_VALUE: usize = 256;
/// The smallest VPC this provider makes: subnets are /24s of it.
const MIN_VPC_PREFIX: u8 = 16;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// The AWS region, such as `us-east-1`.
    pub region: String,
    /// The EC2 API's base URL; `https://ec2.<region>.amazonaws.com` if unset.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The image of new instances (pools).
    pub ami: String,
    #[serde(default = "default_instance_type")]
    pub instance_type: String,
    /// Availability zones: one subnet each (clusters); instance `n` of a
    /// pool goes to zone `n` modulo their count.
    pub zones: Vec<String>,
    #[serde(default = "default_vpc_cidr")]
    pub vpc_cidr: String,
    /// Where the API server port may be reached from.
    #[serde(default)]
    pub api_server_cidrs: Vec<String>,
    #[serde(default = "default_api_server_port")]
    pub api_server_port: u16,
    /// Extra tags for every resource the provider creates.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

fn default_instance_type() -> String {
    DEFAULT_INSTANCE_TYPE.to_owned()
}

fn default_vpc_cidr() -> String {
    DEFAULT_VPC_CIDR.to_owned()
}

fn default_api_server_port() -> u16 {
    DEFAULT_API_SERVER_PORT
}

impl Config {
    /// Where requests go: the endpoint, with a path.
    pub fn url(&self) -> String {
        match &self.endpoint {
            Some(endpoint)
                if endpoint
                    .split_once("://")
                    .is_some_and(|(_, r)| r.contains('/')) =>
            {
                endpoint.clone()
            }
            Some(endpoint) => format!("{endpoint}/"),
            None => format!("https://ec2.{}.amazonaws.com/", self.region),
        }
    }

    /// The endpoint's `host[:port]`, for messages.
    pub fn host(&self) -> String {
        let url = self.url();
        let rest = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
        rest.split('/').next().unwrap_or_default().to_owned()
    }

    /// The VPC's block (checked by [`parse`]).
    pub fn vpc_net(&self) -> Result<Ipv4Net, ProviderError> {
        Ipv4Net::parse(&self.vpc_cidr)
            .map_err(|why| ProviderError::invalid_config(JsonPath::root().key("vpcCidr"), why))
    }

    /// The zone of pool instance `ordinal`.
    pub fn zone_of(&self, ordinal: u32) -> Option<&str> {
        let index = usize::try_from(ordinal).ok()? % self.zones.len().max(1);
        self.zones.get(index).map(String::as_str)
    }
}

/// Parses `json` and checks what the types alone do not.
pub fn parse(json: &str) -> Result<Config, ProviderError> {
    let config: Config = config::parse(json)?;
    validate(&config)?;
    Ok(config)
}

fn validate(config: &Config) -> Result<(), ProviderError> {
    let at = |key: &str| JsonPath::root().key(key);
    if !is_name(&config.region, 32, false) {
        return Err(ProviderError::invalid_config(
            at("region"),
            "must be a region name such as us-east-1",
        ));
    }
    if let Some(endpoint) = &config.endpoint
        && !is_base_url(endpoint)
    {
        return Err(ProviderError::invalid_config(
            at("endpoint"),
            "must be an http or https URL with a host and no query, such as https://ec2.us-east-1.amazonaws.com",
        ));
    }
    if !is_ami(&config.ami) {
        return Err(ProviderError::invalid_config(
            at("ami"),
            "must be an image id such as ami-0123456789abcdef0",
        ));
    }
    if !is_instance_type(&config.instance_type) {
        return Err(ProviderError::invalid_config(
            at("instanceType"),
            "must be an instance type such as t3.medium",
        ));
    }
    validate_zones(config)?;
    let vpc = config.vpc_net()?;
    if vpc.prefix() < MIN_VPC_PREFIX
        || usize::try_from(vpc.subnet_count()).unwrap_or(usize::MAX) < config.zones.len()
    {
        return Err(ProviderError::invalid_config(
            at("vpcCidr"),
            format!(
                "must be a /16 to /24 block with a /24 for each of the {} zones",
                config.zones.len()
            ),
        ));
    }
    validate_api_server_cidrs(config)?;
    if config.api_server_port == 0 {
        return Err(ProviderError::invalid_config(
            at("apiServerPort"),
            "must be between 1 and 65535",
        ));
    }
    validate_tags(&config.tags)
}

fn validate_zones(config: &Config) -> Result<(), ProviderError> {
    let at = || JsonPath::root().key("zones");
    if !(1..=MAX_ZONES).contains(&config.zones.len()) {
        return Err(ProviderError::invalid_config(
            at(),
            "must list 1 to 6 zones",
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, zone) in config.zones.iter().enumerate() {
        // Zone names extend their region's: us-east-1a, us-west-2-lax-1a.
        let in_region = zone
            .strip_prefix(config.region.as_str())
            .is_some_and(|rest| !rest.is_empty());
        if !in_region || !is_name(zone, 64, false) {
            return Err(ProviderError::invalid_config(
                at().index(i),
                format!(
                    "must be an availability zone of region {}, such as {}a",
                    config.region, config.region
                ),
            ));
        }
        if !seen.insert(zone) {
            return Err(ProviderError::invalid_config(
                at().index(i),
                "is listed twice",
            ));
        }
    }
    Ok(())
}

fn validate_api_server_cidrs(config: &Config) -> Result<(), ProviderError> {
    let at = || JsonPath::root().key("apiServerCidrs");
    if config.api_server_cidrs.len() > MAX_API_SERVER_CIDRS {
        return Err(ProviderError::invalid_config(
            at(),
            "must list at most 16 blocks",
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, cidr) in config.api_server_cidrs.iter().enumerate() {
        let net = Ipv4Net::parse(cidr)
            .map_err(|why| ProviderError::invalid_config(at().index(i), why))?;
        if !seen.insert(net) {
            return Err(ProviderError::invalid_config(
                at().index(i),
                "is listed twice",
            ));
        }
    }
    Ok(())
}

fn validate_tags(tags: &BTreeMap<String, String>) -> Result<(), ProviderError> {
    let at = || JsonPath::root().key("tags");
    if tags.len() > MAX_TAGS {
        return Err(ProviderError::invalid_config(
            at(),
            "must hold at most 16 tags",
        ));
    }
    for (key, value) in tags {
        let reserved = key.starts_with("aws:")
            || key.starts_with(crate::tags::PREFIX)
            || key == crate::tags::NAME;
        if key.is_empty() || key.chars().count() > MAX_TAG_KEY || reserved {
            return Err(ProviderError::invalid_config(
                at().key(key),
                "keys must be 1 to 128 characters and not Name, aws:* or capwasm.dev/*",
            ));
        }
        if value.chars().count() > MAX_TAG_VALUE {
            return Err(ProviderError::invalid_config(
                at().key(key),
                "values must be at most 256 characters",
            ));
        }
    }
    Ok(())
}

/// Lowercase alphanumerics and `-` (and `.` if `dots`), not starting or
/// ending with a separator.
fn is_name(name: &str, max: usize, dots: bool) -> bool {
    let bytes = name.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    bytes.len() <= max
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes
            .iter()
            .all(|b| edge(b) || *b == b'-' || (dots && *b == b'.'))
}

fn is_ami(ami: &str) -> bool {
    ami.strip_prefix("ami-").is_some_and(|hex| {
        (8..=17).contains(&hex.len())
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// `family.size`, such as `t3.medium` or `m7i-flex.large`.
fn is_instance_type(name: &str) -> bool {
    name.split_once('.').is_some_and(|(family, size)| {
        is_name(family, 32, false) && is_name(size, 31, false) && !size.contains('-')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str =
        r#"{"region": "us-east-1", "ami": "ami-12c6146b", "zones": ["us-east-1a"]}"#;

    fn with(extra: &str) -> String {
        format!(
            r#"{{"region": "us-east-1", "ami": "ami-12c6146b", "zones": ["us-east-1a", "us-east-1b"], {extra}}}"#
        )
    }

    fn invalid_path(json: &str) -> String {
        match parse(json) {
            Err(ProviderError::InvalidConfig(e)) => e.path,
            other => format!("not invalid-config: {other:?}"),
        }
    }

    #[test]
    fn parse_applies_defaults() {
        let config = parse(MINIMAL).expect("valid");
        assert_eq!(config.url(), "https://ec2.us-east-1.amazonaws.com/");
        assert_eq!(config.host(), "ec2.us-east-1.amazonaws.com");
        assert_eq!(config.instance_type, "t3.medium");
        assert_eq!(config.vpc_cidr, "10.0.0.0/16");
        assert_eq!(config.api_server_port, 6443);
        assert!(config.api_server_cidrs.is_empty() && config.tags.is_empty());
    }

    #[test]
    fn endpoint_gets_a_path_and_names_its_host() {
        let config = parse(&with(r#""endpoint": "http://127.0.0.1:5000""#)).expect("valid");
        assert_eq!(config.url(), "http://127.0.0.1:5000/");
        assert_eq!(config.host(), "127.0.0.1:5000");
        let config = parse(&with(r#""endpoint": "https://vpce.example/ec2/""#)).expect("valid");
        assert_eq!(config.url(), "https://vpce.example/ec2/");
    }

    #[test]
    fn pool_zones_wrap_around() {
        let config = parse(&with(r#""instanceType": "m7i-flex.large""#)).expect("valid");
        assert_eq!(config.zone_of(0), Some("us-east-1a"));
        assert_eq!(config.zone_of(3), Some("us-east-1b"));
    }

    #[test]
    fn parse_rejects_bad_fields_at_their_paths() {
        let cases = [
            (r#""extra": 1"#, "$.extra"),
            (r#""endpoint": "ftp://h""#, "$.endpoint"),
            (r#""endpoint": "http://h/?x=1""#, "$.endpoint"),
            (r#""instanceType": "T3.medium""#, "$.instanceType"),
            (r#""instanceType": "t3""#, "$.instanceType"),
            (r#""vpcCidr": "10.0.0.0/8""#, "$.vpcCidr"),
            (r#""vpcCidr": "10.0.0.1/16""#, "$.vpcCidr"),
            (r#""vpcCidr": "10.0.0.0/24""#, "$.vpcCidr"),
            (
                r#""apiServerCidrs": ["203.0.113.0/24", "x"]"#,
                "$.apiServerCidrs[1]",
            ),
            (
                r#""apiServerCidrs": ["203.0.113.0/24", "203.0.113.0/24"]"#,
                "$.apiServerCidrs[1]",
            ),
            (r#""apiServerPort": 0"#, "$.apiServerPort"),
            (r#""apiServerPort": 70000"#, "$.apiServerPort"),
            (r#""tags": {"Name": "x"}"#, "$.tags.Name"),
            (
                r#""tags": {"aws:cloudformation": "x"}"#,
                "$.tags['aws:cloudformation']",
            ),
            (
                r#""tags": {"capwasm.dev/pool": "x"}"#,
                "$.tags['capwasm.dev/pool']",
            ),
        ];
        for (extra, path) in cases {
            assert_eq!(invalid_path(&with(extra)), path, "{extra}");
        }
        let bad_ami = r#"{"region": "us-east-1", "ami": "ami-XYZ", "zones": ["us-east-1a"]}"#;
        assert_eq!(invalid_path(bad_ami), "$.ami");
        let no_ami = r#"{"region": "us-east-1", "zones": ["us-east-1a"]}"#;
        assert_eq!(invalid_path(no_ami), "$");
        let zones = |zones: &str| {
            format!(r#"{{"region": "us-east-1", "ami": "ami-12c6146b", "zones": {zones}}}"#)
        };
        assert_eq!(invalid_path(&zones("[]")), "$.zones");
        assert_eq!(
            invalid_path(&zones(r#"["us-east-1a", "us-west-2a"]"#)),
            "$.zones[1]"
        );
        assert_eq!(
            invalid_path(&zones(r#"["us-east-1a", "us-east-1a"]"#)),
            "$.zones[1]"
        );
        assert_eq!(invalid_path(&zones(r#"["us-east-1"]"#)), "$.zones[0]");
        let seven = r#"["us-east-1a","us-east-1b","us-east-1c","us-east-1d","us-east-1e","us-east-1f","us-east-1g"]"#;
        assert_eq!(invalid_path(&zones(seven)), "$.zones");
    }

    #[test]
    fn ami_ids_are_8_to_17_hex_digits() {
        assert!(is_ami("ami-12c6146b"));
        assert!(is_ami("ami-0123456789abcdef0"));
        assert!(!is_ami("ami-1234567"));
        assert!(!is_ami("ami-0123456789abcdef01"));
        assert!(!is_ami("ami-ABCDEF12"));
    }

    #[test]
    fn schema_and_parser_agree_on_fields() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("schema.json")).expect("schema is JSON");
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(
            schema["required"],
            serde_json::json!(["region", "ami", "zones"])
        );
        let mut properties: Vec<&str> = schema["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .map(String::as_str)
            .collect();
        properties.sort_unstable();
        assert_eq!(
            properties,
            [
                "ami",
                "apiServerCidrs",
                "apiServerPort",
                "endpoint",
                "instanceType",
                "region",
                "tags",
                "vpcCidr",
                "zones"
            ]
        );
    }
}
