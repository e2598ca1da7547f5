//! Draining a Machine's Node before its InfraMachine (and instance) goes,
//! as upstream's Machine controller drains: the Node cordoned, every Pod on
//! it but DaemonSet and mirror Pods (and those labelled
//! `cluster.x-k8s.io/drain=skip`) evicted through the Eviction API, which
//! refuses what a PodDisruptionBudget does not allow; then a look again
//! every [`RETRY`] until none is left, or `nodeDrainTimeoutSeconds` passed.
//! Not drained: a Machine of a Cluster being deleted or gone, or without a Node, or
//! annotated `machine.cluster.x-k8s.io/exclude-node-draining`, or whose
//! InfraMachine is gone or going already.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;

use super::node::cluster_key;
use crate::api::conditions::{self, Desired};
use crate::api::machine::{EXCLUDE_NODE_DRAINING, MachineDeletionStatus};
use crate::api::{ConditionType, Machine, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::machinepool::deadline;
use crate::controllers::outcome::{Outcome, Wait};
use crate::controllers::reconciler::Scope;

/// How long a drain waits before it looks again (upstream's).
pub const RETRY: Duration = Duration::from_secs(20);
/// How long it waits after it evicted Pods, which then go within their
/// grace period: sooner, so that a drain that can finish does.
const EVICTED_RETRY: Duration = Duration::from_secs(5);
/// On a Pod: `skip` keeps it on the Node (upstream's label).
const DRAIN_LABEL: &str = "cluster.x-k8s.io/drain";
/// What a Pod evicted in this pass is waiting for.
const EVICTED: &str = "evicted, waiting for it to be removed";
/// On a mirror Pod (a static Pod's): the kubelet, not the API, runs it.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

pub async fn run(scope: &mut Scope<Machine>, ctx: &Context) -> Result<Outcome, Error> {
    scope.found.keep_node = scope
        .cluster
        .as_ref()
        .is_none_or(|c| c.metadata.deletion_timestamp.is_some());
    let node = scope.status.node_ref.as_ref().map(|r| r.name.clone());
    let Some(node) = node.filter(|_| !scope.found.keep_node) else {
        scope.found.drained = true;
        return Ok(Outcome::Continue);
    };
    if let Some(why) = not_drained(scope, ctx).await? {
        tracing::debug!(node, why, "the Node is not drained");
        scope.found.drained = true;
        return Ok(Outcome::Continue);
    }
    let started = scope
        .status
        .deletion
        .as_ref()
        .and_then(|d| d.node_drain_start_time.clone())
        .unwrap_or_else(|| scope.now.clone());
    let deadline = drain_deadline(scope, &started);
    if deadline.is_some_and(|d| d <= Timestamp::now()) {
        if was_draining(scope) {
            scope
                .publish(
                    ctx,
                    Reason::NodeDrainTimedOut,
                    format!("the drain of Node {node:?} passed nodeDrainTimeoutSeconds; the Pods left on it are not evicted"),
                )
                .await;
        }
        scope.found.drained = true;
        return Ok(Outcome::Continue);
    }
    scope.status.deletion = Some(MachineDeletionStatus {
        node_drain_start_time: Some(started.clone()),
    });
    let key = cluster_key(scope);
    let drained = match ctx.workload.client(&key).await {
        Ok(client) => drain(&client, &node).await,
        Err(source) => Err(Error::Workload(key.to_string(), source)),
    };
    match drained {
        Ok(left) if left.is_empty() => {
            scope
                .publish(
                    ctx,
                    Reason::SuccessfulDrainNode,
                    format!("drained Node {node:?}"),
                )
                .await;
            scope.found.drained = true;
            Ok(Outcome::Continue)
        }
        Ok(left) => Ok(still_draining(scope, &started, deadline, &left)),
        Err(error) => {
            scope
                .publish(
                    ctx,
                    Reason::FailedDrainNode,
                    format!(
                        "cannot drain Node {node:?}: {}",
                        crate::report::error_chain(&error)
                    ),
                )
                .await;
            scope.set(Desired::holds(
                ConditionType::Deleting,
                Reason::DrainingNode,
                format!(
                    "Error draining Node {node:?}: {}",
                    crate::report::error_chain(&error)
                ),
            ));
            Err(error)
        }
    }
}

/// A drain that left Pods on the Node: the Deleting condition lists them,
/// and the next look is soon after evictions, or when the timeout passes.
fn still_draining(
    scope: &mut Scope<Machine>,
    started: &Time,
    deadline: Option<Timestamp>,
    left: &[String],
) -> Outcome {
    let mut retry = if left.iter().any(|l| l.contains(EVICTED)) {
        EVICTED_RETRY
    } else {
        RETRY
    };
    if let Some(until) = deadline.map(|d| d.duration_since(Timestamp::now())) {
        let until = Duration::try_from(until).unwrap_or_default();
        retry = retry.min(until + Duration::from_secs(1));
    }
    let message = format!(
        "Drain not completed yet (started at {}):\n{}",
        started.0,
        left.join("\n")
    );
    scope.set(Desired::holds(
        ConditionType::Deleting,
        Reason::DrainingNode,
        message.clone(),
    ));
    Outcome::Wait(Wait::after(Reason::DrainingNode, message, retry))
}

/// Why the Node is not to be drained, if it is not.
async fn not_drained(scope: &Scope<Machine>, ctx: &Context) -> Result<Option<&'static str>, Error> {
    if scope
        .object
        .annotations()
        .contains_key(EXCLUDE_NODE_DRAINING)
    {
        return Ok(Some("annotated to be excluded from draining"));
    }
    let reference = &scope.object.spec.infrastructure_ref;
    let resolved = scope.resolve(ctx, reference)?;
    match ctx
        .external
        .get(&resolved, &scope.namespace(), &reference.name)
        .await
    {
        Ok(infra) if infra.metadata.deletion_timestamp.is_some() => {
            Ok(Some("its InfraMachine is being deleted"))
        }
        Ok(_) => Ok(None),
        Err(crate::controllers::external::ReferenceError::NotFound { .. }) => {
            Ok(Some("its InfraMachine is gone"))
        }
        Err(source) => Err(Error::Reference {
            reference: reference.to_string(),
            source,
        }),
    }
}

/// When `nodeDrainTimeoutSeconds` (unset or 0: never) passes for a drain
/// `started`.
fn drain_deadline(scope: &Scope<Machine>, started: &Time) -> Option<Timestamp> {
    let timeout = scope.object.spec.deletion.as_ref();
    deadline(
        started.0,
        timeout.and_then(|d| d.node_drain_timeout_seconds),
    )
}

/// Whether the last reconcile left the Machine draining.
fn was_draining(scope: &Scope<Machine>) -> bool {
    conditions::get(&scope.status.conditions, ConditionType::Deleting)
        .is_some_and(|c| c.reason == Reason::DrainingNode.as_str())
}

/// Cordons Node `name` and evicts its Pods; what is left on it, one line
/// each (none: drained). A Node gone is drained.
async fn drain(client: &Client, name: &str) -> Result<Vec<String>, Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let write = |source| Error::Write {
        what: "Node",
        name: name.to_owned(),
        source,
    };
    let Some(node) = nodes.get_opt(name).await.map_err(write)? else {
        return Ok(Vec::new());
    };
    if node.spec.as_ref().and_then(|s| s.unschedulable) != Some(true) {
        nodes
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "unschedulable": true } })),
            )
            .await
            .map_err(write)?;
    }
    // A Node that stopped reporting runs nothing that could finish: its Pods
    // deleted a second ago are taken as gone (upstream's).
    let unreachable = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Ready" && c.status == "Unknown")
        });
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={name}")))
        .await
        .map_err(|source| Error::Get {
            kind: "Pod",
            name: format!("on Node {name}"),
            source,
        })?;
    let mut left = Vec::new();
    for pod in pods.items.iter().filter(|p| evictable(p)) {
        let id = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
        if let Some(deleted) = &pod.metadata.deletion_timestamp {
            let stale = Timestamp::now().duration_since(deleted.0).as_secs() > 1;
            if !(unreachable && stale) {
                left.push(format!(
                    "* Pod {id}: deletionTimestamp set, but still not removed from the Node"
                ));
            }
            continue;
        }
        let api = Api::<Pod>::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
        match api.evict(&pod.name_any(), &EvictParams::default()).await {
            Ok(_) => left.push(format!("* Pod {id}: {EVICTED}")),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(kube::Error::Api(status)) if status.code == 429 => left.push(format!(
                "* Pod {id}: cannot evict pod as it would violate the pod's disruption budget. {}",
                status.message
            )),
            Err(error) => left.push(format!(
                "* Pod {id}: failed to evict Pod, {}",
                crate::report::error_chain(&error)
            )),
        }
    }
    Ok(left)
}

/// Whether the drain evicts `pod`: not a DaemonSet's, a mirror Pod, or one
/// labelled to be skipped.
fn evictable(pod: &Pod) -> bool {
    let daemon = pod
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.kind == "DaemonSet");
    let mirror = pod.annotations().contains_key(MIRROR_ANNOTATION);
    let skipped = pod.labels().get(DRAIN_LABEL).map(String::as_str) == Some("skip");
    !(daemon || mirror || skipped)
}
