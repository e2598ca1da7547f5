//! Mappings from watched kinds to the objects to reconcile, shared by the
//! controllers (each reads its own controller's store).

use std::sync::Arc;

use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt as _};

use crate::api::{Cluster, ProviderModule, labels};

/// How Clusters are watched by controllers of objects belonging to them.
pub fn cluster_changes() -> watcher::Config {
    watcher::Config::default()
}

/// A Cluster → the objects in `store` labelled as belonging to it.
pub fn by_cluster_label<K>(
    store: Store<K>,
) -> impl Fn(Cluster) -> Vec<ObjectRef<K>> + Send + Sync + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    move |cluster| {
        let namespace = cluster.namespace().unwrap_or_default();
        let name = cluster.name_any();
        store
            .state()
            .iter()
            .filter(|o| {
                o.namespace().as_deref() == Some(namespace.as_str())
                    && o.labels().get(labels::CLUSTER_NAME) == Some(&name)
            })
            .map(|o| ObjectRef::from_obj(&**o))
            .collect()
    }
}

/// A ProviderModule → the objects in `store` it serves (`provider_of` names their module).
pub fn by_provider<K>(
    store: Store<K>,
    provider_of: impl Fn(&K) -> String + Send + Sync + 'static,
) -> impl Fn(ProviderModule) -> Vec<ObjectRef<K>> + Send + Sync + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    move |module| {
        let name = module.name_any();
        store
            .state()
            .iter()
            .filter(|o: &&Arc<K>| provider_of(o) == name)
            .map(|o| ObjectRef::from_obj(&**o))
            .collect()
    }
}
