//! The node phase: find the pool's Nodes in the workload cluster by exact
//! providerID, set `nodeRefs` and the ready / available counts, delete the
//! Nodes that left the pool, and mark the pool's Nodes as Cluster API's.
//! Node changes arrive through the workload Node watch; nothing polls.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt as _};

use super::CONTROLLER;
use super::status::{self, Matched};
use crate::api::conditions::{self, Desired};
use crate::api::{ConditionType, MachinePool, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::Scope;
use crate::controllers::write;
use crate::workload::ClusterKey;

pub async fn run(scope: &mut Scope<MachinePool>, ctx: &Context) -> Result<Outcome, Error> {
    if !scope.found.infrastructure_ready {
        return Ok(Outcome::Continue);
    }
    if let Some(waiting) = control_plane_wait(scope) {
        return Ok(waiting);
    }
    let key = scope.cluster_key();
    let (nodes, api) = match ctx.workload.nodes_and_client(&key).await {
        Ok((nodes, client)) => (nodes, Api::<Node>::all(client)),
        Err(source) => {
            let error = Error::Workload(key.to_string(), source);
            return Err(scope.failed(ConditionType::ReplicasReady, error));
        }
    };
    let refs = scope.status.node_refs.clone();
    let replicas = scope.status.replicas.unwrap_or(0);
    let ready_before = scope
        .status
        .deprecated
        .as_ref()
        .and_then(|d| d.v1beta1.as_ref())
        .and_then(|v| v.ready_replicas)
        .unwrap_or(0);
    // Steady state: nothing to recompute while every reference still names
    // the same Node (a Node recreated under its name gets a new UID).
    if scope.found.provider_id_list.is_none()
        && replicas == ready_before
        && i32::try_from(refs.len()).ok() == Some(ready_before)
        && status::refs_current(&refs, |name| nodes.by_name(name))
    {
        scope.set(Desired::holds(
            ConditionType::ReplicasReady,
            Reason::Ready,
            "",
        ));
        return Ok(Outcome::Continue);
    }
    let provider_ids = scope.provider_ids().to_vec();
    if provider_ids.is_empty() && scope.object.desired_replicas() != 0 {
        return Ok(Outcome::Continue);
    }
    let retired = status::retired(&refs, &provider_ids, |name| nodes.by_name(name));
    if !retired.is_empty() {
        delete_nodes(ctx, &api, &key, &retired).await?;
        ctx.publish(
            &scope.reference(),
            Reason::NodesDeleted,
            format!("deleted Nodes that left the pool: {}", retired.join(", ")),
        )
        .await;
    }

    let min_ready = Duration::from_secs(
        u64::try_from(
            scope
                .object
                .spec
                .template
                .spec
                .min_ready_seconds
                .unwrap_or(0),
        )
        .unwrap_or(0),
    );
    let matched = status::match_nodes(
        &provider_ids,
        |id| nodes.by_provider_id(id),
        min_ready,
        scope.now.0,
    );
    if matched.refs.is_empty() && !provider_ids.is_empty() {
        tracing::debug!(
            pool = scope.object.name_any(),
            "no Node matches the pool's providerIDs yet"
        );
        return Ok(Outcome::Continue);
    }
    let owned: Vec<Arc<Node>> = provider_ids
        .iter()
        .filter_map(|id| nodes.by_provider_id(id))
        .collect();
    mark_nodes(scope, ctx, &api, &owned).await?;
    let next_available_in = matched.next_available_in;
    record(scope, ctx, replicas, matched).await;
    // Node events bring the pool back when a Node changes; only the
    // minReadySeconds clock needs a timer.
    Ok(next_available_in.map_or(Outcome::Continue, Outcome::RequeueAfter))
}

/// What the pool waits for while its Cluster's control plane is not up
/// (upstream watches a workload cluster's Nodes only once it is).
fn control_plane_wait(scope: &mut Scope<MachinePool>) -> Option<Outcome> {
    let cluster = scope.cluster.clone()?;
    let conditions = cluster
        .status
        .as_ref()
        .map_or(&[][..], |s| &s.conditions[..]);
    if conditions::is_true(conditions, ConditionType::ControlPlaneInitialized) {
        return None;
    }
    let message = format!(
        "waiting for Cluster {:?} to initialize its control plane",
        cluster.name_any()
    );
    Some(scope.waits(Desired::fails(
        ConditionType::ReplicasReady,
        Reason::WaitingForReplicasReady,
        message,
    )))
}

/// Sets the Node references and counts, and `ReplicasReady`.
async fn record(scope: &mut Scope<MachinePool>, ctx: &Context, replicas: i32, matched: Matched) {
    let (ready, available) = (matched.ready, matched.available);
    let v1beta1 = scope.v1beta1();
    v1beta1.ready_replicas = Some(ready);
    v1beta1.available_replicas = Some(available);
    v1beta1.unavailable_replicas = Some(replicas - available);
    scope.status.ready_replicas = Some(ready);
    scope.status.available_replicas = Some(available);
    scope.status.versions = matched.versions;
    let all_ready = replicas == ready && i32::try_from(matched.refs.len()).ok() == Some(ready);
    if scope.status.node_refs != matched.refs {
        ctx.publish(
            &scope.reference(),
            Reason::SuccessfulSetNodeRefs,
            format!("{} Node references, {ready} Ready", matched.refs.len()),
        )
        .await;
        scope.status.node_refs = matched.refs;
    }
    scope.set(if all_ready {
        Desired::holds(ConditionType::ReplicasReady, Reason::Ready, "")
    } else {
        Desired::fails(
            ConditionType::ReplicasReady,
            Reason::WaitingForReplicasReady,
            format!("{ready} of {replicas} replicas have a Ready Node"),
        )
    });
}

/// Gives the pool's Nodes the Cluster API annotations and removes the
/// uninitialized taint, patching only Nodes that lack them.
async fn mark_nodes(
    scope: &Scope<MachinePool>,
    ctx: &Context,
    api: &Api<Node>,
    nodes: &[Arc<Node>],
) -> Result<(), Error> {
    let (cluster, namespace, pool) = (
        &scope.object.spec.cluster_name,
        scope.namespace(),
        scope.object.name_any(),
    );
    let patches: Vec<_> = nodes
        .iter()
        .filter_map(|node| {
            Some((
                node.name_any(),
                status::node_patch(node, cluster, &namespace, &pool)?,
            ))
        })
        .collect();
    for (name, patch) in patches {
        ctx.metrics.write(CONTROLLER, "workload Node");
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| Error::Write {
                what: "workload Node",
                name,
                source,
            })?;
    }
    Ok(())
}

/// Deletes the named Nodes of workload cluster `key` through `api` (a Node
/// already gone is fine).
pub async fn delete_nodes(
    ctx: &Context,
    api: &Api<Node>,
    key: &ClusterKey,
    names: &[String],
) -> Result<(), Error> {
    for name in names {
        let what = "deletion of a workload Node";
        if write::delete(api, name, &DeleteParams::default(), what).await? {
            ctx.metrics.write(CONTROLLER, "workload Node deletion");
            tracing::info!(node = name, cluster = %key, "deleted a Node that left its pool");
        }
    }
    Ok(())
}
