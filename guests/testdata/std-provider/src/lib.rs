//! Test component: a bootstrap provider that links Rust's standard library,
//! as a provider does when it needs a crate that is not `no_std`. Such a
//! component imports the `wasi:cli` and `wasi:io` interfaces the standard
//! library uses, which the host must serve (empty environment, stderr kept
//! for error messages).
//!
//! `generate` writes a shell script listing what the standard library sees
//! of the sandbox (environment variables, arguments); with `{"panic": true}`
//! it panics, and the standard library prints the message to stderr.

use std::collections::HashMap;

use capwasm_provider_sdk::bootstrap::{BootstrapProvider, GenerateRequest};
use capwasm_provider_sdk::config;
use capwasm_provider_sdk::types::{BootstrapData, BootstrapFormat, ProviderError};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    panic: bool,
}

struct StdProvider;

impl BootstrapProvider for StdProvider {
    fn config_schema() -> String {
        r#"{"type": "object", "additionalProperties": false,
            "properties": {"panic": {"type": "boolean"}}}"#
            .to_owned()
    }

    // Panicking on request is how the test reaches std's panic output.
    #[allow(clippy::panic, clippy::manual_assert)]
    fn generate(request: GenerateRequest) -> Result<BootstrapData, ProviderError> {
        let config: Config = config::parse(&request.config)?;
        if config.panic {
            panic!(
                "std provider panics on request (owner {})",
                request.owner_name
            );
        }
        let env: HashMap<String, String> = std::env::vars().collect();
        let script = format!(
            "#!/bin/sh\n# owner={} env={} args={}\n",
            request.owner_name,
            env.len(),
            std::env::args().count()
        );
        Ok(BootstrapData {
            format: BootstrapFormat::ShellScript,
            value: script.into_bytes(),
        })
    }
}

capwasm_provider_sdk::export_bootstrap_provider!(StdProvider, std);
