//! The Machine's derived status once the phases ran: its phase, and the
//! `Ready` and `Available` summaries (upstream's v1beta2 names).

use crate::api::conditions::{self, Desired};
use crate::api::{ConditionType, Machine, Reason};
use crate::controllers::reconciler::Scope;

pub fn summarize(scope: &mut Scope<Machine>) {
    let deleting = scope.deleting();
    if !deleting {
        scope.set(Desired::fails(
            ConditionType::Deleting,
            Reason::NotDeleting,
            "",
        ));
    }
    // A pool's Machine is bootstrapped by its pool's config.
    scope.set(Desired::holds(
        ConditionType::BootstrapConfigReady,
        Reason::DataSecretProvided,
        "",
    ));
    let provisioned = super::infrastructure::provisioned(scope);
    let phase = if deleting {
        "Deleting"
    } else if scope.status.node_ref.is_some() && provisioned {
        "Running"
    } else if scope.object.spec.provider_id.is_some() {
        "Provisioned"
    } else {
        "Pending"
    };
    scope.status.phase = Some(phase.to_owned());
    let is = |type_| conditions::is_true(&scope.status.conditions, type_);
    let ready =
        !deleting && is(ConditionType::InfrastructureReady) && is(ConditionType::NodeHealthy);
    let summary = if ready {
        Desired::holds(ConditionType::Ready, Reason::Ready, "")
    } else if deleting {
        Desired::fails(
            ConditionType::Ready,
            Reason::NotReady,
            "the Machine is being deleted",
        )
    } else {
        let waiting: Vec<&str> = [
            ConditionType::InfrastructureReady,
            ConditionType::NodeHealthy,
        ]
        .into_iter()
        .filter(|t| !is(*t))
        .map(ConditionType::as_str)
        .collect();
        Desired::fails(
            ConditionType::Ready,
            Reason::NotReady,
            format!("not yet: {}", waiting.join(", ")),
        )
    };
    let available = if ready {
        Desired::holds(ConditionType::Available, Reason::Available, "")
    } else {
        Desired::fails(
            ConditionType::Available,
            Reason::NotAvailable,
            "the Machine is not Ready",
        )
    };
    scope.set(summary);
    scope.set(available);
}
