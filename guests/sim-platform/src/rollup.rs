//! The phase of a platform cluster from its objects and Nodes, in
//! azimuth's order: networking (the infrastructure), the control plane,
//! nodes of more than one kubelet version (Upgrading), nodes still
//! provisioning (Reconciling), anything unhealthy (Unhealthy), else Ready.

use alloc::collections::BTreeSet;

use capwasm_provider_sdk::platform::{
    ClusterSummary, Condition, ConditionStatus, NodeGroupSummary, NodeSummary, Phase, StatusRequest,
};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::ProviderError;
use serde_json::Value;

use crate::document::{at, count, kind_and_name, parse, text};
use crate::versions::Version;

/// The Node annotation naming its MachinePool (Cluster API's).
const OWNER_NAME: &str = "cluster.x-k8s.io/owner-name";

pub fn status(request: &StatusRequest) -> Result<ClusterSummary, ProviderError> {
    let cluster = parse(&request.cluster, "cluster")?;
    let observed = parse_all(&request.observed, "observed")?;
    let nodes = parse_all(&request.nodes, "nodes")?;
    let name = text(&cluster, &["metadata", "name"]).unwrap_or_default();
    let capi = observed
        .iter()
        .find(|o| kind_and_name(o) == ("Cluster", name));
    let groups = node_groups(&cluster, &observed, name);
    let nodes: Vec<NodeSummary> = nodes.iter().map(|n| node(n, name)).collect();
    let versions: BTreeSet<Version> = nodes
        .iter()
        .filter_map(|n| Version::parse(&n.kubelet_version))
        .collect();
    let flag = |path: &[&str]| capi.and_then(|c| at(c, path)) == Some(&Value::Bool(true));
    let networking = flag(&["status", "initialization", "infrastructureProvisioned"]);
    let control_plane = flag(&["status", "initialization", "controlPlaneInitialized"]);
    let provisioning: Vec<String> = groups
        .iter()
        .filter(|g| g.ready < g.desired)
        .map(|g| format!("{} {}/{}", g.name, g.ready, g.desired))
        .collect();
    let unhealthy: Vec<String> = groups
        .iter()
        .filter(|g| g.phase == "Failed")
        .map(|g| format!("node group {} failed", g.name))
        .chain(
            nodes
                .iter()
                .filter(|n| !n.ready)
                .map(|n| format!("node {} is not ready", n.name)),
        )
        .collect();

    let (phase, message) = if capi.is_none() {
        (
            Phase::Pending,
            "waiting for the Cluster to be created".to_owned(),
        )
    } else if !networking {
        (
            Phase::Reconciling,
            "networking: the cluster's infrastructure is being provisioned".to_owned(),
        )
    } else if !control_plane {
        (
            Phase::Reconciling,
            "control plane: waiting for the API server to answer".to_owned(),
        )
    } else if versions.len() > 1 {
        let list: Vec<String> = versions.iter().map(ToString::to_string).collect();
        (Phase::Upgrading, format!("nodes run {}", list.join(", ")))
    } else if !provisioning.is_empty() {
        (
            Phase::Reconciling,
            format!("nodes provisioning: {}", provisioning.join(", ")),
        )
    } else if !unhealthy.is_empty() {
        (Phase::Unhealthy, unhealthy.join(", "))
    } else {
        (Phase::Ready, String::new())
    };
    let mut conditions = vec![
        condition(
            "NetworkingReady",
            networking,
            "InfrastructureProvisioned",
            "WaitingForInfrastructure",
        ),
        condition(
            "ControlPlaneReady",
            control_plane,
            "ControlPlaneAnswers",
            "WaitingForControlPlane",
        ),
        condition(
            "NodesReady",
            provisioning.is_empty() && unhealthy.is_empty(),
            "NodesReady",
            "NodesNotReady",
        ),
    ];
    let echoing =
        |doc: &Value| at(doc, &["spec", "values", "echoObserved"]) == Some(&Value::Bool(true));
    if echoing(&cluster) || parse(&request.template, "template").is_ok_and(|t| echoing(&t)) {
        conditions.push(echo(&observed));
    }
    Ok(ClusterSummary {
        phase,
        message,
        kubernetes_version: versions.first().map(ToString::to_string),
        conditions,
        node_groups: groups,
        nodes,
    })
}

/// Condition `Echo`: each observed Secret's name and data, as handed over.
fn echo(observed: &[Value]) -> Condition {
    let secrets: Vec<String> = observed
        .iter()
        .filter(|o| kind_and_name(o).0 == "Secret")
        .map(|s| {
            let data = |key: &str| at(s, &[key]).map_or_else(|| "none".into(), Value::to_string);
            format!(
                "{} data={} stringData={}",
                kind_and_name(s).1,
                data("data"),
                data("stringData")
            )
        })
        .collect();
    Condition {
        kind: "Echo".into(),
        status: ConditionStatus::Satisfied,
        reason: "Echoed".into(),
        message: secrets.join("; "),
    }
}

fn parse_all(documents: &[String], what: &str) -> Result<Vec<Value>, ProviderError> {
    documents.iter().map(|d| parse(d, what)).collect()
}

fn condition(kind: &str, holds: bool, yes: &str, no: &str) -> Condition {
    Condition {
        kind: kind.into(),
        status: if holds {
            ConditionStatus::Satisfied
        } else {
            ConditionStatus::Unsatisfied
        },
        reason: (if holds { yes } else { no }).into(),
        message: String::new(),
    }
}

/// Each node group as its pool reports it (missing: nothing ready).
fn node_groups(cluster: &Value, observed: &[Value], name: &str) -> Vec<NodeGroupSummary> {
    let groups = at(cluster, &["spec", "nodeGroups"])
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    groups
        .iter()
        .map(|group| {
            let group_name = text(group, &["name"]).unwrap_or_default();
            let pool_name = format!("{name}-{group_name}");
            let pool = observed
                .iter()
                .find(|o| kind_and_name(o) == ("MachinePool", pool_name.as_str()));
            let desired = pool
                .and_then(|p| count(p, &["spec", "replicas"]))
                .or_else(|| count(group, &["count"]))
                .or_else(|| count(group, &["minCount"]))
                .unwrap_or(0);
            NodeGroupSummary {
                name: group_name.into(),
                desired,
                ready: pool
                    .and_then(|p| count(p, &["status", "readyReplicas"]))
                    .unwrap_or(0),
                phase: pool
                    .and_then(|p| text(p, &["status", "phase"]))
                    .unwrap_or("Pending")
                    .into(),
            }
        })
        .collect()
}

fn node(node: &Value, cluster: &str) -> NodeSummary {
    let owner = text(node, &["metadata", "annotations", OWNER_NAME]).unwrap_or_default();
    let prefix = format!("{cluster}-");
    let ready = at(node, &["status", "conditions"])
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                text(c, &["type"]) == Some("Ready") && text(c, &["status"]) == Some("True")
            })
        });
    NodeSummary {
        name: text(node, &["metadata", "name"]).unwrap_or_default().into(),
        node_group: owner.strip_prefix(&prefix).unwrap_or(owner).into(),
        kubelet_version: text(node, &["status", "nodeInfo", "kubeletVersion"])
            .unwrap_or_default()
            .into(),
        ready,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn summary(observed: &[Value], nodes: &[Value]) -> ClusterSummary {
        let cluster = json!({"metadata": {"name": "c"}, "spec": {"nodeGroups": [{"name": "md", "count": 2}]}});
        let request = StatusRequest {
            cluster: cluster.to_string(),
            template: "{}".into(),
            observed: observed.iter().map(Value::to_string).collect(),
            nodes: nodes.iter().map(Value::to_string).collect(),
        };
        match status(&request) {
            Ok(summary) => summary,
            Err(e) => panic!("{}", e.message()),
        }
    }

    fn capi(networking: bool, control_plane: bool) -> Value {
        json!({"kind": "Cluster", "metadata": {"name": "c"}, "status": {"initialization": {
            "infrastructureProvisioned": networking, "controlPlaneInitialized": control_plane }}})
    }

    fn pool(ready: u32, phase: &str) -> Value {
        json!({"kind": "MachinePool", "metadata": {"name": "c-md"}, "spec": {"replicas": 2},
            "status": {"readyReplicas": ready, "phase": phase}})
    }

    fn node(name: &str, version: &str, ready: bool) -> Value {
        json!({"metadata": {"name": name, "annotations": {OWNER_NAME: "c-md"}}, "status": {
            "nodeInfo": {"kubeletVersion": version},
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    #[test]
    fn the_phase_rolls_up_in_azimuth_s_order() {
        assert_eq!(summary(&[], &[]).phase, Phase::Pending);
        assert_eq!(
            summary(&[capi(false, false)], &[]).phase,
            Phase::Reconciling
        );
        assert!(
            summary(&[capi(true, false)], &[])
                .message
                .starts_with("control plane")
        );
        let mixed = [node("a", "v1.30.1", true), node("b", "v1.31.2", true)];
        let upgrading = summary(&[capi(true, true), pool(1, "ScalingUp")], &mixed);
        assert_eq!(
            (upgrading.phase, upgrading.message.as_str()),
            (Phase::Upgrading, "nodes run v1.30.1, v1.31.2")
        );
        assert_eq!(upgrading.kubernetes_version.as_deref(), Some("v1.30.1"));
        let one = [node("a", "v1.31.2", true)];
        let provisioning = summary(&[capi(true, true), pool(1, "ScalingUp")], &one);
        assert_eq!(
            (provisioning.phase, provisioning.message.as_str()),
            (Phase::Reconciling, "nodes provisioning: md 1/2")
        );
        let sick = [node("a", "v1.31.2", true), node("b", "v1.31.2", false)];
        assert_eq!(
            summary(&[capi(true, true), pool(2, "Running")], &sick).phase,
            Phase::Unhealthy
        );
        let ready = summary(
            &[capi(true, true), pool(2, "Running")],
            &[node("a", "v1.31.2", true), node("b", "v1.31.2", true)],
        );
        assert_eq!(ready.phase, Phase::Ready);
        assert_eq!(ready.node_groups[0].ready, 2);
        assert_eq!(ready.nodes[1].node_group, "md");
    }
}
