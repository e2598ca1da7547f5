//! Deleting a Cluster in upstream's order: its MachinePools and Machines
//! first, then the control plane, then the infrastructure; only then the
//! finalizer goes.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::DeleteParams;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt as _};

use super::CONTROLLER;
use crate::api::conditions::Desired;
use crate::api::{Cluster, ConditionType, Machine, MachinePool, Reason};
use crate::controllers::cache::cluster_key;
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::Scope;
use crate::controllers::write;
use crate::workload::ClusterKey;

/// Asks for the deletion of the Cluster's MachinePools and waits until they
/// are gone (the pool cache brings the Cluster back as each goes).
pub async fn workers(scope: &mut Scope<Cluster>, ctx: &Context) -> Result<Outcome, Error> {
    let cluster = scope.object.clone();
    // By spec.clusterName, not the label: a pool never reconciled has no label yet.
    let remaining = ctx.caches.pools_by_cluster.get(
        ctx.caches.pools.store(),
        &cluster_key(&*cluster, &cluster.name_any()),
    );
    let pools: Api<MachinePool> = Api::namespaced(ctx.client.clone(), &scope.namespace());
    for pool in remaining
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let background = DeleteParams::background();
        if write::delete(
            &pools,
            &pool.name_any(),
            &background,
            "deletion of a MachinePool",
        )
        .await?
        {
            ctx.metrics.write(CONTROLLER, "delete");
        }
    }
    if remaining.is_empty() && no_pools_left(&pools, &cluster.name_any()).await? {
        return machines(scope, ctx).await;
    }
    let mut names: Vec<String> = remaining.iter().map(|p| p.name_any()).collect();
    names.sort();
    let message = format!("* MachinePools: {}", names.join(", "));
    Ok(scope.waits(Desired::holds(
        ConditionType::Deleting,
        Reason::WaitingForWorkersDeletion,
        message,
    )))
}

/// Once the pools are gone, the Cluster's Machines, as upstream waits for
/// its worker Machines: each is drained while the Cluster and its
/// kubeconfig are still there. Those the Cluster owns are deleted here, and
/// so are those whose MachinePool is gone (what the garbage collector does
/// where one runs: a test API server has none).
async fn machines(scope: &mut Scope<Cluster>, ctx: &Context) -> Result<Outcome, Error> {
    let cluster = scope.object.clone();
    let (namespace, name) = (scope.namespace(), cluster.name_any());
    let left: Vec<Arc<Machine>> = ctx
        .caches
        .machines
        .store()
        .state()
        .into_iter()
        .filter(|m| {
            m.metadata.namespace.as_deref() == Some(namespace.as_str())
                && m.spec.cluster_name == name
        })
        .collect();
    if left.is_empty() {
        scope.found.workers_gone = true;
        return Ok(Outcome::Continue);
    }
    let uid = cluster.uid().unwrap_or_default();
    let core = |o: &OwnerReference| o.api_version.starts_with("cluster.x-k8s.io/");
    // A pool of that name made again is another pool: owners go by UID.
    let pool_gone = |o: &OwnerReference| {
        let key = ObjectRef::<MachinePool>::new(&o.name).within(&namespace);
        let pool = ctx.caches.pools.store().get(&key);
        core(o) && o.kind == "MachinePool" && pool.is_none_or(|p| p.uid().as_ref() != Some(&o.uid))
    };
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &namespace);
    for machine in left
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
    {
        // The Cluster's own, or one the garbage collector would delete:
        // every owner a MachinePool that is gone. Nobody else's.
        let owners = machine.owner_references();
        let ours = owners
            .iter()
            .any(|o| core(o) && o.kind == "Cluster" && o.uid == uid)
            || (!owners.is_empty() && owners.iter().all(pool_gone));
        if !ours {
            continue;
        }
        let background = DeleteParams::background();
        if write::delete(
            &api,
            &machine.name_any(),
            &background,
            "deletion of a Machine",
        )
        .await?
        {
            ctx.metrics.write(CONTROLLER, "delete");
        }
    }
    let mut names: Vec<String> = left.iter().map(|m| m.name_any()).collect();
    names.sort();
    let message = format!("* Machines: {}", names.join(", "));
    Ok(scope.waits(Desired::holds(
        ConditionType::Deleting,
        Reason::WaitingForWorkersDeletion,
        message,
    )))
}

/// Whether the server, not only the cache, knows no pool of the Cluster
/// (by its label, as upstream lists a Cluster's descendants): the control
/// plane and the infrastructure go next, for good.
async fn no_pools_left(pools: &Api<MachinePool>, cluster: &str) -> Result<bool, Error> {
    let selector = format!("{}={cluster}", crate::api::labels::CLUSTER_NAME);
    let listed = pools
        .list_metadata(&kube::api::ListParams::default().labels(&selector).limit(1))
        .await
        .map_err(|source| Error::Get {
            kind: "MachinePool",
            name: selector,
            source,
        })?;
    Ok(listed.items.is_empty())
}

/// Once the pools are gone: the control plane, then the infrastructure,
/// each deleted and awaited in turn.
pub async fn references(scope: &mut Scope<Cluster>, ctx: &Context) -> Result<Outcome, Error> {
    if !scope.found.workers_gone {
        return Ok(Outcome::Continue);
    }
    let spec = &scope.object.spec;
    let references = [
        spec.control_plane_ref.clone(),
        spec.infrastructure_ref.clone(),
    ];
    for reference in references.into_iter().flatten() {
        if scope.delete_reference(ctx, &reference).await? {
            let message = format!("waiting for {reference} to be deleted");
            return Ok(scope.waits(Desired::holds(
                ConditionType::Deleting,
                Reason::WaitingForInfrastructureDeletion,
                message,
            )));
        }
    }
    scope.found.references_gone = true;
    Ok(Outcome::Continue)
}

/// Once everything is gone: the workload cluster is forgotten and the
/// deletion announced, and the finalizer may go.
pub async fn completed(scope: &mut Scope<Cluster>, ctx: &Context) -> Result<Outcome, Error> {
    if !scope.found.references_gone {
        return Ok(Outcome::Continue);
    }
    let name = scope.object.name_any();
    ctx.workload
        .forget(&ClusterKey::new(scope.namespace(), name.clone()));
    scope.set(Desired::holds(
        ConditionType::Deleting,
        Reason::DeletionCompleted,
        "",
    ));
    ctx.publish(
        &scope.reference(),
        Reason::DeletionCompleted,
        format!("Cluster {name} has been deleted"),
    )
    .await;
    Ok(Outcome::Continue)
}
