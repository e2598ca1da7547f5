//! Deleting a MachinePool: delete its bootstrap config and infrastructure
//! object, wait until both are gone, then delete its Nodes in the workload
//! cluster; only then may the finalizer go.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::noderefs;
use super::scope::Scope;
use crate::api::conditions::Desired;
use crate::api::{ConditionType, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::{Outcome, Wait};

/// One deletion step. `None` once everything is gone.
pub async fn run(scope: &mut Scope<'_>, ctx: &Context) -> Result<Option<Outcome>, Error> {
    let spec = &scope.pool.spec.template.spec;
    let references = [
        spec.bootstrap.config_ref.clone(),
        Some(spec.infrastructure_ref.clone()),
    ];
    let mut remaining = Vec::new();
    for reference in references.into_iter().flatten() {
        let resolved = match scope.resolve(ctx, &reference).await {
            Ok(resolved) => resolved,
            // No CRD serves the kind: no such object can exist.
            Err(Error::Reference { source, .. }) if source.reason() == Reason::ReferenceInvalid => {
                continue;
            }
            Err(error) => return Err(error),
        };
        let exists = ctx
            .external
            .delete(&resolved, &scope.namespace(), &reference.name)
            .await
            .map_err(|source| Error::Reference {
                reference: reference.to_string(),
                source,
            })?;
        if exists {
            remaining.push(reference.to_string());
        }
    }
    if !remaining.is_empty() {
        let message = format!("waiting for {} to be deleted", remaining.join(" and "));
        scope.set(Desired::fails(
            ConditionType::Deleting,
            Reason::WaitingForInfrastructureDeletion,
            message.clone(),
        ));
        // The watches on their kinds bring the pool back as they go.
        return Ok(Some(Outcome::Wait(Wait::on_change(
            Reason::WaitingForInfrastructureDeletion,
            message,
        ))));
    }

    // With the infrastructure gone every referenced Node has left the pool.
    let nodes: Vec<String> = scope
        .status
        .node_refs
        .iter()
        .filter_map(|r| r.name.clone())
        .collect();
    if !nodes.is_empty() {
        match noderefs::delete_nodes(ctx, &scope.cluster_key(), &nodes).await {
            Ok(()) => {}
            // An unreachable workload cluster must not block deletion for ever.
            Err(error) if node_deletion_timed_out(scope) => {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "node deletion timeout passed; leaving the pool's Nodes"
                );
            }
            Err(error) => {
                scope.set(Desired::fails(
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
    Ok(None)
}

/// Whether `nodeDeletionTimeoutSeconds` (non-zero) has passed since the
/// deletion was requested.
fn node_deletion_timed_out(scope: &Scope<'_>) -> bool {
    let timeout = scope
        .pool
        .spec
        .template
        .spec
        .deletion
        .as_ref()
        .and_then(|d| d.node_deletion_timeout_seconds)
        .unwrap_or(0);
    let Some(requested) = &scope.pool.metadata.deletion_timestamp else {
        return false;
    };
    if timeout <= 0 {
        return false;
    }
    let deadline = requested
        .0
        .checked_add(Duration::from_secs(u64::try_from(timeout).unwrap_or(0)))
        .unwrap_or(requested.0);
    deadline < Timestamp::now()
}
