//! Once the Node is drained (or not to be): the InfraMachine deleted and
//! waited for (its instance goes with it), then the Node deleted, unless
//! its Cluster is being deleted; only then may the finalizer go.

use k8s_openapi::jiff::Timestamp;
use kube::Api;

use super::node::cluster_key;
use crate::api::conditions::Desired;
use crate::api::{ConditionType, Machine, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::machinepool::{delete_nodes, timeout_passed};
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::Scope;

/// Asks for the InfraMachine's deletion once the drain is done, and waits
/// until it is gone.
pub async fn infrastructure(scope: &mut Scope<Machine>, ctx: &Context) -> Result<Outcome, Error> {
    if !scope.found.drained {
        return Ok(Outcome::Continue);
    }
    let reference = scope.object.spec.infrastructure_ref.clone();
    if scope.delete_reference(ctx, &reference).await? {
        // Its cache brings the Machine back as it goes.
        return Ok(scope.waits(Desired::holds(
            ConditionType::Deleting,
            Reason::WaitingForInfrastructureDeletion,
            format!("Waiting for {reference} to be deleted"),
        )));
    }
    scope.found.infrastructure_gone = true;
    Ok(Outcome::Continue)
}

/// Once the InfraMachine is gone, deletes the Node (an unreachable
/// workload cluster is given up on after `nodeDeletionTimeoutSeconds`).
pub async fn node(scope: &mut Scope<Machine>, ctx: &Context) -> Result<Outcome, Error> {
    if !scope.found.infrastructure_gone {
        return Ok(Outcome::Continue);
    }
    let node = scope.status.node_ref.as_ref().map(|r| r.name.clone());
    if let Some(node) = node.filter(|_| !scope.found.keep_node) {
        let key = cluster_key(scope);
        let deleted = match ctx.workload.client(&key).await {
            Ok(client) => delete_nodes(ctx, &Api::all(client), &key, &[node]).await,
            Err(source) => Err(Error::Workload(key.to_string(), source)),
        };
        if let Err(error) = deleted {
            let timeout = scope
                .object
                .spec
                .deletion
                .as_ref()
                .and_then(|d| d.node_deletion_timeout_seconds);
            let requested = scope
                .object
                .metadata
                .deletion_timestamp
                .as_ref()
                .map(|t| t.0);
            if !timeout_passed(requested, timeout, Timestamp::now()) {
                scope.set(Desired::holds(
                    ConditionType::Deleting,
                    Reason::WaitingForNodeDeletion,
                    crate::report::error_chain(&error),
                ));
                return Err(error);
            }
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "node deletion timeout passed; leaving the Machine's Node"
            );
        }
    }
    scope.set(Desired::holds(
        ConditionType::Deleting,
        Reason::DeletionCompleted,
        "",
    ));
    Ok(Outcome::Continue)
}
