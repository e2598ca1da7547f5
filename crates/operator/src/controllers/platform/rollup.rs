//! The cluster's state from its objects and its workload cluster's Nodes,
//! as the provider's `status` rolls it up, written with the rest of the
//! status in the reconcile's one write. A transitional phase (Pending,
//! Reconciling, Upgrading) the provider keeps reporting past the
//! template's timeout shows as Unhealthy, with the reason.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt as _;
use serde_json::Value;

use super::children::Child;
use crate::api::conditions::{self, ConditionType};
use crate::api::platform::{
    DEFAULT_PHASE_TIMEOUT_SECONDS, NodeGroupStatus, NodeStatus, PlatformClusterStatus, phase,
};
use crate::api::{CLUSTER_API_GROUP, PlatformCluster, annotations};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::provider::within_status_bound;
use crate::controllers::reconciler::Scope;
use crate::platform::documents;
use crate::wasm::checks::Violation;
use crate::wasm::composition::{ClusterSummary, ConditionStatus, Phase, StatusRequest};
use crate::workload::ClusterKey;

const EXPORT: &str = "composition.status";

/// Calls `status` and records what it says.
pub(super) async fn roll_up(
    scope: &mut Scope<PlatformCluster>,
    ctx: &Context,
) -> Result<Outcome, Error> {
    let found = &scope.found;
    let (Some(template), Some(provider), Some(observed)) =
        (&found.template, &found.provider, &found.observed)
    else {
        return Ok(Outcome::Continue);
    };
    let (template, provider) = (template.clone(), provider.clone());
    let object = scope.object.clone();
    let request = StatusRequest {
        cluster: found.documents.cluster.clone(),
        template: found.documents.template.clone(),
        observed: found.documents.observed.clone(),
        nodes: nodes(ctx, observed).await,
    };
    let uid = object.uid().unwrap_or_default();
    let namespace = object.namespace().unwrap_or_default();
    let summary = ctx
        .runtime
        .platform_status(provider.name(), &uid, &namespace, &request)
        .await
        .map_err(Error::Guest)?;
    if let Some(violation) = host_condition(&summary) {
        return Err(Error::Guest(
            ctx.runtime.refused(&provider, EXPORT, violation),
        ));
    }
    let timeout = Duration::from_secs(u64::from(
        template
            .spec
            .phase_timeout_seconds
            .unwrap_or(DEFAULT_PHASE_TIMEOUT_SECONDS),
    ));
    let now = scope.now.clone();
    let generation = object.metadata.generation;
    let mut status = scope.status.clone();
    let remaining = record(&mut status, summary, timeout, &now, generation);
    within_status_bound(ctx, &provider, EXPORT, "the status", &status)?;
    scope.status = status;
    Ok(remaining.map_or(Outcome::Continue, Outcome::RequeueAfter))
}

/// The workload cluster's Nodes of the cluster's CAPI Cluster, once its
/// control plane has answered; none before, or while it cannot be reached.
async fn nodes(ctx: &Context, observed: &[Child]) -> Vec<String> {
    let Some(cluster) = observed.iter().find(|c| c.is(CLUSTER_API_GROUP, "Cluster")) else {
        return Vec::new();
    };
    let initialized = cluster.object.data["status"]["initialization"]["controlPlaneInitialized"]
        == Value::Bool(true);
    let (namespace, name) = (
        cluster.object.namespace().unwrap_or_default(),
        cluster.object.name_any(),
    );
    if !initialized {
        return Vec::new();
    }
    let Ok(nodes) = ctx
        .workload
        .nodes(&ClusterKey::new(&namespace, &name))
        .await
    else {
        return Vec::new();
    };
    // Workload clusters may share an API server: a Node is this cluster's
    // when Cluster API annotated it so. By name: the same Nodes make the
    // same request, and the same status.
    let mut nodes: Vec<_> = nodes.iter().collect();
    nodes.sort_by_key(|node| node.metadata.name.clone());
    nodes
        .into_iter()
        .filter(|node| {
            let annotation = |key| node.annotations().get(key).map(String::as_str);
            annotation(annotations::NODE_CLUSTER_NAME) == Some(name.as_str())
                && annotation(annotations::NODE_CLUSTER_NAMESPACE) == Some(namespace.as_str())
        })
        .map(|node| documents::node(node))
        .collect()
}

/// A condition of a type the host writes, which the provider may not set.
fn host_condition(summary: &ClusterSummary) -> Option<Violation> {
    summary.conditions.iter().enumerate().find_map(|(i, c)| {
        ConditionType::named(&c.kind).map(|_| Violation {
            rule: "a condition type the host writes",
            field: format!("conditions[{i}].type ({})", c.kind),
        })
    })
}

fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Pending => phase::PENDING,
        Phase::Reconciling => phase::RECONCILING,
        Phase::Upgrading => phase::UPGRADING,
        Phase::Ready => phase::READY,
        Phase::Unhealthy => phase::UNHEALTHY,
        Phase::Unknown => phase::UNKNOWN,
    }
}

fn transitional(phase: &str) -> bool {
    [phase::PENDING, phase::RECONCILING, phase::UPGRADING].contains(&phase)
}

/// Whether the phase is Unhealthy because a transitional one timed out.
pub fn timed_out(status: &PlatformClusterStatus) -> bool {
    status.phase.as_deref() == Some(phase::UNHEALTHY)
        && status.reported_phase.as_deref().is_some_and(transitional)
}

/// Records `summary` in `status`; how long the reported phase may still
/// last before it times out, if it is transitional.
fn record(
    status: &mut PlatformClusterStatus,
    summary: ClusterSummary,
    timeout: Duration,
    now: &Time,
    generation: Option<i64>,
) -> Option<Duration> {
    let reported = phase_name(summary.phase);
    let since = match (&status.reported_phase, &status.phase_since) {
        (Some(before), Some(since)) if before == reported => since.clone(),
        _ => now.clone(),
    };
    let elapsed = now.0.duration_since(since.0).unsigned_abs();
    status.reported_phase = Some(reported.to_owned());
    status.phase_since = Some(since);
    let message = summary.message;
    let remaining = if transitional(reported) {
        timeout.checked_sub(elapsed).filter(|r| !r.is_zero())
    } else {
        None
    };
    if transitional(reported) && remaining.is_none() {
        status.phase = Some(phase::UNHEALTHY.to_owned());
        status.message = Some(format!(
            "{reported} for longer than the template's {}s: {message}",
            timeout.as_secs()
        ));
    } else {
        status.phase = Some(reported.to_owned());
        status.message = (!message.is_empty()).then_some(message);
    }
    status.kubernetes_version = summary.kubernetes_version;
    status.node_count = u32::try_from(summary.nodes.len()).ok();
    status.node_groups = summary
        .node_groups
        .into_iter()
        .map(|g| NodeGroupStatus {
            name: g.name,
            desired: g.desired,
            ready: g.ready,
            phase: g.phase,
        })
        .collect();
    let mut nodes = summary.nodes;
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    status.nodes = nodes
        .into_iter()
        .map(|n| NodeStatus {
            name: n.name,
            node_group: n.node_group,
            kubelet_version: n.kubelet_version,
            ready: n.ready,
        })
        .collect();
    // The provider's conditions replace those it reported before.
    let reported: Vec<&str> = summary.conditions.iter().map(|c| c.kind.as_str()).collect();
    status.conditions.retain(|c| {
        ConditionType::named(&c.type_).is_some() || reported.contains(&c.type_.as_str())
    });
    for condition in summary.conditions {
        let status_text = match condition.status {
            ConditionStatus::Satisfied => conditions::ConditionStatus::True,
            ConditionStatus::Unsatisfied => conditions::ConditionStatus::False,
            ConditionStatus::Unknown => conditions::ConditionStatus::Unknown,
        };
        conditions::put(
            &mut status.conditions,
            Condition {
                type_: condition.kind,
                status: status_text.as_str().to_owned(),
                reason: condition.reason,
                message: condition.message,
                observed_generation: generation,
                last_transition_time: now.clone(),
            },
        );
    }
    remaining
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::{SignedDuration, Timestamp};

    use super::*;

    fn summary(phase: Phase) -> ClusterSummary {
        ClusterSummary {
            phase,
            message: "nodes provisioning".into(),
            kubernetes_version: None,
            conditions: Vec::new(),
            node_groups: Vec::new(),
            nodes: Vec::new(),
        }
    }

    fn at(seconds: i64) -> Time {
        Time(Timestamp::UNIX_EPOCH + SignedDuration::from_secs(seconds))
    }

    #[test]
    fn a_transitional_phase_past_its_timeout_is_unhealthy_with_the_reason() {
        let mut status = PlatformClusterStatus::default();
        let timeout = Duration::from_secs(60);
        let left = record(
            &mut status,
            summary(Phase::Reconciling),
            timeout,
            &at(0),
            None,
        );
        assert_eq!(left, Some(timeout));
        let left = record(
            &mut status,
            summary(Phase::Reconciling),
            timeout,
            &at(45),
            None,
        );
        assert_eq!(
            (left, status.phase.as_deref()),
            (Some(Duration::from_secs(15)), Some("Reconciling"))
        );
        let left = record(
            &mut status,
            summary(Phase::Reconciling),
            timeout,
            &at(61),
            None,
        );
        assert_eq!(left, None);
        assert_eq!(status.phase.as_deref(), Some("Unhealthy"));
        assert!(timed_out(&status));
        assert_eq!(
            status.message.as_deref(),
            Some("Reconciling for longer than the template's 60s: nodes provisioning")
        );
        // A new phase starts its own clock.
        record(&mut status, summary(Phase::Ready), timeout, &at(62), None);
        assert_eq!(
            (status.phase.as_deref(), status.phase_since.clone()),
            (Some("Ready"), Some(at(62)))
        );
        assert!(!timed_out(&status));
    }
}
