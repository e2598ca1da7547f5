//! `capwasm run`: the operator, with `/metrics`, `/healthz` and `/readyz`.
//! Its flags (`args`), what they configure (`settings`), reaching the API
//! server (`connect`), the HTTP endpoints (`http`); here, the run itself:
//! start, lead or serve, stop.

mod args;
mod connect;
mod http;
mod settings;

use anyhow::{Context as _, bail};
use kube::Client;

pub use args::Args;
use args::Which;
pub(super) use connect::client;
use connect::{check_api_server, kube_config};
use http::router;
use settings::{identity, operator_config, operator_namespace, webhook_settings};

use crate::leader::{self, Election};
use crate::operator::Operator;
use crate::webhook;

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
    let mut config = operator_config(args, shard, &namespace);
    if let Some(path) = &args.trusted_root {
        let json = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read --trusted-root {}", path.display()))?;
        let trust = crate::oci::Trust::from_json(path.display().to_string(), &json)
            .context("--trusted-root is not a usable Sigstore trusted root")?;
        config.settings.trusted_root = Some(std::sync::Arc::new(trust));
    }
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
