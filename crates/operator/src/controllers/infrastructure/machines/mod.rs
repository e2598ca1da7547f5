//! A pool's instances as WasmMachines, the InfraMachines of the Cluster API
//! contract for MachinePool Machines, for providers that remove instances
//! one by one (`pool-machines`, WIT 0.1.2).
//!
//! One WasmMachine per instance, labelled with its Cluster and MachinePool
//! (core lists them so and makes a Machine of each) and owned by the
//! WasmMachinePool. A WasmMachine being deleted (core deletes it once its
//! Machine's Node is drained) has its instance removed by the provider,
//! and keeps its finalizer until the instance is gone. On scale-down the
//! instances to go are chosen here, those whose Machine is annotated
//! `cluster.x-k8s.io/delete-machine` first, and their Machines deleted, so
//! that core drains the Nodes before the instances go. Everything runs in
//! the pool's reconcile: one writer of the pool's instances.

mod capi;
mod objects;

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::ResourceExt as _;

pub use capi::{CoreMachines, going, scale_down};
pub use objects::{release, sync};

use super::{CONTROLLER, guest_io};
use crate::api::conditions;
use crate::api::provider::{INFRASTRUCTURE_FIELD_MANAGER, InstanceState, InstanceStatus};
use crate::api::{Cluster, ConditionType, MachinePool, WasmMachine, WasmMachinePool};
use crate::controllers::cache::cluster_key;
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::provider::{self, Prepared};
use crate::controllers::write::Author;
use crate::wasm::pool_machines::RemoveRequest;
use crate::wasm::types::ClusterInfo;

/// The kind `status.infrastructureMachineKind` names.
pub const KIND: &str = "WasmMachine";

const AUTHOR: Author = Author {
    controller: CONTROLLER,
    manager: INFRASTRUCTURE_FIELD_MANAGER,
};

/// The WasmMachines `pool` owns (by UID), as cached: what its deletion
/// releases.
pub fn of_pool(ctx: &Context, pool: &WasmMachinePool) -> Vec<Arc<WasmMachine>> {
    let uid = pool.uid();
    ctx.caches
        .infra_machines_by_pool
        .get(
            ctx.caches.infra_machines.store(),
            &cluster_key(pool, &pool.name_any()),
        )
        .into_iter()
        .filter(|m| m.pool_owner().is_some_and(|o| Some(&o.uid) == uid.as_ref()))
        .collect()
}

/// Of those, the ones this controller made for `machine_pool`'s instances
/// ([`objects::made_for`]): the only ones whose deletion removes an
/// instance, or which it writes.
pub fn made_for(
    ctx: &Context,
    pool: &WasmMachinePool,
    machine_pool: &MachinePool,
) -> Vec<Arc<WasmMachine>> {
    of_pool(ctx, pool)
        .into_iter()
        .filter(|m| objects::made_for(m, machine_pool))
        .collect()
}

/// Whether the pool's Cluster's control plane is initialized (its
/// `ControlPlaneInitialized` condition, which upstream's Machine controller
/// reads): only then are its instances Machines. Before, core could neither
/// tell a Machine's Node healthy nor count the pool's Machines ready; the
/// pool then counts its Nodes, as without Machines.
pub fn control_plane_initialized(cluster: Option<&Cluster>) -> bool {
    cluster
        .and_then(|c| c.status.as_ref())
        .is_some_and(|s| conditions::is_true(&s.conditions, ConditionType::ControlPlaneInitialized))
}

/// Whether an instance still counts towards the pool's size.
pub fn up(instance: &InstanceStatus) -> bool {
    instance.state != InstanceState::Terminating
}

/// The instances up whose WasmMachine is being deleted: the provider
/// removes them.
pub fn to_remove(machines: &[Arc<WasmMachine>], instances: &[InstanceStatus]) -> Vec<String> {
    let deleting: BTreeSet<&str> = machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_some())
        .map(|m| m.spec.instance_id.as_str())
        .collect();
    instances
        .iter()
        .filter(|i| up(i) && deleting.contains(i.id.as_str()))
        .map(|i| i.id.clone())
        .collect()
}

/// The pool's instances once its provider removed those whose WasmMachine
/// is being deleted (`recorded` when there are none).
pub async fn remove_deleted(
    ctx: &Context,
    pool: &WasmMachinePool,
    prepared: &Prepared,
    cluster: &ClusterInfo,
    machines: &[Arc<WasmMachine>],
    recorded: Vec<InstanceStatus>,
) -> Result<Vec<InstanceStatus>, Error> {
    let remove = to_remove(machines, &recorded);
    if remove.is_empty() {
        return Ok(recorded);
    }
    let request = RemoveRequest {
        pool: provider::object_ref(pool),
        cluster: cluster.clone(),
        config: prepared.config.clone(),
        remove,
        instances: guest_io::to_instances(&recorded),
        idempotency_key: pool.uid().unwrap_or_default(),
        credentials: prepared.credentials.clone(),
    };
    let state = ctx
        .runtime
        .remove_instances(&pool.spec.provider, &request)
        .await
        .map_err(Error::Guest)?;
    Ok(guest_io::from_instances(&state.instances))
}
