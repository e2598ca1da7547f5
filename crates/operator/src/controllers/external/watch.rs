//! Caches of the kinds references name, known only at run time (bootstrap
//! configs, infrastructure and control-plane objects): one watch per kind,
//! started the first time a reference to it is resolved, whose changes
//! bring back the MachinePools and Clusters that own or reference the
//! changed object (upstream's `externalTracker`, which maps by owner only:
//! mapping by reference too means an object created after the pool that
//! names it is picked up at once, not after a backoff). capwasm's own kinds
//! are not watched twice: they are read from the typed caches their
//! providers' controllers fill, each object converted when read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use futures::{FutureExt as _, Stream, StreamExt as _};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource, ResourceExt as _};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::api::{CLUSTER_API_GROUP, Cluster, MachinePool};
use crate::controllers::cache::{Cache, Caches, Index, Reader, object_key, sharded};
use crate::controllers::metrics::Metrics;
use crate::controllers::shard::Shard;

/// The objects that reference others, to map a changed object back to them.
#[derive(Clone)]
pub(super) struct Referrers {
    pools: (Store<MachinePool>, Index<MachinePool>),
    clusters: (Store<Cluster>, Index<Cluster>),
}

impl Referrers {
    pub(super) fn of(caches: &Caches) -> Self {
        Self {
            pools: (
                caches.pools.store().clone(),
                caches.pools_by_reference.clone(),
            ),
            clusters: (
                caches.clusters.store().clone(),
                caches.clusters_by_reference.clone(),
            ),
        }
    }
}

/// Where a referenced kind's objects are read, as `DynamicObject`s.
pub(super) trait Objects: Send + Sync {
    /// The object `name` in `namespace` (cluster-scoped kinds: `None`), as cached.
    fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<DynamicObject>>;
    /// Once the first list is in.
    fn ready(&self) -> BoxFuture<'_, ()>;
}

impl Objects for Cache<DynamicObject> {
    fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<DynamicObject>> {
        Cache::get(self, namespace, name)
    }

    fn ready(&self) -> BoxFuture<'_, ()> {
        Cache::ready(self).boxed()
    }
}

/// What a kind of capwasm's own is to be read from its typed cache.
trait OwnKind:
    Resource<DynamicType = ()> + serde::Serialize + Clone + std::fmt::Debug + Send + Sync + 'static
{
}

impl<K> OwnKind for K where
    K: Resource<DynamicType = ()>
        + serde::Serialize
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// One of capwasm's own kinds, as its typed cache holds it.
struct Typed<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    reader: Reader<K>,
}

impl<K> Objects for Typed<K>
where
    K: OwnKind,
{
    fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<DynamicObject>> {
        let object = self.reader.get(namespace, name)?;
        let converted = serde_json::to_value(&*object).and_then(serde_json::from_value);
        match converted {
            Ok(object) => Some(Arc::new(object)),
            Err(error) => {
                // Not reachable with the API's own types; logged, read as missing.
                tracing::error!(
                    kind = K::kind(&()).as_ref(),
                    name,
                    error = &error as &dyn std::error::Error,
                    "cannot convert a cached object"
                );
                None
            }
        }
    }

    fn ready(&self) -> BoxFuture<'_, ()> {
        self.reader.ready().boxed()
    }
}

/// A kind of capwasm's own with a typed cache: read from it rather than
/// watched again.
pub(super) struct Own {
    resource: ApiResource,
    objects: Arc<dyn Objects>,
    /// Maps each change of its objects to their referrers, until dropped.
    changes: Box<dyn Fn(Referrers, Senders) -> BoxFuture<'static, ()> + Send + Sync>,
}

impl Own {
    /// The kinds of capwasm's providers, from `caches`.
    pub(super) fn kinds(caches: &Caches) -> Vec<Self> {
        vec![
            Self::of(&caches.configs),
            Self::of(&caches.infra_pools),
            Self::of(&caches.infra_clusters),
            Self::of(&caches.infra_machines),
        ]
    }

    fn of<K>(cache: &Cache<K>) -> Self
    where
        K: OwnKind,
    {
        let reader = cache.reader();
        let resource = ApiResource::erase::<K>(&());
        let kind = (resource.group.clone(), resource.kind.clone());
        let changes = reader.clone();
        Self {
            resource,
            objects: Arc::new(Typed { reader }),
            changes: Box::new(move |referrers, senders| {
                let kind = kind.clone();
                changes
                    .subscribe()
                    .for_each(move |object| {
                        referrers.send(object.meta(), Some((&kind.0, &kind.1)), &senders);
                        futures::future::ready(())
                    })
                    .boxed()
            }),
        }
    }
}

/// Where the changes of referenced objects go: the MachinePool and Cluster controllers.
#[derive(Clone)]
pub(super) struct Senders {
    pools: mpsc::UnboundedSender<ObjectRef<MachinePool>>,
    clusters: mpsc::UnboundedSender<ObjectRef<Cluster>>,
}

/// The watched referenced kinds.
pub(super) struct Kinds {
    client: Client,
    metrics: Metrics,
    referrers: Referrers,
    senders: Senders,
    shard: Shard,
    /// capwasm's own kinds, read from their typed caches.
    own: Vec<Own>,
    /// By (group, kind): the version watched, its cache, its task.
    watched: Mutex<HashMap<(String, String), Watched>>,
}

/// A watched kind: the version watched, its cache, the task feeding it.
type Watched = (String, Arc<dyn Objects>, AbortHandle);

/// The streams of MachinePools and Clusters whose referenced objects changed.
pub type Changed<K> = Box<dyn Stream<Item = ObjectRef<K>> + Send + Unpin>;

impl Kinds {
    /// Kinds to be watched with `client`, but for `own` ones; the streams
    /// yield the MachinePools and the Clusters owning or referencing a
    /// changed object.
    pub(super) fn new(
        client: Client,
        metrics: Metrics,
        referrers: Referrers,
        shard: Shard,
        own: Vec<Own>,
    ) -> (Self, Changed<MachinePool>, Changed<Cluster>) {
        let (pools, changed_pools) = mpsc::unbounded_channel();
        let (clusters, changed_clusters) = mpsc::unbounded_channel();
        let kinds = Self {
            client,
            metrics,
            referrers,
            senders: Senders { pools, clusters },
            shard,
            own,
            watched: Mutex::new(HashMap::new()),
        };
        (kinds, stream(changed_pools), stream(changed_clusters))
    }

    /// The cache of `resource`'s kind, watched from now on (a new version
    /// of the kind replaces the watch of the old one).
    pub(super) fn cache(&self, resource: &ApiResource) -> Arc<dyn Objects> {
        let key = (resource.group.clone(), resource.kind.clone());
        let mut watched = self.watched.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((version, cache, _)) = watched.get(&key)
            && *version == resource.version
        {
            return cache.clone();
        }
        let own = self.own.iter().find(|own| {
            (
                &own.resource.group,
                &own.resource.kind,
                &own.resource.version,
            ) == (&resource.group, &resource.kind, &resource.version)
        });
        if let Some(own) = own {
            let changes = (own.changes)(self.referrers.clone(), self.senders.clone());
            let task = tokio::spawn(changes);
            if let Some((_, _, old)) = watched.insert(
                key,
                (
                    resource.version.clone(),
                    own.objects.clone(),
                    task.abort_handle(),
                ),
            ) {
                old.abort();
            }
            return own.objects.clone();
        }
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), resource);
        let cache = Arc::new(sharded(
            Cache::new(
                resource.plural.clone(),
                watcher(api, watcher::Config::default())
                    .default_backoff()
                    .modify(|object: &mut DynamicObject| object.managed_fields_mut().clear())
                    .boxed(),
                resource.clone(),
            ),
            self.shard,
        ));
        let changes = cache.subscribe();
        let feed = cache.run(self.metrics.clone());
        let (referrers, senders) = (self.referrers.clone(), self.senders.clone());
        let task = tokio::spawn(async move {
            let mapping = changes.for_each(|object| {
                let kind = object.types.as_ref().map(|types| {
                    let group = types.api_version.rsplit_once('/').map_or("", |(g, _)| g);
                    (group, types.kind.as_str())
                });
                referrers.send(&object.metadata, kind, &senders);
                futures::future::ready(())
            });
            futures::join!(feed, mapping);
        });
        tracing::debug!(
            group = resource.group,
            kind = resource.kind,
            version = resource.version,
            "watching referenced kind"
        );
        if let Some((_, _, old)) = watched.insert(
            key,
            (resource.version.clone(), cache.clone(), task.abort_handle()),
        ) {
            old.abort();
        }
        cache
    }
}

impl Drop for Kinds {
    fn drop(&mut self) {
        for (_, _, task) in self
            .watched
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            task.abort();
        }
    }
}

impl Referrers {
    /// Sends the MachinePools and Clusters owning or referencing the object
    /// of `meta`, of (group, kind) `kind` if known.
    fn send(&self, meta: &ObjectMeta, kind: Option<(&str, &str)>, senders: &Senders) {
        let key = key_of(meta, kind);
        for pool in owners_and_referrers(meta, key.as_deref(), &self.pools) {
            let _ = senders.pools.send(pool);
        }
        for cluster in owners_and_referrers(meta, key.as_deref(), &self.clusters) {
            let _ = senders.clusters.send(cluster);
        }
    }
}

/// The `K`s (MachinePools or Clusters) that own the object of `meta` (any
/// version of the Cluster API group) or reference it under `key`.
fn owners_and_referrers<K>(
    meta: &ObjectMeta,
    key: Option<&str>,
    (store, index): &(Store<K>, Index<K>),
) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let namespace = meta.namespace.clone().unwrap_or_default();
    let kind = K::kind(&());
    let mut found: Vec<ObjectRef<K>> = meta
        .owner_references
        .iter()
        .flatten()
        .filter(|r| r.kind == kind && r.api_version.split('/').next() == Some(CLUSTER_API_GROUP))
        .map(|r| ObjectRef::new(&r.name).within(&namespace))
        .collect();
    if let Some(key) = key {
        found.extend(
            index
                .get(store, key)
                .iter()
                .map(|o| ObjectRef::from_obj(&**o)),
        );
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found.dedup();
    found
}

/// The key the indexes by reference file the referrers of the object of
/// `meta` and (group, kind) `kind` under.
fn key_of(meta: &ObjectMeta, kind: Option<(&str, &str)>) -> Option<String> {
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let name = meta.name.as_deref().unwrap_or_default();
    kind.map(|(group, kind)| object_key(namespace, group, kind, name))
}

fn stream<T: Send + 'static>(
    receiver: mpsc::UnboundedReceiver<T>,
) -> Box<dyn Stream<Item = T> + Send + Unpin> {
    Box::new(Box::pin(futures::stream::unfold(
        receiver,
        |mut receiver| async move { receiver.recv().await.map(|item| (item, receiver)) },
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::runtime::reflector;

    #[test]
    fn a_changed_object_maps_to_its_owners_of_the_kind_and_group_and_its_referrers() {
        let resource = ApiResource::erase::<crate::api::WasmMachinePool>(&());
        let mut object = DynamicObject::new("p", &resource).within("ns");
        let owner = |api_version: &str, kind: &str, name: &str| OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: name.into(),
            ..OwnerReference::default()
        };
        object.metadata.owner_references = Some(vec![
            owner("cluster.x-k8s.io/v1beta2", "MachinePool", "a"),
            owner("cluster.x-k8s.io/v1beta1", "MachinePool", "b"),
            owner("example.com/v1", "MachinePool", "c"),
            owner("cluster.x-k8s.io/v1beta2", "Cluster", "d"),
        ]);
        let (store, mut writer) = reflector::store::<MachinePool>();
        let index = crate::controllers::cache::pools_by_reference();
        // The builder's pools reference a WasmMachinePool of their own name.
        let referring = capwasm_api::testing::MachinePoolBuilder::new("ns", "p", "c1").build();
        let event = watcher::Event::Apply(referring);
        index.apply(&event);
        writer.apply_watcher_event(&event);

        // The key the changed object is looked up by is the one the index
        // filed the referring pool under.
        let key = key_of(&object.metadata, Some((&resource.group, &resource.kind)));
        let pools = owners_and_referrers(&object.metadata, key.as_deref(), &(store, index));
        let names: Vec<_> = pools.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "p"]);
        assert!(pools.iter().all(|o| o.namespace.as_deref() == Some("ns")));
    }
}
