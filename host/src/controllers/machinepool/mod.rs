//! The MachinePool controller (standalone mode): bootstrap and
//! infrastructure phases over referenced objects of any contract-labelled
//! kind, and the node phase through the workload cluster.

mod bootstrap;
mod delete;
mod infrastructure;
mod noderefs;
mod phase;
mod reconcile;
mod scope;
mod status;

use std::future::Future;
use std::sync::Arc;

use futures::{Stream, StreamExt as _};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Api, ResourceExt as _};

use super::context::Context;
use crate::api::{Cluster, MachinePool};
use crate::workload::NodeEvent;

pub use phase::Phase;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "machinepool";

/// Runs the controller until `shutdown` completes. `referenced` yields pools
/// owning a changed bootstrap or infrastructure object; `nodes` the changes
/// to workload-cluster Nodes.
pub fn run(
    ctx: Arc<Context>,
    referenced: impl Stream<Item = ObjectRef<MachinePool>> + Send + 'static,
    nodes: impl Stream<Item = NodeEvent> + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let client = ctx.client.clone();
    let controller = Controller::new(
        Api::<MachinePool>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(kube::runtime::controller::Config::default().debounce(ctx.settings.core_debounce));
    let store = controller.store();
    let node_store = store.clone();
    let cluster_store = store;
    controller
        .reconcile_on(referenced)
        .reconcile_on(
            nodes
                .filter_map(move |event| futures::future::ready(pool_of_node(&node_store, &event))),
        )
        .watches(
            Api::<Cluster>::all(client),
            watcher::Config::default(),
            move |cluster| {
                let namespace = cluster.namespace().unwrap_or_default();
                let name = cluster.name_any();
                cluster_store
                    .state()
                    .iter()
                    .filter(|p| {
                        p.namespace().as_deref() == Some(namespace.as_str())
                            && p.spec.cluster_name == name
                    })
                    .map(|p| ObjectRef::from_obj(&**p))
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|_| futures::future::ready(()))
}

/// The one pool of the Node's Cluster that references the Node by name, or
/// else lists its providerID; nothing if none or several do (upstream).
fn pool_of_node(store: &Store<MachinePool>, event: &NodeEvent) -> Option<ObjectRef<MachinePool>> {
    let pools: Vec<Arc<MachinePool>> = store
        .state()
        .into_iter()
        .filter(|p| {
            p.namespace().as_deref() == Some(event.cluster.namespace.as_str())
                && p.spec.cluster_name == event.cluster.name
        })
        .collect();
    let one = |matching: Vec<&Arc<MachinePool>>| match matching.as_slice() {
        [pool] => Some(ObjectRef::from_obj(&***pool)),
        _ => None,
    };
    let by_name = pools
        .iter()
        .filter(|p| {
            p.status.as_ref().is_some_and(|s| {
                s.node_refs
                    .iter()
                    .any(|r| r.name.as_deref() == Some(&event.node_name))
            })
        })
        .collect();
    one(by_name).or_else(|| {
        let id = event.provider_id.as_deref()?;
        one(pools
            .iter()
            .filter(|p| p.spec.provider_id_list.iter().any(|p| p == id))
            .collect())
    })
}
