//! Pure derivations over Nodes: which Nodes are the pool's (exact
//! providerID match, in list order), how many are ready and available,
//! which Nodes left the pool, and what a pool's Node must carry.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, ObjectReference};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::api::cluster::StatusVersion;
use crate::api::{NODE_UNINITIALIZED_TAINT, annotations};
use crate::workload::is_control_plane;

/// What matching a providerID list against Nodes found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Matched {
    /// References to the matched Nodes, in providerID list order.
    pub refs: Vec<ObjectReference>,
    /// Matched Nodes whose `Ready` condition is `True`.
    pub ready: i32,
    /// Ready Nodes that have been Ready for at least minReadySeconds.
    pub available: i32,
    /// When the next ready-but-not-yet-available Node becomes available.
    pub next_available_in: Option<Duration>,
    /// The matched Nodes' kubelet versions, aggregated (those without one
    /// left out, as upstream does).
    pub versions: Vec<StatusVersion>,
}

/// Matches `provider_ids` (exact, case-sensitive; empty entries skipped)
/// against Nodes found by `lookup`.
pub fn match_nodes<N: Deref<Target = Node>>(
    provider_ids: &[String],
    lookup: impl Fn(&str) -> Option<N>,
    min_ready: Duration,
    now: Timestamp,
) -> Matched {
    let mut matched = Matched::default();
    let mut versions = Vec::new();
    for id in provider_ids.iter().filter(|id| !id.is_empty()) {
        let Some(node) = lookup(id) else {
            continue;
        };
        matched.refs.push(node_ref(&node));
        if let Some(info) = node.status.as_ref().and_then(|s| s.node_info.as_ref()) {
            versions.push(StatusVersion {
                version: info.kubelet_version.clone(),
                replicas: 1,
            });
        }
        let Some(since) = ready_since(&node) else {
            continue;
        };
        matched.ready += 1;
        let available_at = since
            .checked_add(k8s_openapi::jiff::SignedDuration::try_from(min_ready).unwrap_or_default())
            .unwrap_or(since);
        if min_ready.is_zero() || available_at < now {
            matched.available += 1;
        } else {
            let wait = Duration::try_from(now.duration_until(available_at)).unwrap_or_default();
            matched.next_available_in =
                Some(matched.next_available_in.map_or(wait, |w| w.min(wait)));
        }
    }
    matched.versions = StatusVersion::aggregate(versions);
    matched
}

/// When `node` last became Ready, if its `Ready` condition is `True`.
pub(crate) fn ready_since(node: &Node) -> Option<Timestamp> {
    let ready = node
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    (ready.status == "True").then(|| {
        ready
            .last_transition_time
            .as_ref()
            .map_or(Timestamp::UNIX_EPOCH, |t| t.0)
    })
}

/// A reference to `node` as `status.nodeRefs` holds it.
pub fn node_ref(node: &Node) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: node.metadata.name.clone(),
        uid: node.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

/// The referenced Nodes that left the pool: their providerID (non-empty) is
/// no longer in `provider_ids`. Only Nodes in `refs` are ever candidates.
pub fn retired<N: Deref<Target = Node>>(
    refs: &[ObjectReference],
    provider_ids: &[String],
    by_name: impl Fn(&str) -> Option<N>,
) -> Vec<String> {
    refs.iter()
        .filter_map(|r| by_name(r.name.as_deref()?))
        .filter(|node| !is_control_plane(node))
        .filter(|node| {
            node.spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .is_some_and(|id| !id.is_empty() && !provider_ids.iter().any(|p| p == id))
        })
        .filter_map(|node| node.metadata.name.clone())
        .collect()
}

/// Whether every reference names a Node that still exists with the same UID.
pub fn refs_current<N: Deref<Target = Node>>(
    refs: &[ObjectReference],
    by_name: impl Fn(&str) -> Option<N>,
) -> bool {
    refs.iter().all(|r| {
        r.name
            .as_deref()
            .and_then(&by_name)
            .is_some_and(|node| node.metadata.uid == r.uid)
    })
}

/// The merge patch that gives a pool's Node the Cluster API annotations
/// and removes the uninitialized taint; `None` if it has both already.
/// Taints are an atomic list, so the patch carries the remaining ones and
/// the Node's resourceVersion: it fails rather than drop a taint added
/// meanwhile. Node labels are not touched (upstream).
pub fn node_patch(node: &Node, cluster: &str, namespace: &str, pool: &str) -> Option<Value> {
    let wanted = BTreeMap::from([
        (annotations::NODE_CLUSTER_NAME, cluster),
        (annotations::NODE_CLUSTER_NAMESPACE, namespace),
        (annotations::NODE_OWNER_KIND, "MachinePool"),
        (annotations::NODE_OWNER_NAME, pool),
    ]);
    let current = node.metadata.annotations.clone().unwrap_or_default();
    let missing: BTreeMap<&str, &str> = wanted
        .into_iter()
        .filter(|(k, v)| current.get(*k).map(String::as_str) != Some(*v))
        .collect();
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let uninitialized = |t: &k8s_openapi::api::core::v1::Taint| {
        t.key == NODE_UNINITIALIZED_TAINT && t.effect == "NoSchedule"
    };
    let tainted = taints.iter().any(uninitialized);
    if missing.is_empty() && !tainted {
        return None;
    }
    let mut patch = json!({ "metadata": {
        "annotations": missing,
        "resourceVersion": node.metadata.resource_version,
    } });
    if tainted {
        let remaining: Vec<_> = taints.into_iter().filter(|t| !uninitialized(t)).collect();
        patch["spec"] = json!({ "taints": remaining });
    }
    Some(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn node(name: &str, provider_id: &str, ready: Option<(&str, i64)>) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(provider_id.into()),
                ..NodeSpec::default()
            }),
            status: ready.map(|(status, since)| NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: status.into(),
                    last_transition_time: Some(Time(Timestamp::from_second(since).unwrap())),
                    ..NodeCondition::default()
                }]),
                ..NodeStatus::default()
            }),
        }
    }

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn by_provider_id<'a>(nodes: &'a [Node]) -> impl Fn(&str) -> Option<&'a Node> {
        move |id| {
            nodes
                .iter()
                .find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(id))
        }
    }

    const NOW: i64 = 1_000;

    #[test]
    fn match_nodes_refs_in_list_order_counting_ready_and_available() {
        let nodes = [
            node("b", "sim://r/b", Some(("True", NOW - 100))),
            node("a", "sim://r/a", Some(("True", NOW - 100))),
            node("c", "sim://r/c", Some(("False", NOW - 100))),
            node("d", "sim://r/d", None),
        ];
        let matched = match_nodes(
            &ids(&["sim://r/a", "sim://r/b", "sim://r/c", "sim://r/d", ""]),
            by_provider_id(&nodes),
            Duration::ZERO,
            Timestamp::from_second(NOW).unwrap(),
        );
        let names: Vec<_> = matched
            .refs
            .iter()
            .map(|r| r.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert_eq!((matched.ready, matched.available), (2, 2));
        assert_eq!(matched.refs[0].uid.as_deref(), Some("uid-a"));
        assert!(matched.versions.is_empty(), "no Node reports a version");
    }

    #[test]
    fn match_nodes_sums_the_kubelet_versions_of_the_matched_nodes() {
        let mut nodes = [
            node("a", "sim://r/a", Some(("True", 0))),
            node("b", "sim://r/b", Some(("True", 0))),
            node("c", "sim://r/c", None),
            node("other", "sim://r/other", Some(("True", 0))),
        ];
        for (node, version) in nodes
            .iter_mut()
            .zip(["v1.31.2", "v1.30.4", "v1.31.2", "v1.29.0"])
        {
            node.status.get_or_insert_default().node_info = Some(NodeSystemInfo {
                kubelet_version: version.to_owned(),
                ..NodeSystemInfo::default()
            });
        }
        let matched = match_nodes(
            &ids(&["sim://r/a", "sim://r/b", "sim://r/c", "sim://r/gone"]),
            by_provider_id(&nodes),
            Duration::ZERO,
            Timestamp::from_second(NOW).unwrap(),
        );
        let versions: Vec<_> = matched
            .versions
            .iter()
            .map(|v| (v.version.as_str(), v.replicas))
            .collect();
        assert_eq!(versions, [("v1.30.4", 1), ("v1.31.2", 2)]);
    }

    #[test]
    fn match_nodes_compares_provider_ids_exactly() {
        let nodes = [
            node("x", "aws:///us-east-2a/i-1", Some(("True", 0))),
            node("p1", "azure://westus2/id-nodepool1/0", Some(("True", 0))),
            node("p2", "azure://westus2/id-nodepool2/0", Some(("True", 0))),
        ];
        let now = Timestamp::from_second(NOW).unwrap();
        let none = match_nodes(
            &ids(&["aws:////i-1"]),
            by_provider_id(&nodes),
            Duration::ZERO,
            now,
        );
        assert!(none.refs.is_empty());
        let both = match_nodes(
            &ids(&[
                "azure://westus2/id-nodepool1/0",
                "azure://westus2/id-nodepool2/0",
            ]),
            by_provider_id(&nodes),
            Duration::ZERO,
            now,
        );
        let names: Vec<_> = both.refs.iter().map(|r| r.name.clone().unwrap()).collect();
        assert_eq!(names, ["p1", "p2"]);
    }

    #[test]
    fn match_nodes_counts_available_only_after_min_ready_seconds() {
        let nodes = [node("a", "p", Some(("True", NOW - 5)))];
        let now = Timestamp::from_second(NOW).unwrap();
        let waiting = match_nodes(
            &ids(&["p"]),
            by_provider_id(&nodes),
            Duration::from_secs(20),
            now,
        );
        assert_eq!((waiting.ready, waiting.available), (1, 0));
        assert_eq!(waiting.next_available_in, Some(Duration::from_secs(15)));
        let at_once = match_nodes(&ids(&["p"]), by_provider_id(&nodes), Duration::ZERO, now);
        assert_eq!((at_once.ready, at_once.available), (1, 1));
    }

    #[test]
    fn retired_only_considers_referenced_nodes_whose_id_left_the_list() {
        let nodes = [
            node("a", "p-a", None),
            node("b", "p-b", None),
            node("c", "p-c", None),
        ];
        let by_name = |name: &str| {
            nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(name))
        };
        let refs = vec![node_ref(&nodes[0]), node_ref(&nodes[1])];
        // c is not referenced: never a candidate, even though its id is absent.
        assert_eq!(retired(&refs, &ids(&["p-a"]), by_name), ["b"]);
        assert!(retired(&refs, &ids(&["p-a", "p-b"]), by_name).is_empty());
    }

    #[test]
    fn refs_current_notices_a_node_recreated_under_the_same_name() {
        let old = node("a", "p", None);
        let mut new = old.clone();
        new.metadata.uid = Some("uid-new".into());
        let refs = vec![node_ref(&old)];
        assert!(refs_current(&refs, |_| Some(&old)));
        assert!(!refs_current(&refs, |_| Some(&new)));
        assert!(!refs_current(&refs, |_| None::<&Node>));
    }

    #[test]
    fn node_patch_adds_annotations_removes_the_taint_and_is_none_when_done() {
        let mut fresh = node("a", "p", None);
        let taint = |key: &str, effect: &str| Taint {
            key: key.into(),
            effect: effect.into(),
            ..Taint::default()
        };
        fresh.spec.as_mut().unwrap().taints = Some(vec![
            taint(NODE_UNINITIALIZED_TAINT, "NoSchedule"),
            taint("other", "NoExecute"),
        ]);
        fresh.metadata.resource_version = Some("7".into());
        let patch = node_patch(&fresh, "c", "ns", "pool").unwrap();
        assert_eq!(
            patch["metadata"]["annotations"][annotations::NODE_OWNER_KIND],
            "MachinePool"
        );
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(
            patch["spec"]["taints"],
            json!([{ "key": "other", "effect": "NoExecute" }])
        );

        let mut done = node("a", "p", None);
        done.metadata.annotations = Some(
            [
                (annotations::NODE_CLUSTER_NAME, "c"),
                (annotations::NODE_CLUSTER_NAMESPACE, "ns"),
                (annotations::NODE_OWNER_KIND, "MachinePool"),
                (annotations::NODE_OWNER_NAME, "pool"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        );
        assert_eq!(node_patch(&done, "c", "ns", "pool"), None);
    }
}
