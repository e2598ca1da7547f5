//! Hostile test guest: `generate` waits `seconds` (default 20) on a
//! `wasi:clocks` timer, blocked in a host call rather than computing. The
//! host must end the call at its wall-clock deadline all the same, holding
//! no thread while it waits.
#![no_std]

extern crate alloc;

use capwasm_provider_sdk::bindings::infrastructure::wasi::clocks::monotonic_clock;
use capwasm_provider_sdk::bootstrap::{BootstrapProvider, GenerateRequest};
use capwasm_provider_sdk::config;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{BootstrapData, BootstrapFormat, ProviderError};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "default_seconds")]
    seconds: u32,
}

fn default_seconds() -> u32 {
    20
}

struct TimerSleep;

impl BootstrapProvider for TimerSleep {
    fn config_schema() -> String {
        r#"{"type": "object", "additionalProperties": false,
            "properties": {"seconds": {"type": "integer", "minimum": 0, "maximum": 86400}}}"#
            .to_owned()
    }

    fn generate(request: GenerateRequest) -> Result<BootstrapData, ProviderError> {
        let config: Config = config::parse(&request.config)?;
        let nanos = u64::from(config.seconds) * 1_000_000_000;
        monotonic_clock::subscribe_duration(nanos).block();
        Ok(BootstrapData {
            format: BootstrapFormat::ShellScript,
            value: b"#!/bin/sh\n# slept\n".to_vec(),
        })
    }
}

capwasm_provider_sdk::export_bootstrap_provider!(TimerSleep);
