//! The objects of a platform cluster: its Cluster and WasmCluster, and per
//! node group a MachinePool with its WasmBootstrapConfig and
//! WasmMachinePool, all named after the cluster.

use capwasm_provider_sdk::platform::{GeneratedSecret, RenderRequest, Rendered};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::ProviderError;
use serde_json::{Map, Value, json};

use crate::document::{at, count, kind_and_name, parse, text};

/// The label naming a MachinePool's node group.
pub const NODE_GROUP_LABEL: &str = "platform.capwasm.dev/node-group";
/// The cluster-autoscaler's bounds of a MachinePool.
const AUTOSCALER_MIN: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
const AUTOSCALER_MAX: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";
/// The label with this build's version (sim-platform-v2).
#[cfg(feature = "version-label")]
const VERSION_LABEL: &str = "platform.capwasm.dev/provider-version";

const CAPI: &str = "cluster.x-k8s.io/v1beta2";
const BOOTSTRAP: &str = "bootstrap.cluster.x-k8s.io";
const INFRASTRUCTURE: &str = "infrastructure.cluster.x-k8s.io";

pub fn render(request: &RenderRequest) -> Result<Rendered, ProviderError> {
    let cluster = parse(&request.cluster, "cluster")?;
    let values = parse(&request.values, "values")?;
    let observed = request
        .observed
        .iter()
        .map(|o| parse(o, "observed"))
        .collect::<Result<Vec<_>, _>>()?;
    let name = text(&cluster, &["metadata", "name"]).unwrap_or_default();
    let version = text(&values, &["kubernetesVersion"]).unwrap_or_default();
    let provider = |path: &str| -> (Value, Value) {
        (
            at(&values, &[path, "provider"])
                .cloned()
                .unwrap_or(Value::Null),
            at(&values, &[path, "config"])
                .cloned()
                .unwrap_or_else(|| json!({})),
        )
    };
    let (bootstrap, bootstrap_config) = provider("bootstrap");
    let (infrastructure, pool_config) = provider("infrastructure");
    let cluster_config = at(&values, &["infrastructure", "clusterConfig"])
        .cloned()
        .unwrap_or_else(|| pool_config.clone());

    let mut objects = vec![
        json!({
            "apiVersion": CAPI,
            "kind": "Cluster",
            "metadata": { "name": name },
            "spec": { "infrastructureRef": { "apiGroup": INFRASTRUCTURE, "kind": "WasmCluster", "name": name } },
        }),
        json!({
            "apiVersion": format!("{INFRASTRUCTURE}/v1alpha1"),
            "kind": "WasmCluster",
            "metadata": { "name": name },
            "spec": { "provider": infrastructure, "config": cluster_config },
        }),
    ];
    let groups = at(&cluster, &["spec", "nodeGroups"])
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for (i, group) in groups.iter().enumerate() {
        let group_name = text(group, &["name"]).unwrap_or_default();
        let pool = format!("{name}-{group_name}");
        if pool.len() > 63 {
            return Err(ProviderError::invalid_config(
                format!("$.nodeGroups[{i}].name"),
                format!("the pool name {pool:?} (cluster name, '-', group name) is longer than 63"),
            ));
        }
        let mut labels = Map::new();
        labels.insert(NODE_GROUP_LABEL.into(), group_name.into());
        if let Some(extra) = at(&values, &["poolLabels"]).and_then(Value::as_object) {
            labels.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        #[cfg(feature = "version-label")]
        labels.insert(VERSION_LABEL.into(), env!("CARGO_PKG_VERSION").into());
        let (replicas, annotations) = replicas(group, observed_replicas(&observed, &pool));
        objects.push(json!({
            "apiVersion": CAPI,
            "kind": "MachinePool",
            "metadata": { "name": pool, "labels": labels, "annotations": annotations },
            "spec": {
                "clusterName": name,
                "replicas": replicas,
                "template": { "spec": {
                    "clusterName": name,
                    "version": version,
                    "bootstrap": { "configRef": { "apiGroup": BOOTSTRAP, "kind": "WasmBootstrapConfig", "name": pool } },
                    "infrastructureRef": { "apiGroup": INFRASTRUCTURE, "kind": "WasmMachinePool", "name": pool },
                } },
            },
        }));
        objects.push(json!({
            "apiVersion": format!("{BOOTSTRAP}/v1alpha1"),
            "kind": "WasmBootstrapConfig",
            "metadata": { "name": pool },
            "spec": { "provider": bootstrap, "config": bootstrap_config },
        }));
        objects.push(json!({
            "apiVersion": format!("{INFRASTRUCTURE}/v1alpha1"),
            "kind": "WasmMachinePool",
            "metadata": { "name": pool },
            "spec": { "provider": infrastructure, "config": pool_config },
        }));
    }
    objects.extend(extra_objects(&values));
    objects.extend(echo(name, &values, &observed));
    let mut secrets = Vec::new();
    if at(&values, &["encryptionKey"]) == Some(&Value::Bool(true)) {
        secrets.push(GeneratedSecret {
            name: format!("{name}-encryption"),
            keys: vec!["key".into()],
            bytes: 32,
        });
    }
    Ok(Rendered {
        objects: objects.iter().map(Value::to_string).collect(),
        secrets,
    })
}

/// The replicas of a group (its count; for an autoscaled one what the
/// autoscaler set, kept within the bounds) and its pool's annotations.
fn replicas(group: &Value, observed: Option<u32>) -> (u32, Map<String, Value>) {
    let mut annotations = Map::new();
    if let Some(count) = count(group, &["count"]) {
        return (count, annotations);
    }
    let min = count(group, &["minCount"]).unwrap_or(0);
    let max = count(group, &["maxCount"]).unwrap_or(min).max(min);
    annotations.insert(AUTOSCALER_MIN.into(), min.to_string().into());
    annotations.insert(AUTOSCALER_MAX.into(), max.to_string().into());
    (observed.unwrap_or(min).clamp(min, max), annotations)
}

fn observed_replicas(observed: &[Value], pool: &str) -> Option<u32> {
    observed
        .iter()
        .find(|o| kind_and_name(o) == ("MachinePool", pool))
        .and_then(|o| count(o, &["spec", "replicas"]))
}

/// With `echoObserved`, the `ConfigMap` `<name>-echo`: every observed
/// Secret as the host handed it over, in its data and in an annotation.
fn echo(name: &str, values: &Value, observed: &[Value]) -> Option<Value> {
    if at(values, &["echoObserved"]) != Some(&Value::Bool(true)) {
        return None;
    }
    let secrets: Vec<&Value> = observed
        .iter()
        .filter(|o| kind_and_name(o).0 == "Secret")
        .collect();
    let text = Value::from(secrets.iter().map(|s| (*s).clone()).collect::<Vec<_>>()).to_string();
    Some(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": format!("{name}-echo"), "annotations": { "sim-platform.capwasm.dev/echo": text } },
        "data": { "observed": text },
    }))
}

/// `extraObjects`, the first repeated `extraObjectCopies` times.
fn extra_objects(values: &Value) -> Vec<Value> {
    let extra = at(values, &["extraObjects"])
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let copies = count(values, &["extraObjectCopies"]).unwrap_or(0);
    let Some(first) = extra.first() else {
        return extra;
    };
    let base = text(first, &["metadata", "name"])
        .unwrap_or("extra")
        .to_owned();
    let mut objects = extra.clone();
    for i in 0..copies {
        let mut copy = first.clone();
        copy["metadata"]["name"] = format!("{base}-{i}").into();
        objects.push(copy);
    }
    objects
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(cluster: &Value, values: &Value, observed: &[Value]) -> RenderRequest {
        RenderRequest {
            cluster: cluster.to_string(),
            template: "{}".into(),
            values: values.to_string(),
            observed: observed.iter().map(Value::to_string).collect(),
        }
    }

    fn values() -> Value {
        json!({
            "kubernetesVersion": "v1.31.2",
            "bootstrap": { "provider": "kubeadm", "config": { "mode": "join" } },
            "infrastructure": { "provider": "sim", "config": { "region": "r" }, "clusterConfig": { "region": "c" } },
        })
    }

    fn rendered(cluster: &Value, values: &Value, observed: &[Value]) -> Vec<Value> {
        let Ok(rendered) = render(&request(cluster, values, observed)) else {
            return Vec::new();
        };
        rendered
            .objects
            .iter()
            .filter_map(|o| serde_json::from_str(o).ok())
            .collect()
    }

    #[test]
    fn each_node_group_is_a_pool_with_its_provider_objects() {
        let cluster = json!({"metadata": {"name": "c"}, "spec": {"nodeGroups": [
            {"name": "md", "count": 2},
            {"name": "auto", "minCount": 1, "maxCount": 4},
        ]}});
        let objects = rendered(&cluster, &values(), &[]);
        let names: Vec<(&str, &str)> = objects.iter().map(kind_and_name).collect();
        assert_eq!(
            names,
            [
                ("Cluster", "c"),
                ("WasmCluster", "c"),
                ("MachinePool", "c-md"),
                ("WasmBootstrapConfig", "c-md"),
                ("WasmMachinePool", "c-md"),
                ("MachinePool", "c-auto"),
                ("WasmBootstrapConfig", "c-auto"),
                ("WasmMachinePool", "c-auto"),
            ]
        );
        assert_eq!(objects[1]["spec"]["config"], json!({"region": "c"}));
        assert_eq!(objects[2]["spec"]["replicas"], 2);
        assert_eq!(objects[2]["spec"]["template"]["spec"]["version"], "v1.31.2");
        assert_eq!(objects[5]["spec"]["replicas"], 1);
        assert_eq!(objects[5]["metadata"]["annotations"][AUTOSCALER_MAX], "4");
    }

    #[test]
    fn an_autoscaled_group_keeps_the_autoscaler_s_count_within_its_bounds() {
        let cluster = json!({"metadata": {"name": "c"}, "spec": {"nodeGroups": [{"name": "a", "minCount": 1, "maxCount": 4}]}});
        let pool = |n: u32| json!({"kind": "MachinePool", "metadata": {"name": "c-a"}, "spec": {"replicas": n}});
        assert_eq!(
            rendered(&cluster, &values(), &[pool(3)])[2]["spec"]["replicas"],
            3
        );
        assert_eq!(
            rendered(&cluster, &values(), &[pool(9)])[2]["spec"]["replicas"],
            4
        );
    }

    #[test]
    fn a_pool_name_longer_than_a_label_is_invalid_config_at_its_group() {
        let long = "g".repeat(63);
        let cluster = json!({"metadata": {"name": "c"}, "spec": {"nodeGroups": [{"name": long, "count": 1}]}});
        let error = render(&request(&cluster, &values(), &[])).err();
        assert!(
            matches!(error, Some(ProviderError::InvalidConfig(e)) if e.path == "$.nodeGroups[0].name")
        );
    }
}
