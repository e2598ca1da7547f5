//! The bootstrap phase: adopt the bootstrap config, wait until it has made
//! its data Secret, and record the Secret's name in spec — or accept the
//! Secret the user named.

use serde_json::Value;

use super::scope::Scope;
use crate::api::conditions::Desired;
use crate::api::{ConditionStatus, ConditionType, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::external;
use crate::controllers::outcome::{Outcome, Wait};

pub async fn run(scope: &mut Scope<'_>, ctx: &Context) -> Result<Outcome, Error> {
    let bootstrap = &scope.pool.spec.template.spec.bootstrap;
    let Some(reference) = bootstrap.config_ref.clone() else {
        if let Some(name) = bootstrap.data_secret_name.clone() {
            scope.bootstrap_ready = true;
            scope.set(Desired::holds(
                ConditionType::BootstrapConfigReady,
                Reason::DataSecretProvided,
                format!("bootstrap data from Secret {name:?}"),
            ));
            return Ok(Outcome::Continue);
        }
        // The CRD requires one of the two; an object from before that rule may lack both.
        let message = "spec.template.spec.bootstrap has neither configRef nor dataSecretName";
        scope.set(Desired::fails(
            ConditionType::BootstrapConfigReady,
            Reason::ReferenceInvalid,
            message,
        ));
        return Ok(Outcome::Wait(Wait::on_change(
            Reason::ReferenceInvalid,
            message,
        )));
    };
    // Also when it does not exist: a new config has no owner yet, so its
    // creation does not reach this pool through the watch; backoff brings
    // the pool back (upstream does the same).
    let (resolved, config) = match scope.adopted(ctx, &reference).await {
        Ok(found) => found,
        Err(error) => return Err(scope.failed(ConditionType::BootstrapConfigReady, error)),
    };
    if config.metadata.deletion_timestamp.is_some() {
        return Ok(Outcome::Continue);
    }
    let ready = external::contract_flag(&config, resolved.contract, "dataSecretCreated", "ready");
    let mirrored = external::ready_condition(&config);
    scope.set(Desired {
        type_: ConditionType::BootstrapConfigReady,
        status: ConditionStatus::from_bool(ready),
        reason: if ready {
            Reason::DataSecretAvailable
        } else {
            Reason::WaitingForDataSecret
        },
        message: mirrored
            .map(|c| c.message)
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| {
                format!(
                    "{reference} has {}produced its data Secret",
                    if ready { "" } else { "not yet " }
                )
            }),
    });
    if !ready {
        // Not sticky; dataSecretName keeps its old value (upstream).
        return Ok(Outcome::Wait(Wait::on_change(
            Reason::WaitingForDataSecret,
            format!("waiting for {reference} to produce its data Secret"),
        )));
    }
    let Some(name) = external::status_field(&config, &["dataSecretName"])
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    else {
        let error = Error::DataSecretNameMissing(reference.to_string());
        return Err(scope.failed(ConditionType::BootstrapConfigReady, error));
    };
    scope.data_secret_name = Some(name.to_owned());
    scope.bootstrap_ready = true;
    Ok(Outcome::Continue)
}
