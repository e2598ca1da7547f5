//! The objects of platform clusters, of kinds known only from the platform
//! modules' `allowedKinds`: one watch per kind, selecting the platform
//! label only, started the first time a cluster needs the kind. Any change
//! to a labelled object, its deletion included, brings back the platform
//! cluster the label names: a child deleted or stripped of its owner
//! reference by hand is seen at once, without polling.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use kube::api::{ApiResource, DeleteParams, DynamicObject};
use kube::discovery::{Discovery, Scope as ResourceScope};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, ResourceExt as _};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::api::platform::CLUSTER_LABEL;
use crate::api::{PlatformCluster, Reason};
use crate::controllers::error::KindError;
use crate::platform::documents::typed;
use crate::wasm::ObjectKind;

/// How long a cluster waits for the first list of a kind it is the first to need.
const FIRST_LIST: Duration = Duration::from_secs(10);

/// Why a kind's objects cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// Discovery failed (the API server is unreachable, say).
    #[error("cannot discover the kinds of group {group:?}: {source}")]
    Discovery {
        /// The group.
        group: String,
        /// Why.
        source: kube::Error,
    },
    /// The API server serves no such kind.
    #[error("the API server serves no kind {0}")]
    NotServed(ObjectKind),
    /// The kind is cluster-scoped: a platform cluster's objects live in its namespace.
    #[error("kind {0} is cluster-scoped; a platform cluster's objects live in its namespace")]
    ClusterScoped(ObjectKind),
    /// The first list did not come in time (a missing permission, say).
    #[error("the objects of kind {0} could not be listed within {FIRST_LIST:?}")]
    NotListed(ObjectKind),
}

/// The objects of a kind a platform cluster is made of cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read a platform cluster's objects")]
pub struct Unreadable(#[source] pub ChildError);

impl KindError for Unreadable {
    fn reason(&self) -> Reason {
        Reason::KindUnavailable
    }

    fn metric_label(&self) -> &'static str {
        "platform_kind"
    }
}

/// One of a platform cluster's objects, with its kind's resource.
#[derive(Clone, Debug)]
pub struct Child {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// The object, as cached.
    pub object: Arc<DynamicObject>,
}

impl Child {
    /// The object as JSON, with its apiVersion and kind (list items of
    /// built-in kinds come without).
    pub fn value(&self) -> serde_json::Value {
        let value = serde_json::to_value(&*self.object).unwrap_or_default();
        typed(value, &self.resource.api_version, &self.resource.kind)
    }

    /// [`Child::value`] as a JSON document.
    pub fn document(&self) -> String {
        self.value().to_string()
    }

    /// Whether the host created it for platform cluster `cluster` (its
    /// creation record says so): what the cluster may update, prune and
    /// delete. An object labelled for the cluster by anyone else, or
    /// owned by it through an owner reference someone added, is not.
    pub fn created_for(&self, cluster: &str) -> bool {
        super::record::created_for(&self.object.metadata, cluster)
    }

    /// Whether it is of `group` and `kind`.
    pub fn is(&self, group: &str, kind: &str) -> bool {
        self.resource.group == group && self.resource.kind == kind
    }

    /// Asks for its deletion (in the background: its own finalizers run);
    /// whether a request was made (gone already is fine).
    pub async fn delete(&self, client: &Client) -> Result<bool, kube::Error> {
        let namespace = self.object.namespace().unwrap_or_default();
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), &namespace, &self.resource);
        match api
            .delete(&self.object.name_any(), &DeleteParams::background())
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(error) => Err(error),
        }
    }
}

/// `object` as the caches keep it: without managedFields, and a Secret
/// without its payload (`data`, `stringData`, and the last-applied copy
/// `kubectl apply` leaves), which neither the controller nor a provider
/// may read.
fn without_payload(object: &mut DynamicObject, secret: bool) {
    object.managed_fields_mut().clear();
    if secret {
        if let Some(data) = object.data.as_object_mut() {
            data.remove("data");
            data.remove("stringData");
        }
        object.annotations_mut().remove(LAST_APPLIED);
    }
}

/// Where `kubectl apply` keeps the whole object it applied, data included.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A kind's watch.
pub struct KindWatch {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    store: Store<DynamicObject>,
    task: AbortHandle,
}

/// The watches of the kinds platform clusters are made of.
pub struct Children {
    client: Client,
    kinds: tokio::sync::Mutex<HashMap<ObjectKind, Arc<KindWatch>>>,
    changed: mpsc::UnboundedSender<ObjectRef<PlatformCluster>>,
}

impl Children {
    /// No watch yet, and the stream of the platform clusters whose objects change.
    pub fn new(
        client: Client,
    ) -> (
        Self,
        impl Stream<Item = ObjectRef<PlatformCluster>> + Send + Unpin + 'static,
    ) {
        let (changed, receiver) = mpsc::unbounded_channel();
        let stream = tokio_stream_of(receiver);
        let children = Self {
            client,
            kinds: tokio::sync::Mutex::default(),
            changed,
        };
        (children, stream)
    }

    /// The watch of `kind`, started (after discovering its resource) if no
    /// cluster needed it before, once its first list is in.
    pub async fn watch(&self, kind: &ObjectKind) -> Result<Arc<KindWatch>, ChildError> {
        let watch = {
            // One discovery per kind, however many clusters ask at once.
            let mut kinds = self.kinds.lock().await;
            if let Some(watch) = kinds.get(kind) {
                watch.clone()
            } else {
                let resource = self.discover(kind).await?;
                let watch = Arc::new(self.start(resource));
                kinds.insert(kind.clone(), watch.clone());
                watch
            }
        };
        tokio::time::timeout(FIRST_LIST, watch.store.wait_until_ready())
            .await
            .map_err(|_| ChildError::NotListed(kind.clone()))?
            .map_err(|_| ChildError::NotListed(kind.clone()))?;
        Ok(watch)
    }

    /// The objects labelled for platform cluster `cluster` in `namespace`,
    /// of `kinds`, as cached.
    pub async fn of(
        &self,
        kinds: &[ObjectKind],
        namespace: &str,
        cluster: &str,
    ) -> Result<Vec<Child>, ChildError> {
        let mut found = Vec::new();
        for kind in kinds {
            let watch = self.watch(kind).await?;
            for object in watch.store.state() {
                let labelled = object.labels().get(CLUSTER_LABEL).map(String::as_str);
                if object.namespace().as_deref() == Some(namespace) && labelled == Some(cluster) {
                    found.push(Child {
                        resource: watch.resource.clone(),
                        object,
                    });
                }
            }
        }
        Ok(found)
    }

    /// The object of `kind` named `name` in `namespace`, as cached: any
    /// object labelled for a platform cluster, whichever cluster.
    pub async fn cached(
        &self,
        kind: &ObjectKind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, ChildError> {
        let watch = self.watch(kind).await?;
        let key = ObjectRef::new_with(name, watch.resource.clone()).within(namespace);
        Ok(watch.store.get(&key))
    }

    /// Every kind watched so far.
    pub async fn watched(&self) -> Vec<ObjectKind> {
        self.kinds.lock().await.keys().cloned().collect()
    }

    async fn discover(&self, kind: &ObjectKind) -> Result<ApiResource, ChildError> {
        let discovery = Discovery::new(self.client.clone())
            .filter(&[kind.group.as_str()])
            .run()
            .await
            .map_err(|source| ChildError::Discovery {
                group: kind.group.clone(),
                source,
            })?;
        let found = discovery
            .groups()
            .flat_map(kube::discovery::ApiGroup::recommended_resources)
            .find(|(resource, _)| resource.group == kind.group && resource.kind == kind.kind);
        match found {
            None => Err(ChildError::NotServed(kind.clone())),
            Some((_, capabilities)) if capabilities.scope == ResourceScope::Cluster => {
                Err(ChildError::ClusterScoped(kind.clone()))
            }
            Some((resource, _)) => Ok(resource),
        }
    }

    fn start(&self, resource: ApiResource) -> KindWatch {
        let writer = reflector::store::Writer::new(resource.clone());
        let store = writer.as_reader();
        let api = Api::<DynamicObject>::all_with(self.client.clone(), &resource);
        let config = watcher::Config::default().labels(CLUSTER_LABEL);
        let changed = self.changed.clone();
        let kind = resource.kind.clone();
        let secret = resource.group.is_empty() && resource.kind == "Secret";
        let feed = watcher(api, config)
            .default_backoff()
            .modify(move |object: &mut DynamicObject| without_payload(object, secret))
            .reflect(writer)
            .touched_objects()
            .for_each(move |touched| {
                match touched {
                    Ok(object) => {
                        if let (Some(cluster), Some(namespace)) =
                            (object.labels().get(CLUSTER_LABEL), object.namespace())
                        {
                            let _ = changed.send(ObjectRef::new(cluster).within(&namespace));
                        }
                    }
                    Err(error) => tracing::warn!(
                        kind,
                        error = &error as &dyn std::error::Error,
                        "watching a platform cluster's objects"
                    ),
                }
                futures::future::ready(())
            });
        let task = tokio::spawn(feed).abort_handle();
        KindWatch {
            resource,
            store,
            task,
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for watch in self.kinds.get_mut().values() {
            watch.task.abort();
        }
    }
}

fn tokio_stream_of<T: Send + 'static>(
    mut receiver: mpsc::UnboundedReceiver<T>,
) -> impl Stream<Item = T> + Send + Unpin + 'static {
    Box::pin(futures::stream::poll_fn(move |cx| receiver.poll_recv(cx)))
}
