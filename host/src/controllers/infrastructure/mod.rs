//! The WasmMachinePool and WasmCluster controllers: infrastructure from an
//! infrastructure-provider component.

mod cluster;
mod guest_io;
mod machinepool;

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt as _;
use kube::Api;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};

use super::context::Context;
use super::watches;
use crate::api::provider::INFRASTRUCTURE_GROUP;
use crate::api::{Cluster, MachinePool, ProviderModule, WasmCluster, WasmMachinePool};

/// The WasmMachinePool controller's name in metrics and logs.
pub const CONTROLLER: &str = "wasmmachinepool";
/// The WasmCluster controller's name in metrics and logs.
pub const CONTROLLER_CLUSTER: &str = "wasmcluster";

/// Runs the WasmMachinePool controller until `shutdown` completes.
pub fn run_machine_pools(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let metrics = ctx.metrics.clone();
    let client = ctx.client.clone();
    let controller = Controller::new(
        Api::<WasmMachinePool>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(kube::runtime::controller::Config::default().debounce(ctx.settings.debounce));
    let store = controller.store();
    controller
        .watches(
            Api::<MachinePool>::all(client.clone()),
            watcher::Config::default(),
            |pool| {
                let reference = &pool.spec.template.spec.infrastructure_ref;
                (reference.kind == "WasmMachinePool" && reference.api_group == INFRASTRUCTURE_GROUP)
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
            watches::by_provider(store, |p: &WasmMachinePool| p.spec.provider.clone()),
        )
        .graceful_shutdown_on(shutdown)
        .run(machinepool::reconcile, machinepool::error_policy, ctx)
        .for_each(super::watches::count_watch_errors(CONTROLLER, metrics))
}

/// Runs the WasmCluster controller until `shutdown` completes.
pub fn run_clusters(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let metrics = ctx.metrics.clone();
    let client = ctx.client.clone();
    let controller = Controller::new(
        Api::<WasmCluster>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(kube::runtime::controller::Config::default().debounce(ctx.settings.debounce));
    let store = controller.store();
    controller
        .watches(
            Api::<Cluster>::all(client.clone()),
            watches::cluster_changes(),
            |cluster| {
                let reference = cluster.spec.infrastructure_ref.as_ref()?;
                (reference.kind == "WasmCluster" && reference.api_group == INFRASTRUCTURE_GROUP)
                    .then(|| {
                        ObjectRef::new(&reference.name)
                            .within(cluster.metadata.namespace.as_deref().unwrap_or_default())
                    })
            },
        )
        .watches(
            Api::<ProviderModule>::all(client),
            watcher::Config::default(),
            watches::by_provider(store, |c: &WasmCluster| c.spec.provider.clone()),
        )
        .graceful_shutdown_on(shutdown)
        .run(cluster::reconcile, cluster::error_policy, ctx)
        .for_each(super::watches::count_watch_errors(
            CONTROLLER_CLUSTER,
            metrics,
        ))
}
