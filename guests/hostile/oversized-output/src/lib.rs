//! Hostile test guest: `generate` returns far more bootstrap data than a
//! host should accept (64 MiB unless `sizeBytes` in the config says
//! otherwise, so a test can stay under its memory cap and still exceed its
//! output cap). The host must refuse the output, failing only this call.
#![no_std]

extern crate alloc;

use capwasm_provider_sdk::bootstrap::{BootstrapProvider, GenerateRequest};
use capwasm_provider_sdk::config;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{BootstrapData, BootstrapFormat, ProviderError};
use serde::Deserialize;

const DEFAULT_SIZE_BYTES: u32 = 64 << 20;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Config {
    #[serde(default = "default_size")]
    size_bytes: u32,
}

fn default_size() -> u32 {
    DEFAULT_SIZE_BYTES
}

struct OversizedOutput;

impl BootstrapProvider for OversizedOutput {
    fn config_schema() -> String {
        r#"{"type": "object", "additionalProperties": false,
            "properties": {"sizeBytes": {"type": "integer", "minimum": 0, "maximum": 4294967295}}}"#
            .to_owned()
    }

    fn generate(request: GenerateRequest) -> Result<BootstrapData, ProviderError> {
        let config: Config = config::parse(&request.config)?;
        let size = usize::try_from(config.size_bytes).unwrap_or(usize::MAX);
        let mut value = b"#!/bin/sh\n".to_vec();
        value.resize(size.max(value.len()), b'#');
        Ok(BootstrapData {
            format: BootstrapFormat::ShellScript,
            value,
        })
    }
}

capwasm_provider_sdk::export_bootstrap_provider!(OversizedOutput);
