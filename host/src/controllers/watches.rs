//! Mappings from a changed object of one kind to the objects of another
//! that a controller reconciles, read from the caches.

use std::sync::Arc;

use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt as _};

use super::cache::{Index, cluster_key};
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

/// A ProviderModule → the objects in `store` it serves (`provider_of` names their module).
pub fn by_provider<K>(
    store: Store<K>,
    provider_of: impl Fn(&K) -> String + Send + Sync + 'static,
) -> impl Fn(Arc<ProviderModule>) -> Vec<ObjectRef<K>> + Send + Sync + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    move |module| {
        let name = module.name_any();
        store
            .state()
            .iter()
            .filter(|o| provider_of(o) == name)
            .map(|o| ObjectRef::from_obj(&**o))
            .collect()
    }
}
