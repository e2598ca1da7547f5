//! Access to workload clusters: a client per Cluster API Cluster, built from
//! its `<name>-kubeconfig` Secret, and a watched cache of its Nodes whose
//! changes come out of one stream, for mapping to MachinePools.
//!
//! Everything here is per [`ClusterKey`] and lives in [`WorkloadClusters`],
//! which the controllers share through their context. Nothing here knows
//! about MachinePools or WebAssembly.

mod bounded;
mod cluster;
mod error;
pub mod generated;
mod kubeconfig;
mod nodes;
mod secrets;
mod settings;
mod transport;
mod watch;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::Stream;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::Store;
use tokio::sync::mpsc;

pub use cluster::{ClusterKey, NodeEvent};
pub use error::{Error, Framing, InvalidKubeconfig, Measure, ResponseTooLarge, WatchFailure};
pub use nodes::{Nodes, is_control_plane};
use secrets::{KUBECONFIG_KEY, KubeconfigSecrets, SecretVersion};
pub use settings::Settings;
use watch::NodeWatch;

/// Workload-cluster access shared by all controllers. Cheap to clone; when
/// the last clone is dropped every Node watch stops.
#[derive(Clone)]
pub struct WorkloadClusters {
    shared: Arc<Shared>,
}

struct Shared {
    /// The kubeconfig Secrets, read when they changed.
    secrets: KubeconfigSecrets,
    settings: Settings,
    events: mpsc::UnboundedSender<NodeEvent>,
    connections: Mutex<HashMap<ClusterKey, Arc<Connection>>>,
}

/// The client of one workload cluster, built from one version of its
/// kubeconfig Secret, and its Node watch once someone asked for Nodes.
struct Connection {
    secret: SecretVersion,
    client: Client,
    watch: Mutex<Option<Arc<NodeWatch>>>,
}

impl WorkloadClusters {
    /// Workload-cluster access reading kubeconfig Secrets with `management`
    /// when `secrets` (a cache of labelled Secrets' metadata) says they
    /// changed, or does not hold them. Node events of every watched cluster
    /// come out of the returned stream, which is unbounded so that a slow
    /// consumer never stalls a watch; it ends once every clone of the
    /// returned value is dropped.
    pub fn new(
        management: Client,
        secrets: Store<PartialObjectMeta<Secret>>,
        settings: Settings,
    ) -> (Self, impl Stream<Item = NodeEvent> + Send + 'static) {
        let (events, receiver) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            secrets: KubeconfigSecrets::new(management, secrets),
            settings,
            events,
            connections: Mutex::new(HashMap::new()),
        });
        let stream = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|event| (event, receiver))
        });
        (Self { shared }, stream)
    }

    /// A client for the cluster's API server, built from Secret
    /// `<name>-kubeconfig` (key `value`) in the cluster's namespace.
    ///
    /// The client is built again when the Secret changed (and the Node
    /// watch, if running, restarted with it), and dropped when the Secret is
    /// gone or no longer usable.
    pub async fn client(&self, cluster: &ClusterKey) -> Result<Client, Error> {
        Ok(self.connection(cluster).await?.client.clone())
    }

    /// The cluster's Nodes. The first call starts a watch on them, whose
    /// changes go to the [`NodeEvent`] stream, and waits for its first list
    /// at most [`Settings::initial_list_timeout`]. If the watch's last
    /// attempt failed, answers [`Error::Unreachable`] at once.
    pub async fn nodes(&self, cluster: &ClusterKey) -> Result<Nodes, Error> {
        self.nodes_and_client(cluster).await.map(|(nodes, _)| nodes)
    }

    /// [`Self::nodes`], with the client to write to them: one look at the
    /// kubeconfig Secret for both.
    pub async fn nodes_and_client(&self, cluster: &ClusterKey) -> Result<(Nodes, Client), Error> {
        let connection = self.connection(cluster).await?;
        let watch = connection.watch(|| self.start_watch(cluster, &connection.client));
        let nodes = watch
            .nodes(self.shared.settings.initial_list_timeout)
            .await?;
        Ok((nodes, connection.client.clone()))
    }

    /// When the client certificate of the cluster's kubeconfig expires, if
    /// it has one (whether or not the kubeconfig is otherwise usable).
    pub async fn client_certificate_expiry(
        &self,
        cluster: &ClusterKey,
    ) -> Result<Option<Timestamp>, Error> {
        self.shared.secrets.client_certificate_expiry(cluster).await
    }

    /// Stops the cluster's Node watch and drops its client (the Cluster was
    /// deleted). A later call connects again.
    pub fn forget(&self, cluster: &ClusterKey) {
        self.shared.secrets.forget(cluster);
        if self.connections().remove(cluster).is_some() {
            tracing::info!(%cluster, "stopped workload cluster access");
        }
    }

    async fn connection(&self, cluster: &ClusterKey) -> Result<Arc<Connection>, Error> {
        let name = cluster.kubeconfig_secret_name();
        // The Secret is read only when the cache says it changed since the
        // client was built, or does not hold it (no cluster-name label).
        if let Some(version) = self.shared.secrets.cached_version(cluster)
            && let Some(connection) = self.connections().get(cluster)
            && connection.secret == version
        {
            return Ok(connection.clone());
        }
        let secret = self.shared.secrets.read(cluster).await?;
        let Some(secret) = secret else {
            self.disconnect(cluster, None, "the kubeconfig Secret is gone");
            return Err(Error::KubeconfigSecretNotFound {
                namespace: cluster.namespace.clone(),
                name,
            });
        };
        let version = SecretVersion::of(&secret.metadata);
        if let Some(connection) = self.connections().get(cluster)
            && connection.secret == version
        {
            return Ok(connection.clone());
        }
        match self.connect(cluster, &name, &secret).await {
            Ok(client) => Ok(self.install(cluster, version, client)),
            Err(error) => {
                self.disconnect(
                    cluster,
                    Some(&version),
                    "the kubeconfig Secret changed and is not usable",
                );
                Err(error)
            }
        }
    }

    /// Builds a client from the Secret's kubeconfig.
    async fn connect(
        &self,
        cluster: &ClusterKey,
        name: &str,
        secret: &Secret,
    ) -> Result<Client, Error> {
        let invalid = |source| Error::KubeconfigInvalid {
            namespace: cluster.namespace.clone(),
            name: name.to_owned(),
            source,
        };
        let value = secret
            .data
            .as_ref()
            .and_then(|data| data.get(KUBECONFIG_KEY))
            .ok_or_else(|| Error::KubeconfigMissingKey {
                namespace: cluster.namespace.clone(),
                name: name.to_owned(),
            })?;
        let config = kubeconfig::client_config(&value.0, &self.shared.settings)
            .await
            .map_err(invalid)?;
        transport::client(config).map_err(|source| invalid(InvalidKubeconfig::Client(source)))
    }

    /// Keeps `client` as the cluster's connection unless one of the same
    /// Secret version is already kept (a concurrent call built it), and
    /// restarts the Node watch on it if the replaced connection had one.
    fn install(
        &self,
        cluster: &ClusterKey,
        version: SecretVersion,
        client: Client,
    ) -> Arc<Connection> {
        let mut connections = self.connections();
        let previous = connections.get(cluster).cloned();
        if let Some(existing) = &previous
            && existing.secret == version
        {
            return existing.clone();
        }
        let connection = Arc::new(Connection {
            secret: version,
            client,
            watch: Mutex::new(None),
        });
        let rewatch = previous.as_ref().is_some_and(|old| old.is_watching());
        if rewatch {
            connection.watch(|| self.start_watch(cluster, &connection.client));
        }
        connections.insert(cluster.clone(), connection.clone());
        drop(connections);
        if previous.is_some() {
            tracing::info!(
                %cluster,
                node_watch_restarted = rewatch,
                "the kubeconfig Secret changed; rebuilt the workload cluster's client"
            );
        } else {
            tracing::debug!(%cluster, "built the workload cluster's client");
        }
        connection
    }

    /// Drops the cluster's connection, unless it was built from `keep`.
    fn disconnect(&self, cluster: &ClusterKey, keep: Option<&SecretVersion>, why: &'static str) {
        let mut connections = self.connections();
        let stale = connections
            .get(cluster)
            .is_some_and(|connection| Some(&connection.secret) != keep);
        if stale {
            connections.remove(cluster);
            drop(connections);
            tracing::info!(%cluster, why, "dropped the workload cluster's client");
        }
    }

    fn start_watch(&self, cluster: &ClusterKey, client: &Client) -> NodeWatch {
        NodeWatch::start(
            cluster.clone(),
            client.clone(),
            &self.shared.settings,
            self.shared.events.clone(),
        )
    }

    fn connections(&self) -> MutexGuard<'_, HashMap<ClusterKey, Arc<Connection>>> {
        // The map stays consistent whatever a panicking holder did: every
        // change is a single insert or remove.
        self.shared
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for WorkloadClusters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let clusters: Vec<ClusterKey> = self.connections().keys().cloned().collect();
        f.debug_struct("WorkloadClusters")
            .field("settings", &self.shared.settings)
            .field("clusters", &clusters)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// The Node watch on this connection, started by `start` if none runs.
    fn watch(&self, start: impl FnOnce() -> NodeWatch) -> Arc<NodeWatch> {
        self.watch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| Arc::new(start()))
            .clone()
    }

    fn is_watching(&self) -> bool {
        self.watch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }
}
