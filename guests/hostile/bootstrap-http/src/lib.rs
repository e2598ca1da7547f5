//! Hostile test guest: a bootstrap provider whose `generate` sends HTTP,
//! so the component imports `wasi:http`, which the bootstrap world does
//! not offer. The host must refuse it at load, naming the import.
#![no_std]

extern crate alloc;

use capwasm_provider_sdk::bootstrap::{BootstrapProvider, GenerateRequest};
use capwasm_provider_sdk::http::Request;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{BootstrapData, BootstrapFormat, ProviderError};

struct BootstrapHttp;

impl BootstrapProvider for BootstrapHttp {
    fn config_schema() -> String {
        r#"{"type": "object"}"#.to_owned()
    }

    fn generate(_request: GenerateRequest) -> Result<BootstrapData, ProviderError> {
        let response = Request::get("http://127.0.0.1:1/").send()?;
        Ok(BootstrapData {
            format: BootstrapFormat::ShellScript,
            value: response.body,
        })
    }
}

capwasm_provider_sdk::export_bootstrap_provider!(BootstrapHttp);
