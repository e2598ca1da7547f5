//! The simulated cloud's HTTP API (served by `capwasm sim-cloud`).
//!
//! ```text
//! POST   {endpoint}/v1/regions/{region}/instances          201 new, 200 same requestToken seen before
//! GET    {endpoint}/v1/regions/{region}/instances?pool=P   200 {"instances": [...]}
//! DELETE {endpoint}/v1/regions/{region}/instances/{id}     202 terminating, 404 already gone
//! ```
//!
//! A `token` credential is sent as a bearer token. Statuses map to provider
//! errors as the SDK's `Response::status_error` does: 404 is handled here,
//! 409, 429 and 5xx are retried, other 4xx are terminal.

use alloc::collections::BTreeMap;

use base64::Engine as _;
use capwasm_provider_sdk::http::{Request, encode_component};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{BootstrapFormat, ProviderError};
use serde::{Deserialize, Serialize};

/// An instance as the cloud reports it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SimInstance {
    pub id: String,
    #[serde(rename = "providerID", default)]
    pub provider_id: String,
    #[serde(default)]
    pub pool: String,
    pub state: SimState,
    #[serde(default)]
    pub failure_domain: Option<String>,
    #[serde(default)]
    pub addresses: Vec<SimAddress>,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SimState {
    Pending,
    Running,
    Failed,
    Terminating,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct SimAddress {
    #[serde(rename = "type")]
    pub kind: String,
    pub address: String,
}

#[derive(Deserialize)]
struct InstanceList {
    instances: Vec<SimInstance>,
}

/// Body of POST .../instances.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateInstance<'a> {
    pub request_token: &'a str,
    pub pool: &'a str,
    /// Base64 of the bootstrap data.
    pub bootstrap_data: String,
    pub bootstrap_format: &'static str,
    pub failure_domain: Option<&'a str>,
    pub node_labels: &'a BTreeMap<String, String>,
    pub instance_type: Option<&'a str>,
    /// The pool's Kubernetes version: the cloud boots the image that runs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<&'a str>,
}

impl CreateInstance<'_> {
    pub fn encode_bootstrap(data: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(data)
    }

    pub fn format_name(format: BootstrapFormat) -> &'static str {
        match format {
            BootstrapFormat::CloudConfig => "cloud-config",
            BootstrapFormat::Ignition => "ignition",
            BootstrapFormat::ShellScript => "shell-script",
        }
    }
}

/// An instance type as `GET /v1/instance-types/{name}` describes it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SimInstanceType {
    pub capacity: BTreeMap<String, String>,
    pub architecture: String,
    pub operating_system: String,
}

/// Calls one region of the simulated cloud.
pub struct Client<'a> {
    region_url: String,
    token: Option<&'a [u8]>,
}

impl<'a> Client<'a> {
    pub fn new(region_url: String, token: Option<&'a [u8]>) -> Self {
        Self { region_url, token }
    }

    fn authorize(&self, request: Request) -> Request {
        match self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// The instances of `pool` (`<namespace>/<name>`).
    pub fn list(&self, pool: &str) -> Result<Vec<SimInstance>, ProviderError> {
        let url = format!(
            "{}/instances?pool={}",
            self.region_url,
            encode_component(pool)
        );
        let response = self
            .authorize(Request::get(url))
            .send()?
            .error_for_status()?;
        let list: InstanceList = response.json()?;
        // Defensive: never act on another pool's instances.
        Ok(list
            .instances
            .into_iter()
            .filter(|i| i.pool.is_empty() || i.pool == pool)
            .collect())
    }

    /// Creates an instance, or returns the one an earlier request with the
    /// same token created; the flag says whether it is new (201).
    pub fn create(&self, body: &CreateInstance<'_>) -> Result<(SimInstance, bool), ProviderError> {
        let url = format!("{}/instances", self.region_url);
        let request = self.authorize(Request::post(url)).json(body)?;
        let response = request.send()?.error_for_status()?;
        Ok((response.json()?, response.status == 201))
    }

    /// What a node of the instance type at `url` has; an unknown type is
    /// the terminal `UnknownInstanceType`.
    pub fn instance_type(&self, url: &str) -> Result<SimInstanceType, ProviderError> {
        let response = self.authorize(Request::get(url)).send()?;
        if response.status == 404 {
            return Err(ProviderError::terminal(
                "UnknownInstanceType",
                format!("the cloud does not offer this instance type (GET {url}: 404)"),
            ));
        }
        response.error_for_status()?.json()
    }

    /// Starts terminating instance `id`; an instance already gone is fine.
    pub fn delete(&self, id: &str) -> Result<(), ProviderError> {
        let url = format!("{}/instances/{}", self.region_url, encode_component(id));
        let response = self.authorize(Request::delete(url)).send()?;
        if response.status == 404 {
            return Ok(());
        }
        response.error_for_status().map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_decodes_from_the_documented_shape() {
        let json = r#"{"id": "i-1", "providerID": "sim://local-1/i-1", "pool": "ns/p", "state": "running",
                       "failureDomain": null, "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]}"#;
        let instance: SimInstance = serde_json::from_str(json).expect("decodes");
        assert_eq!(instance.state, SimState::Running);
        assert_eq!(instance.addresses[0].kind, "InternalIP");
    }

    #[test]
    fn create_body_encodes_the_documented_shape() {
        let labels = BTreeMap::from([("tier".to_owned(), "web".to_owned())]);
        let body = CreateInstance {
            request_token: "key-0",
            pool: "ns/p",
            bootstrap_data: CreateInstance::encode_bootstrap(b"#cloud-config\n"),
            bootstrap_format: CreateInstance::format_name(BootstrapFormat::CloudConfig),
            failure_domain: None,
            node_labels: &labels,
            instance_type: Some("small"),
            kubernetes_version: Some("v1.31.2"),
        };
        let value = serde_json::to_value(&body).expect("encodes");
        assert_eq!(
            value,
            serde_json::json!({
                "requestToken": "key-0",
                "pool": "ns/p",
                "bootstrapData": "I2Nsb3VkLWNvbmZpZwo=",
                "bootstrapFormat": "cloud-config",
                "failureDomain": null,
                "nodeLabels": {"tier": "web"},
                "instanceType": "small",
                "kubernetesVersion": "v1.31.2",
            })
        );
    }
}
