//! Hostile test guest: a pool reconcile returns a result that breaks the
//! contract, the way `mode` in the config says. The host must refuse the
//! result whole, naming the rule and the field, and write nothing of it:
//!
//! - `controlChars`: a providerID with an escape sequence, NUL and CR/LF;
//! - `duplicateIds`: the same instance three times;
//! - `foreignScheme`: a well-formed providerID of another cloud
//!   (`aws:///…`), which `owns` claims as it claims every one;
//! - `tooMany`: 100,000 instances, whatever the replicas;
//! - `longId`: a 10 KB providerID;
//! - `emptyAddresses`: one instance with 2,000,000 empty addresses (light
//!   in bytes, heavy in the host's memory);
//! - `wide`: `replicas` instances of its own, each with 32 addresses of
//!   250 bytes: within every rule for one instance, too much for a status
//!   when there are many;
//! - `claim`: one running instance for each of `providerIDs` (a control
//!   plane's, another cloud's): Nodes it never made;
//! - `fine`: `replicas` running instances with providerIDs of its own.
//!
//! Whatever the mode, `remove` answers that every instance still runs.
#![no_std]

extern crate alloc;

use capwasm_provider_sdk::config;
use capwasm_provider_sdk::infrastructure::{
    InfrastructureProvider, PoolDeleteRequest, PoolReconcileRequest, PoolRemoveRequest, PoolState,
};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{
    Address, AddressType, DeleteOutcome, Instance, InstanceState, ProviderError,
};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    mode: String,
    #[serde(default, rename = "providerIDs")]
    provider_ids: Vec<String>,
}

fn instance(id: String, provider_id: String) -> Instance {
    Instance {
        id,
        provider_id,
        state: InstanceState::Running,
        failure_domain: None,
        addresses: Vec::new(),
        request_token: None,
    }
}

fn own(i: u32, pool: &str) -> Instance {
    instance(format!("i-{i}"), format!("hostile://{pool}/i-{i}"))
}

struct BadResults;

impl InfrastructureProvider for BadResults {
    fn config_schema() -> String {
        r#"{"type": "object", "additionalProperties": false, "required": ["mode"],
            "properties": {"mode": {"enum": ["controlChars", "duplicateIds", "foreignScheme",
                "tooMany", "longId", "emptyAddresses", "wide", "claim", "fine"]},
                "providerIDs": {"type": "array", "items": {"type": "string"}, "maxItems": 16}}}"#
            .to_owned()
    }

    fn reconcile_machine_pool(request: PoolReconcileRequest) -> Result<PoolState, ProviderError> {
        let config: Config = config::parse(&request.config)?;
        let pool = request.pool.name.as_str();
        let instances = match config.mode.as_str() {
            "controlChars" => vec![instance(
                "i-0".into(),
                format!("hostile://{pool}/\u{1b}[31mred\u{0}\r\nX-Injected: yes"),
            )],
            "duplicateIds" => (0..3).map(|_| own(0, pool)).collect(),
            "foreignScheme" => vec![instance("i-0".into(), "aws:///us-east-1a/i-0abc".into())],
            "wide" => (0..request.replicas)
                .map(|i| {
                    let mut one = own(i, pool);
                    one.addresses = (0..32)
                        .map(|j| Address {
                            kind: AddressType::InternalDns,
                            address: alloc::format!("{j}-{}", "w".repeat(240)),
                        })
                        .collect();
                    one
                })
                .collect(),
            "claim" => (0u32..)
                .zip(config.provider_ids)
                .map(|(i, id)| instance(format!("i-{i}"), id))
                .collect(),
            "tooMany" => (0..100_000).map(|i| own(i, pool)).collect(),
            "longId" => vec![instance(
                "i-0".into(),
                format!("hostile://{pool}/{}", "x".repeat(10_000)),
            )],
            "emptyAddresses" => {
                let mut one = own(0, pool);
                one.addresses = (0..2_000_000)
                    .map(|_| Address {
                        kind: AddressType::InternalIp,
                        address: String::new(),
                    })
                    .collect();
                vec![one]
            }
            _ => (0..request.replicas).map(|i| own(i, pool)).collect(),
        };
        Ok(PoolState {
            instances,
            ready: true,
            requeue_after_seconds: None,
        })
    }

    /// Says it removed nothing: every instance as it was, running.
    fn remove_instances(request: PoolRemoveRequest) -> Result<PoolState, ProviderError> {
        let mut instances = request.instances;
        for one in &mut instances {
            one.state = InstanceState::Running;
        }
        Ok(PoolState {
            instances,
            ready: true,
            requeue_after_seconds: None,
        })
    }

    fn delete_machine_pool(_request: PoolDeleteRequest) -> Result<DeleteOutcome, ProviderError> {
        Ok(DeleteOutcome::Done)
    }

    /// Every providerID is its own, it says: the host must not take its word.
    fn owns(_provider_id: &str) -> bool {
        true
    }
}

capwasm_provider_sdk::export_infrastructure_provider!(BadResults);
