//! Hostile test guest: `generate` fails with strings of 400 KB (under the
//! output cap, which a log call and a result each stay within), full of what a terminal or a log reader must
//! never see raw (escape sequences, NUL, CR/LF, a right-to-left override),
//! in the field `field` of the config names, after logging a line of the
//! same. The host must bound and escape each before it reaches a log,
//! condition, Event or the CLI.
#![no_std]

extern crate alloc;

use capwasm_provider_sdk::bootstrap::{BootstrapProvider, GenerateRequest};
use capwasm_provider_sdk::config;
use capwasm_provider_sdk::log;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{BootstrapData, ProviderError};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    field: String,
    #[serde(default = "default_bytes")]
    bytes: u32,
}

fn default_bytes() -> u32 {
    400_000
}

/// `bytes` of text where every tenth character is one to be escaped.
fn hostile_text(bytes: u32) -> String {
    const PIECE: &str = "\u{1b}[2Jerror\u{0}\r\n\u{202e}drow";
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    let mut text = String::with_capacity(bytes);
    while text.len() + PIECE.len() <= bytes {
        text.push_str(PIECE);
    }
    text
}

struct HugeStrings;

impl BootstrapProvider for HugeStrings {
    fn config_schema() -> String {
        r#"{"type": "object", "additionalProperties": false, "required": ["field"],
            "properties": {
                "field": {"enum": ["terminalReason", "terminalMessage", "retryMessage", "configPath"]},
                "bytes": {"type": "integer", "minimum": 0, "maximum": 4294967295}}}"#
            .to_owned()
    }

    fn generate(request: GenerateRequest) -> Result<BootstrapData, ProviderError> {
        let config: Config = config::parse(&request.config)?;
        let text = hostile_text(config.bytes);
        log::warn(&text, &[("detail", &text)]);
        Err(match config.field.as_str() {
            "terminalReason" => ProviderError::terminal(text, "the reason is the payload"),
            "terminalMessage" => ProviderError::terminal("Hostile", text),
            "retryMessage" => ProviderError::retry_after(5, text),
            _ => ProviderError::invalid_config(text, "the path is the payload"),
        })
    }
}

capwasm_provider_sdk::export_bootstrap_provider!(HugeStrings);
