//! The simulated cloud's control-plane API (served by `capwasm sim-cloud`).
//!
//! ```text
//! PUT    {endpoint}/v1/control-planes/{name}   200 its state; 400 invalid; 409 VersionDowngrade
//! GET    {endpoint}/v1/control-planes/{name}   200 its state, 404 gone
//! DELETE {endpoint}/v1/control-planes/{name}   202 deleting, 404 already gone
//! ```
//!
//! A `token` credential is sent as a bearer token. Statuses map to provider
//! errors as the SDK's `Response::status_error` does (409, 429 and 5xx are
//! retried, other 4xx are terminal), except a refused PUT: see [`refusal`].

use capwasm_provider_sdk::http::{Request, Response};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::ProviderError;
use serde::{Deserialize, Serialize};

/// A control plane as the cloud reports it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SimControlPlane {
    pub name: String,
    /// The version asked for.
    pub version: String,
    pub replicas: u32,
    pub ready_replicas: u32,
    pub available_replicas: u32,
    pub up_to_date_replicas: u32,
    pub initialized: bool,
    /// The oldest version among the replicas, once initialized.
    #[serde(default)]
    pub oldest_version: Option<String>,
    #[serde(default)]
    pub endpoint: Option<SimEndpoint>,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct SimEndpoint {
    pub host: String,
    pub port: u16,
}

/// Body of PUT .../control-planes/{name}.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PutControlPlane<'a> {
    pub version: &'a str,
    pub replicas: u32,
    pub idempotency_key: &'a str,
}

/// The cloud's error body.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

/// The error a refused PUT stands for where its status alone says too
/// little: 400 (the request's version or replicas; retrying will not help)
/// and a 409 downgrade, both terminal. `None` for any other answer.
pub fn refusal(status: u16, body: &[u8], name: &str) -> Option<ProviderError> {
    let error: ErrorBody = serde_json::from_slice(body).ok()?;
    let reason = match (status, error.code.as_str()) {
        (400, _) => "InvalidParameter",
        (409, "VersionDowngrade") => "VersionDowngrade",
        _ => return None,
    };
    Some(ProviderError::terminal(
        reason,
        format!("the cloud refused control plane {name}: {}", error.message),
    ))
}

/// Calls the cloud about one control plane.
pub struct Client<'a> {
    url: String,
    name: &'a str,
    token: Option<&'a [u8]>,
}

impl<'a> Client<'a> {
    /// A client for control plane `name`, served at `url`.
    pub fn new(url: String, name: &'a str, token: Option<&'a [u8]>) -> Self {
        Self { url, name, token }
    }

    fn send(&self, request: Request) -> Result<Response, ProviderError> {
        let request = match self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        Ok(request.send()?)
    }

    /// Creates the control plane or brings it to `body`; its state.
    pub fn put(&self, body: &PutControlPlane<'_>) -> Result<SimControlPlane, ProviderError> {
        let response = self.send(Request::put(&self.url).json(body)?)?;
        if let Some(refused) = refusal(response.status, &response.body, self.name) {
            return Err(refused);
        }
        response.error_for_status()?.json()
    }

    /// Its state, or `None` once it is gone.
    pub fn get(&self) -> Result<Option<SimControlPlane>, ProviderError> {
        let response = self.send(Request::get(&self.url))?;
        if response.status == 404 {
            return Ok(None);
        }
        response.error_for_status()?.json().map(Some)
    }

    /// Starts deleting it; whether there was anything to delete.
    pub fn delete(&self) -> Result<bool, ProviderError> {
        let response = self.send(Request::delete(&self.url))?;
        if response.status == 404 {
            return Ok(false);
        }
        response.error_for_status().map(|_| true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_plane_decodes_from_the_documented_shape() {
        let json = r#"{"name": "ns/cp", "version": "v1.36.3", "replicas": 3, "readyReplicas": 2,
                       "availableReplicas": 2, "upToDateReplicas": 1, "initialized": true,
                       "oldestVersion": "v1.35.0", "endpoint": {"host": "127.0.0.1", "port": 40123}}"#;
        let plane: SimControlPlane = serde_json::from_str(json).expect("decodes");
        assert_eq!(plane.up_to_date_replicas, 1);
        assert_eq!(plane.endpoint.map(|e| e.port), Some(40123));
        let starting = r#"{"name": "cp", "version": "v1.36.3", "replicas": 1, "readyReplicas": 0,
                           "availableReplicas": 0, "upToDateReplicas": 1, "initialized": false,
                           "oldestVersion": null, "endpoint": null}"#;
        let plane: SimControlPlane = serde_json::from_str(starting).expect("decodes");
        assert_eq!((plane.oldest_version, plane.endpoint), (None, None));
    }

    #[test]
    fn put_body_encodes_the_documented_shape() {
        let body = PutControlPlane {
            version: "v1.36.3",
            replicas: 1,
            idempotency_key: "uid-1",
        };
        assert_eq!(
            serde_json::to_value(&body).expect("encodes"),
            serde_json::json!({"version": "v1.36.3", "replicas": 1, "idempotencyKey": "uid-1"})
        );
    }

    #[test]
    fn refusal_is_terminal_for_a_bad_request_and_a_downgrade() {
        let body = br#"{"code": "VersionDowngrade", "message": "version v1.35.0 is a downgrade"}"#;
        assert!(matches!(
            refusal(409, body, "ns/cp"),
            Some(ProviderError::Terminal(e))
                if e.reason == "VersionDowngrade" && e.message.contains("v1.35.0") && e.message.contains("ns/cp")
        ));
        let body = br#"{"code": "InvalidParameter", "message": "replicas must be 1 to 9"}"#;
        assert!(matches!(
            refusal(400, body, "ns/cp"),
            Some(ProviderError::Terminal(e)) if e.reason == "InvalidParameter"
        ));
    }

    #[test]
    fn refusal_leaves_other_answers_to_the_status() {
        let in_use = br#"{"code": "ControlPlaneNameInUse", "message": "another key"}"#;
        assert!(refusal(409, in_use, "ns/cp").is_none(), "retried");
        let unavailable = br#"{"code": "ServiceUnavailable", "message": "bad minute"}"#;
        assert!(refusal(503, unavailable, "ns/cp").is_none());
        assert!(
            refusal(400, b"<html>", "ns/cp").is_none(),
            "not the cloud's error"
        );
    }
}
