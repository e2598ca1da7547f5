//! Hostile test guest: pool and cluster reconciles send `GET` to the `url`
//! in the config (default `http://127.0.0.1:1/`), a host its ProviderModule
//! is not meant to allow. The host must refuse the request and hand the
//! guest an error rather than trap. The guest reports what it saw:
//!
//! - refused by the host: terminal error, reason `HttpRequestDenied`
//!   (the SDK's mapping of `wasi:http` `HTTP-request-denied`);
//! - other transport failure: retry-after;
//! - a response: terminal error, reason `HttpRequestSucceeded`, with the
//!   status in the message.
#![no_std]

extern crate alloc;

use capwasm_provider_sdk::config;
use capwasm_provider_sdk::http::Request;
use capwasm_provider_sdk::infrastructure::{
    ClusterRequest, ClusterState, InfrastructureProvider, PoolDeleteRequest, PoolReconcileRequest,
    PoolRemoveRequest, PoolState,
};
use capwasm_provider_sdk::log;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{DeleteOutcome, ProviderError};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "default_url")]
    url: String,
}

fn default_url() -> String {
    "http://127.0.0.1:1/".to_owned()
}

fn probe(config: &str) -> ProviderError {
    let config: Config = match config::parse(config) {
        Ok(config) => config,
        Err(err) => return err,
    };
    match Request::get(&config.url).send() {
        Ok(response) => ProviderError::terminal(
            "HttpRequestSucceeded",
            format!("GET {} returned {}", config.url, response.status),
        ),
        Err(err) => {
            log::warn(
                "request failed",
                &[("url", &config.url), ("error", err.message())],
            );
            err.into()
        }
    }
}

struct ForbiddenHttp;

impl InfrastructureProvider for ForbiddenHttp {
    fn config_schema() -> String {
        r#"{"type": "object", "additionalProperties": false,
            "properties": {"url": {"type": "string"}}}"#
            .to_owned()
    }

    fn reconcile_machine_pool(request: PoolReconcileRequest) -> Result<PoolState, ProviderError> {
        Err(probe(&request.config))
    }

    fn remove_instances(request: PoolRemoveRequest) -> Result<PoolState, ProviderError> {
        Err(probe(&request.config))
    }

    fn delete_machine_pool(_request: PoolDeleteRequest) -> Result<DeleteOutcome, ProviderError> {
        Ok(DeleteOutcome::Done)
    }

    fn owns(_provider_id: &str) -> bool {
        false
    }

    fn reconcile_cluster(request: ClusterRequest) -> Result<ClusterState, ProviderError> {
        Err(probe(&request.config))
    }
}

capwasm_provider_sdk::export_infrastructure_provider!(ForbiddenHttp);
