//! Deleting a MachinePool: delete its bootstrap config and infrastructure
//! object, wait until both are gone, then delete its Nodes in the workload
//! cluster; only then may the finalizer go.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Api;

use super::noderefs;
use crate::api::conditions::Desired;
use crate::api::{ConditionType, MachinePool, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::Scope;
use crate::workload::is_control_plane;

/// Asks for the bootstrap config's and the infrastructure object's
/// deletion, and waits until both are gone.
pub async fn references(scope: &mut Scope<MachinePool>, ctx: &Context) -> Result<Outcome, Error> {
    let spec = &scope.object.spec.template.spec;
    let references = [
        spec.bootstrap.config_ref.clone(),
        Some(spec.infrastructure_ref.clone()),
    ];
    let mut remaining = Vec::new();
    for reference in references.into_iter().flatten() {
        if scope.delete_reference(ctx, &reference).await? {
            remaining.push(reference.to_string());
        }
    }
    if remaining.is_empty() {
        scope.found.references_gone = true;
        return Ok(Outcome::Continue);
    }
    let message = format!("waiting for {} to be deleted", remaining.join(" and "));
    // The caches of their kinds bring the pool back as they go.
    Ok(scope.waits(Desired::holds(
        ConditionType::Deleting,
        Reason::WaitingForInfrastructureDeletion,
        message,
    )))
}

/// Once the referenced objects are gone, deletes the Nodes the pool
/// referenced (with the infrastructure gone, each has left the pool).
pub async fn nodes(scope: &mut Scope<MachinePool>, ctx: &Context) -> Result<Outcome, Error> {
    if !scope.found.references_gone {
        return Ok(Outcome::Continue);
    }
    let nodes: Vec<String> = scope
        .status
        .node_refs
        .iter()
        .filter_map(|r| r.name.clone())
        .collect();
    if !nodes.is_empty() {
        let key = scope.cluster_key();
        let deleted = match ctx.workload.nodes_and_client(&key).await {
            Ok((cached, client)) => {
                // Never a Node of the control plane, whatever the references say.
                let workers: Vec<String> = nodes
                    .into_iter()
                    .filter(|name| !cached.by_name(name).is_some_and(|n| is_control_plane(&n)))
                    .collect();
                noderefs::delete_nodes(ctx, &Api::all(client), &key, &workers).await
            }
            Err(source) => Err(Error::Workload(key.to_string(), source)),
        };
        match deleted {
            Ok(()) => {}
            // An unreachable workload cluster must not block deletion for ever.
            Err(error) if node_deletion_timed_out(scope) => {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "node deletion timeout passed; leaving the pool's Nodes"
                );
            }
            Err(error) => {
                scope.set(Desired::holds(
                    ConditionType::Deleting,
                    Reason::WaitingForNodeDeletion,
                    crate::report::error_chain(&error),
                ));
                return Err(error);
            }
        }
    }
    scope.set(Desired::holds(
        ConditionType::Deleting,
        Reason::DeletionCompleted,
        "",
    ));
    Ok(Outcome::Continue)
}

/// Whether `nodeDeletionTimeoutSeconds` has passed since the deletion was
/// requested.
fn node_deletion_timed_out(scope: &Scope<MachinePool>) -> bool {
    let timeout = scope
        .object
        .spec
        .template
        .spec
        .deletion
        .as_ref()
        .and_then(|d| d.node_deletion_timeout_seconds);
    let requested = scope.object.metadata.deletion_timestamp.as_ref();
    timeout_passed(requested.map(|t| t.0), timeout, Timestamp::now())
}

/// As upstream: a timeout that is unset or not positive never passes.
pub(crate) fn timeout_passed(
    requested: Option<Timestamp>,
    timeout_seconds: Option<i32>,
    now: Timestamp,
) -> bool {
    requested
        .and_then(|requested| deadline(requested, timeout_seconds))
        .is_some_and(|deadline| deadline < now)
}

/// When a timeout of `timeout_seconds` from `start` passes: never, if it is
/// unset or not positive (upstream's).
pub(crate) fn deadline(start: Timestamp, timeout_seconds: Option<i32>) -> Option<Timestamp> {
    let timeout = u64::try_from(timeout_seconds?).ok().filter(|t| *t > 0)?;
    start.checked_add(Duration::from_secs(timeout)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    /// Checks 50 and 51.
    #[test]
    fn the_node_deletion_timeout_passes_only_when_set_and_past() {
        let cases = [
            // (deletion requested at, timeout, now, passed)
            (Some(at(0)), Some(10), at(60), true),
            (Some(at(0)), Some(10), at(10), false),
            (Some(at(0)), Some(10), at(5), false),
            (Some(at(0)), None, at(3600), false),
            (Some(at(0)), Some(0), at(3600), false),
            (Some(at(0)), Some(-5), at(3600), false),
            (None, Some(10), at(3600), false),
        ];
        for (requested, timeout, now, passed) in cases {
            assert_eq!(
                timeout_passed(requested, timeout, now),
                passed,
                "requested {requested:?}, timeout {timeout:?}, now {now}"
            );
        }
    }
}
