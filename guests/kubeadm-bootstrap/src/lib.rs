//! capwasm bootstrap provider that produces a cloud-config running
//! `kubeadm join` (workers) or `kubeadm init` (the first control-plane
//! node). The logic lives in plain functions ([`config`],
//! [`cloud_config`]) that native unit tests exercise; this file only wires
//! them to the WIT exports.
#![no_std]

extern crate alloc;
// The unit tests run natively, with the standard library's harness.
#[cfg(test)]
extern crate std;

mod cloud_config;
mod config;
mod yaml;

use capwasm_provider_sdk::bootstrap::{BootstrapProvider, GenerateRequest, join_token};
use capwasm_provider_sdk::log;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{BootstrapData, BootstrapFormat, ProviderError};

struct KubeadmBootstrap;

impl BootstrapProvider for KubeadmBootstrap {
    fn config_schema() -> String {
        include_str!("schema.json").to_owned()
    }

    fn generate(request: GenerateRequest) -> Result<BootstrapData, ProviderError> {
        let config = config::with_token(config::parse(&request.config)?, || {
            join_token().map(|t| format!("{}.{}", t.id, t.secret))
        })?;
        let cloud_config = cloud_config::render(&config, &request.cluster)?;
        log::info(
            "rendered kubeadm cloud-config",
            &[
                ("mode", config.mode.as_str()),
                ("owner", &request.owner_name),
            ],
        );
        Ok(BootstrapData {
            format: BootstrapFormat::CloudConfig,
            value: cloud_config.into_bytes(),
        })
    }
}

capwasm_provider_sdk::export_bootstrap_provider!(KubeadmBootstrap);

#[cfg(test)]
mod tests {
    use serde_json::Value;

    #[test]
    fn schema_is_a_strict_json_schema_object() {
        let schema: Value =
            serde_json::from_str(include_str!("schema.json")).expect("schema is JSON");
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], serde_json::json!(["mode"]));
    }
}
