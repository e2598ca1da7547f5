//! The ProviderModule controller: loads each module's component (fetched,
//! verified against its digest, compiled or taken from the precompiled
//! cache, checked) and swaps it into service; a module that fails any step
//! never replaces the working version, and its status says why.

mod reconcile;

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, WatchStreamExt as _, watcher};

use super::context::Context;
use crate::api::ProviderModule;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "providermodule";

/// Runs the controller until `shutdown` completes.
pub fn run(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let metrics = ctx.metrics.clone();
    let modules: Api<ProviderModule> = Api::all(ctx.client.clone());
    let controller = Controller::new(modules, watcher::Config::default())
        .with_config(kube::runtime::controller::Config::default().debounce(ctx.settings.debounce));
    let store = controller.store();
    // ConfigMap sources: a changed ConfigMap reloads the modules reading it.
    let config_maps = watcher(
        Api::<PartialObjectMeta<ConfigMap>>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .touched_objects();
    controller
        .watches_stream(config_maps, move |config_map| {
            let namespace = config_map.metadata.namespace.unwrap_or_default();
            let name = config_map.metadata.name.unwrap_or_default();
            store
                .state()
                .into_iter()
                .filter(|m| {
                    m.spec
                        .source
                        .config_map
                        .as_ref()
                        .is_some_and(|c| c.namespace == namespace && c.name == name)
                })
                .map(|m| ObjectRef::from_obj(&*m))
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(super::watches::count_watch_errors(CONTROLLER, metrics))
}
