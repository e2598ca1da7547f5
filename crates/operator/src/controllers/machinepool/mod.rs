//! The MachinePool controller (standalone mode): bootstrap and
//! infrastructure phases over referenced objects of any contract-labelled
//! kind, and the node phase through the workload cluster.

mod bootstrap;
mod delete;
mod infrastructure;
mod machines;
mod noderefs;
mod phase;
mod reconcile;
mod scope;
mod spec;
mod status;
mod summary;

use std::future::Future;
use std::sync::Arc;

use futures::{Stream, StreamExt as _};

use kube::runtime::Controller;
use kube::runtime::reflector::{ObjectRef, Store};

use super::cache::Index;
use super::context::Context;
use super::reconciler::{error_policy, reconcile};
use super::watches;
use crate::api::MachinePool;
use crate::workload::NodeEvent;

pub(crate) use delete::{deadline, timeout_passed};
pub(crate) use noderefs::delete_nodes;
pub use phase::Phase;
pub(crate) use status::ready_since;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "machinepool";

/// Runs the controller until `shutdown` completes. `referenced` yields pools
/// owning or referencing a changed bootstrap or infrastructure object;
/// `nodes` the changes to workload-cluster Nodes.
pub fn run(
    ctx: Arc<Context>,
    referenced: impl Stream<Item = ObjectRef<MachinePool>> + Send + 'static,
    nodes: impl Stream<Item = NodeEvent> + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let caches = &ctx.caches;
    let store = caches.pools.store().clone();
    let of_node = (store.clone(), caches.pools_by_cluster.clone());
    Controller::for_shared_stream(caches.pools.subscribe(), store.clone())
        .with_config(ctx.settings.controller(ctx.settings.core_debounce))
        .reconcile_on(referenced)
        .reconcile_on(
            nodes.filter_map(move |event| futures::future::ready(pool_of_node(&of_node, &event))),
        )
        .watches_shared_stream(
            caches.clusters.subscribe(),
            watches::by_cluster(store.clone(), caches.pools_by_cluster.clone()),
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile::<MachinePool>, error_policy::<MachinePool>, ctx)
        .for_each(|_| futures::future::ready(()))
}

/// The one pool of the Node's Cluster that references the Node by name, or
/// else lists its providerID; nothing if none or several do (upstream).
fn pool_of_node(
    (store, by_cluster): &(Store<MachinePool>, Index<MachinePool>),
    event: &NodeEvent,
) -> Option<ObjectRef<MachinePool>> {
    let pools = by_cluster.get(store, &event.cluster.to_string());
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ObjectReference;
    use kube::runtime::{reflector, watcher};

    use super::*;
    use crate::workload::ClusterKey;
    use capwasm_api::testing::MachinePoolBuilder;

    /// Pool `name` of Cluster `cluster` in `ns` listing `ids` and referencing `nodes`.
    fn pool(ns: &str, name: &str, cluster: &str, ids: &[&str], nodes: &[&str]) -> MachinePool {
        let mut pool = MachinePoolBuilder::new(ns, name, cluster).build();
        pool.spec.provider_id_list = ids.iter().map(|&id| id.to_owned()).collect();
        pool.status.get_or_insert_default().node_refs = nodes
            .iter()
            .map(|&node| ObjectReference {
                kind: Some("Node".into()),
                name: Some(node.into()),
                ..ObjectReference::default()
            })
            .collect();
        pool
    }

    fn event(cluster: &str, node: &str, provider_id: Option<&str>) -> NodeEvent {
        NodeEvent {
            cluster: ClusterKey::new("ns", cluster),
            node_name: node.into(),
            provider_id: provider_id.map(Into::into),
        }
    }

    /// Check 38, and the matching the node phase relies on.
    #[test]
    fn a_node_event_brings_the_one_pool_that_references_or_lists_the_node() {
        let (store, mut writer) = reflector::store::<MachinePool>();
        let index = crate::controllers::cache::pools_by_cluster();
        for pool in [
            pool("ns", "a", "c1", &["sim://r/1"], &["n1"]),
            pool("ns", "b", "c1", &["sim://r/2", "sim://r/shared"], &[]),
            pool("ns", "c", "c1", &["sim://r/shared"], &[]),
            pool("ns", "d", "c2", &["sim://r/9"], &["n9"]),
            pool("other", "e", "c1", &["sim://r/3"], &["n3"]),
        ] {
            let event = watcher::Event::Apply(pool);
            index.apply(&event);
            writer.apply_watcher_event(&event);
        }
        let cached = (store, index);
        let name = |e: &NodeEvent| pool_of_node(&cached, e).map(|r| r.name);
        let cases = [
            // By nodeRef name, whatever the providerID says.
            (event("c1", "n1", Some("sim://r/2")), Some("a")),
            // Not referenced yet: by providerID.
            (event("c1", "n2", Some("sim://r/2")), Some("b")),
            // Listed by two pools: nothing (upstream).
            (event("c1", "n7", Some("sim://r/shared")), None),
            // Another Cluster's pool, or the same name in another namespace: nothing.
            (event("c1", "n9", Some("sim://r/9")), None),
            (event("c1", "n3", Some("sim://r/3")), None),
            // Neither referenced nor listed, or no providerID yet: nothing.
            (event("c1", "n8", Some("sim://r/8")), None),
            (event("c1", "n8", None), None),
        ];
        for (event, expected) in cases {
            assert_eq!(name(&event).as_deref(), expected, "{event:?}");
        }
    }
}
