//! Core's Machines of a pool's WasmMachines: read to rank a scale-down
//! (`cluster.x-k8s.io/delete-machine` first) and deleted for the instances
//! that go, so that core drains their Nodes first. A Machine is deleted only
//! when the pool's Machines list it as the one whose infrastructure is that
//! WasmMachine, whatever owner reference the WasmMachine carries.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kube::ResourceExt as _;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Preconditions,
};

use super::{CONTROLLER, KIND, up};
use crate::api::provider::{InstanceState, InstanceStatus};
use crate::api::wasmmachine::pool_name_label;
use crate::api::{
    CLUSTER_API_GROUP, MachinePool, WasmMachine, WasmMachinePool, annotations, labels,
};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::infrastructure::rollout::{self, Plan};

/// Core's Machines of one pool, listed from the API server the first time
/// a pass needs them, and only then.
pub struct CoreMachines<'a> {
    machine_pool: &'a MachinePool,
    /// By UID.
    listed: Option<BTreeMap<String, DynamicObject>>,
}

impl<'a> CoreMachines<'a> {
    /// Those of `machine_pool`, not listed yet.
    pub fn new(machine_pool: &'a MachinePool) -> Self {
        Self {
            machine_pool,
            listed: None,
        }
    }

    /// The Machine of `machine`: the one of the pool's Machines whose
    /// infrastructure it is. Found by that reference, not only by the owner
    /// reference core adds later: a WasmMachine read before its owner
    /// reference reached the cache still goes through its Machine, and so
    /// its Node is drained.
    async fn of(
        &mut self,
        ctx: &Context,
        machine: &WasmMachine,
    ) -> Result<Option<&DynamicObject>, Error> {
        let owner = machine_owner(machine).map(|o| o.uid.clone());
        let listed = self.listed(ctx).await?;
        let infrastructure_of = |m: &DynamicObject| {
            let infrastructure = &m.data["spec"]["infrastructureRef"];
            infrastructure["kind"] == KIND
                && infrastructure["name"].as_str() == machine.metadata.name.as_deref()
        };
        if let Some(found) = owner.and_then(|uid| listed.get(&uid)) {
            return Ok(Some(found).filter(|m| infrastructure_of(m)));
        }
        Ok(listed.values().find(|m| infrastructure_of(m)))
    }

    /// The pool's Machines, by UID: listed by the pool's labels.
    async fn listed(&mut self, ctx: &Context) -> Result<&BTreeMap<String, DynamicObject>, Error> {
        if self.listed.is_none() {
            let selector = format!(
                "{}={},{}={}",
                labels::CLUSTER_NAME,
                self.machine_pool.spec.cluster_name,
                labels::POOL_NAME,
                pool_name_label(&self.machine_pool.name_any()),
            );
            let namespace = self.machine_pool.namespace().unwrap_or_default();
            let listed = machines_api(ctx, &namespace)
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(|source| Error::Get {
                    kind: "Machine",
                    name: selector,
                    source,
                })?;
            self.listed = Some(
                listed
                    .items
                    .into_iter()
                    .filter_map(|m| Some((m.metadata.uid.clone()?, m)))
                    .collect(),
            );
        }
        Ok(self.listed.get_or_insert_default())
    }
}

/// The Machine kind of Cluster API core.
fn machines_api(ctx: &Context, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(CLUSTER_API_GROUP, "v1beta2", "Machine"),
        "machines",
    );
    Api::namespaced_with(ctx.client.clone(), namespace, &resource)
}

/// The Machine `machine`'s owner reference names, if any.
fn machine_owner(
    machine: &WasmMachine,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    machine
        .owner_references()
        .iter()
        .find(|o| o.kind == "Machine" && o.api_version.split('/').next() == Some(CLUSTER_API_GROUP))
}

/// Deletes `machine`'s Machine (its UID as the precondition), or the
/// WasmMachine itself when core made none: either way core or this
/// controller then removes the instance after its Node is drained.
pub async fn delete_machine_of(
    ctx: &Context,
    core: &mut CoreMachines<'_>,
    machine: &WasmMachine,
) -> Result<(), Error> {
    if delete_core_machine_of(ctx, core, machine).await? {
        return Ok(());
    }
    let namespace = machine.namespace().unwrap_or_default();
    let result = Api::<WasmMachine>::namespaced(ctx.client.clone(), &namespace)
        .delete(&machine.name_any(), &precondition(machine.uid()))
        .await
        .map(drop);
    deleted(ctx, result, "WasmMachine", machine.name_any())
}

/// Deletes `machine`'s Machine, if core made one and it is not going
/// already. Whether there was one.
pub async fn delete_core_machine_of(
    ctx: &Context,
    core: &mut CoreMachines<'_>,
    machine: &WasmMachine,
) -> Result<bool, Error> {
    let Some((name, uid, going)) = core.of(ctx, machine).await?.map(|m| {
        (
            m.name_any(),
            m.uid(),
            m.metadata.deletion_timestamp.is_some(),
        )
    }) else {
        return Ok(false);
    };
    if !going {
        let namespace = machine.namespace().unwrap_or_default();
        let result = machines_api(ctx, &namespace)
            .delete(&name, &precondition(uid))
            .await
            .map(drop);
        deleted(ctx, result, "Machine", name)?;
    }
    Ok(true)
}

/// A background deletion of the object of UID `uid` only.
fn precondition(uid: Option<String>) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::background()
    }
}

/// The deletion's `result`, counted; gone already is fine.
fn deleted(
    ctx: &Context,
    result: Result<(), kube::Error>,
    what: &'static str,
    name: String,
) -> Result<(), Error> {
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

/// The ids of the instances whose WasmMachine or Machine is being deleted:
/// going already. Core's Machines are listed only when `with_core`.
pub async fn going(
    ctx: &Context,
    core: &mut CoreMachines<'_>,
    machines: &[Arc<WasmMachine>],
    with_core: bool,
) -> Result<BTreeSet<String>, Error> {
    let mut going = BTreeSet::new();
    for machine in machines {
        let deleting = machine.metadata.deletion_timestamp.is_some()
            || (with_core
                && core
                    .of(ctx, machine)
                    .await?
                    .is_some_and(|c| c.metadata.deletion_timestamp.is_some()));
        if deleting {
            going.insert(machine.spec.instance_id.clone());
        }
    }
    Ok(going)
}

/// Removes `plan.goes` of the instances up whose Machines are not going, by
/// deleting their Machines: those annotated `cluster.x-k8s.io/delete-machine`
/// first, then those out of date, then those not running, then as the
/// pool's `deletePolicy` ranks them (the oldest by default).
pub async fn scale_down(
    ctx: &Context,
    core: &mut CoreMachines<'_>,
    pool: &WasmMachinePool,
    machines: &[Arc<WasmMachine>],
    instances: &[InstanceStatus],
    plan: &Plan,
) -> Result<(), Error> {
    if plan.goes == 0 {
        return Ok(());
    }
    let up: BTreeMap<&str, &InstanceStatus> = instances
        .iter()
        .filter(|i| up(i))
        .map(|i| (i.id.as_str(), i))
        .collect();
    let mut staying = Vec::new();
    for machine in machines {
        let Some(instance) = up.get(machine.spec.instance_id.as_str()) else {
            continue;
        };
        let core_machine = core.of(ctx, machine).await?;
        if machine.metadata.deletion_timestamp.is_some()
            || core_machine.is_some_and(|c| c.metadata.deletion_timestamp.is_some())
        {
            continue;
        }
        let annotated =
            core_machine.is_some_and(|c| c.annotations().contains_key(annotations::DELETE_MACHINE));
        let created = machine
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_second());
        let key = (
            !annotated,
            !plan.out_of_date.contains(&instance.id),
            instance.state == InstanceState::Running,
            rollout::rank(pool, created, &machine.name_any()),
        );
        staying.push((key, machine));
    }
    staying.sort_by(|a, b| a.0.cmp(&b.0));
    for (_, machine) in staying.into_iter().take(plan.goes) {
        delete_machine_of(ctx, core, machine).await?;
    }
    Ok(())
}
