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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
    Preconditions,
};
use kube::core::{ObjectMeta, PartialObjectMeta};
use kube::{Resource as _, ResourceExt as _};
use serde_json::json;
use sha2::Digest as _;

use super::{CONTROLLER, guest_io};
use crate::api::conditions;
use crate::api::machine::{MACHINE_FINALIZER, WasmMachineSpec, WasmMachineStatus, pool_name_label};
use crate::api::provider::{
    INFRASTRUCTURE_FIELD_MANAGER, InfrastructureInitialization, InstanceState, InstanceStatus,
};
use crate::api::{
    Cluster, ConditionType, MachinePool, WasmMachine, WasmMachinePool, annotations, labels,
};
use crate::controllers::cache::cluster_key;
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::finalizer;
use crate::controllers::provider::{self, Prepared};
use crate::controllers::write::{self, Author};
use crate::wasm::pool_machines::RemoveRequest;
use crate::wasm::types::ClusterInfo;

/// The kind `status.infrastructureMachineKind` names.
pub const KIND: &str = "WasmMachine";

const AUTHOR: Author = Author {
    controller: CONTROLLER,
    manager: INFRASTRUCTURE_FIELD_MANAGER,
};

/// The WasmMachines of `pool`, as cached.
pub fn of_pool(ctx: &Context, pool: &WasmMachinePool) -> Vec<Arc<WasmMachine>> {
    let uid = pool.uid();
    ctx.caches
        .infra_machines_by_pool
        .get(
            ctx.caches.infra_machines.store(),
            &cluster_key(pool, &pool.name_any()),
        )
        .into_iter()
        .filter(|m| {
            m.owner_references()
                .iter()
                .any(|o| o.kind == "WasmMachinePool" && Some(&o.uid) == uid.as_ref())
        })
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

/// The name of the WasmMachine (and so of the Machine) of instance `id` of
/// pool `pool`: `<pool>-<id>` as a DNS label of at most 63 characters, with
/// a hash of the id where the id had to change to fit.
pub fn name(pool: &str, id: &str) -> String {
    let cleaned: String = id
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let cleaned = cleaned.trim_matches('-');
    let suffix = if cleaned == id && id.len() <= 40 {
        cleaned.to_owned()
    } else {
        let hash = hex::encode(sha2::Sha256::digest(id.as_bytes()));
        let keep = cleaned.get(..cleaned.len().min(40)).unwrap_or_default();
        format!(
            "{}-{}",
            keep.trim_end_matches('-'),
            hash.get(..8).unwrap_or_default()
        )
        .trim_start_matches('-')
        .to_owned()
    };
    let room = 63usize.saturating_sub(suffix.len() + 1);
    let pool = pool.get(..pool.len().min(room)).unwrap_or_default();
    match pool.trim_end_matches(['-', '.']) {
        "" => suffix,
        pool => format!("{pool}-{suffix}"),
    }
}

/// What a WasmMachine of `instance` reports.
fn status_of(instance: &InstanceStatus, before: &WasmMachineStatus) -> WasmMachineStatus {
    let running = instance.state == InstanceState::Running;
    // Provisioned stays provisioned: core reads a change back as a fault.
    let provisioned = running
        || before
            .initialization
            .as_ref()
            .and_then(|i| i.provisioned)
            .unwrap_or(false);
    WasmMachineStatus {
        ready: provisioned,
        initialization: provisioned.then_some(InfrastructureInitialization {
            provisioned: Some(true),
        }),
        state: Some(instance.state),
        failure_domain: instance.failure_domain.clone(),
        addresses: instance.addresses.clone(),
        common: before.common.clone(),
    }
}

/// Brings the pool's WasmMachines in line with its instances: one for each
/// instance up, each reporting its instance; the finalizer of one being
/// deleted removed once its instance is gone; one whose instance went
/// another way (the cloud ended it) deleted, through its Machine if it has
/// one, so that core deletes the Node.
pub async fn sync(
    ctx: &Context,
    pool: &WasmMachinePool,
    machine_pool: &MachinePool,
    machines: &[Arc<WasmMachine>],
    instances: &[InstanceStatus],
) -> Result<(), Error> {
    let by_id: BTreeMap<&str, &InstanceStatus> =
        instances.iter().map(|i| (i.id.as_str(), i)).collect();
    let mut have = BTreeSet::new();
    for machine in machines {
        have.insert(machine.spec.instance_id.as_str());
        let instance = by_id.get(machine.spec.instance_id.as_str());
        if machine.metadata.deletion_timestamp.is_some() {
            if instance.is_none() {
                finalizer::remove(ctx, CONTROLLER, &**machine, MACHINE_FINALIZER).await?;
            }
            continue;
        }
        let Some(instance) = instance else {
            delete_machine_of(ctx, machine).await?;
            continue;
        };
        let provider_id = (!instance.provider_id.is_empty()).then(|| instance.provider_id.clone());
        if provider_id.is_some() && machine.spec.provider_id != provider_id {
            let spec = json!({ "spec": { "providerID": provider_id } });
            write::fields(ctx, AUTHOR, &**machine, "spec", spec).await?;
        }
        let before = machine.status.clone().unwrap_or_default();
        let after = status_of(instance, &before);
        if worth_writing(&before, &after) {
            write::status(ctx, AUTHOR, &**machine, &before, &after).await?;
        }
    }
    for instance in instances
        .iter()
        .filter(|i| up(i) && !have.contains(i.id.as_str()))
    {
        create(ctx, pool, machine_pool, instance).await?;
    }
    Ok(())
}

/// Creates the WasmMachine of `instance`, then its status if it has one
/// worth writing ([`worth_writing`]). One that exists
/// already (a cache behind) is left as it is: the next pass reads it.
async fn create(
    ctx: &Context,
    pool: &WasmMachinePool,
    machine_pool: &MachinePool,
    instance: &InstanceStatus,
) -> Result<(), Error> {
    let namespace = pool.namespace().unwrap_or_default();
    let owner = OwnerReference {
        block_owner_deletion: Some(true),
        controller: None,
        ..pool.controller_owner_ref(&()).unwrap_or_default()
    };
    let name = name(&machine_pool.name_any(), &instance.id);
    let machine = WasmMachine {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            labels: Some(BTreeMap::from([
                (
                    labels::CLUSTER_NAME.to_owned(),
                    machine_pool.spec.cluster_name.clone(),
                ),
                (
                    labels::POOL_NAME.to_owned(),
                    pool_name_label(&machine_pool.name_any()),
                ),
            ])),
            owner_references: Some(vec![owner]),
            finalizers: Some(vec![MACHINE_FINALIZER.to_owned()]),
            ..ObjectMeta::default()
        },
        spec: WasmMachineSpec {
            instance_id: instance.id.clone(),
            provider_id: (!instance.provider_id.is_empty()).then(|| instance.provider_id.clone()),
        },
        status: None,
    };
    let api: Api<WasmMachine> = Api::namespaced(ctx.client.clone(), &namespace);
    let created = match api.create(&PostParams::default(), &machine).await {
        Ok(created) => created,
        Err(kube::Error::Api(status)) if status.code == 409 => return Ok(()),
        Err(source) => {
            return Err(Error::Write {
                what: "WasmMachine",
                name,
                source,
            });
        }
    };
    ctx.metrics.write(CONTROLLER, "WasmMachine");
    let before = WasmMachineStatus::default();
    let after = status_of(instance, &before);
    if worth_writing(&before, &after) {
        write::status(ctx, AUTHOR, &created, &before, &after).await?;
    }
    Ok(())
}

/// Whether a WasmMachine's status is worth a write: not for an instance
/// still booting with nothing reported yet (no status says as much), so
/// that an instance costs its WasmMachine two writes, not three.
fn worth_writing(before: &WasmMachineStatus, after: &WasmMachineStatus) -> bool {
    after != before
        && (*before != WasmMachineStatus::default()
            || after.ready
            || after.state == Some(InstanceState::Failed))
}

/// The Machine kind of Cluster API core.
fn machines_api(ctx: &Context, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(crate::api::CLUSTER_API_GROUP, "v1beta2", "Machine"),
        "machines",
    );
    Api::namespaced_with(ctx.client.clone(), namespace, &resource)
}

/// The Machine owning `machine`, if core made one.
fn machine_owner(machine: &WasmMachine) -> Option<&OwnerReference> {
    machine.owner_references().iter().find(|o| {
        o.kind == "Machine"
            && o.api_version.split('/').next() == Some(crate::api::CLUSTER_API_GROUP)
    })
}

/// Deletes `machine`'s Machine (its UID as the precondition), or the
/// WasmMachine itself when core made none: either way core or this
/// controller then removes the instance after its Node is drained.
async fn delete_machine_of(ctx: &Context, machine: &WasmMachine) -> Result<(), Error> {
    let namespace = machine.namespace().unwrap_or_default();
    let params = |uid: Option<String>| DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    let (result, what, name) = match machine_owner(machine) {
        Some(owner) => (
            machines_api(ctx, &namespace)
                .delete(&owner.name, &params(Some(owner.uid.clone())))
                .await
                .map(drop),
            "Machine",
            owner.name.clone(),
        ),
        None => (
            Api::<WasmMachine>::namespaced(ctx.client.clone(), &namespace)
                .delete(&machine.name_any(), &params(machine.uid()))
                .await
                .map(drop),
            "WasmMachine",
            machine.name_any(),
        ),
    };
    match result {
        Ok(()) => {
            ctx.metrics.write(CONTROLLER, "delete");
            Ok(())
        }
        // Gone, or another object of that name now: not ours to delete.
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(source) => Err(Error::Write { what, name, source }),
    }
}

/// Scales the pool down to `desired` instances up: chooses the instances to
/// go beyond those going already (those whose Machine is annotated
/// `cluster.x-k8s.io/delete-machine` first, then those not running, then
/// the oldest) and deletes their Machines. How many it chose.
pub async fn scale_down(
    ctx: &Context,
    machines: &[Arc<WasmMachine>],
    instances: &[InstanceStatus],
    desired: usize,
) -> Result<usize, Error> {
    let up: BTreeMap<&str, &InstanceStatus> = instances
        .iter()
        .filter(|i| up(i))
        .map(|i| (i.id.as_str(), i))
        .collect();
    if up.len() <= desired {
        return Ok(0);
    }
    let owned = machines.iter().filter(|m| machine_owner(m).is_some());
    let core = if owned.clone().next().is_some() {
        core_machines(ctx, machines).await?
    } else {
        BTreeMap::new()
    };
    let going = |m: &WasmMachine| {
        m.metadata.deletion_timestamp.is_some()
            || machine_owner(m)
                .and_then(|o| core.get(&o.uid))
                .is_some_and(|c| c.metadata.deletion_timestamp.is_some())
    };
    let staying: Vec<&Arc<WasmMachine>> = machines
        .iter()
        .filter(|m| up.contains_key(m.spec.instance_id.as_str()) && !going(m))
        .collect();
    let goes = up
        .len()
        .saturating_sub(desired)
        .saturating_sub(up.len().saturating_sub(staying.len()));
    let mut ranked = staying;
    ranked.sort_by_key(|m| {
        let annotated = machine_owner(m)
            .and_then(|o| core.get(&o.uid))
            .is_some_and(|c| c.annotations().contains_key(annotations::DELETE_MACHINE));
        let running = up
            .get(m.spec.instance_id.as_str())
            .is_some_and(|i| i.state == InstanceState::Running);
        (
            !annotated,
            running,
            m.metadata.creation_timestamp.clone(),
            m.name_any(),
        )
    });
    for machine in ranked.iter().take(goes) {
        delete_machine_of(ctx, machine).await?;
    }
    Ok(goes.min(ranked.len()))
}

/// Core's Machines owning `machines`, by UID, metadata only.
async fn core_machines(
    ctx: &Context,
    machines: &[Arc<WasmMachine>],
) -> Result<BTreeMap<String, PartialObjectMeta<DynamicObject>>, Error> {
    let Some(first) = machines.first() else {
        return Ok(BTreeMap::new());
    };
    let namespace = first.namespace().unwrap_or_default();
    let selector: Vec<String> = [labels::CLUSTER_NAME, labels::POOL_NAME]
        .iter()
        .filter_map(|key| Some(format!("{key}={}", first.labels().get(*key)?)))
        .collect();
    let listed = machines_api(ctx, &namespace)
        .list_metadata(&ListParams::default().labels(&selector.join(",")))
        .await
        .map_err(|source| Error::Get {
            kind: "Machine",
            name: selector.join(","),
            source,
        })?;
    Ok(listed
        .items
        .into_iter()
        .filter_map(|m| Some((m.metadata.uid.clone()?, m)))
        .collect())
}

/// Once the pool is deleted, its instances with it: every WasmMachine's
/// finalizer removed, so that they go too.
pub async fn release(ctx: &Context, machines: &[Arc<WasmMachine>]) -> Result<(), Error> {
    for machine in machines {
        finalizer::remove(ctx, CONTROLLER, &**machine, MACHINE_FINALIZER).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_booting_instance_costs_no_status_write_until_it_runs_or_fails() {
        let instance = |state| InstanceStatus {
            id: "i-1".into(),
            provider_id: "sim://r/i-1".into(),
            state,
            ..InstanceStatus::default()
        };
        let none = WasmMachineStatus::default();
        let pending = status_of(&instance(InstanceState::Pending), &none);
        assert!(!worth_writing(&none, &pending));
        let running = status_of(&instance(InstanceState::Running), &none);
        assert!(running.ready && worth_writing(&none, &running));
        assert!(worth_writing(
            &none,
            &status_of(&instance(InstanceState::Failed), &none)
        ));
        // Once running, it stays provisioned, and its state change is written.
        let terminating = status_of(&instance(InstanceState::Terminating), &running);
        assert!(terminating.ready && worth_writing(&running, &terminating));
        assert!(!worth_writing(&running, &running));
    }

    #[test]
    fn names_are_dns_labels_of_the_pool_and_instance() {
        assert_eq!(name("pool-a", "i-0abc"), "pool-a-i-0abc");
        let odd = name("pool-a", "Pool_A/7");
        assert!(odd.starts_with("pool-a-pool-a-7-"), "{odd}");
        assert_ne!(odd, name("pool-a", "pool-a-7"));
        assert_ne!(name("p", "A"), name("p", "a"));
        let long = name(&"p".repeat(80), &"i".repeat(80));
        assert!(long.len() <= 63, "{long}");
        for n in [odd, long, name("pool-a", "---")] {
            assert!(
                n.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !n.starts_with('-')
                    && !n.ends_with('-'),
                "{n}"
            );
        }
    }
}
