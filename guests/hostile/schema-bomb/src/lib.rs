//! Hostile test guest: a config schema of 40 definitions, each an `anyOf`
//! of two references to the next. A few hundred bytes of text that a
//! validator walks 2^40 ways; the host must refuse the module at load,
//! naming the bound, instead of freezing on the first config it checks.
#![no_std]

extern crate alloc;

use core::fmt::Write as _;

use capwasm_provider_sdk::bootstrap::{BootstrapProvider, GenerateRequest};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{BootstrapData, BootstrapFormat, ProviderError};

const LEVELS: u32 = 40;

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
