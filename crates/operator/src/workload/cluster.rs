//! What workload-cluster access is keyed by, and the change events of
//! workload-cluster Nodes.

use std::fmt;

/// Identifies a Cluster API Cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterKey {
    /// The Cluster's namespace.
    pub namespace: String,
    /// The Cluster's name.
    pub name: String,
}

impl ClusterKey {
    /// The key of Cluster `name` in `namespace`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// `<name>-kubeconfig`, the Secret holding the Cluster's kubeconfig.
    pub fn kubeconfig_secret_name(&self) -> String {
        format!("{}-kubeconfig", self.name)
    }
}

impl fmt::Display for ClusterKey {
    /// `namespace/name`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A change to a Node of some workload cluster, for mapping to MachinePools:
/// a Node was added, changed (beyond heartbeats) or deleted, including
/// changes found by listing again after the watch was interrupted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEvent {
    /// The Cluster whose workload cluster the Node is in.
    pub cluster: ClusterKey,
    /// The Node's name.
    pub node_name: String,
    /// The Node's `spec.providerID`, if set and not empty.
    pub provider_id: Option<String>,
}
