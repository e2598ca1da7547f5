//! `capwasm sim-cloud`: the simulated cloud sim-infrastructure provisions
//! in, served until Ctrl-C or SIGTERM.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::simcloud::{Settings, SimCloud};

/// Flags of `capwasm sim-cloud`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
API (what sim-infrastructure calls; point its config's endpoint at the printed URL):
  POST   /v1/regions/{region}/instances
  GET    /v1/regions/{region}/instances?pool=<namespace>/<name>
  DELETE /v1/regions/{region}/instances/{id}
  GET    /v1/instance-types/{name}   (small, medium, large, small-arm, gpu)

Instances are pending for --boot-delay, then running; with --kubeconfig each
running instance gets a Node (its providerID, Ready) in that cluster, deleted
once the instance stops running. Bootstrap data a machine could not run (empty,
cloud-config without #cloud-config, a script without #!, Ignition that is not
an Ignition config) makes an instance that ends `failed`, as a node that never
joins would.")]
pub struct Args {
    /// Where to serve the API. Use port 0 for a free port (the URL printed
    /// says which). A non-loopback address needs --bearer-token-file.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8081")]
    listen: SocketAddr,
    /// Kubeconfig of the workload cluster to register Nodes in, as kubelets
    /// on the instances would. Without it, no Nodes.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// How long an instance stays pending before it runs (and its Node is Ready),
    /// such as `500ms`, `3s` or `1m`.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    boot_delay: Duration,
    /// How long a deleted instance stays listed as terminating.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    termination_delay: Duration,
    /// Instances the cloud holds at most; creating more is answered 429.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    max_instances: usize,
    /// A file holding the token every request must carry as
    /// `Authorization: Bearer <token>` (give sim-infrastructure the same
    /// token as its `token` credential).
    #[arg(long, value_name = "FILE")]
    bearer_token_file: Option<PathBuf>,
}

/// How long the workload cluster's API server gets to answer at start-up.
const STARTUP_CHECK: Duration = Duration::from_secs(15);

pub fn run(args: &Args) -> anyhow::Result<()> {
    let bearer_token = args
        .bearer_token_file
        .as_deref()
        .map(read_token)
        .transpose()?;
    // Anyone who can reach an open API can create instances, and with
    // --kubeconfig Nodes in a real cluster.
    if !args.listen.ip().is_loopback() && bearer_token.is_none() {
        bail!(
            "refusing to serve on {} without authentication: pass --bearer-token-file, or listen on a loopback address",
            args.listen
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(args, bearer_token))
}

async fn serve(args: &Args, bearer_token: Option<String>) -> anyhow::Result<()> {
    let nodes = match &args.kubeconfig {
        Some(path) => Some(workload_client(path).await?),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {} (--listen)", args.listen))?;
    let addr = listener
        .local_addr()
        .context("cannot read the address listened on")?;
    let cloud = SimCloud::new(Settings {
        boot_delay: args.boot_delay,
        termination_delay: args.termination_delay,
        max_instances: args.max_instances,
        bearer_token,
        nodes,
        ..Settings::default()
    });
    // The URL on stdout, alone on its line, for people and for scripts waiting on it.
    let mut out = std::io::stdout().lock();
    writeln!(out, "sim-cloud serving http://{addr}")?;
    out.flush().context("cannot write to stdout")?;
    drop(out);
    tracing::info!(
        endpoint = %format_args!("http://{addr}"),
        nodes = args.kubeconfig.is_some(),
        "sim-cloud is running; Ctrl-C to stop"
    );
    cloud
        .serve(listener, super::run::shutdown_signal())
        .await
        .context("the simulated cloud stopped")?;
    tracing::info!("sim-cloud stopped");
    Ok(())
}

fn read_token(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the bearer token file {}", path.display()))?;
    // Files written by `echo` end with a newline that is not part of the token.
    let token = text.trim();
    if token.is_empty() {
        bail!("the bearer token file {} is empty", path.display());
    }
    Ok(token.to_owned())
}

/// A client of the workload cluster, checked to answer, so that a wrong
/// kubeconfig fails now rather than as retried Node registrations later.
async fn workload_client(path: &std::path::Path) -> anyhow::Result<kube::Client> {
    let client = super::run::client(Some(path)).await?;
    match tokio::time::timeout(STARTUP_CHECK, client.apiserver_version()).await {
        Err(_) => bail!(
            "the workload cluster's API server in {} did not answer within {STARTUP_CHECK:?}: is the cluster up?",
            path.display()
        ),
        // The answer, not kube's Debug dump of it.
        Ok(Err(kube::Error::Api(status))) => bail!(
            "the workload cluster's API server in {} answered {} {}: {}; are the kubeconfig's credentials right?",
            path.display(),
            status.code,
            status.reason,
            status.message
        ),
        Ok(Err(e)) => Err(anyhow::Error::new(e).context(format!(
            "cannot reach the workload cluster's API server in {}: is the cluster up, and is the kubeconfig right?",
            path.display()
        ))),
        Ok(Ok(_)) => Ok(client),
    }
}

/// `500ms`, `3s`, `2m`, or `0`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration such as 500ms, 3s or 1m"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(number)),
        "s" => Ok(Duration::from_secs(number)),
        "m" => Ok(Duration::from_secs(number.saturating_mul(60))),
        _ => Err(format!(
            "`{text}` has no unit ms, s or m (such as 500ms, 3s or 1m)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_duration_reads_milliseconds_seconds_and_minutes() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("3s"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
    }

    #[test]
    fn parse_duration_refuses_missing_units_and_garbage() {
        assert!(parse_duration("3").unwrap_err().contains("no unit"));
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("1h").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
