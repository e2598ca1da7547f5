//! Hostile test guest: `generate` recurses without bound until the stack
//! runs out (a trap). The host must fail only this call.
#![no_std]

extern crate alloc;

use core::hint::black_box;

use capwasm_provider_sdk::bootstrap::{BootstrapProvider, GenerateRequest};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{BootstrapData, ProviderError};

struct DeepRecursion;

/// Each frame keeps a buffer live across the call and uses the callee's
/// result, so neither tail-call optimisation nor frame merging applies.
#[inline(never)]
fn descend(depth: u64) -> u64 {
    let frame = black_box([depth.to_le_bytes(); 32]);
    // Never true; it only keeps rustc from flagging unconditional recursion.
    if black_box(depth) == u64::MAX {
        return 0;
    }
    let below = black_box(descend(black_box(depth + 1)));
    below.wrapping_add(u64::from(frame[31][0]))
}

impl BootstrapProvider for DeepRecursion {
    fn config_schema() -> String {
        r#"{"type": "object"}"#.to_owned()
    }

    fn generate(_request: GenerateRequest) -> Result<BootstrapData, ProviderError> {
        let depth = descend(0);
        Err(ProviderError::terminal(
            "Unreachable",
            format!("recursion ended at {depth}"),
        ))
    }
}

capwasm_provider_sdk::export_bootstrap_provider!(DeepRecursion);
