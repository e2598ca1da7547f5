//! The WasmMachines themselves: one per instance up, named for its pool
//! and instance, reporting the instance; released once it is gone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::core::ObjectMeta;
use kube::{Resource as _, ResourceExt as _};
use serde_json::json;
use sha2::Digest as _;

use super::capi::{self, CoreMachines};
use super::{AUTHOR, CONTROLLER, up};
use crate::api::conditions::{self, Desired};
use crate::api::provider::{InfrastructureInitialization, InstanceState, InstanceStatus};
use crate::api::wasmmachine::{
    MACHINE_FINALIZER, WasmMachineSpec, WasmMachineStatus, pool_name_label,
};
use crate::api::{ConditionType, MachinePool, Reason, WasmMachine, WasmMachinePool, labels};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::finalizer;
use crate::controllers::infrastructure::rollout;
use crate::controllers::write;

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

/// Whether `machine` is the one this controller makes for its instance in
/// `machine_pool`: its name and labels are those [`create`] gives. Another
/// object claiming the pool as owner is not looked after.
pub fn made_for(machine: &WasmMachine, machine_pool: &MachinePool) -> bool {
    let labels = machine.labels();
    machine.name_any() == name(&machine_pool.name_any(), &machine.spec.instance_id)
        && labels.get(labels::CLUSTER_NAME) == Some(&machine_pool.spec.cluster_name)
        && labels.get(labels::POOL_NAME) == Some(&pool_name_label(&machine_pool.name_any()))
}

/// The providerID an instance reported, if any.
fn provider_id(instance: &InstanceStatus) -> Option<String> {
    (!instance.provider_id.is_empty()).then(|| instance.provider_id.clone())
}

/// What a WasmMachine of `instance` reports, the pool's revision being
/// `revision`.
fn status_of(
    instance: &InstanceStatus,
    before: &WasmMachineStatus,
    revision: &str,
) -> WasmMachineStatus {
    let running = instance.state == InstanceState::Running;
    // Provisioned stays provisioned: core reads a change back as a fault.
    let provisioned = running
        || before
            .initialization
            .as_ref()
            .and_then(|i| i.provisioned)
            .unwrap_or(false);
    let mut common = before.common.clone();
    let up_to_date = if rollout::up_to_date(instance, revision) {
        Desired::holds(ConditionType::UpToDate, Reason::UpToDate, "")
    } else {
        Desired::fails(
            ConditionType::UpToDate,
            Reason::NotUpToDate,
            "Made before the pool's version, bootstrap config or config changed",
        )
    };
    conditions::set(
        &mut common.conditions,
        up_to_date,
        None,
        &Time(Timestamp::now()),
    );
    WasmMachineStatus {
        ready: provisioned,
        initialization: provisioned.then_some(InfrastructureInitialization {
            provisioned: Some(true),
        }),
        state: Some(instance.state),
        failure_domain: instance.failure_domain.clone(),
        addresses: instance.addresses.clone(),
        common,
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
    core: &mut CoreMachines<'_>,
    machines: &[Arc<WasmMachine>],
    instances: &[InstanceStatus],
    revision: &str,
) -> Result<(), Error> {
    let by_id: BTreeMap<&str, &InstanceStatus> =
        instances.iter().map(|i| (i.id.as_str(), i)).collect();
    let mut have = BTreeSet::new();
    for machine in machines {
        have.insert(machine.spec.instance_id.as_str());
        let instance = by_id.get(machine.spec.instance_id.as_str());
        if machine.metadata.deletion_timestamp.is_some() {
            if instance.is_none() {
                // Deleted by hand, not through its Machine: that goes too,
                // as a pool's Machine of an instance gone does.
                capi::delete_core_machine_of(ctx, core, machine).await?;
                finalizer::remove(ctx, CONTROLLER, &**machine, MACHINE_FINALIZER).await?;
            }
            continue;
        }
        let Some(instance) = instance else {
            capi::delete_machine_of(ctx, core, machine).await?;
            continue;
        };
        let provider_id = provider_id(instance);
        if provider_id.is_some() && machine.spec.provider_id != provider_id {
            let spec = json!({ "spec": { "providerID": provider_id } });
            write::fields(ctx, AUTHOR, &**machine, "spec", spec).await?;
        }
        let before = machine.status.clone().unwrap_or_default();
        let after = status_of(instance, &before, revision);
        if worth_writing(&before, &after) {
            write::status(ctx, AUTHOR, &**machine, &before, &after).await?;
        }
    }
    for instance in instances
        .iter()
        .filter(|i| up(i) && !have.contains(i.id.as_str()))
    {
        create(ctx, pool, machine_pool, instance, revision).await?;
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
    revision: &str,
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
            provider_id: provider_id(instance),
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
    let after = status_of(instance, &before, revision);
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
        let pending = status_of(&instance(InstanceState::Pending), &none, "r1");
        assert!(!worth_writing(&none, &pending));
        let running = status_of(&instance(InstanceState::Running), &none, "r1");
        assert!(running.ready && worth_writing(&none, &running));
        assert!(worth_writing(
            &none,
            &status_of(&instance(InstanceState::Failed), &none, "r1")
        ));
        // Once running, it stays provisioned, and its state change is written.
        let terminating = status_of(&instance(InstanceState::Terminating), &running, "r1");
        assert!(terminating.ready && worth_writing(&running, &terminating));
        assert!(!worth_writing(&running, &running));
    }

    #[test]
    fn only_the_machine_made_for_an_instance_of_the_pool_is_looked_after() {
        let machine_pool: MachinePool = serde_json::from_value(json!({
            "metadata": {"name": "pool-a", "namespace": "ns"},
            "spec": {"clusterName": "c1", "template": {"spec": {
                "clusterName": "c1", "bootstrap": {}, "infrastructureRef": {
                    "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "WasmMachinePool", "name": "pool-a"}}}},
        }))
        .unwrap();
        let machine = |name: &str, pool_label: &str| -> WasmMachine {
            serde_json::from_value(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
                "kind": "WasmMachine",
                "metadata": {"name": name, "namespace": "ns", "labels": {
                    "cluster.x-k8s.io/cluster-name": "c1",
                    "cluster.x-k8s.io/pool-name": pool_label,
                }},
                "spec": {"instanceID": "i-1"},
            }))
            .unwrap()
        };
        assert!(made_for(&machine("pool-a-i-1", "pool-a"), &machine_pool));
        // Another name for the same instance, or another pool's label: a decoy.
        assert!(!made_for(&machine("decoy", "pool-a"), &machine_pool));
        assert!(!made_for(&machine("pool-a-i-1", "pool-b"), &machine_pool));
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
