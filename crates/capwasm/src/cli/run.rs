//! `capwasm run`: the operator, with `/metrics`, `/healthz` and `/readyz`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use kube::api::ListParams;
use kube::{Api, Client};
use prometheus_client::registry::Registry;

use crate::api::{MachinePool, WEBHOOK_PATH, WebhookClient};
use crate::controllers::shard::{Shard, ShardError};
use crate::controllers::{Controllers, Settings};
use crate::leader::{self, Election};
use crate::oci::Puller;
use crate::operator::{Config, Operator};
use crate::readiness::Readiness;
use crate::wasm::{PrecompiledCache, RuntimeSettings, bounds};
use crate::webhook;

/// Flags of `capwasm run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which controllers to run: `all` (standalone), or `providers` only
    /// (ProviderModule and the Wasm provider kinds, beside upstream Cluster API).
    #[arg(long, value_enum, default_value_t = Which::All)]
    controllers: Which,
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    metrics_bind_address: SocketAddr,
    /// A kubeconfig file; otherwise the in-cluster config, $KUBECONFIG or ~/.kube/config.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Where compiled provider components are kept, so a restart does not recompile.
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// The most memory any provider may be given, in MiB.
    #[arg(long, default_value_t = bounds::MAX_PROVIDER_MEMORY_MIB, value_name = "MIB")]
    max_provider_memory_mib: usize,
    /// Provider calls that may run at once (more wait for a slot). Times
    /// --max-provider-memory-mib, the most memory guests can ever hold.
    #[arg(long, default_value_t = bounds::MAX_PROVIDER_INSTANCES, value_name = "N",
          value_parser = clap::value_parser!(u32).range(
              i64::from(bounds::MAX_PROVIDER_INSTANCES_MIN)..=i64::from(bounds::MAX_PROVIDER_INSTANCES_MAX)))]
    max_provider_instances: u32,
    /// Linear memory all provider calls together may hold, in MiB, so that
    /// the process's memory has a bound whatever its guests do; a call that
    /// would cross it waits, within its deadline, for memory to come back.
    /// Unset: only each provider's own limit bounds it.
    #[arg(long, value_name = "MIB",
          value_parser = clap::value_parser!(u32).range(
              i64::from(bounds::GUEST_MEMORY_BUDGET_MIB_MIN)..=i64::from(bounds::GUEST_MEMORY_BUDGET_MIB_MAX)))]
    guest_memory_budget_mib: Option<u32>,
    /// Calls of one provider that may run at once (default: a quarter of
    /// --concurrency); a call that finds none of its turns free within
    /// 250 ms (or finds them all held longer than that) is refused as busy
    /// and its object comes back in about a
    /// second, so that one provider's calls running to their deadline hold
    /// at most that many of a controller's workers.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(
              i64::from(bounds::MAX_CALLS_PER_PROVIDER_MIN)..=i64::from(bounds::MAX_CALLS_PER_PROVIDER_MAX)))]
    max_calls_per_provider: Option<u32>,
    /// The share of a core one provider's calls may compute, beyond a
    /// 2-second burst; a call past it waits at its next 10 ms tick.
    #[arg(long, default_value_t = bounds::PROVIDER_CPU_SHARE, value_name = "CORES")]
    provider_cpu_share: f64,
    /// Reconciles each controller runs at once (as upstream's
    /// --machinepool-concurrency); more wait in its queue.
    #[arg(long, default_value_t = bounds::CONCURRENCY, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..))]
    concurrency: u16,
    /// How long one pull of a ProviderModule's OCI image may take, its
    /// tag, manifest, signatures and component together; a registry still
    /// sending then is given up on (`PullTimedOut`).
    #[arg(long, default_value_t = 60, value_name = "SECONDS",
          value_parser = clap::value_parser!(u32).range(1..=3600))]
    oci_pull_deadline_seconds: u32,
    /// How long a bootstrap token the operator makes in a workload cluster
    /// is valid; it is extended by as much while its pool has machines to
    /// join, then left to expire (kubeadm's 15 minutes by default).
    #[arg(long, default_value_t = 900, value_name = "SECONDS",
          value_parser = clap::value_parser!(u32).range(10..=86_400))]
    bootstrap_token_ttl_seconds: u32,
    /// The pod's name, for Events and the leader Lease (from the downward API in a Deployment).
    #[arg(long, value_name = "NAME")]
    instance: Option<String>,
    /// Run the controllers only while holding the leader Lease, so that
    /// several replicas can run with one active.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    leader_elect: bool,
    /// Split the fleet into this many shards, each run by its own
    /// replica(s) with --shard-index: a Cluster and all its objects go to
    /// the shard a stable hash of its namespace/name picks.
    #[arg(long, default_value_t = 1, value_name = "N")]
    shards: u32,
    /// Which shard this replica runs, from 0 (a StatefulSet's pod ordinal, say).
    #[arg(long, default_value_t = 0, value_name = "I")]
    shard_index: u32,
    /// The namespace of the leader Lease; by default the pod's own, else `capwasm-system`.
    #[arg(long, value_name = "NAMESPACE")]
    leader_election_namespace: Option<String>,
    /// The only namespace ProviderModule credentials Secrets are read from;
    /// by default the operator's own (as for the Lease). `*` allows any.
    #[arg(long, value_name = "NAMESPACE")]
    credentials_namespace: Option<String>,
    /// Where the webhook listens (standalone mode only): the conversion of
    /// `cluster.x-k8s.io/v1beta1`, and the admission of PlatformCluster
    /// template changes (at `/validate-platformcluster`).
    #[arg(long, default_value = "127.0.0.1:9443", value_name = "ADDR")]
    webhook_bind_address: SocketAddr,
    /// The Secret in the operator's namespace holding the webhook's
    /// certificate (`tls.crt`, `tls.key`, `ca.crt`, `ca.key`); generated if
    /// missing, renewed before it expires.
    #[arg(long, default_value = "capwasm-webhook-cert", value_name = "NAME")]
    webhook_cert_secret: String,
    /// The Service in the operator's namespace the API server calls the
    /// webhook through (port 443).
    #[arg(long, default_value = "capwasm-webhook", value_name = "NAME")]
    webhook_service: String,
    /// Call the webhook at this URL instead (`https://host:port/convert`;
    /// the admission webhook at the same host and port),
    /// for an operator running outside the cluster.
    #[arg(long, value_name = "URL", conflicts_with = "webhook_service")]
    webhook_url: Option<String>,
    /// How long the webhook's serving certificate is valid, in seconds
    /// (a year); renewed once less than a third remains. Advanced: for tests.
    #[arg(long, hide = true, default_value_t = 365 * DAY, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(3..))]
    webhook_cert_validity_seconds: u64,
    /// How long the webhook's CA is valid, in seconds (ten years); replaced
    /// once less than a third remains. Advanced: for tests.
    #[arg(long, hide = true, default_value_t = 10 * 365 * DAY, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(3..))]
    webhook_ca_validity_seconds: u64,
    /// Send every span (reconciles, provider calls) to this OpenTelemetry
    /// collector over OTLP/HTTP (protobuf), at `/v1/traces` of it
    /// (`http://collector:4318`). Off by default.
    #[arg(long, value_name = "URL", value_parser = super::telemetry::parse_otlp_endpoint)]
    pub(super) otlp_endpoint: Option<String>,
}

impl Args {
    /// The shard these flags ask for.
    pub(super) fn shard(&self) -> Result<Shard, ShardError> {
        Shard::new(self.shard_index, self.shards)
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Which {
    All,
    Providers,
}

/// A day, in seconds.
const DAY: u64 = 24 * 3600;

/// How long the API server gets to answer at start-up.
const STARTUP_CHECK: Duration = Duration::from_secs(15);

pub fn run(args: &Args) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: &Args) -> anyhow::Result<()> {
    let shard = args.shard()?;
    if !(args.provider_cpu_share > 0.0 && args.provider_cpu_share.is_finite()) {
        bail!("--provider-cpu-share must be a number of cores above 0, such as 0.5");
    }
    if shard.count() > 1 && !args.leader_elect {
        bail!(
            "--shards needs --leader-elect: a shard's Lease is what keeps two replicas from running it at once"
        );
    }
    let kube = kube_config(args.kubeconfig.as_deref()).await?;
    let client = Client::try_from(kube.clone()).context("cannot build a Kubernetes client")?;
    check_api_server(&client).await?;
    let namespace = operator_namespace(args.leader_election_namespace.as_deref());
    let config = Config {
        controllers: match args.controllers {
            Which::All => Controllers::All,
            Which::Providers => Controllers::Providers,
        },
        settings: Settings {
            instance: args.instance.clone(),
            credentials_namespace: match args.credentials_namespace.as_deref() {
                Some("*") => None,
                Some(namespace) => Some(namespace.to_owned()),
                None => Some(namespace.clone()),
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
    };
    let election_client = client.clone();
    let operator = Operator::new(kube, config).context("cannot start the operator")?;
    // Every replica serves the webhook, leader or not: the Service picks any.
    let webhook = matches!(args.controllers, Which::All).then(|| {
        tokio::spawn(webhook::run(
            client,
            webhook_settings(args, &namespace),
            operator.context().metrics.clone(),
            operator.context().runtime.clone(),
            operator.readiness().check("webhook"),
        ))
    });
    let listener = tokio::net::TcpListener::bind(args.metrics_bind_address)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} (--metrics-bind-address)",
                args.metrics_bind_address
            )
        })?;
    let app = router(operator.registry(), operator.readiness());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    tracing::info!(
        controllers = ?args.controllers,
        metrics = %args.metrics_bind_address,
        shard = shard.index(),
        shards = shard.count(),
        "capwasm is running"
    );
    let result = if args.leader_elect {
        let election = Election::of_shard(namespace, identity(args), shard);
        lead(operator, election_client, &election).await
    } else {
        let filled = operator.readiness().check("caches");
        operator.run(filled, shutdown_signal()).await;
        Ok(())
    };
    server.abort();
    if let Some(webhook) = webhook {
        webhook.abort();
    }
    tracing::info!("capwasm stopped");
    result
}

/// Runs the controllers while this replica holds `election`'s Lease: an
/// error once it is lost, so that only the new leader reconciles.
async fn lead(operator: Operator, client: Client, election: &Election) -> anyhow::Result<()> {
    let metrics = operator.context().metrics.clone();
    metrics.leader(&election.lease, false);
    let mut leadership = tokio::select! {
        leadership = leader::acquire(client, election) => leadership?,
        () = shutdown_signal() => return Ok(()),
    };
    let filled = operator.readiness().check("caches");
    tracing::info!(
        lease = election.lease,
        identity = election.identity,
        "became the leader"
    );
    metrics.leader(&election.lease, true);
    let lost = tokio::select! {
        () = operator.run(filled, shutdown_signal()) => false,
        () = leadership.lost() => true,
    };
    if lost {
        return Err(anyhow::anyhow!(
            "lost the leader Lease {}/{}: exiting so that only the new leader reconciles",
            election.namespace,
            election.lease
        ));
    }
    leadership.release().await;
    metrics.leader(&election.lease, false);
    Ok(())
}

/// The operator's namespace (the leader Lease's, and by default the one
/// provider credentials are read from): `given`, or the pod's own, or
/// `capwasm-system`.
fn operator_namespace(given: Option<&str>) -> String {
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
fn runtime_settings(args: &Args) -> RuntimeSettings {
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
fn webhook_settings(args: &Args, namespace: &str) -> webhook::Settings {
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
fn identity(args: &Args) -> String {
    args.instance.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), std::process::id())
    })
}

pub(super) async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<Client> {
    let config = kube_config(kubeconfig).await?;
    Client::try_from(config).context("cannot build a Kubernetes client")
}

/// The client configuration: from `kubeconfig`, or inferred.
async fn kube_config(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Config> {
    match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("cannot use the kubeconfig {}", path.display()))
        }
        None => kube::Config::infer()
            .await
            .context("no Kubernetes configuration found: pass --kubeconfig, set KUBECONFIG, or run in a cluster"),
    }
}

/// Fails early, saying what to do, if the API server does not answer or
/// the CRDs are not installed.
async fn check_api_server(client: &Client) -> anyhow::Result<()> {
    match tokio::time::timeout(STARTUP_CHECK, client.apiserver_version()).await {
        Err(_) => bail!(
            "the Kubernetes API server did not answer within {STARTUP_CHECK:?}: is the cluster up, and is the kubeconfig right?"
        ),
        Ok(Err(e)) => {
            return Err(anyhow::Error::new(e).context("cannot reach the Kubernetes API server: is the cluster up, and is the kubeconfig right?"));
        }
        Ok(Ok(_)) => {}
    }
    let pools: Api<MachinePool> = Api::all(client.clone());
    match pools.list(&ListParams::default().limit(1)).await {
        Err(kube::Error::Api(status)) if status.code == 404 => {
            bail!(
                "the capwasm CRDs are not installed: run `capwasm crds | kubectl apply --server-side -f -`"
            )
        }
        Err(e) => Err(anyhow::Error::new(e).context("cannot list MachinePools")),
        Ok(_) => Ok(()),
    }
}

/// `/healthz` answers as soon as the server does (liveness stays cheap);
/// `/readyz` once every readiness check holds: the webhook serving, on
/// every replica, and the caches filled, on the one reconciling.
fn router(registry: Arc<Registry>, readiness: Readiness) -> Router {
    Router::new()
        .route("/metrics", get(metrics).with_state(registry))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz).with_state(readiness))
}

async fn readyz(State(readiness): State<Readiness>) -> impl IntoResponse {
    let (ready, text) = readiness.report();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, [(header::CONTENT_TYPE, "text/plain")], text)
}

async fn metrics(State(registry): State<Arc<Registry>>) -> impl IntoResponse {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        ),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain")],
            "cannot encode the metrics".to_owned(),
        ),
    }
}

/// Ctrl-C or SIGTERM.
pub(super) async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            let _ = ctrl_c.await;
            return;
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
