//! The WasmMachinePool and WasmCluster controllers: infrastructure from an
//! infrastructure-provider component.

mod cluster;
mod guest_io;
mod machinepool;
mod machines;
mod rollout;

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt as _;
use kube::runtime::Controller;

use super::context::Context;
use super::reconciler::{error_policy, reconcile};
use super::watches;
use crate::api::provider::INFRASTRUCTURE_GROUP;
use crate::api::{WasmCluster, WasmMachinePool};

/// The WasmMachinePool controller's name in metrics and logs.
pub const CONTROLLER: &str = "wasmmachinepool";
/// The WasmCluster controller's name in metrics and logs.
pub const CONTROLLER_CLUSTER: &str = "wasmcluster";

/// Runs the WasmMachinePool controller until `shutdown` completes.
pub fn run_machine_pools(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let caches = &ctx.caches;
    let store = caches.infra_pools.store().clone();
    Controller::for_shared_stream(caches.infra_pools.subscribe(), store.clone())
        .with_config(ctx.settings.controller(ctx.settings.debounce))
        .watches_shared_stream(caches.pools.subscribe(), |pool| {
            watches::referenced(
                &pool.spec.template.spec.infrastructure_ref,
                (INFRASTRUCTURE_GROUP, "WasmMachinePool"),
                pool.metadata.namespace.as_deref(),
            )
        })
        .watches_shared_stream(
            caches.clusters.subscribe(),
            watches::by_cluster(store.clone(), caches.infra_pools_by_cluster.clone()),
        )
        // A WasmMachine deleted (its Machine's Node drained): its instance goes.
        .watches_shared_stream(caches.infra_machines.subscribe(), |machine| {
            let owner = machine.pool_owner()?;
            Some(
                kube::runtime::reflector::ObjectRef::new(&owner.name)
                    .within(machine.metadata.namespace.as_deref().unwrap_or_default()),
            )
        })
        .watches_shared_stream(
            caches.modules.subscribe(),
            watches::by_provider(store.clone()),
        )
        .reconcile_on(watches::installed(ctx.runtime.registry().installs(), store))
        .graceful_shutdown_on(shutdown)
        .run(
            reconcile::<WasmMachinePool>,
            error_policy::<WasmMachinePool>,
            ctx,
        )
        .for_each(|_| futures::future::ready(()))
}

/// Runs the WasmCluster controller until `shutdown` completes.
pub fn run_clusters(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let caches = &ctx.caches;
    let store = caches.infra_clusters.store().clone();
    Controller::for_shared_stream(caches.infra_clusters.subscribe(), store.clone())
        .with_config(ctx.settings.controller(ctx.settings.debounce))
        .watches_shared_stream(caches.clusters.subscribe(), |cluster| {
            watches::referenced(
                cluster.spec.infrastructure_ref.as_ref()?,
                (INFRASTRUCTURE_GROUP, "WasmCluster"),
                cluster.metadata.namespace.as_deref(),
            )
        })
        .watches_shared_stream(
            caches.modules.subscribe(),
            watches::by_provider(store.clone()),
        )
        .reconcile_on(watches::installed(ctx.runtime.registry().installs(), store))
        .graceful_shutdown_on(shutdown)
        .run(reconcile::<WasmCluster>, error_policy::<WasmCluster>, ctx)
        .for_each(|_| futures::future::ready(()))
}
