//! The Machine controller (standalone mode), for the Machines MachinePools
//! make of their InfraMachines: adopts the InfraMachine and copies its
//! providerID and addresses, finds the Node by providerID, and on deletion
//! drains that Node (cordon, evictions that honour PodDisruptionBudgets,
//! `nodeDrainTimeoutSeconds`), deletes the InfraMachine (its instance goes
//! with it) and then the Node, as upstream's Machine controller does.

mod delete;
mod drain;
mod infrastructure;
mod node;
mod reconcile;
mod summary;

use std::future::Future;
use std::sync::Arc;

use futures::{Stream, StreamExt as _};
use kube::ResourceExt as _;
use kube::runtime::Controller;
use kube::runtime::reflector::{ObjectRef, Store};

use super::cache::Index;
use super::context::Context;
use super::reconciler::{error_policy, reconcile};
use crate::api::{CLUSTER_API_GROUP, Machine, WasmMachine};
use crate::workload::NodeEvent;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "machine";

/// What the phases found.
#[derive(Default)]
pub struct Found {
    /// The drain is done or not to be done (delete phase).
    pub drained: bool,
    /// The InfraMachine is gone (delete phase).
    pub infrastructure_gone: bool,
    /// The Node stays: its Cluster is being deleted or gone (delete phase).
    pub keep_node: bool,
}

/// Runs the controller until `shutdown` completes: Machines, brought back
/// by their InfraMachines' changes, their Cluster's, and their Nodes'.
pub fn run(
    ctx: Arc<Context>,
    nodes: impl Stream<Item = NodeEvent> + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let caches = &ctx.caches;
    let store = caches.machines.store().clone();
    let of_node = (store.clone(), caches.machines_by_provider_id.clone());
    Controller::for_shared_stream(caches.machines.subscribe(), store.clone())
        .with_config(ctx.settings.controller(ctx.settings.core_debounce))
        .reconcile_on(
            nodes
                .filter_map(move |event| futures::future::ready(machine_of_node(&of_node, &event))),
        )
        .watches_shared_stream(caches.infra_machines.subscribe(), |infra| {
            machines_of(&infra)
        })
        .graceful_shutdown_on(shutdown)
        .run(reconcile::<Machine>, error_policy::<Machine>, ctx)
        .for_each(|_| futures::future::ready(()))
}

/// The Machines an InfraMachine's change concerns: the one controlling it,
/// and the one of its name (a pool's Machine, before it adopted it).
fn machines_of(infra: &WasmMachine) -> Vec<ObjectRef<Machine>> {
    let namespace = infra.namespace().unwrap_or_default();
    let mut refs: Vec<ObjectRef<Machine>> = infra
        .owner_references()
        .iter()
        .filter(|o| {
            o.kind == "Machine" && o.api_version.split('/').next() == Some(CLUSTER_API_GROUP)
        })
        .map(|o| ObjectRef::new(&o.name).within(&namespace))
        .collect();
    let named = ObjectRef::new(&infra.name_any()).within(&namespace);
    if !refs.contains(&named) {
        refs.push(named);
    }
    refs
}

/// The Machines whose providerID the Node reports, of its Cluster.
fn machine_of_node(
    (store, by_provider_id): &(Store<Machine>, Index<Machine>),
    event: &NodeEvent,
) -> Option<ObjectRef<Machine>> {
    let id = event.provider_id.as_deref()?;
    let key = format!("{}/{id}", event.cluster);
    by_provider_id
        .get(store, &key)
        .first()
        .map(|m| ObjectRef::from_obj(&**m))
}
