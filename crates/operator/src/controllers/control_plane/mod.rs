//! The WasmControlPlane controller: a cluster's control plane from a
//! control-plane-provider component, per Cluster API's control-plane
//! contract. The provider brings it up; the host reports it (endpoint,
//! initialization, replica counts, version, `Available`) and deletes it
//! when the Cluster asks, after its workers.

mod certificates;
mod reconcile;

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt as _;
use kube::runtime::Controller;

use super::context::Context;
use super::reconciler::{self, error_policy, reconcile};
use super::watches;
use crate::api::WasmControlPlane;
use crate::api::provider::CONTROL_PLANE_GROUP;

/// The WasmControlPlane controller's name in metrics and logs.
pub const CONTROLLER: &str = "wasmcontrolplane";

/// Runs the WasmControlPlane controller until `shutdown` completes.
pub fn run(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let caches = &ctx.caches;
    let store = caches.control_planes.store().clone();
    Controller::for_shared_stream(caches.control_planes.subscribe(), store.clone())
        .with_config(ctx.settings.controller(ctx.settings.debounce))
        .watches_shared_stream(caches.clusters.subscribe(), |cluster| {
            watches::referenced(
                cluster.spec.control_plane_ref.as_ref()?,
                (CONTROL_PLANE_GROUP, "WasmControlPlane"),
                cluster.metadata.namespace.as_deref(),
            )
        })
        .watches_shared_stream(
            caches.modules.subscribe(),
            watches::by_provider(store.clone()),
        )
        .reconcile_on(watches::installed(ctx.runtime.registry().installs(), store))
        .graceful_shutdown_on(shutdown)
        .run(
            reconcile::<WasmControlPlane>,
            error_policy::<WasmControlPlane>,
            ctx,
        )
        .for_each(|_| futures::future::ready(()))
}

/// Whether the control plane has served once (kept so by the status).
fn initialized(scope: &reconciler::Scope<WasmControlPlane>) -> bool {
    scope
        .status
        .initialization
        .as_ref()
        .and_then(|i| i.control_plane_initialized)
        == Some(true)
}
