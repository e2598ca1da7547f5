//! WIT records as JSON, for request fixtures and printed results.
//!
//! Field names are the WIT names in camelCase (`idempotency-key` →
//! `idempotencyKey`), enum and variant cases are spelled as in the WIT
//! (`cloud-config`, `internal-ip`, `in-progress`), and `list<u8>` values
//! are [`Bytes`]: a string for UTF-8 text or `{"base64": "..."}`. Unknown
//! fields are refused, so a typo is an error rather than a silent default.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::wasm::types;
use crate::wasm::{bootstrap, clusters, machine_pools};

/// `list<u8>`: UTF-8 text as a JSON string, anything else as `{"base64": "..."}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        if let Ok(text) = std::str::from_utf8(&self.0) {
            return serializer.serialize_str(text);
        }
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry("base64", &BASE64.encode(&self.0))?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(BytesVisitor)
    }
}

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = Bytes;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#"a UTF-8 string or {"base64": "..."}"#)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Bytes, E> {
        Ok(Bytes(text.as_bytes().to_vec()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Bytes, A::Error> {
        let Some(key) = map.next_key::<String>()? else {
            return Err(de::Error::missing_field("base64"));
        };
        if key != "base64" {
            return Err(de::Error::unknown_field(&key, &["base64"]));
        }
        let encoded: String = map.next_value()?;
        if let Some(extra) = map.next_key::<String>()? {
            return Err(de::Error::unknown_field(&extra, &[]));
        }
        BASE64
            .decode(encoded.trim())
            .map(Bytes)
            .map_err(|e| de::Error::custom(format_args!("invalid base64: {e}")))
    }
}

/// A request's `config`: any JSON document (absent: `{}`), handed to the
/// guest as a string once it has passed the provider's schema.
pub(super) fn empty_config() -> Value {
    Value::Object(serde_json::Map::new())
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectRef {
    namespace: String,
    name: String,
    uid: String,
}

impl From<ObjectRef> for types::ObjectRef {
    fn from(o: ObjectRef) -> Self {
        Self {
            namespace: o.namespace,
            name: o.name,
            uid: o.uid,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiEndpoint {
    host: String,
    port: u16,
}

impl From<ApiEndpoint> for types::ApiEndpoint {
    fn from(e: ApiEndpoint) -> Self {
        Self {
            host: e.host,
            port: e.port,
        }
    }
}

impl From<types::ApiEndpoint> for ApiEndpoint {
    fn from(e: types::ApiEndpoint) -> Self {
        Self {
            host: e.host,
            port: e.port,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterInfo {
    name: String,
    namespace: String,
    #[serde(default)]
    control_plane_endpoint: Option<ApiEndpoint>,
    #[serde(default)]
    kubernetes_version: Option<String>,
}

impl From<ClusterInfo> for types::ClusterInfo {
    fn from(c: ClusterInfo) -> Self {
        Self {
            name: c.name,
            namespace: c.namespace,
            control_plane_endpoint: c.control_plane_endpoint.map(Into::into),
            kubernetes_version: c.kubernetes_version,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Credential {
    key: String,
    value: Bytes,
}

pub(super) fn credentials(list: Vec<Credential>) -> Vec<types::Credential> {
    list.into_iter()
        .map(|c| types::Credential {
            key: c.key,
            value: c.value.0,
        })
        .collect()
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BootstrapFormat {
    CloudConfig,
    Ignition,
    ShellScript,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BootstrapData {
    format: BootstrapFormat,
    value: Bytes,
}

impl From<BootstrapData> for types::BootstrapData {
    fn from(d: BootstrapData) -> Self {
        Self {
            format: match d.format {
                BootstrapFormat::CloudConfig => types::BootstrapFormat::CloudConfig,
                BootstrapFormat::Ignition => types::BootstrapFormat::Ignition,
                BootstrapFormat::ShellScript => types::BootstrapFormat::ShellScript,
            },
            value: d.value.0,
        }
    }
}

impl From<types::BootstrapData> for BootstrapData {
    fn from(d: types::BootstrapData) -> Self {
        Self {
            format: match d.format {
                types::BootstrapFormat::CloudConfig => BootstrapFormat::CloudConfig,
                types::BootstrapFormat::Ignition => BootstrapFormat::Ignition,
                types::BootstrapFormat::ShellScript => BootstrapFormat::ShellScript,
            },
            value: Bytes(d.value),
        }
    }
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceState {
    Pending,
    Running,
    Failed,
    Terminating,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AddressType {
    Hostname,
    ExternalIp,
    InternalIp,
    ExternalDns,
    InternalDns,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Address {
    kind: AddressType,
    address: String,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Instance {
    id: String,
    provider_id: String,
    state: InstanceState,
    #[serde(default)]
    failure_domain: Option<String>,
    #[serde(default)]
    addresses: Vec<Address>,
    #[serde(default)]
    request_token: Option<String>,
}

impl From<Instance> for types::Instance {
    fn from(i: Instance) -> Self {
        Self {
            id: i.id,
            provider_id: i.provider_id,
            state: match i.state {
                InstanceState::Pending => types::InstanceState::Pending,
                InstanceState::Running => types::InstanceState::Running,
                InstanceState::Failed => types::InstanceState::Failed,
                InstanceState::Terminating => types::InstanceState::Terminating,
            },
            failure_domain: i.failure_domain,
            addresses: i
                .addresses
                .into_iter()
                .map(|a| types::Address {
                    kind: match a.kind {
                        AddressType::Hostname => types::AddressType::Hostname,
                        AddressType::ExternalIp => types::AddressType::ExternalIp,
                        AddressType::InternalIp => types::AddressType::InternalIp,
                        AddressType::ExternalDns => types::AddressType::ExternalDns,
                        AddressType::InternalDns => types::AddressType::InternalDns,
                    },
                    address: a.address,
                })
                .collect(),
            request_token: i.request_token,
        }
    }
}

impl From<types::Instance> for Instance {
    fn from(i: types::Instance) -> Self {
        Self {
            id: i.id,
            provider_id: i.provider_id,
            state: match i.state {
                types::InstanceState::Pending => InstanceState::Pending,
                types::InstanceState::Running => InstanceState::Running,
                types::InstanceState::Failed => InstanceState::Failed,
                types::InstanceState::Terminating => InstanceState::Terminating,
            },
            failure_domain: i.failure_domain,
            addresses: i
                .addresses
                .into_iter()
                .map(|a| Address {
                    kind: match a.kind {
                        types::AddressType::Hostname => AddressType::Hostname,
                        types::AddressType::ExternalIp => AddressType::ExternalIp,
                        types::AddressType::InternalIp => AddressType::InternalIp,
                        types::AddressType::ExternalDns => AddressType::ExternalDns,
                        types::AddressType::InternalDns => AddressType::InternalDns,
                    },
                    address: a.address,
                })
                .collect(),
            request_token: i.request_token,
        }
    }
}

pub(super) fn instances(list: Vec<Instance>) -> Vec<types::Instance> {
    list.into_iter().map(Into::into).collect()
}

mod requests;
mod results;

pub use requests::*;
pub use results::*;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn bytes_read_text_as_utf8_and_objects_as_base64() {
        let text: Bytes = serde_json::from_value(json!("#cloud-config\n")).unwrap();
        assert_eq!(text.0, b"#cloud-config\n");
        let binary: Bytes = serde_json::from_value(json!({"base64": "AP8="})).unwrap();
        assert_eq!(binary.0, [0, 255]);
    }

    #[test]
    fn bytes_refuse_bad_base64_and_other_keys() {
        let bad = serde_json::from_value::<Bytes>(json!({"base64": "%%"})).unwrap_err();
        assert!(bad.to_string().contains("invalid base64"), "{bad}");
        let other = serde_json::from_value::<Bytes>(json!({"hex": "00"})).unwrap_err();
        assert!(other.to_string().contains("unknown field `hex`"), "{other}");
        let number = serde_json::from_value::<Bytes>(json!(3)).unwrap_err();
        assert!(number.to_string().contains("a UTF-8 string"), "{number}");
    }

    #[test]
    fn bytes_print_text_as_a_string_and_binary_as_base64() {
        assert_eq!(
            serde_json::to_value(Bytes(b"hi".to_vec())).unwrap(),
            json!("hi")
        );
        assert_eq!(
            serde_json::to_value(Bytes(vec![0xff])).unwrap(),
            json!({"base64": "/w=="})
        );
    }

    #[test]
    fn delete_outcome_prints_as_the_wit_variant() {
        assert_eq!(
            serde_json::to_value(DeleteOutcome::Done).unwrap(),
            json!("done")
        );
        assert_eq!(
            serde_json::to_value(DeleteOutcome::InProgress(30)).unwrap(),
            json!({"in-progress": 30})
        );
    }

    #[test]
    fn instance_round_trips_with_camel_case_fields_and_kebab_case_cases() {
        let value = json!({
            "id": "i-1",
            "providerId": "sim://local-1/i-1",
            "state": "running",
            "failureDomain": "zone-a",
            "addresses": [{"kind": "internal-ip", "address": "10.0.0.1"}],
            "requestToken": "t-0"
        });
        let wit: types::Instance = serde_json::from_value::<Instance>(value.clone())
            .unwrap()
            .into();
        assert_eq!(wit.state, types::InstanceState::Running);
        assert_eq!(serde_json::to_value(Instance::from(wit)).unwrap(), value);
    }
}
