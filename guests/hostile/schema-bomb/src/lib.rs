//! Hostile test guest: a config schema of 18 definitions, each an `anyOf`
//! of two references to the next. A few hundred bytes of text, shallow
//! enough to pass the depth bound, that a validator walks 2^18 ways (more
//! than a second per config, unbounded); the host must refuse the module
//! at load by its expanded size, instead of stalling on every config it
//! checks.
#![no_std]

extern crate alloc;

use core::fmt::Write as _;

use capwasm_provider_sdk::bootstrap::{BootstrapProvider, GenerateRequest};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{BootstrapData, BootstrapFormat, ProviderError};

const LEVELS: u32 = 18;

struct SchemaBomb;

impl BootstrapProvider for SchemaBomb {
    fn config_schema() -> String {
        let mut schema = String::from(r##"{"$ref": "#/$defs/l0", "$defs": {"##);
        for level in 0..LEVELS {
            let next = level + 1;
            let _ = write!(
                schema,
                r##""l{level}": {{"anyOf": [{{"$ref": "#/$defs/l{next}"}}, {{"$ref": "#/$defs/l{next}", "minProperties": 1}}]}}, "##
            );
        }
        let _ = write!(
            schema,
            r#""l{LEVELS}": {{"type": "object", "required": ["never"]}}}}}}"#
        );
        schema
    }

    fn generate(_request: GenerateRequest) -> Result<BootstrapData, ProviderError> {
        Ok(BootstrapData {
            format: BootstrapFormat::ShellScript,
            value: b"#!/bin/sh\n".to_vec(),
        })
    }
}

capwasm_provider_sdk::export_bootstrap_provider!(SchemaBomb);
