//! The Cluster's derived status once the phases ran: its workers' replica
//! counts (from the pool cache's index), phase and `Available`.

use kube::ResourceExt as _;

use super::phase::{self, Observed};
use crate::api::cluster::{StatusVersion, WorkersStatus};
use crate::api::conditions::{self, Desired};
use crate::api::{Cluster, ConditionType, MachinePool, Reason};
use crate::controllers::reconciler::Scope;

/// The v1beta1 conditions of a Cluster and the v1beta2 ones they mirror.
const V1BETA1_CONDITIONS: [(&str, ConditionType); 3] = [
    ("Ready", ConditionType::Available),
    ("InfrastructureReady", ConditionType::InfrastructureReady),
    (
        "ControlPlaneInitialized",
        ConditionType::ControlPlaneInitialized,
    ),
];

pub fn summarize(scope: &mut Scope<Cluster>, pools: &[std::sync::Arc<MachinePool>]) {
    let deleting = scope.deleting();
    if !deleting {
        scope.set(Desired::fails(
            ConditionType::Deleting,
            Reason::NotDeleting,
            "",
        ));
    }
    scope.status.workers = workers(pools);
    for condition in workers_conditions(pools) {
        scope.set(condition);
    }
    let init = scope.status.initialization.clone().unwrap_or_default();
    let cluster = scope.object.clone();
    let observed = Observed {
        deleting,
        has_refs: cluster.spec.infrastructure_ref.is_some()
            || cluster.spec.control_plane_ref.is_some(),
        infrastructure_provisioned: init.infrastructure_provisioned == Some(true),
        endpoint_valid: cluster.endpoint().is_some() || scope.found.endpoint.is_some(),
    };
    scope.status.phase = Some(phase::phase(observed).as_str().into());
    let missing: Vec<&str> = [
        (!observed.infrastructure_provisioned).then_some("infrastructure not provisioned"),
        (!observed.endpoint_valid).then_some("no control-plane endpoint"),
        (init.control_plane_initialized != Some(true)).then_some("control plane not initialized"),
        deleting.then_some("being deleted"),
    ]
    .into_iter()
    .flatten()
    .collect();
    scope.set(if missing.is_empty() {
        Desired::holds(ConditionType::Available, Reason::Ready, "")
    } else {
        Desired::fails(
            ConditionType::Available,
            Reason::NotReady,
            missing.join(", "),
        )
    });
    let conditions = scope.status.conditions.clone();
    let v1beta1 = scope
        .status
        .deprecated
        .get_or_insert_with(Default::default)
        .v1beta1
        .get_or_insert_with(Default::default);
    conditions::mirror_v1beta1(&conditions, &V1BETA1_CONDITIONS, &mut v1beta1.conditions);
    tracing::trace!(cluster = cluster.name_any(), "summarized");
}

/// `WorkersAvailable`, `ScalingUp` and `ScalingDown`: upstream's summaries
/// of the Cluster's MachinePools (it has no other workers).
fn workers_conditions(pools: &[std::sync::Arc<MachinePool>]) -> [Desired; 3] {
    let names = |pick: &dyn Fn(&MachinePool) -> bool| {
        let mut names: Vec<String> = pools
            .iter()
            .filter(|p| pick(p))
            .map(|p| p.name_any())
            .collect();
        names.sort();
        names.join(", ")
    };
    let available = |p: &MachinePool| {
        p.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Available" && c.status == "True")
        })
    };
    let current = |p: &MachinePool| p.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    let workers = if pools.is_empty() {
        Desired::holds(ConditionType::WorkersAvailable, Reason::NoWorkers, "")
    } else {
        let unavailable = names(&|p| !available(p));
        if unavailable.is_empty() {
            Desired::holds(ConditionType::WorkersAvailable, Reason::Available, "")
        } else {
            let message = format!("MachinePools not available: {unavailable}");
            Desired::fails(
                ConditionType::WorkersAvailable,
                Reason::NotAvailable,
                message,
            )
        }
    };
    let scaling = |type_, yes, no, pick: &dyn Fn(&MachinePool) -> bool| {
        let scaling = names(pick);
        if scaling.is_empty() {
            Desired::fails(type_, no, "")
        } else {
            Desired::holds(type_, yes, format!("MachinePools: {scaling}"))
        }
    };
    [
        workers,
        scaling(
            ConditionType::ScalingUp,
            Reason::ScalingUp,
            Reason::NotScalingUp,
            &|p| current(p) < p.desired_replicas(),
        ),
        scaling(
            ConditionType::ScalingDown,
            Reason::ScalingDown,
            Reason::NotScalingDown,
            &|p| current(p) > p.desired_replicas(),
        ),
    ]
}

/// Versions a Cluster's `status.workers` lists (its schema's bound).
const MAX_WORKER_VERSIONS: usize = 32;

/// The replica counts of the Cluster's MachinePools, summed; none without pools.
fn workers(pools: &[std::sync::Arc<MachinePool>]) -> Option<WorkersStatus> {
    if pools.is_empty() {
        return None;
    }
    let sum =
        |f: &dyn Fn(&MachinePool) -> Option<i32>| Some(pools.iter().filter_map(|p| f(p)).sum());
    Some(WorkersStatus {
        desired_replicas: sum(&|p| p.spec.replicas),
        replicas: sum(&|p| p.status.as_ref()?.replicas),
        ready_replicas: sum(&|p| p.status.as_ref()?.ready_replicas),
        available_replicas: sum(&|p| p.status.as_ref()?.available_replicas),
        up_to_date_replicas: sum(&|p| p.status.as_ref()?.up_to_date_replicas),
        versions: StatusVersion::aggregate(
            pools
                .iter()
                .filter_map(|p| p.status.as_ref())
                .flat_map(|s| s.versions.iter().cloned()),
        )
        .into_iter()
        .take(MAX_WORKER_VERSIONS)
        .collect(),
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::api::{ConditionStatus, conditions};
    use capwasm_api::testing::MachinePoolBuilder;

    #[test]
    fn workers_sum_the_pools_counts_and_are_absent_without_pools() {
        assert_eq!(workers(&[]), None);
        let mut a = MachinePoolBuilder::new("ns", "a", "c").replicas(3).build();
        let status = a.status.get_or_insert_default();
        status.replicas = Some(3);
        status.ready_replicas = Some(2);
        let at = |version: &str, replicas| StatusVersion {
            version: version.to_owned(),
            replicas,
        };
        status.versions = vec![at("v1.30.4", 1), at("v1.31.2", 2)];
        let mut b = MachinePoolBuilder::new("ns", "b", "c").replicas(2).build();
        b.status.get_or_insert_default().versions = vec![at("v1.31.2", 1)];
        let summed = workers(&[std::sync::Arc::new(a), std::sync::Arc::new(b)]).unwrap();
        assert_eq!(summed.versions, [at("v1.30.4", 1), at("v1.31.2", 3)]);
        assert_eq!(summed.desired_replicas, Some(5));
        assert_eq!(summed.replicas, Some(3));
        assert_eq!(summed.ready_replicas, Some(2));
        assert_eq!(summed.available_replicas, Some(0));
        assert_eq!(summed.up_to_date_replicas, Some(0));
    }

    #[test]
    fn workers_conditions_summarize_the_pools() {
        let status = |c: &Desired| (c.type_, c.status, c.reason);
        let [workers, up, down] = workers_conditions(&[]);
        assert_eq!(
            [status(&workers), status(&up), status(&down)],
            [
                (
                    ConditionType::WorkersAvailable,
                    ConditionStatus::True,
                    Reason::NoWorkers
                ),
                (
                    ConditionType::ScalingUp,
                    ConditionStatus::False,
                    Reason::NotScalingUp
                ),
                (
                    ConditionType::ScalingDown,
                    ConditionStatus::False,
                    Reason::NotScalingDown
                ),
            ]
        );
        let pool = |name, desired, current, available: bool| {
            let mut pool = MachinePoolBuilder::new("ns", name, "c")
                .replicas(desired)
                .build();
            let status = pool.status.get_or_insert_default();
            status.replicas = Some(current);
            let condition = if available {
                Desired::holds(ConditionType::Available, Reason::Ready, "")
            } else {
                Desired::fails(ConditionType::Available, Reason::NotReady, "")
            };
            let now = Time(k8s_openapi::jiff::Timestamp::now());
            conditions::set(&mut status.conditions, condition, None, &now);
            std::sync::Arc::new(pool)
        };
        let pools = [
            pool("grow", 3, 1, false),
            pool("shrink", 1, 2, true),
            pool("still", 2, 2, true),
        ];
        let [workers, up, down] = workers_conditions(&pools);
        assert_eq!(
            [status(&workers), status(&up), status(&down)],
            [
                (
                    ConditionType::WorkersAvailable,
                    ConditionStatus::False,
                    Reason::NotAvailable
                ),
                (
                    ConditionType::ScalingUp,
                    ConditionStatus::True,
                    Reason::ScalingUp
                ),
                (
                    ConditionType::ScalingDown,
                    ConditionStatus::True,
                    Reason::ScalingDown
                ),
            ]
        );
        assert_eq!(workers.message, "MachinePools not available: grow");
        assert_eq!(up.message, "MachinePools: grow");
        assert_eq!(down.message, "MachinePools: shrink");
    }
}
