//! Hostile test guest: `generate` allocates and writes memory until an
//! allocation fails (which aborts, a trap). The host's per-instance memory
//! cap must stop it, failing only this call.
#![no_std]

extern crate alloc;

use core::hint::black_box;

use capwasm_provider_sdk::bootstrap::{BootstrapProvider, GenerateRequest};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{BootstrapData, ProviderError};

/// Allocation step: 1 MiB.
const CHUNK: usize = 1 << 20;

struct MemoryBomb;

impl BootstrapProvider for MemoryBomb {
    fn config_schema() -> String {
        r#"{"type": "object"}"#.to_owned()
    }

    fn generate(_request: GenerateRequest) -> Result<BootstrapData, ProviderError> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            // A non-zero fill writes every page, so the memory is really
            // committed rather than merely reserved.
            hoard.push(black_box(vec![0xA5; CHUNK]));
            black_box(&hoard);
        }
    }
}

capwasm_provider_sdk::export_bootstrap_provider!(MemoryBomb);
