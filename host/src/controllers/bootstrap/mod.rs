//! The WasmBootstrapConfig controller: bootstrap data from a
//! bootstrap-provider component, stored in a Secret the config owns.

mod reconcile;

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, WatchStreamExt as _, watcher};

use super::context::Context;
use super::watches;
use crate::api::{Cluster, MachinePool, ProviderModule, WasmBootstrapConfig};

pub use reconcile::GENERATION_ANNOTATION;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "bootstrap";

/// Runs the controller until `shutdown` completes.
pub fn run(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let metrics = ctx.metrics.clone();
    let client = ctx.client.clone();
    let controller = Controller::new(
        Api::<WasmBootstrapConfig>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(kube::runtime::controller::Config::default().debounce(ctx.settings.debounce));
    let store = controller.store();
    let secrets = watcher(
        Api::<PartialObjectMeta<Secret>>::all(client.clone()),
        watcher::Config::default().labels(crate::api::labels::CLUSTER_NAME),
    )
    .default_backoff()
    .touched_objects();
    controller
        .owns_stream(secrets)
        .watches(
            Api::<MachinePool>::all(client.clone()),
            watcher::Config::default(),
            |pool| {
                let reference = pool.spec.template.spec.bootstrap.config_ref.clone()?;
                (reference.kind == "WasmBootstrapConfig"
                    && reference.api_group == crate::api::provider::BOOTSTRAP_GROUP)
                    .then(|| {
                        ObjectRef::new(&reference.name)
                            .within(pool.metadata.namespace.as_deref().unwrap_or_default())
                    })
            },
        )
        .watches(
            Api::<Cluster>::all(client.clone()),
            watches::cluster_changes(),
            watches::by_cluster_label(store.clone()),
        )
        .watches(
            Api::<ProviderModule>::all(client),
            watcher::Config::default(),
            watches::by_provider(store, |c: &WasmBootstrapConfig| c.spec.provider.clone()),
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(super::watches::count_watch_errors(CONTROLLER, metrics))
}
