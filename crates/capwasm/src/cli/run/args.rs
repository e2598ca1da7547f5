//! The flags of `capwasm run`.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::controllers::shard::{Shard, ShardError};
use crate::wasm::bounds;

/// Flags of `capwasm run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which controllers to run: `all` (standalone), or `providers` only
    /// (ProviderModule and the Wasm provider kinds, beside upstream Cluster API).
    #[arg(long, value_enum, default_value_t = Which::All)]
    pub(super) controllers: Which,
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub(super) metrics_bind_address: SocketAddr,
    /// A kubeconfig file; otherwise the in-cluster config, $KUBECONFIG or ~/.kube/config.
    #[arg(long, value_name = "FILE")]
    pub(super) kubeconfig: Option<PathBuf>,
    /// Where compiled provider components are kept, so a restart does not recompile.
    #[arg(long, value_name = "DIR")]
    pub(super) cache_dir: Option<PathBuf>,
    /// The most memory any provider may be given, in MiB.
    #[arg(long, default_value_t = bounds::MAX_PROVIDER_MEMORY_MIB, value_name = "MIB")]
    pub(super) max_provider_memory_mib: usize,
    /// Provider calls that may run at once (more wait for a slot). Times
    /// --max-provider-memory-mib, the most memory guests can ever hold.
    #[arg(long, default_value_t = bounds::MAX_PROVIDER_INSTANCES, value_name = "N",
          value_parser = clap::value_parser!(u32).range(
              i64::from(bounds::MAX_PROVIDER_INSTANCES_MIN)..=i64::from(bounds::MAX_PROVIDER_INSTANCES_MAX)))]
    pub(super) max_provider_instances: u32,
    /// Linear memory all provider calls together may hold, in MiB, so that
    /// the process's memory has a bound whatever its guests do; a call that
    /// would cross it waits, within its deadline, for memory to come back.
    /// Unset: only each provider's own limit bounds it.
    #[arg(long, value_name = "MIB",
          value_parser = clap::value_parser!(u32).range(
              i64::from(bounds::GUEST_MEMORY_BUDGET_MIB_MIN)..=i64::from(bounds::GUEST_MEMORY_BUDGET_MIB_MAX)))]
    pub(super) guest_memory_budget_mib: Option<u32>,
    /// Calls of one provider that may run at once (default: a quarter of
    /// --concurrency); a call that finds none of its turns free within
    /// 250 ms (or finds them all held longer than that) is refused as busy
    /// and its object comes back in about a
    /// second, so that one provider's calls running to their deadline hold
    /// at most that many of a controller's workers.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(
              i64::from(bounds::MAX_CALLS_PER_PROVIDER_MIN)..=i64::from(bounds::MAX_CALLS_PER_PROVIDER_MAX)))]
    pub(super) max_calls_per_provider: Option<u32>,
    /// The share of a core one provider's calls may compute, beyond a
    /// 2-second burst; a call past it waits at its next 10 ms tick.
    #[arg(long, default_value_t = bounds::PROVIDER_CPU_SHARE, value_name = "CORES")]
    pub(super) provider_cpu_share: f64,
    /// Reconciles each controller runs at once (as upstream's
    /// --machinepool-concurrency); more wait in its queue.
    #[arg(long, default_value_t = bounds::CONCURRENCY, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub(super) concurrency: u16,
    /// How long one pull of a ProviderModule's OCI image may take, its
    /// tag, manifest, signatures and component together; a registry still
    /// sending then is given up on (`PullTimedOut`).
    #[arg(long, default_value_t = 60, value_name = "SECONDS",
          value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub(super) oci_pull_deadline_seconds: u32,
    /// A Sigstore `trusted_root.json` (Fulcio certificate authorities,
    /// timestamp authorities, logs): what keyless signers are checked
    /// against when a ProviderModule names no `verification.trustedRoot`.
    #[arg(long, value_name = "FILE")]
    pub(super) trusted_root: Option<std::path::PathBuf>,
    /// How long a bootstrap token the operator makes in a workload cluster
    /// is valid; it is extended by as much while its pool has machines to
    /// join, then left to expire (kubeadm's 15 minutes by default).
    #[arg(long, default_value_t = 900, value_name = "SECONDS",
          value_parser = clap::value_parser!(u32).range(10..=86_400))]
    pub(super) bootstrap_token_ttl_seconds: u32,
    /// The pod's name, for Events and the leader Lease (from the downward API in a Deployment).
    #[arg(long, value_name = "NAME")]
    pub(super) instance: Option<String>,
    /// Run the controllers only while holding the leader Lease, so that
    /// several replicas can run with one active.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub(super) leader_elect: bool,
    /// Split the fleet into this many shards, each run by its own
    /// replica(s) with --shard-index: a Cluster and all its objects go to
    /// the shard a stable hash of its namespace/name picks.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub(super) shards: u32,
    /// Which shard this replica runs, from 0 (a StatefulSet's pod ordinal, say).
    #[arg(long, default_value_t = 0, value_name = "I")]
    pub(super) shard_index: u32,
    /// The namespace of the leader Lease; by default the pod's own, else `capwasm-system`.
    #[arg(long, value_name = "NAMESPACE")]
    pub(super) leader_election_namespace: Option<String>,
    /// The only namespace ProviderModule credentials Secrets are read from;
    /// by default the operator's own (as for the Lease). `*` allows any.
    #[arg(long, value_name = "NAMESPACE")]
    pub(super) credentials_namespace: Option<String>,
    /// Where the webhook listens (standalone mode only): the conversion of
    /// `cluster.x-k8s.io/v1beta1`, and the admission of PlatformCluster
    /// template changes (at `/validate-platformcluster`).
    #[arg(long, default_value = "127.0.0.1:9443", value_name = "ADDR")]
    pub(super) webhook_bind_address: SocketAddr,
    /// The Secret in the operator's namespace holding the webhook's
    /// certificate (`tls.crt`, `tls.key`, `ca.crt`, `ca.key`); generated if
    /// missing, renewed before it expires.
    #[arg(long, default_value = "capwasm-webhook-cert", value_name = "NAME")]
    pub(super) webhook_cert_secret: String,
    /// The Service in the operator's namespace the API server calls the
    /// webhook through (port 443).
    #[arg(long, default_value = "capwasm-webhook", value_name = "NAME")]
    pub(super) webhook_service: String,
    /// Call the webhook at this URL instead (`https://host:port/convert`;
    /// the admission webhook at the same host and port),
    /// for an operator running outside the cluster.
    #[arg(long, value_name = "URL", conflicts_with = "webhook_service")]
    pub(super) webhook_url: Option<String>,
    /// How long the webhook's serving certificate is valid, in seconds
    /// (a year); renewed once less than a third remains. Advanced: for tests.
    #[arg(long, hide = true, default_value_t = 365 * DAY, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(3..))]
    pub(super) webhook_cert_validity_seconds: u64,
    /// How long the webhook's CA is valid, in seconds (ten years); replaced
    /// once less than a third remains. Advanced: for tests.
    #[arg(long, hide = true, default_value_t = 10 * 365 * DAY, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(3..))]
    pub(super) webhook_ca_validity_seconds: u64,
    /// Send every span (reconciles, provider calls) to this OpenTelemetry
    /// collector over OTLP/HTTP (protobuf), at `/v1/traces` of it
    /// (`http://collector:4318`). Off by default.
    #[arg(long, value_name = "URL", value_parser = crate::cli::telemetry::parse_otlp_endpoint)]
    pub(in crate::cli) otlp_endpoint: Option<String>,
}

impl Args {
    /// The shard these flags ask for.
    pub(in crate::cli) fn shard(&self) -> Result<Shard, ShardError> {
        Shard::new(self.shard_index, self.shards)
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(super) enum Which {
    All,
    Providers,
}

/// A day, in seconds.
const DAY: u64 = 24 * 3600;
