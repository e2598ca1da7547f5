//! The bootstrap phase: adopt the bootstrap config, wait until it has made
//! its data Secret, and record the Secret's name in spec — or accept the
//! Secret the user named.

use serde_json::Value;

use crate::api::conditions::Desired;
use crate::api::{ConditionType, MachinePool, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::{Error, KindError};
use crate::controllers::external::{self, Mirror};
use crate::controllers::outcome::{Outcome, Wait};
use crate::controllers::reconciler::Scope;

pub async fn run(scope: &mut Scope<MachinePool>, ctx: &Context) -> Result<Outcome, Error> {
    let bootstrap = &scope.object.spec.template.spec.bootstrap;
    let Some(reference) = bootstrap.config_ref.clone() else {
        if let Some(name) = bootstrap.data_secret_name.clone() {
            scope.found.bootstrap_ready = true;
            scope.set(Desired::holds(
                ConditionType::BootstrapConfigReady,
                Reason::DataSecretProvided,
                format!("bootstrap data from Secret {name:?}"),
            ));
            return Ok(Outcome::Continue);
        }
        // The CRD requires one of the two; an object from before that rule may lack both.
        let message = "spec.template.spec.bootstrap has neither configRef nor dataSecretName";
        return Ok(scope.waits(Desired::fails(
            ConditionType::BootstrapConfigReady,
            Reason::ReferenceInvalid,
            message,
        )));
    };
    // Also when it does not exist: a new config has no owner yet, so its
    // creation does not reach this pool through the watch; backoff brings
    // the pool back (upstream does the same).
    let (resolved, config) = match scope.adopt(ctx, &reference).await {
        Ok(found) => found,
        Err(error) => return Err(scope.failed(ConditionType::BootstrapConfigReady, error)),
    };
    if config.metadata.deletion_timestamp.is_some() {
        return Ok(Outcome::Continue);
    }
    let ready = external::contract_flag(&config, resolved.contract, "dataSecretCreated", "ready");
    scope.set(
        Mirror {
            type_: ConditionType::BootstrapConfigReady,
            ready: Reason::DataSecretAvailable,
            waiting: Reason::WaitingForDataSecret,
        }
        .of(&config, ready, &reference),
    );
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
        let error = DataSecretNameMissing(reference.to_string()).into();
        return Err(scope.failed(ConditionType::BootstrapConfigReady, error));
    };
    scope.found.data_secret_name = Some(name.to_owned());
    scope.found.bootstrap_ready = true;
    Ok(Outcome::Continue)
}

/// A bootstrap config says it is ready but names no data Secret.
#[derive(Debug, thiserror::Error)]
#[error("{0} is ready but has no status.dataSecretName")]
pub struct DataSecretNameMissing(String);

impl KindError for DataSecretNameMissing {
    fn reason(&self) -> Reason {
        Reason::WaitingForDataSecret
    }

    fn metric_label(&self) -> &'static str {
        "data_secret_name_missing"
    }
}
