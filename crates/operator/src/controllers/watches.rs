//! Mappings from a changed object of one kind to the objects of another
//! that a controller reconciles, read from the caches.

use std::sync::Arc;

use futures::{Stream, StreamExt as _};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt as _};
use tokio::sync::broadcast;

use super::cache::{Index, cluster_key};
use super::provider::ProviderObject;
use crate::api::provider::HasProviderStatus;
use crate::api::{Cluster, ContractVersionedObjectReference, ProviderModule};

/// The object `reference` names, if it is of `(group, kind)`.
pub fn referenced<K: Resource<DynamicType = ()>>(
    reference: &ContractVersionedObjectReference,
    (group, kind): (&str, &str),
    namespace: Option<&str>,
) -> Option<ObjectRef<K>> {
    (reference.kind == kind && reference.api_group == group)
        .then(|| ObjectRef::new(&reference.name).within(namespace.unwrap_or_default()))
}

/// A Cluster → the objects `index` (keyed by [`cluster_key`]) files under it.
pub fn by_cluster<K>(
    store: Store<K>,
    index: Index<K>,
) -> impl Fn(Arc<Cluster>) -> Vec<ObjectRef<K>> + Send + Sync + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    move |cluster| {
        index
            .get(&store, &cluster_key(&*cluster, &cluster.name_any()))
            .iter()
            .map(|o| ObjectRef::from_obj(&**o))
            .collect()
    }
}

/// A ProviderModule → the objects in `store` it serves.
pub fn by_provider<K>(
    store: Store<K>,
) -> impl Fn(Arc<ProviderModule>) -> Vec<ObjectRef<K>> + Send + Sync + 'static
where
    K: ProviderObject,
    K::Status: HasProviderStatus,
{
    move |module| served_by(&store, &module.name_any())
}

/// The objects in `store` served by each provider put in service from now
/// on (a missed install: all of them). A module's object does not change
/// when a restarted operator loads it again, so its watch says nothing to
/// the objects that wait for it.
pub fn installed<K>(
    installs: broadcast::Receiver<Arc<str>>,
    store: Store<K>,
) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
where
    K: ProviderObject,
    K::Status: HasProviderStatus,
{
    installed_by(installs, store, served_by)
}

/// [`installed`] for any kind: `served` finds the objects a module serves.
pub fn installed_by<K, F>(
    installs: broadcast::Receiver<Arc<str>>,
    store: Store<K>,
    served: F,
) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    F: Fn(&Store<K>, &str) -> Vec<ObjectRef<K>> + Clone + Send + Sync + 'static,
{
    futures::stream::unfold((installs, store), move |(mut installs, store)| {
        let served = served.clone();
        async move {
            let objects = match installs.recv().await {
                Ok(name) => served(&store, &name),
                Err(broadcast::error::RecvError::Lagged(_)) => store
                    .state()
                    .iter()
                    .map(|o| ObjectRef::from_obj(&**o))
                    .collect(),
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            Some((futures::stream::iter(objects), (installs, store)))
        }
    })
    .flatten()
}

/// The ProviderModule of each provider put in service, promoted or rolled
/// back by the runtime rather than by its own reconcile.
pub fn modules_named(
    installs: broadcast::Receiver<Arc<str>>,
) -> impl Stream<Item = ObjectRef<crate::api::ProviderModule>> + Send + 'static {
    futures::stream::unfold(installs, |mut installs| async move {
        loop {
            match installs.recv().await {
                Ok(name) => return Some((ObjectRef::new(&name), installs)),
                // Each module's next reconcile shows what it missed.
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}

fn served_by<K>(store: &Store<K>, module: &str) -> Vec<ObjectRef<K>>
where
    K: ProviderObject,
    K::Status: HasProviderStatus,
{
    store
        .state()
        .iter()
        .filter(|o| o.provider() == module)
        .map(|o| ObjectRef::from_obj(&**o))
        .collect()
}
