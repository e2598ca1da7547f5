//! A snapshot of one workload cluster's Nodes with its lookups, and what the
//! cache keeps of each Node.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

/// A snapshot of one workload cluster's Nodes, taken from the watch's cache.
///
/// Like any cache it may lag the API server: confirm with the API before
/// deleting or creating anything because of what is (not) here.
#[derive(Clone, Debug, Default)]
pub struct Nodes {
    by_name: HashMap<String, Arc<Node>>,
    by_provider_id: HashMap<String, Arc<Node>>,
    /// The providerIDs of the control plane's Nodes.
    control_plane: HashSet<String>,
}

impl Nodes {
    /// Indexes `nodes`. If several Nodes report one providerID, the one whose
    /// name sorts last wins, as in Cluster API's map built from a List.
    pub(crate) fn new(mut nodes: Vec<Arc<Node>>) -> Self {
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut by_name = HashMap::with_capacity(nodes.len());
        let mut by_provider_id = HashMap::with_capacity(nodes.len());
        let mut control_plane = HashSet::new();
        for node in nodes {
            if let Some(provider_id) = provider_id(&node) {
                if is_control_plane(&node) {
                    control_plane.insert(provider_id.to_owned());
                } else {
                    by_provider_id.insert(provider_id.to_owned(), node.clone());
                }
            }
            if let Some(name) = &node.metadata.name {
                by_name.insert(name.clone(), node);
            }
        }
        Self {
            by_name,
            by_provider_id,
            control_plane,
        }
    }

    /// Whether `provider_id` is a control-plane Node's: no pool may claim it.
    pub fn of_control_plane(&self, provider_id: &str) -> bool {
        self.control_plane.contains(provider_id)
    }

    /// The Node whose `spec.providerID` is exactly `provider_id` (no
    /// normalisation: `aws:////i-1` does not find `aws:///us-east-2a/i-1`):
    /// what a pool may hold. Nodes without a providerID, and Nodes of the
    /// control plane, are never found here.
    pub fn by_provider_id(&self, provider_id: &str) -> Option<Arc<Node>> {
        self.by_provider_id.get(provider_id).cloned()
    }

    /// The Node named `name`.
    pub fn by_name(&self, name: &str) -> Option<Arc<Node>> {
        self.by_name.get(name).cloned()
    }

    /// Every Node, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Node>> {
        self.by_name.values()
    }

    /// How many Nodes there are.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

/// The role labels of a control-plane Node (the second is kubeadm's before 1.24).
const CONTROL_PLANE_LABELS: [&str; 2] = [
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
];

/// Whether `node` is of the control plane: no pool may hold, mark or
/// delete it, whatever providerID it reports.
pub fn is_control_plane(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .is_some_and(|labels| CONTROL_PLANE_LABELS.iter().any(|l| labels.contains_key(*l)))
}

/// The Node's non-empty `spec.providerID`.
pub(super) fn provider_id(node: &Node) -> Option<&str> {
    node.spec
        .as_ref()
        .and_then(|spec| spec.provider_id.as_deref())
        .filter(|id| !id.is_empty())
}

/// Drops what the controllers never read, to keep the cache small: managed
/// fields, the last-applied annotation, image and volume lists, and the
/// heartbeat times that change on every kubelet status report.
pub(super) fn strip(node: &mut Node) {
    node.metadata.managed_fields = None;
    if let Some(annotations) = &mut node.metadata.annotations {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    if let Some(status) = &mut node.status {
        status.images = None;
        status.volumes_attached = None;
        status.volumes_in_use = None;
        status.runtime_handlers = None;
        status.config = None;
        for condition in status.conditions.iter_mut().flatten() {
            condition.last_heartbeat_time = None;
        }
    }
}

/// Whether `new` (stripped) differs from `old` in anything but its
/// resourceVersion: a kubelet heartbeat that changed only stripped fields
/// is not worth a reconcile.
pub(super) fn changed(old: &Node, new: &Node) -> bool {
    if old.metadata.resource_version == new.metadata.resource_version {
        return old != new;
    }
    let mut old = old.clone();
    old.metadata
        .resource_version
        .clone_from(&new.metadata.resource_version);
    old != *new
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn node(name: &str, provider_id: Option<&str>) -> Arc<Node> {
        Arc::new(Node {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                resource_version: Some("1".to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: provider_id.map(str::to_owned),
                ..NodeSpec::default()
            }),
            status: None,
        })
    }

    fn names(node: Option<Arc<Node>>) -> Option<String> {
        node.and_then(|n| n.metadata.name.clone())
    }

    #[test]
    fn by_provider_id_matches_exact_string_only() {
        let nodes = Nodes::new(vec![node("a", Some("aws:///us-east-2a/i-1"))]);
        assert_eq!(
            names(nodes.by_provider_id("aws:///us-east-2a/i-1")),
            Some("a".into())
        );
        assert_eq!(names(nodes.by_provider_id("aws:////i-1")), None);
        assert_eq!(names(nodes.by_provider_id("AWS:///us-east-2a/i-1")), None);
        assert_eq!(names(nodes.by_provider_id("i-1")), None);
    }

    #[test]
    fn by_provider_id_tells_ids_with_same_last_segment_apart() {
        let nodes = Nodes::new(vec![
            node("p1", Some("azure://westus2/id-nodepool1/0")),
            node("p2", Some("azure://westus2/id-nodepool2/0")),
        ]);
        assert_eq!(
            names(nodes.by_provider_id("azure://westus2/id-nodepool1/0")),
            Some("p1".into())
        );
        assert_eq!(
            names(nodes.by_provider_id("azure://westus2/id-nodepool2/0")),
            Some("p2".into())
        );
    }

    #[test]
    fn by_provider_id_never_indexes_empty_ids() {
        let nodes = Nodes::new(vec![node("a", Some("")), node("b", None)]);
        assert_eq!(names(nodes.by_provider_id("")), None);
        assert_eq!(nodes.len(), 2);
        assert_eq!(names(nodes.by_name("a")), Some("a".into()));
    }

    #[test]
    fn by_provider_id_picks_last_name_when_ids_collide() {
        let nodes = Nodes::new(vec![node("b", Some("x://1")), node("a", Some("x://1"))]);
        assert_eq!(names(nodes.by_provider_id("x://1")), Some("b".into()));
    }

    #[test]
    fn empty_snapshot_is_empty() {
        let nodes = Nodes::new(Vec::new());
        assert!(nodes.is_empty());
        assert_eq!(nodes.iter().count(), 0);
    }

    fn ready_node(heartbeat: i64, resource_version: &str) -> Node {
        let mut node = Arc::unwrap_or_clone(node("a", Some("x://1")));
        node.metadata.resource_version = Some(resource_version.to_owned());
        node.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        node.status = Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".to_owned(),
                status: "True".to_owned(),
                last_heartbeat_time: Some(Time(
                    Timestamp::from_second(heartbeat).expect("valid time"),
                )),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        });
        node
    }

    #[test]
    fn strip_drops_managed_fields_and_heartbeats() {
        let mut node = ready_node(100, "1");
        strip(&mut node);
        assert_eq!(node.metadata.managed_fields, None);
        let conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
        assert_eq!(conditions[0].last_heartbeat_time, None);
        assert_eq!(conditions[0].status, "True");
    }

    #[test]
    fn changed_is_false_when_only_heartbeat_and_version_moved() {
        let mut old = ready_node(100, "1");
        let mut new = ready_node(200, "2");
        strip(&mut old);
        strip(&mut new);
        assert!(!changed(&old, &new));
    }

    #[test]
    fn changed_is_true_when_ready_status_flips() {
        let mut old = ready_node(100, "1");
        let mut new = ready_node(200, "2");
        if let Some(condition) = new
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|c| c.first_mut())
        {
            condition.status = "False".to_owned();
        }
        strip(&mut old);
        strip(&mut new);
        assert!(changed(&old, &new));
    }
}
