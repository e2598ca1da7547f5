//! Watches of kinds known only at run time (a platform module's
//! `allowedKinds`, say): one watch per kind, selecting one label only,
//! started the first time a reconcile needs the kind. Any change to a
//! labelled object, its deletion included, is sent on as the label's value
//! and the object's namespace, so the controller of the object the label
//! names comes back at once, without polling.

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

use crate::platform::documents::typed;
use crate::wasm::ObjectKind;

/// How long a reconcile waits for the first list of a kind it is the first to need.
const FIRST_LIST: Duration = Duration::from_secs(10);

/// Why a kind's objects cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum KindWatchError {
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
    /// The kind is cluster-scoped: labelled objects are read by namespace.
    #[error("kind {0} is cluster-scoped; a platform cluster's objects live in its namespace")]
    ClusterScoped(ObjectKind),
    /// The first list did not come in time (a missing permission, say).
    #[error("the objects of kind {0} could not be listed within {FIRST_LIST:?}")]
    NotListed(ObjectKind),
}

/// A labelled object, with its kind's resource.
#[derive(Clone, Debug)]
pub struct Labelled {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// The object, as cached.
    pub object: Arc<DynamicObject>,
}

impl Labelled {
    /// The object as JSON, with its apiVersion and kind (list items of
    /// built-in kinds come without).
    pub fn value(&self) -> serde_json::Value {
        let value = serde_json::to_value(&*self.object).unwrap_or_default();
        typed(value, &self.resource.api_version, &self.resource.kind)
    }

    /// [`Labelled::value`] as a JSON document.
    pub fn document(&self) -> String {
        self.value().to_string()
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

/// The label's value and the namespace of a labelled object that changed.
pub type Changed = (String, String);

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

/// The watches of kinds known at run time, of the objects carrying one label.
pub struct LabelledWatches {
    client: Client,
    label: &'static str,
    kinds: tokio::sync::Mutex<HashMap<ObjectKind, Arc<KindWatch>>>,
    changed: mpsc::UnboundedSender<Changed>,
}

impl LabelledWatches {
    /// No watch yet, and the stream of the label values whose objects change.
    pub fn new(
        client: Client,
        label: &'static str,
    ) -> (Self, impl Stream<Item = Changed> + Send + Unpin + 'static) {
        let (changed, receiver) = mpsc::unbounded_channel();
        let stream = tokio_stream_of(receiver);
        let watches = Self {
            client,
            label,
            kinds: tokio::sync::Mutex::default(),
            changed,
        };
        (watches, stream)
    }

    /// The watch of `kind`, started (after discovering its resource) if no
    /// cluster needed it before, once its first list is in.
    pub async fn watch(&self, kind: &ObjectKind) -> Result<Arc<KindWatch>, KindWatchError> {
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
            .map_err(|_| KindWatchError::NotListed(kind.clone()))?
            .map_err(|_| KindWatchError::NotListed(kind.clone()))?;
        Ok(watch)
    }

    /// The objects of `kinds` in `namespace` whose label is `value`, as cached.
    pub async fn of(
        &self,
        kinds: &[ObjectKind],
        namespace: &str,
        value: &str,
    ) -> Result<Vec<Labelled>, KindWatchError> {
        let mut found = Vec::new();
        for kind in kinds {
            let watch = self.watch(kind).await?;
            for object in watch.store.state() {
                let labelled = object.labels().get(self.label).map(String::as_str);
                if object.namespace().as_deref() == Some(namespace) && labelled == Some(value) {
                    found.push(Labelled {
                        resource: watch.resource.clone(),
                        object,
                    });
                }
            }
        }
        Ok(found)
    }

    /// The object of `kind` named `name` in `namespace`, as cached: any
    /// object carrying the label, whatever its value.
    pub async fn cached(
        &self,
        kind: &ObjectKind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, KindWatchError> {
        let watch = self.watch(kind).await?;
        let key = ObjectRef::new_with(name, watch.resource.clone()).within(namespace);
        Ok(watch.store.get(&key))
    }

    /// Every kind watched so far.
    pub async fn watched(&self) -> Vec<ObjectKind> {
        self.kinds.lock().await.keys().cloned().collect()
    }

    async fn discover(&self, kind: &ObjectKind) -> Result<ApiResource, KindWatchError> {
        let discovery = Discovery::new(self.client.clone())
            .filter(&[kind.group.as_str()])
            .run()
            .await
            .map_err(|source| KindWatchError::Discovery {
                group: kind.group.clone(),
                source,
            })?;
        let found = discovery
            .groups()
            .flat_map(kube::discovery::ApiGroup::recommended_resources)
            .find(|(resource, _)| resource.group == kind.group && resource.kind == kind.kind);
        match found {
            None => Err(KindWatchError::NotServed(kind.clone())),
            Some((_, capabilities)) if capabilities.scope == ResourceScope::Cluster => {
                Err(KindWatchError::ClusterScoped(kind.clone()))
            }
            Some((resource, _)) => Ok(resource),
        }
    }

    fn start(&self, resource: ApiResource) -> KindWatch {
        let writer = reflector::store::Writer::new(resource.clone());
        let store = writer.as_reader();
        let api = Api::<DynamicObject>::all_with(self.client.clone(), &resource);
        let config = watcher::Config::default().labels(self.label);
        let label = self.label;
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
                        if let (Some(value), Some(namespace)) =
                            (object.labels().get(label), object.namespace())
                        {
                            let _ = changed.send((value.clone(), namespace));
                        }
                    }
                    Err(error) => tracing::warn!(
                        kind,
                        error = &error as &dyn std::error::Error,
                        "watching labelled objects"
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

impl Drop for LabelledWatches {
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
