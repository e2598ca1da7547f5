//! Hostile test guest: `generate` panics, which aborts the instance (a
//! trap). The host must fail only this call.
#![no_std]

extern crate alloc;

use capwasm_provider_sdk::bootstrap::{BootstrapProvider, GenerateRequest};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{BootstrapData, ProviderError};

struct Panic;

impl BootstrapProvider for Panic {
    fn config_schema() -> String {
        r#"{"type": "object"}"#.to_owned()
    }

    // Panicking is this guest's whole purpose.
    #[allow(clippy::panic)]
    fn generate(request: GenerateRequest) -> Result<BootstrapData, ProviderError> {
        panic!(
            "hostile guest panics on purpose (owner {})",
            request.owner_name
        );
    }
}

capwasm_provider_sdk::export_bootstrap_provider!(Panic);
