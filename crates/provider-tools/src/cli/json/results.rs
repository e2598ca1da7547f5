//! The results of calls, as `capwasm provider test` prints them.

#[allow(clippy::wildcard_imports)]
use super::*;

/// `machine-pools.reconcile`'s result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolState {
    instances: Vec<Instance>,
    ready: bool,
    requeue_after_seconds: Option<u32>,
}

impl From<machine_pools::PoolState> for PoolState {
    fn from(s: machine_pools::PoolState) -> Self {
        Self {
            instances: s.instances.into_iter().map(Into::into).collect(),
            ready: s.ready,
            requeue_after_seconds: s.requeue_after_seconds,
        }
    }
}

/// `clusters.reconcile`'s result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterState {
    control_plane_endpoint: Option<ApiEndpoint>,
    failure_domains: Vec<FailureDomain>,
    ready: bool,
    requeue_after_seconds: Option<u32>,
}

/// Attributes stay a list of pairs, as in the WIT: keys may repeat.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    name: String,
    control_plane: bool,
    attributes: Vec<(String, String)>,
}

impl From<clusters::ClusterState> for ClusterState {
    fn from(s: clusters::ClusterState) -> Self {
        Self {
            control_plane_endpoint: s.control_plane_endpoint.map(Into::into),
            failure_domains: s
                .failure_domains
                .into_iter()
                .map(|d| FailureDomain {
                    name: d.name,
                    control_plane: d.control_plane,
                    attributes: d.attributes,
                })
                .collect(),
            ready: s.ready,
            requeue_after_seconds: s.requeue_after_seconds,
        }
    }
}

/// `delete-outcome`: `"done"` or `{"in-progress": <seconds>}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeleteOutcome {
    Done,
    InProgress(u32),
}

impl From<types::DeleteOutcome> for DeleteOutcome {
    fn from(o: types::DeleteOutcome) -> Self {
        match o {
            types::DeleteOutcome::Done => Self::Done,
            types::DeleteOutcome::InProgress(seconds) => Self::InProgress(seconds),
        }
    }
}

/// `provider-info`.
#[derive(Debug, Serialize)]
pub struct ProviderInfo {
    name: String,
    version: String,
}

impl From<types::ProviderInfo> for ProviderInfo {
    fn from(i: types::ProviderInfo) -> Self {
        Self {
            name: i.name,
            version: i.version,
        }
    }
}
