//! Mappings from watched kinds to the objects to reconcile, shared by the
//! controllers (each reads its own controller's store), and what becomes of
//! their watches' failures.

use std::sync::Arc;

use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt as _};

use super::metrics::Metrics;

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

/// One item of a controller's result stream.
type ControllerResult<K, E> = Result<(ObjectRef<K>, Action), controller::Error<E, watcher::Error>>;

/// What a controller's result stream is run with: reconcile failures are
/// counted by the error policy already, so only a failed list or watch (a
/// missing permission, an API server going away) is counted and logged
/// here; kube-runtime retries the watch itself, with backoff.
pub fn count_watch_errors<K, E>(
    controller: &'static str,
    metrics: Metrics,
) -> impl FnMut(ControllerResult<K, E>) -> futures::future::Ready<()>
where
    K: Resource,
{
    move |result| {
        if let Err(controller::Error::QueueError(error)) = result {
            metrics.watch_error(controller);
            tracing::warn!(
                controller,
                error = crate::report::error_chain(&error),
                "a watch failed; retrying"
            );
        }
        futures::future::ready(())
    }
}
