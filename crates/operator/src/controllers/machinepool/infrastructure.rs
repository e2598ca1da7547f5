//! The infrastructure phase: adopt the infrastructure pool object, follow
//! its readiness and failure, and copy its providerID list and replica count.

use kube::api::DynamicObject;
use serde_json::Value;

use crate::api::cluster::FailureFields;
use crate::api::{ConditionType, ContractVersionedObjectReference, MachinePool, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::external::{self, Mirror, ReferenceError};
use crate::controllers::outcome::{Outcome, Wait};
use crate::controllers::reconciler::Scope;

pub async fn run(scope: &mut Scope<MachinePool>, ctx: &Context) -> Result<Outcome, Error> {
    let reference = scope.object.spec.template.spec.infrastructure_ref.clone();
    let was_provisioned = scope
        .status
        .initialization
        .as_ref()
        .and_then(|i| i.infrastructure_provisioned)
        == Some(true);
    // What was provisioned stays so until the object says otherwise, as
    // upstream leaves `infrastructureProvisioned` alone on a failed read:
    // an object deleted after being ready keeps being reported as such.
    scope.found.infrastructure_ready = was_provisioned;
    let (resolved, object) = match scope.adopt(ctx, &reference).await {
        Ok(found) => found,
        Err(Error::Reference {
            source: ReferenceError::NotFound { .. },
            ..
        }) if was_provisioned => {
            scope.v1beta1().failure = FailureFields {
                failure_reason: Some("InvalidConfiguration".into()),
                failure_message: Some(format!(
                    "MachinePool infrastructure resource {reference} has been deleted after being ready"
                )),
            };
            let error = Error::InfrastructureDeleted(reference.to_string());
            return Err(scope.failed(ConditionType::InfrastructureReady, error));
        }
        Err(error) => return Err(scope.failed(ConditionType::InfrastructureReady, error)),
    };
    if object.metadata.deletion_timestamp.is_some() {
        return Ok(Outcome::Continue);
    }
    // Failures are mirrored while the infrastructure reports them, and
    // cleared when it recovers (upstream keeps them for ever, issue #7332).
    scope.v1beta1().failure = match external::failure(&object) {
        Some((reason, message)) => FailureFields {
            failure_reason: Some(reason),
            failure_message: Some(format!(
                "Failure detected from referenced resource {} with name {:?}: {message}",
                resolved.resource.api_version, reference.name
            )),
        },
        None => FailureFields::default(),
    };
    let ready = external::contract_flag(&object, resolved.contract, "provisioned", "ready");
    scope.found.infrastructure_ready = ready;
    scope.found.infrastructure_machines =
        external::status_field(&object, &["infrastructureMachineKind"])
            .and_then(Value::as_str)
            .filter(|kind| !kind.is_empty())
            .map(|kind| (resolved.clone(), kind.to_owned()));
    scope.set(
        Mirror {
            type_: ConditionType::InfrastructureReady,
            ready: Reason::Ready,
            waiting: Reason::WaitingForInfrastructure,
        }
        .of(&object, ready, &reference),
    );
    if !ready {
        return Ok(Outcome::Wait(Wait::on_change(
            Reason::WaitingForInfrastructure,
            format!("waiting for {reference} to be provisioned"),
        )));
    }
    Ok(copy_provider_ids(scope, &object, &reference))
}

/// Copies the object's `status.replicas`, and its `spec.providerIDList`
/// once it lists the replicas it reports.
fn copy_provider_ids(
    scope: &mut Scope<MachinePool>,
    object: &DynamicObject,
    reference: &ContractVersionedObjectReference,
) -> Outcome {
    let provider_ids: Vec<String> = external::spec_field(object, &["providerIDList"])
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let replicas = external::status_field(object, &["replicas"])
        .and_then(Value::as_i64)
        .and_then(|r| i32::try_from(r).ok());
    if let Some(replicas) = replicas {
        scope.status.replicas = Some(replicas);
    }
    scope.found.up_to_date_replicas = external::status_field(object, &["upToDateReplicas"])
        .and_then(Value::as_i64)
        .and_then(|r| i32::try_from(r).ok());
    if provider_ids.is_empty() && replicas.unwrap_or(0) != 0 {
        return Outcome::Wait(Wait::on_change(
            Reason::WaitingForInfrastructure,
            format!("{reference} reports replicas but no providerIDList yet"),
        ));
    }
    if provider_ids != scope.object.spec.provider_id_list {
        // A new list: Node references are recomputed from scratch.
        let replicas = scope.status.replicas.unwrap_or(0);
        let v1beta1 = scope.v1beta1();
        v1beta1.ready_replicas = Some(0);
        v1beta1.available_replicas = Some(0);
        v1beta1.unavailable_replicas = Some(replicas);
        scope.found.provider_id_list = Some(provider_ids);
    }
    Outcome::Continue
}
