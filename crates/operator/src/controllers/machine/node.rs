//! The node phase: the Machine's Node, found in the workload cluster by its
//! exact providerID: `status.nodeRef`, `status.nodeInfo`, and the
//! `NodeReady` and `NodeHealthy` conditions. Node changes arrive through
//! the workload Node watch; nothing polls.

use k8s_openapi::api::core::v1::Node;

use crate::api::conditions::Desired;
use crate::api::machine::MachineNodeReference;
use crate::api::{ConditionStatus, ConditionType, Machine, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::{Outcome, Wait};
use crate::controllers::reconciler::Scope;
use crate::workload::ClusterKey;

/// The Node conditions that, True, make a Node unhealthy (upstream's).
const PRESSURES: [&str; 3] = ["MemoryPressure", "DiskPressure", "PIDPressure"];

pub async fn run(scope: &mut Scope<Machine>, ctx: &Context) -> Result<Outcome, Error> {
    let Some(provider_id) = scope.object.spec.provider_id.clone() else {
        return Ok(Outcome::Continue);
    };
    let key = cluster_key(scope);
    let nodes = match ctx.workload.nodes(&key).await {
        Ok(nodes) => nodes,
        Err(source) => {
            let error = Error::Workload(key.to_string(), source);
            scope.set(Desired {
                type_: ConditionType::NodeReady,
                status: ConditionStatus::Unknown,
                reason: error.reason(),
                message: crate::report::error_chain(&error),
            });
            return Err(scope.failed(ConditionType::NodeHealthy, error));
        }
    };
    let Some(node) = nodes.by_provider_id(&provider_id) else {
        let (reason, message) = match &scope.status.node_ref {
            Some(gone) => (
                Reason::NodeDoesNotExist,
                format!("Node {:?} is gone", gone.name),
            ),
            None => (
                Reason::WaitingForNode,
                format!("waiting for a Node with providerID {provider_id:?}"),
            ),
        };
        for type_ in [ConditionType::NodeReady, ConditionType::NodeHealthy] {
            scope.set(Desired::fails(type_, reason, message.clone()));
        }
        return Ok(Outcome::Wait(Wait::on_change(reason, message)));
    };
    scope.status.node_ref = node
        .metadata
        .name
        .clone()
        .map(|name| MachineNodeReference { name });
    scope.status.node_info = node.status.as_ref().and_then(|s| s.node_info.clone());
    let (ready, healthy) = health(&node);
    scope.set(condition(
        ConditionType::NodeReady,
        ready,
        "the Node is not Ready",
    ));
    scope.set(condition(
        ConditionType::NodeHealthy,
        healthy,
        "the Node is not Ready, or under pressure",
    ));
    Ok(Outcome::Continue)
}

/// Whether the Node is Ready, and whether it is also under no pressure.
pub fn health(node: &Node) -> (bool, bool) {
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let is = |type_: &str, status: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == status)
    };
    let ready = is("Ready", "True");
    (ready, ready && !PRESSURES.iter().any(|p| is(p, "True")))
}

fn condition(type_: ConditionType, holds: bool, otherwise: &str) -> Desired {
    if holds {
        Desired::holds(type_, Reason::Ready, "")
    } else {
        Desired::fails(type_, Reason::NotReady, otherwise)
    }
}

/// The Machine's Cluster, as the workload-cluster access knows it.
pub fn cluster_key(scope: &Scope<Machine>) -> ClusterKey {
    ClusterKey::new(scope.namespace(), scope.object.spec.cluster_name.clone())
}
