//! Request fixtures for `capwasm provider test`: which call to make, and its
//! request as JSON (see [`super::json`] for how WIT records are written).
//!
//! ```json
//! {
//!   "description": "optional, ignored",
//!   "call": "reconcile-pool",
//!   "request": { "pool": {...}, "cluster": {...}, "config": {...}, "replicas": 2, ... }
//! }
//! ```

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::expect::Expect;
use super::{json, platform_json};
use crate::wasm::bootstrap::GenerateRequest;
use crate::wasm::clusters::ClusterRequest;
use crate::wasm::composition::{RenderRequest, StatusRequest, ValidateRequest};
use crate::wasm::machine_pools::{DeleteRequest, ReconcileRequest};
use crate::wasm::{World, types};

/// The calls a fixture can name, as spelled in it (for tests of the help text).
#[cfg(test)]
pub const CALLS: &[&str] = &[
    "generate",
    "reconcile-pool",
    "delete-pool",
    "reconcile-cluster",
    "delete-cluster",
    "provider-id",
    "owns",
    "render",
    "status",
    "validate",
    "info",
    "config-schema",
];

/// One guest call, decoded into the WIT types the runtime takes.
#[derive(Debug)]
pub enum Call {
    /// `bootstrap.generate`.
    Generate(GenerateRequest),
    /// `machine-pools.reconcile`.
    ReconcilePool(ReconcileRequest),
    /// `machine-pools.delete`.
    DeletePool(DeleteRequest),
    /// `clusters.reconcile`.
    ReconcileCluster(ClusterRequest),
    /// `clusters.delete`.
    DeleteCluster(ClusterRequest),
    /// `provider-ids.provider-id`.
    ProviderId {
        /// The config, as a JSON document.
        config: String,
        /// The instance.
        instance: types::Instance,
    },
    /// `provider-ids.owns`.
    Owns(String),
    /// `composition.render`, for a cluster in `namespace`.
    Render {
        /// The request.
        request: RenderRequest,
        /// The cluster's namespace, where every object must be.
        namespace: String,
    },
    /// `composition.status`.
    Status(StatusRequest),
    /// `composition.validate`.
    Validate(ValidateRequest),
    /// `info`.
    Info,
    /// `config-schema`.
    ConfigSchema,
}

impl Call {
    /// The export it calls, as the runtime names it.
    pub fn export(&self) -> &'static str {
        match self {
            Self::Generate(_) => "bootstrap.generate",
            Self::ReconcilePool(_) => "machine-pools.reconcile",
            Self::DeletePool(_) => "machine-pools.delete",
            Self::ReconcileCluster(_) => "clusters.reconcile",
            Self::DeleteCluster(_) => "clusters.delete",
            Self::ProviderId { .. } => "provider-ids.provider-id",
            Self::Owns(_) => "provider-ids.owns",
            Self::Render { .. } => "composition.render",
            Self::Status(_) => "composition.status",
            Self::Validate(_) => "composition.validate",
            Self::Info => "info",
            Self::ConfigSchema => "config-schema",
        }
    }

    /// The world whose export it is; `None` for the exports every world has.
    pub fn world(&self) -> Option<World> {
        match self {
            Self::Generate(_) => Some(World::Bootstrap),
            Self::Render { .. } | Self::Status(_) | Self::Validate(_) => Some(World::Platform),
            Self::Info | Self::ConfigSchema => None,
            _ => Some(World::Infrastructure),
        }
    }
}

/// A decoded fixture: the call, and the config to check against the
/// provider's schema first (for calls that take one; a render's values).
#[derive(Debug)]
pub struct Fixture {
    /// The call.
    pub call: Call,
    /// Its `config`, if the call takes one.
    pub config: Option<Value>,
    /// What `capwasm provider conformance` holds the call's outcome to.
    pub expect: Option<Expect>,
}

/// Why a fixture cannot be used; says where, as a JSON path.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// Not JSON, or not `{"call": ..., "request": ...}`.
    #[error("{0}")]
    Envelope(serde_path_to_error::Error<serde_json::Error>),
    /// The request does not fit the call.
    #[error("at request{path}: {message}", path = display_path(.0.path()), message = .0.inner())]
    Request(serde_path_to_error::Error<serde_json::Error>),
}

fn display_path(path: &serde_path_to_error::Path) -> String {
    let path = path.to_string();
    if path == "." {
        String::new()
    } else {
        format!(".{path}")
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    /// Free text for whoever reads the fixture.
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    call: CallName,
    #[serde(default)]
    request: Option<Value>,
    #[serde(default)]
    expect: Option<Expect>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum CallName {
    Generate,
    ReconcilePool,
    DeletePool,
    ReconcileCluster,
    DeleteCluster,
    ProviderId,
    Owns,
    Render,
    Status,
    Validate,
    Info,
    ConfigSchema,
}

/// Decodes a fixture from its JSON text.
pub fn parse(text: &str) -> Result<Fixture, FixtureError> {
    let envelope: Envelope =
        serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text))
            .map_err(FixtureError::Envelope)?;
    // Absent and `null` both mean no arguments; calls that need some then
    // report their first missing field.
    let request = envelope
        .request
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
    let (call, config) = match envelope.call {
        CallName::Generate => {
            let r: json::GenerateRequest = decode(request)?;
            let config = Some(r.config.clone());
            (Call::Generate(r.into_wit()), config)
        }
        CallName::ReconcilePool => {
            let r: json::ReconcilePoolRequest = decode(request)?;
            let config = Some(r.config.clone());
            (Call::ReconcilePool(r.into_wit()), config)
        }
        CallName::DeletePool => {
            let r: json::DeletePoolRequest = decode(request)?;
            let config = Some(r.config.clone());
            (Call::DeletePool(r.into_wit()), config)
        }
        CallName::ReconcileCluster | CallName::DeleteCluster => {
            let r: json::ClusterRequest = decode(request)?;
            let config = Some(r.config.clone());
            let r = r.into_wit();
            let call = if matches!(envelope.call, CallName::ReconcileCluster) {
                Call::ReconcileCluster(r)
            } else {
                Call::DeleteCluster(r)
            };
            (call, config)
        }
        CallName::ProviderId => {
            let r: json::ProviderIdRequest = decode(request)?;
            let call = Call::ProviderId {
                config: r.config.to_string(),
                instance: r.instance.into(),
            };
            (call, Some(r.config))
        }
        CallName::Owns => {
            let r: json::OwnsRequest = decode(request)?;
            (Call::Owns(r.provider_id), None)
        }
        CallName::Render => {
            let r: platform_json::RenderRequest = decode(request)?;
            let values = Some(r.values.clone());
            let namespace = r.namespace();
            let request = r.into_wit();
            (Call::Render { request, namespace }, values)
        }
        CallName::Status => {
            let r: platform_json::StatusRequest = decode(request)?;
            (Call::Status(r.into_wit()), None)
        }
        CallName::Validate => {
            let r: platform_json::ValidateRequest = decode(request)?;
            (Call::Validate(r.into_wit()), None)
        }
        CallName::Info => {
            let json::NoArguments {} = decode(request)?;
            (Call::Info, None)
        }
        CallName::ConfigSchema => {
            let json::NoArguments {} = decode(request)?;
            (Call::ConfigSchema, None)
        }
    };
    Ok(Fixture {
        call,
        config,
        expect: envelope.expect,
    })
}

fn decode<T: DeserializeOwned>(request: Value) -> Result<T, FixtureError> {
    serde_path_to_error::deserialize(request).map_err(FixtureError::Request)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn parse_decodes_reconcile_pool_with_defaults_and_text_bootstrap_data() {
        let fixture = parse(
            r##"{
              "call": "reconcile-pool",
              "request": {
                "pool": {"namespace": "default", "name": "pool-a", "uid": "u-1"},
                "cluster": {"name": "demo", "namespace": "default"},
                "config": {"endpoint": "http://127.0.0.1:8081"},
                "replicas": 2,
                "bootstrapData": {"format": "cloud-config", "value": "#cloud-config\n"},
                "idempotencyKey": "u-1",
                "credentials": [{"key": "token", "value": "s3cret"}]
              }
            }"##,
        )
        .unwrap();
        let Call::ReconcilePool(request) = fixture.call else {
            panic!("not reconcile-pool: {:?}", fixture.call);
        };
        assert_eq!(request.replicas, 2);
        assert_eq!(request.config, r#"{"endpoint":"http://127.0.0.1:8081"}"#);
        assert_eq!(
            request.bootstrap_data.map(|d| d.value),
            Some(b"#cloud-config\n".to_vec())
        );
        assert!(request.instances.is_empty());
        assert_eq!(request.credentials[0].value, b"s3cret");
        assert_eq!(
            fixture.config,
            Some(serde_json::json!({"endpoint": "http://127.0.0.1:8081"}))
        );
    }

    #[test]
    fn parse_defaults_config_to_an_empty_object() {
        let fixture = parse(
            r#"{"call": "provider-id", "request": {"instance": {"id": "i-1", "providerId": "sim://x/i-1", "state": "pending"}}}"#,
        )
        .unwrap();
        assert_eq!(fixture.config, Some(serde_json::json!({})));
    }

    #[test]
    fn parse_takes_info_without_a_request() {
        assert!(matches!(
            parse(r#"{"call": "info"}"#).unwrap().call,
            Call::Info
        ));
    }

    #[test]
    fn parse_names_the_path_of_a_bad_field() {
        let message = error(
            r#"{"call": "generate", "request": {"configObject": {"namespace": "a", "name": "b"}}}"#,
        );
        assert_eq!(message, "at request.configObject: missing field `uid`");
    }

    #[test]
    fn parse_refuses_an_unknown_call_with_the_known_ones() {
        let message = error(r#"{"call": "reconcile", "request": {}}"#);
        assert!(
            message.starts_with("call: unknown variant `reconcile`"),
            "{message}"
        );
        assert!(message.contains("reconcile-pool"), "{message}");
    }

    #[test]
    fn calls_lists_every_call_a_fixture_can_name() {
        for call in CALLS {
            let name: Result<CallName, _> = serde_json::from_value(serde_json::json!(call));
            assert!(name.is_ok(), "{call}");
        }
        assert_eq!(CALLS.len(), 12);
    }

    #[test]
    fn parse_accepts_every_example_fixture() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/requests");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let text = std::fs::read_to_string(&path).unwrap();
                parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                seen += 1;
            }
        }
        assert!(seen >= 5, "examples/requests holds {seen} fixtures");
    }

    #[test]
    fn parse_refuses_unknown_fields_and_bad_json_with_a_position() {
        let message = error(r#"{"call": "owns", "request": {"providerID": "x"}}"#);
        assert!(message.contains("unknown field `providerID`"), "{message}");
        let message = error("{\"call\": \"info\",\n}");
        assert!(message.contains("line 2"), "{message}");
    }
}
