//! What a rendered object may say about itself beyond its kind, name and
//! namespace: nothing that makes it outlive or escape its platform
//! cluster. No finalizers (a deletion the host could not finish); no
//! Cluster API control labels or annotations (pausing, conversion data,
//! cluster-name, ...) beyond the few a platform sets on purpose; a
//! `cluster-name` label or `clusterName` only of a Cluster the same render
//! makes, never another team's; and no Secret of a type the API server
//! fills with credentials (a service account's token, a bootstrap token).

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::checks::{Violation, violation};
use super::text;

/// Cluster API's label naming the Cluster an object belongs to.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// The keys of Cluster API's domain a rendered object may carry: the
/// Cluster it belongs to (checked to be the render's own), the
/// cluster-autoscaler's bounds of a pool, and the note that something
/// else manages its replicas.
const CAPI_KEYS_ALLOWED: &[&str] = &[
    CLUSTER_NAME_LABEL,
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size",
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size",
    "cluster.x-k8s.io/replicas-managed-by",
];

/// Secret types the API server or its controllers never fill in: data as
/// written, nothing minted.
const INERT_SECRET_TYPES: &[&str] = &[
    "Opaque",
    "kubernetes.io/basic-auth",
    "kubernetes.io/ssh-auth",
    "kubernetes.io/tls",
    "kubernetes.io/dockercfg",
    "kubernetes.io/dockerconfigjson",
    "cluster.x-k8s.io/secret",
];

/// Checks what rendered `object` (of API `group`, kind `kind`) says about
/// itself; `clusters` are the Clusters of the same render; `at` names a
/// field of it.
pub(super) fn check(
    object: &Map<String, Value>,
    (group, kind): (&str, &str),
    clusters: &HashSet<String>,
    at: &dyn Fn(&str) -> String,
) -> Result<(), Violation> {
    let metadata = object.get("metadata").and_then(Value::as_object);
    let field = |key: &str| metadata.and_then(|m| m.get(key));
    if field("finalizers").is_some_and(|f| f.as_array().is_none_or(|f| !f.is_empty())) {
        return Err(violation(
            "finalizers, which the host could not remove",
            at(".metadata.finalizers"),
        ));
    }
    for map in ["labels", "annotations"] {
        let Some(entries) = field(map).and_then(Value::as_object) else {
            continue;
        };
        for (key, value) in entries {
            let here = || at(&format!(".metadata.{map}[{:?}]", text::clean(key, 80)));
            if in_capi_domain(key) && !CAPI_KEYS_ALLOWED.contains(&key.as_str()) {
                return Err(violation(
                    "a Cluster API control label or annotation",
                    here(),
                ));
            }
            if key == CLUSTER_NAME_LABEL && !names_a_cluster(value, clusters) {
                return Err(violation("a Cluster this render does not make", here()));
            }
        }
    }
    if group == "cluster.x-k8s.io" {
        for (path, value) in [
            (".spec.clusterName", spec(object, &["clusterName"])),
            (
                ".spec.template.spec.clusterName",
                spec(object, &["template", "spec", "clusterName"]),
            ),
        ] {
            if let Some(value) = value
                && !names_a_cluster(value, clusters)
            {
                return Err(violation("a Cluster this render does not make", at(path)));
            }
        }
    }
    if group.is_empty() && kind == "Secret" {
        let type_ = object
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("Opaque");
        if minted(type_) {
            return Err(violation(
                "a Secret type the API server fills with credentials",
                at(&format!(".type ({:?})", text::clean(type_, 80))),
            ));
        }
    }
    Ok(())
}

/// `object.spec` at `path`.
fn spec<'o>(object: &'o Map<String, Value>, path: &[&str]) -> Option<&'o Value> {
    path.iter()
        .try_fold(object.get("spec")?, |value, key| value.get(key))
}

fn names_a_cluster(value: &Value, clusters: &HashSet<String>) -> bool {
    value.as_str().is_some_and(|name| clusters.contains(name))
}

/// Whether a label or annotation key is of Cluster API's domain
/// (`cluster.x-k8s.io/...`, `*.cluster.x-k8s.io/...`).
fn in_capi_domain(key: &str) -> bool {
    key.split_once('/').is_some_and(|(prefix, _)| {
        prefix == "cluster.x-k8s.io" || prefix.ends_with(".cluster.x-k8s.io")
    })
}

/// Whether Secrets of `type_` get credentials the renderer never wrote: a
/// service account's token, a bootstrap token, or any type of the
/// `kubernetes.io` domain not known to be inert.
fn minted(type_: &str) -> bool {
    // An empty type is Opaque.
    if type_.is_empty() || INERT_SECRET_TYPES.contains(&type_) {
        return false;
    }
    let prefix = type_.split_once('/').map_or("", |(prefix, _)| prefix);
    prefix == "kubernetes.io" || prefix.ends_with(".kubernetes.io")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn checked(object: &Value, group: &str, kind: &str) -> Result<(), Violation> {
        let clusters = HashSet::from(["c".to_owned()]);
        let Value::Object(object) = object else {
            return Err(violation("not an object", ""));
        };
        check(object, (group, kind), &clusters, &|f| {
            format!("objects[0]{f}")
        })
    }

    #[test]
    fn what_a_platform_sets_on_purpose_passes() {
        let pool = json!({"metadata": {"name": "c-md",
            "labels": {"cluster.x-k8s.io/cluster-name": "c", "platform.capwasm.dev/node-group": "md"},
            "annotations": {"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "3"}},
            "spec": {"clusterName": "c", "template": {"spec": {"clusterName": "c"}}}});
        assert_eq!(checked(&pool, "cluster.x-k8s.io", "MachinePool"), Ok(()));
        for type_ in ["Opaque", "", "kubernetes.io/tls", "example.com/mine"] {
            let secret = json!({"metadata": {"name": "k"}, "type": type_});
            assert_eq!(checked(&secret, "", "Secret"), Ok(()), "{type_}");
        }
        assert_eq!(
            checked(&json!({"metadata": {"finalizers": []}}), "", "Secret"),
            Ok(())
        );
    }

    #[test]
    fn each_way_out_is_refused_naming_its_field() {
        let cases = [
            (
                json!({"metadata": {"finalizers": ["example.com/hold"]}}),
                "",
                "ConfigMap",
                "objects[0].metadata.finalizers",
            ),
            (
                json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": ""}}}),
                "cluster.x-k8s.io",
                "Cluster",
                "objects[0].metadata.annotations[\"cluster.x-k8s.io/paused\"]",
            ),
            (
                json!({"metadata": {"annotations": {"cluster.x-k8s.io/conversion-data": "{}"}}}),
                "cluster.x-k8s.io",
                "MachinePool",
                "objects[0].metadata.annotations[\"cluster.x-k8s.io/conversion-data\"]",
            ),
            (
                json!({"metadata": {"labels": {"topology.cluster.x-k8s.io/owned": ""}}}),
                "cluster.x-k8s.io",
                "MachinePool",
                "objects[0].metadata.labels[\"topology.cluster.x-k8s.io/owned\"]",
            ),
            (
                json!({"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "team"}}}),
                "infrastructure.cluster.x-k8s.io",
                "WasmMachinePool",
                "objects[0].metadata.labels[\"cluster.x-k8s.io/cluster-name\"]",
            ),
            (
                json!({"metadata": {}, "spec": {"clusterName": "team"}}),
                "cluster.x-k8s.io",
                "MachinePool",
                "objects[0].spec.clusterName",
            ),
            (
                json!({"metadata": {}, "spec": {"clusterName": "c", "template": {"spec": {"clusterName": "team"}}}}),
                "cluster.x-k8s.io",
                "MachinePool",
                "objects[0].spec.template.spec.clusterName",
            ),
            (
                json!({"metadata": {}, "type": "kubernetes.io/service-account-token"}),
                "",
                "Secret",
                "objects[0].type (\"kubernetes.io/service-account-token\")",
            ),
            (
                json!({"metadata": {}, "type": "bootstrap.kubernetes.io/token"}),
                "",
                "Secret",
                "objects[0].type (\"bootstrap.kubernetes.io/token\")",
            ),
        ];
        for (object, group, kind, field) in cases {
            let refused = checked(&object, group, kind).err();
            assert_eq!(refused.map(|v| v.field), Some(field.to_owned()), "{object}");
        }
    }
}
