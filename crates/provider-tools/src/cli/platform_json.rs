//! The platform world's records as JSON, for request fixtures and printed
//! results (the rules of [`super::json`]). Documents (a PlatformCluster, a
//! template, an observed object, a Node) are written as JSON objects and
//! handed to the component as their text.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::wasm::composed::Composition;
use crate::wasm::composition::{self, ConditionStatus, Phase};

/// `composition.render`'s request.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RenderRequest {
    /// The PlatformCluster.
    pub cluster: Value,
    /// Its ClusterTemplate.
    pub template: Value,
    /// The values, checked against the provider's schema first.
    #[serde(default = "empty_object")]
    pub values: Value,
    /// Its objects as they are.
    #[serde(default)]
    pub observed: Vec<Value>,
}

impl RenderRequest {
    /// The namespace the objects must be in: the cluster's.
    pub fn namespace(&self) -> String {
        self.cluster
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_owned()
    }

    /// The WIT record: each document as its text.
    pub fn into_wit(self) -> composition::RenderRequest {
        composition::RenderRequest {
            cluster: self.cluster.to_string(),
            template: self.template.to_string(),
            values: self.values.to_string(),
            observed: texts(&self.observed),
        }
    }
}

/// `composition.status`'s request.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusRequest {
    /// The PlatformCluster.
    pub cluster: Value,
    /// Its ClusterTemplate.
    pub template: Value,
    /// Its objects.
    #[serde(default)]
    pub observed: Vec<Value>,
    /// The workload cluster's Nodes.
    #[serde(default)]
    pub nodes: Vec<Value>,
}

impl StatusRequest {
    /// The WIT record.
    pub fn into_wit(self) -> composition::StatusRequest {
        composition::StatusRequest {
            cluster: self.cluster.to_string(),
            template: self.template.to_string(),
            observed: texts(&self.observed),
            nodes: texts(&self.nodes),
        }
    }
}

/// `composition.validate`'s request.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValidateRequest {
    /// The cluster as it runs.
    pub old: Value,
    /// The cluster as asked.
    pub new: Value,
    /// The template it runs.
    pub old_template: Value,
    /// The template asked for.
    pub new_template: Value,
}

impl ValidateRequest {
    /// The WIT record.
    pub fn into_wit(self) -> composition::ValidateRequest {
        composition::ValidateRequest {
            old: self.old.to_string(),
            new: self.new.to_string(),
            old_template: self.old_template.to_string(),
            new_template: self.new_template.to_string(),
        }
    }
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

fn texts(documents: &[Value]) -> Vec<String> {
    documents.iter().map(Value::to_string).collect()
}

/// A render, as the host checked it.
#[derive(Debug, Serialize)]
pub struct Rendered {
    objects: Vec<Map<String, Value>>,
    secrets: Vec<GeneratedSecret>,
}

#[derive(Debug, Serialize)]
struct GeneratedSecret {
    name: String,
    keys: Vec<String>,
    bytes: u32,
}

impl From<Composition> for Rendered {
    fn from(composition: Composition) -> Self {
        Self {
            objects: composition.objects,
            secrets: composition
                .secrets
                .into_iter()
                .map(|s| GeneratedSecret {
                    name: s.name,
                    keys: s.keys,
                    bytes: s.bytes,
                })
                .collect(),
        }
    }
}

/// `composition.status`'s summary.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSummary {
    phase: &'static str,
    message: String,
    kubernetes_version: Option<String>,
    conditions: Vec<Condition>,
    node_groups: Vec<NodeGroupSummary>,
    nodes: Vec<NodeSummary>,
}

#[derive(Debug, Serialize)]
struct Condition {
    kind: String,
    status: &'static str,
    reason: String,
    message: String,
}

#[derive(Debug, Serialize)]
struct NodeGroupSummary {
    name: String,
    desired: u32,
    ready: u32,
    phase: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeSummary {
    name: String,
    node_group: String,
    kubelet_version: String,
    ready: bool,
}

impl From<composition::ClusterSummary> for ClusterSummary {
    fn from(summary: composition::ClusterSummary) -> Self {
        Self {
            phase: match summary.phase {
                Phase::Pending => "pending",
                Phase::Reconciling => "reconciling",
                Phase::Upgrading => "upgrading",
                Phase::Ready => "ready",
                Phase::Unhealthy => "unhealthy",
                Phase::Unknown => "unknown",
            },
            message: summary.message,
            kubernetes_version: summary.kubernetes_version,
            conditions: summary
                .conditions
                .into_iter()
                .map(|c| Condition {
                    kind: c.kind,
                    status: match c.status {
                        ConditionStatus::Satisfied => "satisfied",
                        ConditionStatus::Unsatisfied => "unsatisfied",
                        ConditionStatus::Unknown => "unknown",
                    },
                    reason: c.reason,
                    message: c.message,
                })
                .collect(),
            node_groups: summary
                .node_groups
                .into_iter()
                .map(|g| NodeGroupSummary {
                    name: g.name,
                    desired: g.desired,
                    ready: g.ready,
                    phase: g.phase,
                })
                .collect(),
            nodes: summary
                .nodes
                .into_iter()
                .map(|n| NodeSummary {
                    name: n.name,
                    node_group: n.node_group,
                    kubelet_version: n.kubelet_version,
                    ready: n.ready,
                })
                .collect(),
        }
    }
}

/// `composition.validate`'s verdict: `{"allowed": true}` or `{"refused": "why"}`.
pub fn verdict(verdict: composition::Verdict) -> Value {
    match verdict {
        composition::Verdict::Allowed => serde_json::json!({"allowed": true}),
        composition::Verdict::Refused(why) => serde_json::json!({"refused": why}),
    }
}
