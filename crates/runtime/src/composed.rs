//! What a platform provider returns, checked before the host applies any of
//! it: every rendered object a JSON object of a kind its module allows, in
//! the platform cluster's namespace, named by a DNS label, none twice, no
//! more of them than a cluster is made of, and saying nothing of itself
//! that would let it escape the cluster ([`composed_meta`](super::composed_meta));
//! summaries within bounds. A result that breaks a rule is refused whole
//! ([`Violation`]).

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::bounds::{
    MAX_GENERATED_SECRET_BYTES, MAX_GENERATED_SECRETS, MAX_MESSAGE_BYTES, MAX_REASON_BYTES,
    MAX_RENDERED_OBJECTS, MAX_SUMMARY_CONDITIONS, MAX_SUMMARY_NODE_GROUPS, MAX_SUMMARY_NODES,
};
use super::checks::{Violation, violation};
use super::composition::{ClusterSummary, GeneratedSecret, Rendered};
use super::text;

/// A kind by API group (empty for the core group) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectKind {
    /// The API group; empty for the core group (`Secret`).
    pub group: String,
    /// The kind.
    pub kind: String,
}

impl std::fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.kind)
        } else {
            write!(f, "{}.{}", self.kind, self.group)
        }
    }
}

/// Text that names no kind where `Kind.group` was expected.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} names no kind: write Kind.group, as MachinePool.cluster.x-k8s.io")]
pub struct NoKind(String);

/// The inverse of `Display`: `Kind.group`, or `Kind` for the core group.
impl std::str::FromStr for ObjectKind {
    type Err = NoKind;

    fn from_str(text: &str) -> Result<Self, NoKind> {
        let (kind, group) = text.split_once('.').unwrap_or((text, ""));
        if kind.is_empty() {
            return Err(NoKind(text.to_owned()));
        }
        Ok(Self {
            group: group.to_owned(),
            kind: kind.to_owned(),
        })
    }
}

/// A render, checked: objects as JSON objects, and the Secrets to generate.
#[derive(Clone, Debug, Default)]
pub struct Composition {
    /// The objects, in the order rendered.
    pub objects: Vec<Map<String, Value>>,
    /// The Secrets to generate.
    pub secrets: Vec<GeneratedSecret>,
}

/// Whether `name` is a DNS label (RFC 1123): what every rendered name must be.
pub fn dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes.iter().all(|b| edge(b) || *b == b'-')
}

/// The API group of `apiVersion` (`cluster.x-k8s.io/v1beta2` → `cluster.x-k8s.io`; `v1` → ``).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// Checks a render for a platform cluster in `namespace` whose module may
/// create `allowed`.
pub fn rendered(
    rendered: Rendered,
    namespace: &str,
    allowed: &[ObjectKind],
) -> Result<Composition, Violation> {
    if rendered.objects.len() > MAX_RENDERED_OBJECTS {
        return Err(violation(
            "more than 500 objects",
            format!("objects ({})", rendered.objects.len()),
        ));
    }
    let mut names = HashSet::new();
    let mut objects = Vec::with_capacity(rendered.objects.len());
    for (i, document) in rendered.objects.iter().enumerate() {
        let at = |field: &str| format!("objects[{i}]{field}");
        let Ok(Value::Object(object)) = serde_json::from_str::<Value>(document) else {
            return Err(violation("not a JSON object", at("")));
        };
        let text_at = |key: &str| object.get(key).and_then(Value::as_str).unwrap_or("");
        let (api_version, kind) = (text_at("apiVersion"), text_at("kind"));
        if api_version.is_empty() {
            return Err(violation("no apiVersion", at(".apiVersion")));
        }
        if kind.is_empty() {
            return Err(violation("no kind", at(".kind")));
        }
        let metadata = object.get("metadata").and_then(Value::as_object);
        let field = |key: &str| metadata.and_then(|m| m.get(key)).and_then(Value::as_str);
        let name = field("name").unwrap_or("");
        if !dns_label(name) {
            return Err(violation(
                "not a DNS label (lowercase letters, digits and '-', at most 63)",
                at(&format!(".metadata.name ({:?})", text::clean(name, 80))),
            ));
        }
        if field("namespace").is_some_and(|n| !n.is_empty() && n != namespace) {
            return Err(violation(
                "in another namespace than the platform cluster's",
                at(".metadata.namespace"),
            ));
        }
        let object_kind = ObjectKind {
            group: group_of(api_version).to_owned(),
            kind: kind.to_owned(),
        };
        if !allowed.contains(&object_kind) {
            return Err(violation(
                "a kind the ProviderModule's capabilities.allowedKinds does not list",
                at(&format!(
                    ".kind ({})",
                    text::clean(&object_kind.to_string(), 128)
                )),
            ));
        }
        if !names.insert((object_kind, name.to_owned())) {
            return Err(violation("an object rendered twice", at(".metadata.name")));
        }
        objects.push(object);
    }
    let clusters = clusters(&objects);
    for (i, object) in objects.iter().enumerate() {
        let text_at = |key: &str| object.get(key).and_then(Value::as_str).unwrap_or("");
        let kind = (group_of(text_at("apiVersion")), text_at("kind"));
        let at = |field: &str| format!("objects[{i}]{field}");
        super::composed_meta::check(object, kind, &clusters, &at)?;
    }
    secrets(&rendered.secrets, &mut names, allowed)?;
    Ok(Composition {
        objects,
        secrets: rendered.secrets,
    })
}

/// The names of the Clusters (`cluster.x-k8s.io`) among rendered `objects`.
fn clusters(objects: &[Map<String, Value>]) -> HashSet<String> {
    objects
        .iter()
        .filter(|o| {
            o.get("kind").and_then(Value::as_str) == Some("Cluster")
                && o.get("apiVersion")
                    .and_then(Value::as_str)
                    .is_some_and(|v| group_of(v) == "cluster.x-k8s.io")
        })
        .filter_map(|o| {
            o.get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect()
}

fn secrets(
    secrets: &[GeneratedSecret],
    names: &mut HashSet<(ObjectKind, String)>,
    allowed: &[ObjectKind],
) -> Result<(), Violation> {
    if secrets.len() > MAX_GENERATED_SECRETS {
        return Err(violation("more than 16 generated Secrets", "secrets"));
    }
    let secret = ObjectKind {
        group: String::new(),
        kind: "Secret".to_owned(),
    };
    if !secrets.is_empty() && !allowed.contains(&secret) {
        return Err(violation(
            "a kind the ProviderModule's capabilities.allowedKinds does not list",
            "secrets (Secret)",
        ));
    }
    for (i, generated) in secrets.iter().enumerate() {
        let at = |field: &str| format!("secrets[{i}].{field}");
        if !dns_label(&generated.name) {
            return Err(violation("not a DNS label", at("name")));
        }
        if !names.insert((secret.clone(), generated.name.clone())) {
            return Err(violation("an object rendered twice", at("name")));
        }
        if generated.keys.is_empty() || generated.keys.len() > MAX_GENERATED_SECRETS {
            return Err(violation("no keys, or more than 16", at("keys")));
        }
        let key_ok = |k: &String| {
            !k.is_empty()
                && k.len() <= 253
                && k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
        };
        if let Some(j) = generated.keys.iter().position(|k| !key_ok(k)) {
            return Err(violation("not a Secret key", at(&format!("keys[{j}]"))));
        }
        if generated.bytes == 0 || generated.bytes > MAX_GENERATED_SECRET_BYTES {
            return Err(violation("not 1 to 512 bytes", at("bytes")));
        }
    }
    Ok(())
}

/// Checks a summary and bounds its text as all guest text is bounded.
pub fn summary(mut summary: ClusterSummary) -> Result<ClusterSummary, Violation> {
    if summary.conditions.len() > MAX_SUMMARY_CONDITIONS {
        return Err(violation("more than 32 conditions", "conditions"));
    }
    if summary.node_groups.len() > MAX_SUMMARY_NODE_GROUPS {
        return Err(violation("more than 100 node groups", "nodeGroups"));
    }
    if summary.nodes.len() > MAX_SUMMARY_NODES {
        return Err(violation("more than 5000 nodes", "nodes"));
    }
    let camel = |s: &str| {
        !s.is_empty()
            && s.len() <= MAX_REASON_BYTES
            && s.starts_with(|c: char| c.is_ascii_uppercase())
            && s.chars().all(|c| c.is_ascii_alphanumeric())
    };
    for (i, condition) in summary.conditions.iter_mut().enumerate() {
        if !camel(&condition.kind) {
            return Err(violation(
                "not a CamelCase type",
                format!("conditions[{i}].type"),
            ));
        }
        if !camel(&condition.reason) {
            return Err(violation(
                "not a CamelCase reason",
                format!("conditions[{i}].reason"),
            ));
        }
        condition.message = text::clean(&condition.message, MAX_MESSAGE_BYTES);
    }
    summary.message = text::clean(&summary.message, MAX_MESSAGE_BYTES);
    let bounded = |s: &mut String| *s = text::clean(s, 253);
    if let Some(version) = summary.kubernetes_version.as_mut() {
        bounded(version);
    }
    for group in &mut summary.node_groups {
        bounded(&mut group.name);
        bounded(&mut group.phase);
    }
    for node in &mut summary.nodes {
        bounded(&mut node.name);
        bounded(&mut node.node_group);
        bounded(&mut node.kubelet_version);
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn allowed() -> Vec<ObjectKind> {
        vec![
            ObjectKind {
                group: "cluster.x-k8s.io".into(),
                kind: "MachinePool".into(),
            },
            ObjectKind {
                group: String::new(),
                kind: "Secret".into(),
            },
        ]
    }

    fn render(objects: &[&str]) -> Rendered {
        Rendered {
            objects: objects.iter().map(|o| (*o).to_owned()).collect(),
            secrets: Vec::new(),
        }
    }

    fn refused(objects: &[&str]) -> Violation {
        match rendered(render(objects), "team-a", &allowed()) {
            Err(violation) => violation,
            Ok(_) => panic!("accepted {objects:?}"),
        }
    }

    const POOL: &str = r#"{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachinePool","metadata":{"name":"workers"}}"#;

    #[test]
    fn a_kind_reads_back_as_it_is_written() {
        for kind in allowed() {
            assert_eq!(kind.to_string().parse::<ObjectKind>().ok(), Some(kind));
        }
        let refused = ".cluster.x-k8s.io".parse::<ObjectKind>().err();
        assert!(refused.is_some_and(|e| e.to_string().contains("names no kind")));
    }

    #[test]
    fn a_pool_of_an_allowed_kind_in_the_namespace_passes() {
        let with_namespace =
            r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"k","namespace":"team-a"}}"#;
        let checked = rendered(render(&[POOL, with_namespace]), "team-a", &allowed());
        assert_eq!(checked.map(|c| c.objects.len()), Ok(2));
    }

    #[test]
    fn each_rule_names_its_field() {
        let cases = [
            (
                r#"{"kind":"MachinePool","metadata":{"name":"a"}}"#,
                "objects[0].apiVersion",
            ),
            (
                r#"{"apiVersion":"v1","metadata":{"name":"a"}}"#,
                "objects[0].kind",
            ),
            ("[1]", "objects[0]"),
            (
                r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"Not_A_Label"}}"#,
                "objects[0].metadata.name (\"Not_A_Label\")",
            ),
            (
                r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a","namespace":"kube-system"}}"#,
                "objects[0].metadata.namespace",
            ),
            (
                r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a"}}"#,
                "objects[0].kind (Deployment.apps)",
            ),
        ];
        for (object, field) in cases {
            assert_eq!(refused(&[object]).field, field, "{object}");
        }
        assert_eq!(refused(&[POOL, POOL]).field, "objects[1].metadata.name");
    }

    #[test]
    fn more_objects_than_a_cluster_is_made_of_are_refused_before_parsing() {
        let many = vec!["not even JSON"; MAX_RENDERED_OBJECTS + 1];
        assert_eq!(refused(&many).rule, "more than 500 objects");
    }

    #[test]
    fn generated_secrets_need_the_secret_kind_and_sane_keys() {
        let secret = |keys: &[&str], bytes| GeneratedSecret {
            name: "enc".into(),
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            bytes,
        };
        let check = |s: GeneratedSecret, allowed: &[ObjectKind]| {
            let render = Rendered {
                objects: Vec::new(),
                secrets: vec![s],
            };
            rendered(render, "team-a", allowed).map(drop)
        };
        assert_eq!(check(secret(&["key"], 32), &allowed()), Ok(()));
        assert!(check(secret(&["key"], 32), &allowed()[..1]).is_err());
        assert!(check(secret(&["a/b"], 32), &allowed()).is_err());
        assert!(check(secret(&["key"], 0), &allowed()).is_err());
        assert!(check(secret(&[], 32), &allowed()).is_err());
    }

    #[test]
    fn dns_labels() {
        assert!(dns_label("a-0"));
        for bad in ["", "-a", "a-", "A", "a.b", &"a".repeat(64)] {
            assert!(!dns_label(bad), "{bad}");
        }
    }

    #[test]
    fn the_clusters_of_a_render_are_its_cluster_x_k8s_io_clusters() {
        let objects = [
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "c"}}),
            json!({"apiVersion": "example.com/v1", "kind": "Cluster", "metadata": {"name": "other"}}),
        ];
        let objects: Vec<Map<String, Value>> = objects
            .into_iter()
            .filter_map(|o| o.as_object().cloned())
            .collect();
        assert_eq!(clusters(&objects), HashSet::from(["c".to_owned()]));
    }
}
