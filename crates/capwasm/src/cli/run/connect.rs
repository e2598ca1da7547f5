//! Reaching the API server: the client, and the check at start-up that it
//! answers and serves capwasm's CRDs.

use std::time::Duration;

use anyhow::{Context as _, bail};
use kube::api::ListParams;
use kube::{Api, Client};

use crate::api::MachinePool;

/// How long the API server gets to answer at start-up.
const STARTUP_CHECK: Duration = Duration::from_secs(15);

pub(in crate::cli) async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<Client> {
    let config = kube_config(kubeconfig).await?;
    Client::try_from(config).context("cannot build a Kubernetes client")
}

/// The client configuration: from `kubeconfig`, or inferred.
pub(super) async fn kube_config(
    kubeconfig: Option<&std::path::Path>,
) -> anyhow::Result<kube::Config> {
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
pub(super) async fn check_api_server(client: &Client) -> anyhow::Result<()> {
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
