//! Hostile test guest: a pool reconcile sends more HTTP than the host
//! allows one call, to a host it may reach (`url` in the config), and
//! reports what it saw as a terminal error with reason `FloodReport` and a
//! message `ok=<n> refused=<n> first=<kind or code>; <what it said>`:
//!
//! - `inARow`: `count` GETs one after another, stopping at the first error;
//! - `atOnce`: `count` GETs started before any is awaited (raw `wasi:http`);
//! - `bigRequest`: one POST with a body of `bytes`;
//! - `bigResponse`: one GET whose response the guest itself would take up
//!   to 1 GiB of.
#![no_std]

extern crate alloc;

use capwasm_provider_sdk::bindings::infrastructure::wasi::http::outgoing_handler;
use capwasm_provider_sdk::bindings::infrastructure::wasi::http::types::{
    Fields, FutureIncomingResponse, Method, OutgoingBody, OutgoingRequest, Scheme,
};
use capwasm_provider_sdk::config;
use capwasm_provider_sdk::http::Request;
use capwasm_provider_sdk::infrastructure::{
    InfrastructureProvider, PoolDeleteRequest, PoolReconcileRequest, PoolRemoveRequest, PoolState,
};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{DeleteOutcome, ProviderError};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    mode: String,
    /// `http://host:port/path`.
    url: String,
    #[serde(default)]
    count: u32,
    #[serde(default)]
    bytes: u32,
}

#[derive(Default)]
struct Tally {
    ok: u32,
    refused: u32,
    first: Option<String>,
    detail: Option<String>,
}

impl Tally {
    fn saw(&mut self, outcome: Result<(), (String, String)>) {
        match outcome {
            Ok(()) => self.ok += 1,
            Err((kind, detail)) => {
                self.refused += 1;
                if self.first.is_none() {
                    self.first = Some(kind);
                    self.detail = Some(detail);
                }
            }
        }
    }

    fn report(self) -> ProviderError {
        let first = self.first.unwrap_or_else(|| "none".into());
        let detail = self.detail.unwrap_or_default();
        ProviderError::terminal(
            "FloodReport",
            format!(
                "ok={} refused={} first={first}; {detail}",
                self.ok, self.refused
            ),
        )
    }
}

fn sdk(request: Request) -> Result<(), (String, String)> {
    request
        .send()
        .map(|_| ())
        .map_err(|e| (format!("{:?}", e.kind()), e.message().to_owned()))
}

/// A raw `wasi:http` failure, as (kind, detail).
fn raw(what: &str, code: impl core::fmt::Debug) -> (String, String) {
    (format!("{code:?}"), what.to_owned())
}

/// Starts a GET without waiting for it.
fn start(authority: &str, path: &str) -> Result<FutureIncomingResponse, (String, String)> {
    let request = OutgoingRequest::new(Fields::new());
    let _ = request.set_method(&Method::Get);
    let _ = request.set_scheme(Some(&Scheme::Http));
    let _ = request.set_authority(Some(authority));
    let _ = request.set_path_with_query(Some(path));
    let body = request.body().map_err(|()| raw("body", "NoBody"))?;
    let future = outgoing_handler::handle(request, None).map_err(|code| raw("handle", code))?;
    OutgoingBody::finish(body, None).map_err(|code| raw("finish", code))?;
    Ok(future)
}

fn finish(future: &FutureIncomingResponse) -> Result<(), (String, String)> {
    future.subscribe().block();
    match future.get() {
        Some(Ok(Ok(_response))) => Ok(()),
        Some(Ok(Err(code))) => Err(raw("response", code)),
        _ => Err(raw("response", "NoResponse")),
    }
}

fn flood(config: &Config) -> ProviderError {
    let mut tally = Tally::default();
    match config.mode.as_str() {
        "inARow" => {
            for _ in 0..config.count {
                let outcome = sdk(Request::get(&config.url));
                let stop = outcome.is_err();
                tally.saw(outcome);
                if stop {
                    break;
                }
            }
        }
        "atOnce" => {
            let rest = config.url.trim_start_matches("http://");
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let path = if path.is_empty() { "/" } else { path };
            let started: Vec<_> = (0..config.count).map(|_| start(authority, path)).collect();
            for future in started {
                tally.saw(future.and_then(|f| finish(&f)));
            }
        }
        "bigRequest" => {
            let body = vec![b'x'; usize::try_from(config.bytes).unwrap_or(0)];
            tally.saw(sdk(Request::post(&config.url).body(body)));
        }
        _ => tally.saw(sdk(Request::get(&config.url).max_response_bytes(1 << 30))),
    }
    tally.report()
}

struct HttpFlood;

impl InfrastructureProvider for HttpFlood {
    fn config_schema() -> String {
        r#"{"type": "object", "additionalProperties": false, "required": ["mode", "url"],
            "properties": {
                "mode": {"enum": ["inARow", "atOnce", "bigRequest", "bigResponse"]},
                "url": {"type": "string"},
                "count": {"type": "integer", "minimum": 0, "maximum": 100000},
                "bytes": {"type": "integer", "minimum": 0, "maximum": 67108864}}}"#
            .to_owned()
    }

    fn reconcile_machine_pool(request: PoolReconcileRequest) -> Result<PoolState, ProviderError> {
        let config: Config = config::parse(&request.config)?;
        Err(flood(&config))
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
}

capwasm_provider_sdk::export_infrastructure_provider!(HttpFlood);
