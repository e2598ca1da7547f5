//! What the flags configure: the operator, its provider runtime, its
//! webhook and its place in leader election.

use std::time::Duration;

use super::args::{Args, Which};
use crate::api::{WEBHOOK_PATH, WebhookClient};
use crate::controllers::shard::Shard;
use crate::controllers::{Controllers, Settings};
use crate::oci::Puller;
use crate::operator::Config;
use crate::wasm::{PrecompiledCache, RuntimeSettings, bounds};
use crate::webhook;

/// The operator's configuration from the flags: which controllers, their
/// settings and the provider runtime's.
pub(super) fn operator_config(args: &Args, shard: Shard, namespace: &str) -> Config {
    Config {
        controllers: match args.controllers {
            Which::All => Controllers::All,
            Which::Providers => Controllers::Providers,
        },
        settings: Settings {
            instance: args.instance.clone(),
            credentials_namespace: match args.credentials_namespace.as_deref() {
                Some("*") => None,
                Some(namespace) => Some(namespace.to_owned()),
                None => Some(namespace.to_owned()),
            },
            shard,
            concurrency: args.concurrency,
            bootstrap_token_ttl: Duration::from_secs(u64::from(args.bootstrap_token_ttl_seconds)),
            oci: Puller {
                deadline: Duration::from_secs(u64::from(args.oci_pull_deadline_seconds)),
                ..Puller::default()
            },
            ..Settings::default()
        },
        runtime: runtime_settings(args),
        ..Config::default()
    }
}

/// The operator's namespace (the leader Lease's, and by default the one
/// provider credentials are read from): `given`, or the pod's own, or
/// `capwasm-system`.
pub(super) fn operator_namespace(given: Option<&str>) -> String {
    given.map_or_else(
        || {
            std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                .map(|ns| ns.trim().to_owned())
                .ok()
                .filter(|ns| !ns.is_empty())
                .unwrap_or_else(|| "capwasm-system".into())
        },
        str::to_owned,
    )
}

/// The provider runtime's settings from the flags.
pub(super) fn runtime_settings(args: &Args) -> RuntimeSettings {
    RuntimeSettings {
        max_memory_bytes: args.max_provider_memory_mib << 20,
        max_instances: args.max_provider_instances,
        guest_memory_budget_bytes: args.guest_memory_budget_mib.map(|mib| (mib as usize) << 20),
        max_calls_per_provider: args
            .max_calls_per_provider
            .unwrap_or(bounds::calls_per_provider(args.concurrency)),
        provider_cpu_share: args.provider_cpu_share,
        cache: args.cache_dir.as_deref().map(PrecompiledCache::new),
        ..RuntimeSettings::default()
    }
}

/// The conversion webhook's settings from the flags.
pub(super) fn webhook_settings(args: &Args, namespace: &str) -> webhook::Settings {
    webhook::Settings {
        bind: args.webhook_bind_address,
        namespace: namespace.to_owned(),
        secret: args.webhook_cert_secret.clone(),
        endpoint: args.webhook_url.clone().map_or_else(
            || WebhookClient::Service {
                name: args.webhook_service.clone(),
                namespace: namespace.to_owned(),
                path: Some(WEBHOOK_PATH.into()),
                port: Some(443),
            },
            WebhookClient::Url,
        ),
        validity: webhook::Validity {
            serving: Duration::from_secs(args.webhook_cert_validity_seconds),
            ca: Duration::from_secs(args.webhook_ca_validity_seconds),
        },
    }
}

/// This replica's identity in the Lease: its pod name, or host name and process id.
pub(super) fn identity(args: &Args) -> String {
    args.instance.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), std::process::id())
    })
}
