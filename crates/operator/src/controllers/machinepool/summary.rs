//! The MachinePool's derived status once the phases ran: milestones, phase,
//! up-to-date count and the `Available` summary.

use kube::ResourceExt as _;

use super::phase::{self, Observed, Phase};
use crate::api::conditions::{self, Desired};
use crate::api::machinepool::{MachinePoolInitializationStatus, MachinePoolV1Beta1Status};
use crate::api::{ConditionType, MachinePool, Reason, annotations};
use crate::controllers::reconciler::Scope;

/// The v1beta1 conditions of a MachinePool and the v1beta2 ones they mirror.
const V1BETA1_CONDITIONS: [(&str, ConditionType); 4] = [
    ("Ready", ConditionType::Available),
    ("BootstrapReady", ConditionType::BootstrapConfigReady),
    ("InfrastructureReady", ConditionType::InfrastructureReady),
    ("ReplicasReady", ConditionType::ReplicasReady),
];

pub fn summarize(scope: &mut Scope<MachinePool>) {
    let deleting = scope.deleting();
    if !deleting {
        scope.set(Desired::fails(
            ConditionType::Deleting,
            Reason::NotDeleting,
            "",
        ));
        scope.status.initialization = Some(MachinePoolInitializationStatus {
            bootstrap_data_secret_created: Some(scope.found.bootstrap_ready),
            infrastructure_provisioned: Some(scope.found.infrastructure_ready),
        });
    }
    let pool = scope.object.clone();
    let init = scope.status.initialization.clone().unwrap_or_default();
    let observed = Observed {
        deleting,
        bootstrap_ready: init.bootstrap_data_secret_created == Some(true),
        infrastructure_ready: init.infrastructure_provisioned == Some(true),
        has_node_refs: !scope.status.node_refs.is_empty(),
        desired: pool.spec.replicas,
        ready: scope.v1beta1().ready_replicas.unwrap_or(0),
        externally_scaled: pool
            .annotations()
            .get(annotations::REPLICAS_MANAGED_BY)
            .is_some_and(|v| v != "false"),
        previous: scope.status.phase.as_deref().and_then(Phase::parse),
    };
    let phase = phase::phase(observed);
    scope.status.phase = Some(phase.as_str().into());
    // Every replica is up to date unless the infrastructure pool, which
    // alone knows what each instance was made from, says otherwise.
    scope.status.up_to_date_replicas = scope.found.up_to_date_replicas.or(scope.status.replicas);
    let available = scope.status.available_replicas.unwrap_or(0);
    scope.set(available_condition(
        phase,
        observed.infrastructure_ready,
        available,
        pool.spec.replicas,
    ));
    let conditions = scope.status.conditions.clone();
    conditions::mirror_v1beta1(
        &conditions,
        &V1BETA1_CONDITIONS,
        &mut scope.v1beta1().conditions,
    );
    // Upstream's v1beta1 counters are omitted when zero (`omitempty` ints).
    if let Some(v1beta1) = scope
        .status
        .deprecated
        .as_mut()
        .and_then(|d| d.v1beta1.as_mut())
    {
        for counter in [
            &mut v1beta1.ready_replicas,
            &mut v1beta1.available_replicas,
            &mut v1beta1.unavailable_replicas,
        ] {
            *counter = counter.filter(|n| *n != 0);
        }
    }
    // The phases create the v1beta1 part on first use; none at all when nothing is in it.
    if scope.status.deprecated.as_ref().is_some_and(|d| {
        d.v1beta1
            .as_ref()
            .is_none_or(|v| *v == MachinePoolV1Beta1Status::default())
    }) {
        scope.status.deprecated = None;
    }
}

/// `Available`: True once the infrastructure is provisioned and every
/// desired replica is available.
fn available_condition(
    phase: Phase,
    infrastructure_ready: bool,
    available: i32,
    desired: Option<i32>,
) -> Desired {
    match phase {
        Phase::Deleting => {
            Desired::fails(ConditionType::Available, Reason::NotReady, "being deleted")
        }
        _ if infrastructure_ready && Some(available) == desired => {
            Desired::holds(ConditionType::Available, Reason::Ready, "")
        }
        _ => Desired::fails(
            ConditionType::Available,
            Reason::NotReady,
            format!("{available} of {} replicas available", desired.unwrap_or(1)),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ConditionStatus;

    #[test]
    fn available_holds_only_when_provisioned_with_every_desired_replica_available() {
        let cases = [
            // (phase, infrastructure ready, available, desired, holds, message)
            (Phase::Running, true, 3, Some(3), true, ""),
            (
                Phase::ScalingUp,
                true,
                2,
                Some(3),
                false,
                "2 of 3 replicas available",
            ),
            (
                Phase::Provisioning,
                false,
                0,
                Some(0),
                false,
                "0 of 0 replicas available",
            ),
            (Phase::Running, true, 0, Some(0), true, ""),
            (Phase::Deleting, true, 3, Some(3), false, "being deleted"),
        ];
        for (phase, ready, available, desired, holds, message) in cases {
            let condition = available_condition(phase, ready, available, desired);
            assert_eq!(
                (condition.status, condition.message.as_str()),
                (ConditionStatus::from_bool(holds), message),
                "{phase:?} ready={ready} {available}/{desired:?}"
            );
        }
    }
}
