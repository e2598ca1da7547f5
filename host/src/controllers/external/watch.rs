//! Caches of the kinds references name, known only at run time (bootstrap
//! configs, infrastructure and control-plane objects): one watch per kind,
//! started the first time a reference to it is resolved, whose changes
//! bring back the MachinePools and Clusters that own or reference the
//! changed object (upstream's `externalTracker`, which maps by owner only:
//! mapping by reference too means an object created after the pool that
//! names it is picked up at once, not after a backoff).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::{Stream, StreamExt as _};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource, ResourceExt as _};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::api::{CLUSTER_API_GROUP, Cluster, MachinePool};
use crate::controllers::cache::{Cache, Caches, Index, object_key, sharded};
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

/// Where the changes of referenced objects go: the MachinePool and Cluster controllers.
#[derive(Clone)]
struct Senders {
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
    /// By (group, kind): the version watched, its cache, its task.
    watched: Mutex<HashMap<(String, String), Watched>>,
}

/// A watched kind: the version watched, its cache, the task feeding it.
type Watched = (String, Arc<Cache<DynamicObject>>, AbortHandle);

/// The streams of MachinePools and Clusters whose referenced objects changed.
pub type Changed<K> = Box<dyn Stream<Item = ObjectRef<K>> + Send + Unpin>;

impl Kinds {
    /// Kinds to be watched with `client`; the streams yield the MachinePools
    /// and the Clusters owning or referencing a changed object.
    pub(super) fn new(
        client: Client,
        metrics: Metrics,
        referrers: Referrers,
        shard: Shard,
    ) -> (Self, Changed<MachinePool>, Changed<Cluster>) {
        let (pools, changed_pools) = mpsc::unbounded_channel();
        let (clusters, changed_clusters) = mpsc::unbounded_channel();
        let kinds = Self {
            client,
            metrics,
            referrers,
            senders: Senders { pools, clusters },
            shard,
            watched: Mutex::new(HashMap::new()),
        };
        (kinds, stream(changed_pools), stream(changed_clusters))
    }

    /// The cache of `resource`'s kind, watched from now on (a new version
    /// of the kind replaces the watch of the old one).
    pub(super) fn cache(&self, resource: &ApiResource) -> Arc<Cache<DynamicObject>> {
        let key = (resource.group.clone(), resource.kind.clone());
        let mut watched = self.watched.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((version, cache, _)) = watched.get(&key)
            && *version == resource.version
        {
            return cache.clone();
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
                referrers.send(&object, &senders);
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
    /// Sends the MachinePools and Clusters owning or referencing `object`.
    fn send(&self, object: &DynamicObject, senders: &Senders) {
        let key = key_of(object);
        for pool in owners_and_referrers(object, key.as_deref(), &self.pools) {
            let _ = senders.pools.send(pool);
        }
        for cluster in owners_and_referrers(object, key.as_deref(), &self.clusters) {
            let _ = senders.clusters.send(cluster);
        }
    }
}

/// The `K`s (MachinePools or Clusters) that own `object` (any version of
/// the Cluster API group) or reference it under `key`.
fn owners_and_referrers<K>(
    object: &DynamicObject,
    key: Option<&str>,
    (store, index): &(Store<K>, Index<K>),
) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let namespace = object.namespace().unwrap_or_default();
    let kind = K::kind(&());
    let mut found: Vec<ObjectRef<K>> = object
        .owner_references()
        .iter()
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

/// The key the indexes by reference file `object`'s referrers under.
fn key_of(object: &DynamicObject) -> Option<String> {
    let namespace = object.namespace().unwrap_or_default();
    object.types.as_ref().map(|types| {
        let group = types.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        object_key(&namespace, group, &types.kind, &object.name_any())
    })
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
        let referring = crate::testing::objects::MachinePoolBuilder::new("ns", "p", "c1").build();
        let event = watcher::Event::Apply(referring);
        index.apply(&event);
        writer.apply_watcher_event(&event);

        // The key the changed object is looked up by is the one the index
        // filed the referring pool under.
        let key = key_of(&object);
        let pools = owners_and_referrers(&object, key.as_deref(), &(store, index));
        let names: Vec<_> = pools.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "p"]);
        assert!(pools.iter().all(|o| o.namespace.as_deref() == Some("ns")));
    }
}
