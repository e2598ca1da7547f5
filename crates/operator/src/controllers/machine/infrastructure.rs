//! The infrastructure phase: adopt the InfraMachine (the Machine its
//! controller, as upstream's Machine controller sets it), mirror its
//! readiness, and copy its providerID, failure domain and addresses.

use serde_json::{Value, json};

use crate::api::conditions::Desired;
use crate::api::machine::{FIELD_MANAGER, MachineInitializationStatus};
use crate::api::provider::MachineAddress;
use crate::api::{ConditionType, Machine, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::external::{
    self, Adopter, Mirror, ReferenceError, spec_field, status_field,
};
use crate::controllers::outcome::{Outcome, Wait};
use crate::controllers::reconciler::Scope;

pub async fn run(scope: &mut Scope<Machine>, ctx: &Context) -> Result<Outcome, Error> {
    let reference = scope.object.spec.infrastructure_ref.clone();
    let was_provisioned = provisioned(scope);
    let machine = scope.object.clone();
    let adopter = Adopter {
        owner: scope.controller_reference(),
        cluster: &machine.spec.cluster_name,
        manager: FIELD_MANAGER,
    };
    let (resolved, object) = match scope.adopted(ctx, &reference, adopter).await {
        Ok(found) => found,
        // Upstream: an InfraMachine gone after its Machine was provisioned
        // is a failure; before, something to wait for.
        Err(Error::Reference {
            source: ReferenceError::NotFound { .. },
            ..
        }) if was_provisioned => {
            let error = Error::InfrastructureDeleted(reference.to_string());
            return Err(scope.failed(ConditionType::InfrastructureReady, error));
        }
        Err(error) => return Err(scope.failed(ConditionType::InfrastructureReady, error)),
    };
    let ready = external::contract_flag(&object, resolved.contract, "provisioned", "ready");
    scope.set(
        Mirror {
            type_: ConditionType::InfrastructureReady,
            ready: Reason::Ready,
            waiting: Reason::WaitingForInfrastructure,
        }
        .of(&object, ready, &reference),
    );
    // Up to date as its InfraMachine says: only the infrastructure pool
    // knows what each instance was made from.
    if let Some((status, _, message)) = external::condition(&object, "UpToDate") {
        scope.set(if status == "True" {
            Desired::holds(ConditionType::UpToDate, Reason::UpToDate, "")
        } else {
            Desired::fails(ConditionType::UpToDate, Reason::NotUpToDate, message)
        });
    }
    let provider_id = spec_field(&object, &["providerID"])
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty());
    let Some(provider_id) = provider_id.filter(|_| ready) else {
        return Ok(Outcome::Wait(Wait::on_change(
            Reason::WaitingForInfrastructure,
            format!("waiting for {reference} to be provisioned and report a providerID"),
        )));
    };
    scope.status.addresses = status_field(&object, &["addresses"])
        .and_then(|a| serde_json::from_value::<Vec<MachineAddress>>(a.clone()).ok())
        .unwrap_or_default();
    let failure_domain = status_field(&object, &["failureDomain"])
        .or_else(|| spec_field(&object, &["failureDomain"]))
        .and_then(Value::as_str)
        .filter(|d| !d.is_empty());
    let spec = &scope.object.spec;
    if spec.provider_id.as_deref() != Some(provider_id)
        || (failure_domain.is_some() && spec.failure_domain.as_deref() != failure_domain)
    {
        let mut fields = json!({ "providerID": provider_id });
        if let Some(domain) = failure_domain {
            fields["failureDomain"] = domain.into();
        }
        scope.apply(ctx, "spec", json!({ "spec": fields })).await?;
    }
    scope.status.initialization = Some(MachineInitializationStatus {
        bootstrap_data_secret_created: None,
        infrastructure_provisioned: Some(true),
    });
    Ok(Outcome::Continue)
}

/// Whether the Machine was provisioned already.
pub fn provisioned(scope: &Scope<Machine>) -> bool {
    scope
        .status
        .initialization
        .as_ref()
        .and_then(|i| i.infrastructure_provisioned)
        == Some(true)
}
