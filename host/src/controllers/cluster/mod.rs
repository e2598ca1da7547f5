//! The Cluster controller (standalone mode): owns the infrastructure object,
//! copies its endpoint, derives the phase, and deletes in upstream's order.

mod delete;
mod kubeconfig;

pub use kubeconfig::KubeconfigError;
mod phase;
mod reconcile;

use std::future::Future;
use std::sync::Arc;

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, WatchStreamExt as _, watcher};

use super::context::Context;
use crate::api::{Cluster, MachinePool, labels};

pub use phase::Phase;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "cluster";

/// Runs the controller until `shutdown` completes; `referenced` yields
/// Clusters owning a changed infrastructure or control-plane object.
pub fn run(
    ctx: Arc<Context>,
    referenced: impl Stream<Item = ObjectRef<Cluster>> + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let metrics = ctx.metrics.clone();
    let client = ctx.client.clone();
    // kubeconfig Secrets carry the cluster-name label; their arrival initializes the control plane.
    let secrets = watcher(
        Api::<PartialObjectMeta<Secret>>::all(client.clone()),
        watcher::Config::default().labels(labels::CLUSTER_NAME),
    )
    .default_backoff()
    .touched_objects();
    Controller::new(
        Api::<Cluster>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(kube::runtime::controller::Config::default().debounce(ctx.settings.core_debounce))
    .reconcile_on(referenced)
    .watches(
        Api::<MachinePool>::all(client),
        watcher::Config::default(),
        |pool| {
            Some(
                ObjectRef::new(&pool.spec.cluster_name)
                    .within(pool.metadata.namespace.as_deref().unwrap_or_default()),
            )
        },
    )
    .watches_stream(secrets, |secret| {
        let cluster = secret
            .metadata
            .labels
            .as_ref()?
            .get(labels::CLUSTER_NAME)?
            .clone();
        Some(
            ObjectRef::new(&cluster)
                .within(secret.metadata.namespace.as_deref().unwrap_or_default()),
        )
    })
    .graceful_shutdown_on(shutdown)
    .run(reconcile::reconcile, reconcile::error_policy, ctx)
    .for_each(super::watches::count_watch_errors(CONTROLLER, metrics))
}
