//! The operator as a library: everything `capwasm run` starts, built from
//! one [`Config`], so the binary and the tests run the same thing.

use std::future::Future;
use std::sync::Arc;

use prometheus_client::registry::Registry;

use crate::controllers::{self, Caches, Context, Controllers, Parts, Triggers};
use crate::readiness::Readiness;
use crate::wasm::{self, Runtime, RuntimeSettings};
use crate::workload::{self, NodeEvent, WorkloadClusters};

/// What to run, and how.
#[derive(Clone, Debug)]
pub struct Config {
    /// All controllers, or only the provider ones.
    pub controllers: Controllers,
    /// Controller settings.
    pub settings: controllers::Settings,
    /// Provider runtime settings.
    pub runtime: RuntimeSettings,
    /// Workload-cluster access settings.
    pub workload: workload::Settings,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            controllers: Controllers::All,
            settings: controllers::Settings::default(),
            runtime: RuntimeSettings::default(),
            workload: workload::Settings::default(),
        }
    }
}

/// Why the operator could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No client could be built from the kubeconfig.
    #[error("cannot build a Kubernetes client")]
    Client(#[source] kube::Error),
    /// The provider runtime could not start.
    #[error("cannot start the provider runtime")]
    Runtime(#[from] wasm::Error),
}

/// A built operator, ready to run.
pub struct Operator {
    context: Arc<Context>,
    triggers: Triggers,
    node_events: Box<dyn futures::Stream<Item = NodeEvent> + Send + Unpin>,
    registry: Arc<Registry>,
    controllers: Controllers,
    readiness: Readiness,
}

impl Operator {
    /// Builds the runtime, the workload-cluster access and the controllers'
    /// context on a client of `kube` (counting its requests), with every
    /// metric in one registry.
    pub fn new(kube: kube::Config, config: Config) -> Result<Self, Error> {
        let mut registry = Registry::default();
        let guest_metrics = wasm::Metrics::register(&mut registry);
        let metrics = controllers::Metrics::register(&mut registry);
        let host = kube
            .cluster_url
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default();
        let client = kube::client::ClientBuilder::try_from(kube)
            .map_err(Error::Client)?
            .with_layer(&metrics.requests.layer(&host))
            .build();
        let runtime = Runtime::new(config.runtime, Some(guest_metrics))?;
        let caches = Arc::new(Caches::new(&client, config.settings.shard));
        let (workload, node_events) = WorkloadClusters::new(
            client.clone(),
            caches.secrets.store().clone(),
            config.workload,
        );
        let parts = Parts {
            client,
            runtime,
            workload,
            caches,
        };
        let (context, triggers) = Context::new(parts, metrics, config.settings);
        let readiness = Readiness::default();
        registry.register_collector(Box::new(readiness.clone()));
        Ok(Self {
            context,
            triggers,
            node_events: Box::new(Box::pin(node_events)),
            registry: Arc::new(registry),
            controllers: config.controllers,
            readiness,
        })
    }

    /// The context the controllers share (its runtime, metrics, clients).
    pub fn context(&self) -> &Arc<Context> {
        &self.context
    }

    /// What `/readyz` answers: the caches once the process leads (the
    /// check given to [`Operator::run`]), and whatever else it registers
    /// (its webhook).
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    /// Every metric, for a `/metrics` endpoint.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }

    /// Runs the controllers until `shutdown` completes; provider calls in
    /// flight then are abandoned, so that the reconciles waiting on them end
    /// at once.
    /// `filled` holds once every cache has been filled; register it
    /// (`readiness().check("caches")`) before saying this replica leads, so
    /// that nobody sees it lead and ready before its caches are.
    pub async fn run(
        self,
        filled: crate::readiness::Check,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) {
        let runtime = self.context.runtime.clone();
        let shutdown = async move {
            shutdown.await;
            runtime.stop();
        };
        controllers::run(
            self.context,
            self.triggers,
            self.node_events,
            self.controllers,
            filled,
            shutdown,
        )
        .await;
    }
}
