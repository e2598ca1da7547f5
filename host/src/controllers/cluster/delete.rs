//! Deleting a Cluster in upstream's order: its MachinePools first, then the
//! control plane, then the infrastructure; only then the finalizer goes.

use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt as _};

use super::CONTROLLER;
use super::reconcile::Scope;
use crate::api::conditions::Desired;
use crate::api::{ConditionType, MachinePool, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::{Outcome, Wait};

/// Deletes what belongs to the Cluster, one stage at a time. `None` once
/// everything is gone and the finalizer may be removed.
pub async fn run(scope: &mut Scope<'_>, ctx: &Context) -> Result<Option<Outcome>, Error> {
    let cluster = scope.cluster;
    let namespace = cluster.namespace().unwrap_or_default();
    let pools: Api<MachinePool> = Api::namespaced(ctx.client.clone(), &namespace);
    // By spec.clusterName, not the label: a pool never reconciled has no label yet.
    let remaining: Vec<MachinePool> = pools
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::Get {
            kind: "MachinePool",
            name: namespace.clone(),
            source,
        })?
        .items
        .into_iter()
        .filter(|p| p.spec.cluster_name == cluster.name_any())
        .collect();
    for pool in remaining
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        match pools
            .delete(&pool.name_any(), &DeleteParams::background())
            .await
        {
            Ok(_) => ctx.metrics.write(CONTROLLER, "delete"),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => {
                return Err(Error::Write {
                    what: "deletion of a MachinePool",
                    name: pool.name_any(),
                    source,
                });
            }
        }
    }
    if !remaining.is_empty() {
        let names: Vec<String> = remaining.iter().map(kube::ResourceExt::name_any).collect();
        let message = format!("* MachinePools: {}", names.join(", "));
        scope.set(Desired::holds(
            ConditionType::Deleting,
            Reason::WaitingForWorkersDeletion,
            message.clone(),
        ));
        return Ok(Some(Outcome::Wait(Wait::on_change(
            Reason::WaitingForWorkersDeletion,
            message,
        ))));
    }

    let references = [
        cluster.spec.control_plane_ref.clone(),
        cluster.spec.infrastructure_ref.clone(),
    ];
    for reference in references.into_iter().flatten() {
        let resolved = match scope.resolve(ctx, &reference).await {
            Ok(resolved) => resolved,
            // No CRD serves the kind any more: no such object can exist.
            Err(Error::Reference { source, .. }) if source.reason() == Reason::ReferenceInvalid => {
                continue;
            }
            Err(error) => return Err(error),
        };
        let exists = ctx
            .external
            .delete(&resolved, &namespace, &reference.name)
            .await
            .map_err(|source| Error::Reference {
                reference: reference.to_string(),
                source,
            })?;
        if exists {
            let message = format!("waiting for {reference} to be deleted");
            scope.set(Desired::holds(
                ConditionType::Deleting,
                Reason::WaitingForInfrastructureDeletion,
                message.clone(),
            ));
            return Ok(Some(Outcome::Wait(Wait::on_change(
                Reason::WaitingForInfrastructureDeletion,
                message,
            ))));
        }
    }
    scope.set(Desired::holds(
        ConditionType::Deleting,
        Reason::DeletionCompleted,
        "",
    ));
    Ok(None)
}
