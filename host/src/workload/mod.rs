//! Access to workload clusters: a client per Cluster API Cluster, built from
//! its `<name>-kubeconfig` Secret, and a watched cache of its Nodes whose
//! changes come out of one stream, for mapping to MachinePools.
//!
//! Everything here is per [`ClusterKey`] and lives in [`WorkloadClusters`],
//! which the controllers share through their context. Nothing here knows
//! about MachinePools or WebAssembly.

mod error;
pub mod generated;
mod kubeconfig;
mod nodes;
mod watch;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::Stream;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};
use tokio::sync::mpsc;

pub use error::{Error, InvalidKubeconfig};
pub use nodes::Nodes;
use watch::NodeWatch;

/// The Secret key Cluster API keeps the kubeconfig under.
const KUBECONFIG_KEY: &str = "value";

/// How far the client's read timeout lies above the watch timeout, so that
/// the server ends an idle watch before the client gives up on it.
const READ_TIMEOUT_MARGIN: Duration = Duration::from_secs(30);

/// Identifies a Cluster API Cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterKey {
    /// The Cluster's namespace.
    pub namespace: String,
    /// The Cluster's name.
    pub name: String,
}

impl ClusterKey {
    /// The key of Cluster `name` in `namespace`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// `<name>-kubeconfig`, the Secret holding the Cluster's kubeconfig.
    pub fn kubeconfig_secret_name(&self) -> String {
        format!("{}-kubeconfig", self.name)
    }
}

impl fmt::Display for ClusterKey {
    /// `namespace/name`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A change to a Node of some workload cluster, for mapping to MachinePools:
/// a Node was added, changed (beyond heartbeats) or deleted, including
/// changes found by listing again after the watch was interrupted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEvent {
    /// The Cluster whose workload cluster the Node is in.
    pub cluster: ClusterKey,
    /// The Node's name.
    pub node_name: String,
    /// The Node's `spec.providerID`, if set and not empty.
    pub provider_id: Option<String>,
}

/// Timeouts of workload-cluster access.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How long connecting to a workload API server may take, so that an
    /// unreachable cluster fails a call in seconds.
    pub connect_timeout: Duration,
    /// How long [`WorkloadClusters::nodes`] waits for the first list of a
    /// cluster's Nodes before it answers [`Error::NodeListTimeout`].
    pub initial_list_timeout: Duration,
    /// The server-side timeout of each Node watch request. The client's
    /// read timeout is set above it.
    pub watch_timeout: Duration,
}

impl Default for Settings {
    /// Connect within 3 s, wait 5 s for a first list, re-watch every 290 s
    /// (kube's default).
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(3),
            initial_list_timeout: Duration::from_secs(5),
            watch_timeout: Duration::from_secs(290),
        }
    }
}

impl Settings {
    /// The read timeout of workload clients: above the watch timeout.
    fn read_timeout(&self) -> Duration {
        self.watch_timeout + READ_TIMEOUT_MARGIN
    }
}

/// Workload-cluster access shared by all controllers. Cheap to clone; when
/// the last clone is dropped every Node watch stops.
#[derive(Clone)]
pub struct WorkloadClusters {
    shared: Arc<Shared>,
}

struct Shared {
    /// Reads the kubeconfig Secrets.
    management: Client,
    /// The management cluster's labelled Secrets, metadata only: a
    /// kubeconfig Secret is read only when it changed.
    secrets: Store<PartialObjectMeta<Secret>>,
    /// When each cluster's kubeconfig client certificate expires, by the
    /// version of the Secret it was read from.
    expiries: Mutex<HashMap<ClusterKey, (SecretVersion, Option<Timestamp>)>>,
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

/// Which version of a kubeconfig Secret a client was built from. A Secret
/// deleted and created again has a new uid even if the resourceVersion
/// happened to match.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SecretVersion {
    uid: Option<String>,
    resource_version: Option<String>,
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
            management,
            secrets,
            expiries: Mutex::new(HashMap::new()),
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

    /// Stops the cluster's Node watch and drops its client (the Cluster was
    /// deleted). A later call connects again.
    pub fn forget(&self, cluster: &ClusterKey) {
        self.expiries().remove(cluster);
        if self.connections().remove(cluster).is_some() {
            tracing::info!(%cluster, "stopped workload cluster access");
        }
    }

    /// When the client certificate of the cluster's kubeconfig expires, if
    /// it has one (whether or not the kubeconfig is otherwise usable). The
    /// Secret is read only when the cache says it changed.
    pub async fn client_certificate_expiry(
        &self,
        cluster: &ClusterKey,
    ) -> Result<Option<Timestamp>, Error> {
        let cached = self.cached_version(cluster);
        if let Some(version) = &cached
            && let Some((read, expiry)) = self.expiries().get(cluster)
            && read == version
        {
            return Ok(*expiry);
        }
        let Some(secret) = self.read_secret(cluster).await? else {
            self.expiries().remove(cluster);
            return Ok(None);
        };
        let expiry = secret
            .data
            .as_ref()
            .and_then(|data| data.get(KUBECONFIG_KEY))
            .and_then(|value| generated::client_certificate_expiry(&value.0));
        self.expiries()
            .insert(cluster.clone(), (SecretVersion::of(&secret), expiry));
        Ok(expiry)
    }

    /// The version of the cluster's kubeconfig Secret the cache holds, if
    /// it holds it (it has the cluster-name label).
    fn cached_version(&self, cluster: &ClusterKey) -> Option<SecretVersion> {
        let name = cluster.kubeconfig_secret_name();
        self.shared
            .secrets
            .get(&ObjectRef::new(&name).within(&cluster.namespace))
            .map(|cached| SecretVersion {
                uid: cached.metadata.uid.clone(),
                resource_version: cached.metadata.resource_version.clone(),
            })
    }

    async fn read_secret(&self, cluster: &ClusterKey) -> Result<Option<Secret>, Error> {
        let name = cluster.kubeconfig_secret_name();
        Api::<Secret>::namespaced(self.shared.management.clone(), &cluster.namespace)
            .get_opt(&name)
            .await
            .map_err(|source| Error::GetKubeconfigSecret {
                namespace: cluster.namespace.clone(),
                name,
                source,
            })
    }

    async fn connection(&self, cluster: &ClusterKey) -> Result<Arc<Connection>, Error> {
        let name = cluster.kubeconfig_secret_name();
        // The Secret is read only when the cache says it changed since the
        // client was built, or does not hold it (no cluster-name label).
        if let Some(version) = self.cached_version(cluster)
            && let Some(connection) = self.connections().get(cluster)
            && connection.secret == version
        {
            return Ok(connection.clone());
        }
        let secret = self.read_secret(cluster).await?;
        let Some(secret) = secret else {
            self.disconnect(cluster, None, "the kubeconfig Secret is gone");
            return Err(Error::KubeconfigSecretNotFound {
                namespace: cluster.namespace.clone(),
                name,
            });
        };
        let version = SecretVersion::of(&secret);
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
        Client::try_from(config).map_err(|source| invalid(InvalidKubeconfig::Client(source)))
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
            self.shared.settings.watch_timeout,
            self.shared.events.clone(),
        )
    }

    fn expiries(&self) -> MutexGuard<'_, HashMap<ClusterKey, (SecretVersion, Option<Timestamp>)>> {
        // As `connections`: every change is a single insert or remove.
        self.shared
            .expiries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
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

impl SecretVersion {
    fn of(secret: &Secret) -> Self {
        Self {
            uid: secret.metadata.uid.clone(),
            resource_version: secret.metadata.resource_version.clone(),
        }
    }
}
