//! The Cluster's derived status once the phases ran: its workers' replica
//! counts (from the pool cache's index), phase and `Available`.

use kube::ResourceExt as _;

use super::phase::{self, Observed};
use crate::api::cluster::WorkersStatus;
use crate::api::conditions::Desired;
use crate::api::{Cluster, ConditionType, MachinePool, Reason};
use crate::controllers::reconciler::Scope;

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
    tracing::trace!(cluster = cluster.name_any(), "summarized");
}

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
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::objects::MachinePoolBuilder;

    #[test]
    fn workers_sum_the_pools_counts_and_are_absent_without_pools() {
        assert_eq!(workers(&[]), None);
        let mut a = MachinePoolBuilder::new("ns", "a", "c").replicas(3).build();
        let status = a.status.get_or_insert_default();
        status.replicas = Some(3);
        status.ready_replicas = Some(2);
        let b = MachinePoolBuilder::new("ns", "b", "c").replicas(2).build();
        let summed = workers(&[std::sync::Arc::new(a), std::sync::Arc::new(b)]).unwrap();
        assert_eq!(summed.desired_replicas, Some(5));
        assert_eq!(summed.replicas, Some(3));
        assert_eq!(summed.ready_replicas, Some(2));
        assert_eq!(summed.available_replicas, Some(0));
    }
}
