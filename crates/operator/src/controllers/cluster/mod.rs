//! The Cluster controller (standalone mode): owns the infrastructure object,
//! copies its endpoint, derives the phase, and deletes in upstream's order.

mod control_plane;
mod delete;
mod infrastructure;
mod kubeconfig;
mod phase;
mod reconcile;
mod summary;

use std::future::Future;
use std::sync::Arc;

use futures::{Stream, StreamExt as _};
use kube::runtime::Controller;
use kube::runtime::reflector::ObjectRef;

use super::context::Context;
use super::reconciler::{error_policy, reconcile};
use crate::api::{Cluster, labels};

pub use phase::Phase;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "cluster";

/// Runs the controller until `shutdown` completes; `referenced` yields
/// Clusters owning or referencing a changed infrastructure or control-plane
/// object.
pub fn run(
    ctx: Arc<Context>,
    referenced: impl Stream<Item = ObjectRef<Cluster>> + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let caches = &ctx.caches;
    Controller::for_shared_stream(caches.clusters.subscribe(), caches.clusters.store().clone())
        .with_config(ctx.settings.controller(ctx.settings.core_debounce))
        .reconcile_on(referenced)
        // Its workers' counts, and its deletion waiting for them.
        .watches_shared_stream(caches.pools.subscribe(), |pool| {
            Some(
                ObjectRef::new(&pool.spec.cluster_name)
                    .within(pool.metadata.namespace.as_deref().unwrap_or_default()),
            )
        })
        // Its deletion waiting for its Machines: those being deleted.
        .watches_shared_stream(caches.machines.subscribe(), |machine| {
            machine.metadata.deletion_timestamp.as_ref()?;
            Some(
                ObjectRef::new(&machine.spec.cluster_name)
                    .within(machine.metadata.namespace.as_deref().unwrap_or_default()),
            )
        })
        // kubeconfig Secrets carry the cluster-name label; their arrival initializes the control plane.
        .watches_shared_stream(caches.secrets.subscribe(), |secret| {
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
        .run(reconcile::<Cluster>, error_policy::<Cluster>, ctx)
        .for_each(|_| futures::future::ready(()))
}
