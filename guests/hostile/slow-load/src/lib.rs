//! Hostile test guest: `info`, which the host calls when it loads the
//! component, waits 30 s on a `wasi:clocks` timer. Loading must fail at
//! the check call's deadline, not 30 s later, and the version in service
//! (if any) must stay.
#![no_std]

extern crate alloc;

use capwasm_provider_sdk::bindings::bootstrap::exports::capwasm::provider::bootstrap;
use capwasm_provider_sdk::bindings::infrastructure::wasi::clocks::monotonic_clock;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{BootstrapData, BootstrapFormat, ProviderError, ProviderInfo};

struct SlowLoad;

impl capwasm_provider_sdk::bindings::bootstrap::Guest for SlowLoad {
    fn info() -> ProviderInfo {
        monotonic_clock::subscribe_duration(30_000_000_000).block();
        ProviderInfo {
            name: "hostile-slow-load".into(),
            version: "0.1.0".into(),
        }
    }

    fn config_schema() -> String {
        r#"{"type": "object"}"#.to_owned()
    }
}

impl bootstrap::Guest for SlowLoad {
    fn generate(_request: bootstrap::GenerateRequest) -> Result<BootstrapData, ProviderError> {
        Ok(BootstrapData {
            format: BootstrapFormat::ShellScript,
            value: b"#!/bin/sh\n".to_vec(),
        })
    }
}

capwasm_provider_sdk::no_std_runtime!();
capwasm_provider_sdk::bindings::bootstrap::export_bootstrap_world!(
    SlowLoad with_types_in capwasm_provider_sdk::bindings::bootstrap
);
