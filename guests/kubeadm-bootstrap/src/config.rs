//! The provider's `spec.config`, parsed and checked.

use alloc::collections::BTreeMap;

use capwasm_provider_sdk::config::{self, JsonPath};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::ProviderError;
use serde::Deserialize;

/// Whether the machine joins an existing cluster or initialises the first
/// control-plane node.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Join,
    Init,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Join => "join",
            Self::Init => "init",
        }
    }
}

/// spec.config; `schema.json` describes the same shape for the host.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    pub mode: Mode,
    /// A kubeadm bootstrap token. Secret: never echoed in messages. Empty
    /// when the config has none: the host's (`bootstrap-tokens`) is used.
    #[serde(default)]
    pub token: String,
    /// Hashes of the cluster CA's public key that a joining node pins;
    /// required for join, unused for init.
    #[serde(default)]
    pub ca_cert_hashes: Vec<String>,
    #[serde(default)]
    pub kubelet_extra_args: BTreeMap<String, String>,
    #[serde(default)]
    pub pre_kubeadm_commands: Vec<String>,
    #[serde(default)]
    pub post_kubeadm_commands: Vec<String>,
    /// Labels the kubelet registers the Node with.
    #[serde(default)]
    pub node_labels: BTreeMap<String, String>,
}

/// The token a machine joins with: the config's if it sets one (whoever
/// set it looks after it), else the one the host made for this call (it
/// keeps that one alive while machines still have to join).
pub fn with_token(
    mut config: Config,
    host: impl FnOnce() -> Option<String>,
) -> Result<Config, ProviderError> {
    if config.token.is_empty() {
        config.token = host().ok_or_else(|| {
            invalid(
                JsonPath::root().key("token"),
                "no token: set one, or give the Cluster a kubeconfig Secret so that the host makes one",
            )
        })?;
    }
    Ok(config)
}

/// Parses `json` and checks what the types alone do not.
pub fn parse(json: &str) -> Result<Config, ProviderError> {
    let config: Config = config::parse(json)?;
    validate(&config)?;
    Ok(config)
}

fn invalid(path: JsonPath, message: impl Into<String>) -> ProviderError {
    ProviderError::invalid_config(path, message)
}

fn validate(config: &Config) -> Result<(), ProviderError> {
    let root = JsonPath::root;
    if !config.token.is_empty() && !is_bootstrap_token(&config.token) {
        return Err(invalid(
            root().key("token"),
            "must be a kubeadm bootstrap token of the form [a-z0-9]{6}.[a-z0-9]{16}",
        ));
    }
    if config.mode == Mode::Join && config.ca_cert_hashes.is_empty() {
        return Err(invalid(
            root().key("caCertHashes"),
            "join needs at least one CA certificate hash to pin the cluster's CA",
        ));
    }
    for (i, hash) in config.ca_cert_hashes.iter().enumerate() {
        if !is_ca_cert_hash(hash) {
            return Err(invalid(
                root().key("caCertHashes").index(i),
                "must be sha256: followed by 64 hexadecimal digits",
            ));
        }
    }
    for (name, value) in &config.kubelet_extra_args {
        let path = root().key("kubeletExtraArgs").key(name);
        if !is_flag_name(name) {
            return Err(invalid(
                path,
                "must be a kubelet flag name without leading dashes, such as max-pods",
            ));
        }
        if value.chars().any(char::is_control) {
            return Err(invalid(path, "must not contain control characters"));
        }
    }
    if !config.node_labels.is_empty() && config.kubelet_extra_args.contains_key("node-labels") {
        return Err(invalid(
            root().key("nodeLabels"),
            "set node labels either in nodeLabels or in kubeletExtraArgs.node-labels, not both",
        ));
    }
    for (key, value) in &config.node_labels {
        let path = root().key("nodeLabels").key(key);
        if !is_label_key(key) {
            return Err(invalid(
                path,
                "must be a label key: an optional DNS subdomain prefix and '/', then a name of at most 63 characters",
            ));
        }
        if !value.is_empty() && !is_label_name(value) {
            return Err(invalid(
                path,
                "must be a label value: at most 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
            ));
        }
    }
    for (field, commands) in [
        ("preKubeadmCommands", &config.pre_kubeadm_commands),
        ("postKubeadmCommands", &config.post_kubeadm_commands),
    ] {
        for (i, command) in commands.iter().enumerate() {
            if command.trim().is_empty() {
                return Err(invalid(root().key(field).index(i), "must not be empty"));
            }
        }
    }
    Ok(())
}

/// `[a-z0-9]{6}.[a-z0-9]{16}`, as kubeadm requires.
fn is_bootstrap_token(token: &str) -> bool {
    let lower_alnum = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    token.split_once('.').is_some_and(|(id, secret)| {
        id.len() == 6 && secret.len() == 16 && lower_alnum(id) && lower_alnum(secret)
    })
}

fn is_ca_cert_hash(hash: &str) -> bool {
    hash.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn is_flag_name(name: &str) -> bool {
    name.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A label name or value: at most 63 characters of `[A-Za-z0-9._-]`,
/// alphanumeric at both ends.
fn is_label_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            bytes.len() <= 63
                && first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// A DNS subdomain (RFC 1123): lowercase labels joined by dots, at most
/// 253 characters.
fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            let bytes = label.as_bytes();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    bytes.len() <= 63
                        && (first.is_ascii_lowercase() || first.is_ascii_digit())
                        && (last.is_ascii_lowercase() || last.is_ascii_digit())
                        && bytes
                            .iter()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                }
                _ => false,
            }
        })
}

fn is_label_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_label_name(name),
        None => is_label_name(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "abcdef.0123456789abcdef";
    const HASH: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn join_config(extra: &str) -> String {
        format!(r#"{{"mode": "join", "token": "{TOKEN}", "caCertHashes": ["{HASH}"]{extra}}}"#)
    }

    fn invalid_path(json: &str) -> String {
        match parse(json) {
            Err(ProviderError::InvalidConfig(e)) => e.path,
            other => format!("not invalid-config: {other:?}"),
        }
    }

    #[test]
    fn parse_accepts_full_join_config() {
        let config = parse(&join_config(
            r#", "kubeletExtraArgs": {"max-pods": "50"}, "nodeLabels": {"example.com/pool": "a", "tier": ""},
               "preKubeadmCommands": ["echo pre"], "postKubeadmCommands": ["echo post"]"#,
        ));
        assert!(matches!(config, Ok(c) if c.mode == Mode::Join && c.node_labels.len() == 2));
    }

    #[test]
    fn parse_accepts_init_without_ca_hashes() {
        assert!(parse(&format!(r#"{{"mode": "init", "token": "{TOKEN}"}}"#)).is_ok());
    }

    #[test]
    fn with_token_takes_the_hosts_only_when_the_config_has_none() {
        let host = || Some("zzzzzz.zzzzzzzzzzzzzzzz".to_owned());
        let own = with_token(parse(&join_config("")).expect("valid"), host).expect("token");
        assert_eq!(own.token, TOKEN);
        let bare = format!(r#"{{"mode": "join", "caCertHashes": ["{HASH}"]}}"#);
        let hosts = with_token(parse(&bare).expect("valid"), host).expect("token");
        assert_eq!(hosts.token, "zzzzzz.zzzzzzzzzzzzzzzz");
        match with_token(parse(&bare).expect("valid"), || None) {
            Err(ProviderError::InvalidConfig(e)) => assert_eq!(e.path, "$.token"),
            other => panic!("expected an invalid config, got {other:?}"),
        }
    }

    #[test]
    fn parse_rejects_malformed_token_without_echoing_it() {
        let json = join_config("").replace(TOKEN, "ABCDEF.0123456789abcdef");
        match parse(&json) {
            Err(ProviderError::InvalidConfig(e)) => {
                assert_eq!(e.path, "$.token");
                assert!(!e.message.contains("ABCDEF"));
            }
            other => panic!("expected invalid-config, got {other:?}"),
        }
    }

    #[test]
    fn parse_rejects_unknown_field_at_its_path() {
        assert_eq!(invalid_path(&join_config(r#", "tokn": "x""#)), "$.tokn");
    }

    #[test]
    fn parse_rejects_unknown_mode() {
        assert_eq!(
            invalid_path(&join_config("").replace("\"join\"", "\"upgrade\"")),
            "$.mode"
        );
    }

    #[test]
    fn parse_rejects_join_without_ca_hashes() {
        assert_eq!(
            invalid_path(&format!(r#"{{"mode": "join", "token": "{TOKEN}"}}"#)),
            "$.caCertHashes"
        );
    }

    #[test]
    fn parse_points_at_the_bad_ca_hash() {
        let json = format!(
            r#"{{"mode": "join", "token": "{TOKEN}", "caCertHashes": ["{HASH}", "sha256:xyz"]}}"#
        );
        assert_eq!(invalid_path(&json), "$.caCertHashes[1]");
    }

    #[test]
    fn parse_rejects_flag_names_with_dashes_or_newlines_in_values() {
        assert_eq!(
            invalid_path(&join_config(r#", "kubeletExtraArgs": {"--max-pods": "5"}"#)),
            "$.kubeletExtraArgs['--max-pods']"
        );
        assert_eq!(
            invalid_path(&join_config(r#", "kubeletExtraArgs": {"v": "2\n"}"#)),
            "$.kubeletExtraArgs.v"
        );
    }

    #[test]
    fn parse_rejects_node_labels_set_twice() {
        assert_eq!(
            invalid_path(&join_config(
                r#", "kubeletExtraArgs": {"node-labels": "a=b"}, "nodeLabels": {"c": "d"}"#
            )),
            "$.nodeLabels"
        );
    }

    #[test]
    fn parse_rejects_label_values_that_could_inject_labels() {
        assert_eq!(
            invalid_path(&join_config(r#", "nodeLabels": {"a": "b,c=d"}"#)),
            "$.nodeLabels.a"
        );
        assert_eq!(
            invalid_path(&join_config(r#", "nodeLabels": {"Bad_Prefix/a": "b"}"#)),
            "$.nodeLabels['Bad_Prefix/a']"
        );
    }

    #[test]
    fn parse_rejects_blank_commands() {
        assert_eq!(
            invalid_path(&join_config(r#", "postKubeadmCommands": ["ok", " "]"#)),
            "$.postKubeadmCommands[1]"
        );
    }
}
