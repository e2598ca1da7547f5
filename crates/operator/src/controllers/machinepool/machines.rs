//! MachinePool Machines: for an infrastructure pool that reports
//! `status.infrastructureMachineKind`, a Machine per InfraMachine, as
//! upstream's MachinePool controller makes them. Each is named after its
//! InfraMachine, controlled by the pool, labelled with the pool's template
//! labels and the pool and Cluster names, and refers to its InfraMachine;
//! its version is its Node's kubelet's. Machines are never deleted here:
//! the infrastructure provider deletes those of the instances that go, and
//! the Machine controller drains their Nodes first.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Resource as _, ResourceExt as _};
use serde_json::{Value, json};

use super::CONTROLLER;
use crate::api::wasmmachine::pool_name_label;
use crate::api::{ContractVersionedObjectReference, Machine, MachinePool, WasmMachine, labels};
use crate::controllers::cache::cluster_key;
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::external::{Resolved, spec_field};
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::Scope;

/// The field manager of the Machines the pool makes.
const MANAGER: &str = "capwasm-machinepool-machines";

/// One InfraMachine: its name, its providerID, and whether it is going.
struct InfraMachine {
    name: String,
    provider_id: Option<String>,
    deleting: bool,
}

pub async fn run(scope: &mut Scope<MachinePool>, ctx: &Context) -> Result<Outcome, Error> {
    let Some((pool_kind, kind)) = scope.found.infrastructure_machines.clone() else {
        return Ok(Outcome::Continue);
    };
    let pool = scope.object.clone();
    let infra_machines = list(ctx, &pool, &pool_kind, &kind).await?;
    let machines: BTreeMap<String, Arc<Machine>> = of_pool(ctx, &pool)
        .into_iter()
        .map(|m| (m.spec.infrastructure_ref.name.clone(), m))
        .collect();
    let key = scope.cluster_key();
    // The Nodes tell each Machine's version; without them it has none yet.
    let nodes = ctx.workload.nodes(&key).await.ok();
    let reference = |name: &str| ContractVersionedObjectReference {
        api_group: pool_kind.resource.group.clone(),
        kind: kind.clone(),
        name: name.to_owned(),
    };
    for infra in infra_machines.iter().filter(|m| !m.deleting) {
        let version = infra
            .provider_id
            .as_deref()
            .and_then(|id| nodes.as_ref()?.by_provider_id(id))
            .and_then(|node| node.status.clone()?.node_info)
            .map(|info| info.kubelet_version)
            .filter(|v| !v.is_empty());
        let desired = desired(scope, &reference(&infra.name), version);
        let current = machines.get(&infra.name);
        if current.is_some_and(|m| holds(m, &desired)) {
            continue;
        }
        apply(ctx, &pool, &infra.name, &desired).await?;
    }
    Ok(Outcome::Continue)
}

/// The Machines `pool` controls, as cached.
pub fn of_pool(ctx: &Context, pool: &MachinePool) -> Vec<Arc<Machine>> {
    let uid = pool.uid();
    ctx.caches
        .machines_by_pool
        .get(
            ctx.caches.machines.store(),
            &cluster_key(pool, &pool.name_any()),
        )
        .into_iter()
        .filter(|m| {
            m.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && Some(&o.uid) == uid.as_ref())
        })
        .collect()
}

/// The pool's InfraMachines, by its labels: WasmMachines from their cache,
/// any other kind listed from the API server.
async fn list(
    ctx: &Context,
    pool: &MachinePool,
    pool_kind: &Resolved,
    kind: &str,
) -> Result<Vec<InfraMachine>, Error> {
    let namespace = pool.namespace().unwrap_or_default();
    let wanted = BTreeMap::from([
        (
            labels::CLUSTER_NAME.to_owned(),
            pool.spec.cluster_name.clone(),
        ),
        (
            labels::POOL_NAME.to_owned(),
            pool_name_label(&pool.name_any()),
        ),
    ]);
    let labelled =
        |object: &BTreeMap<String, String>| wanted.iter().all(|(k, v)| object.get(k) == Some(v));
    let group = &pool_kind.resource.group;
    if kind == "WasmMachine" && group == &WasmMachine::group(&()) {
        let store = ctx.caches.infra_machines.store();
        return Ok(store
            .state()
            .into_iter()
            .filter(|m| m.namespace().as_deref() == Some(&namespace) && labelled(m.labels()))
            .map(|m| InfraMachine {
                name: m.name_any(),
                provider_id: m.spec.provider_id.clone(),
                deleting: m.metadata.deletion_timestamp.is_some(),
            })
            .collect());
    }
    let reference = ContractVersionedObjectReference::new(group, kind, "");
    let resolved = ctx
        .external
        .resolve(&reference)
        .map_err(|source| Error::Reference {
            reference: reference.to_string(),
            source,
        })?;
    let selector = wanted
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let listed =
        Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &namespace, &resolved.resource)
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|source| Error::Get {
                kind: "InfraMachine",
                name: selector,
                source,
            })?;
    Ok(listed
        .items
        .into_iter()
        .map(|m| InfraMachine {
            provider_id: spec_field(&m, &["providerID"])
                .and_then(Value::as_str)
                .map(str::to_owned),
            deleting: m.metadata.deletion_timestamp.is_some(),
            name: m.name_any(),
        })
        .collect())
}

/// What the pool says of the Machine of InfraMachine `infrastructure`.
struct Desired {
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    spec: Value,
    owner: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
}

fn desired(
    scope: &Scope<MachinePool>,
    infrastructure: &ContractVersionedObjectReference,
    version: Option<String>,
) -> Desired {
    let pool = &scope.object;
    let template = pool.spec.template.metadata.clone().unwrap_or_default();
    let mut labels = template.labels;
    labels.insert(
        labels::POOL_NAME.to_owned(),
        pool_name_label(&pool.name_any()),
    );
    labels.insert(
        labels::CLUSTER_NAME.to_owned(),
        pool.spec.cluster_name.clone(),
    );
    let mut spec = json!({
        "clusterName": pool.spec.cluster_name,
        // A pool's Machine has no bootstrap of its own (upstream's empty name).
        "bootstrap": { "dataSecretName": "" },
        "infrastructureRef": infrastructure,
    });
    if let Some(version) = version {
        spec["version"] = version.into();
    }
    Desired {
        labels,
        annotations: template.annotations,
        spec,
        owner: scope.controller_reference(),
    }
}

/// Whether `machine` already holds everything `desired` says.
fn holds(machine: &Machine, desired: &Desired) -> bool {
    let contains = |have: &BTreeMap<String, String>, want: &BTreeMap<String, String>| {
        want.iter().all(|(k, v)| have.get(k) == Some(v))
    };
    let spec = serde_json::to_value(&machine.spec).unwrap_or_default();
    contains(machine.labels(), &desired.labels)
        && contains(machine.annotations(), &desired.annotations)
        && machine.owner_references().contains(&desired.owner)
        && ["clusterName", "infrastructureRef", "version"]
            .iter()
            .all(|field| spec.get(field) == desired.spec.get(field))
}

/// Creates or updates the Machine named `name` to `desired`, in one apply.
async fn apply(
    ctx: &Context,
    pool: &MachinePool,
    name: &str,
    desired: &Desired,
) -> Result<(), Error> {
    let patch = json!({
        "apiVersion": Machine::api_version(&()),
        "kind": Machine::kind(&()),
        "metadata": {
            "name": name,
            "labels": desired.labels,
            "annotations": desired.annotations,
            "ownerReferences": [desired.owner],
        },
        "spec": desired.spec,
    });
    let namespace = pool.namespace().unwrap_or_default();
    Api::<Machine>::namespaced(ctx.client.clone(), &namespace)
        .patch(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(|source| Error::Write {
            what: "Machine",
            name: name.to_owned(),
            source,
        })?;
    ctx.metrics.write(CONTROLLER, "machine");
    Ok(())
}
