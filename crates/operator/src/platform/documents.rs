//! Objects as the platform provider reads them: JSON documents without
//! what it has no use for (managedFields), the values it composes from,
//! and the workload cluster's Nodes cut to what a summary needs.

use k8s_openapi::api::core::v1::Node;
use kube::Resource;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::api::{ClusterTemplate, PlatformCluster};

/// `object` as a JSON document with apiVersion and kind, managedFields dropped.
pub fn document<K: Resource<DynamicType = ()> + Serialize>(object: &K) -> String {
    let value = serde_json::to_value(object).unwrap_or(Value::Null);
    let mut value = typed(value, &K::api_version(&()), &K::kind(&()));
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    value.to_string()
}

/// `value` with its `apiVersion` and `kind` (the list items of a built-in
/// kind come without them).
pub fn typed(mut value: Value, api_version: &str, kind: &str) -> Value {
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), api_version.into());
        map.insert("kind".into(), kind.into());
    }
    value
}

/// What the provider's calls read, serialised once per reconcile.
#[derive(Default)]
pub struct Documents {
    /// The PlatformCluster.
    pub cluster: String,
    /// Its ClusterTemplate.
    pub template: String,
    /// Its objects.
    pub observed: Vec<String>,
}

/// The cluster as it runs: its spec with the template last applied.
pub fn as_running(cluster: &PlatformCluster) -> PlatformCluster {
    let mut running = cluster.clone();
    if let Some(applied) = cluster
        .status
        .as_ref()
        .and_then(|s| s.applied_template.clone())
    {
        running.spec.template_name = applied;
    }
    running
}

/// The template's values overlaid with the cluster's: objects merge key by
/// key, anything else the cluster sets replaces the template's.
pub fn values(template: &ClusterTemplate, cluster: &PlatformCluster) -> Value {
    let mut merged = template
        .spec
        .values
        .clone()
        .unwrap_or_else(|| Value::Object(Map::new()));
    if let Some(over) = &cluster.spec.values {
        overlay(&mut merged, over);
    }
    merged
}

fn overlay(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(key) {
                    Some(existing) => overlay(existing, value),
                    None => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, over) => *base = over.clone(),
    }
}

/// A workload Node as a summary reads it: name, labels, annotations,
/// kubelet version, providerID and conditions.
pub fn node(node: &Node) -> String {
    let status = node.status.as_ref();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.metadata.name,
            "labels": node.metadata.labels,
            "annotations": node.metadata.annotations,
        },
        "spec": { "providerID": node.spec.as_ref().and_then(|s| s.provider_id.clone()) },
        "status": {
            "nodeInfo": { "kubeletVersion": status.and_then(|s| s.node_info.as_ref()).map(|i| i.kubelet_version.clone()) },
            "conditions": status.and_then(|s| s.conditions.clone()),
        },
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::platform::{ClusterTemplateSpec, PlatformClusterSpec};

    #[test]
    fn cluster_values_go_over_the_template_s_key_by_key() {
        let template = ClusterTemplate::new(
            "t",
            ClusterTemplateSpec {
                provider: "p".into(),
                values: Some(
                    json!({"kubernetesVersion": "v1.31.2", "addons": {"monitoring": true, "ingress": false}}),
                ),
                ..ClusterTemplateSpec::default()
            },
        );
        let cluster = PlatformCluster::new(
            "c",
            PlatformClusterSpec {
                template_name: "t".into(),
                values: Some(json!({"addons": {"ingress": true}, "extra": [1]})),
                ..PlatformClusterSpec::default()
            },
        );
        assert_eq!(
            values(&template, &cluster),
            json!({"kubernetesVersion": "v1.31.2", "addons": {"monitoring": true, "ingress": true}, "extra": [1]})
        );
    }

    #[test]
    fn a_document_names_its_kind_and_drops_managed_fields() {
        let mut cluster = PlatformCluster::new("c", PlatformClusterSpec::default());
        cluster.metadata.managed_fields = Some(Vec::new());
        let document: Value = serde_json::from_str(&document(&cluster)).unwrap_or_default();
        assert_eq!(document["kind"], "PlatformCluster");
        assert_eq!(document["apiVersion"], "platform.capwasm.dev/v1alpha1");
        assert!(document["metadata"].get("managedFields").is_none());
    }
}
