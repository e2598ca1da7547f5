//! Hostile test guest: `generate` never returns. The host must end the
//! call at its deadline and keep serving everything else.
#![no_std]

extern crate alloc;

use capwasm_provider_sdk::bootstrap::{BootstrapProvider, GenerateRequest};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{BootstrapData, ProviderError};

struct InfiniteLoop;

impl BootstrapProvider for InfiniteLoop {
    fn config_schema() -> String {
        r#"{"type": "object"}"#.to_owned()
    }

    fn generate(_request: GenerateRequest) -> Result<BootstrapData, ProviderError> {
        let mut spins: u64 = 0;
        loop {
            // black_box keeps the loop from being optimised into anything
            // cheaper or provably finite.
            spins = core::hint::black_box(spins.wrapping_add(1));
        }
    }
}

capwasm_provider_sdk::export_bootstrap_provider!(InfiniteLoop);
