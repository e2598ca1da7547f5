//! Timeouts and bounds of workload-cluster access.

use std::time::Duration;

/// How far the client's read timeout lies above the watch timeout, so that
/// the server ends an idle watch before the client gives up on it.
const READ_TIMEOUT_MARGIN: Duration = Duration::from_secs(30);

/// Timeouts and bounds of workload-cluster access.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How long connecting to a workload API server may take, so that an
    /// unreachable cluster fails a call in seconds.
    pub connect_timeout: Duration,
    /// How long [`WorkloadClusters::nodes`] waits for the first list of a
    /// cluster's Nodes before it answers [`Error::NodeListTimeout`].
    pub initial_list_timeout: Duration,
    /// The server-side timeout of each Node watch request. The client's
    /// read timeout is set above it.
    pub watch_timeout: Duration,
    /// The most Nodes one workload cluster may have: a cluster that lists
    /// more is unreachable ([`WatchFailure::TooManyNodes`]) and none of
    /// them is cached beyond this many.
    ///
    /// [`WatchFailure::TooManyNodes`]: super::WatchFailure::TooManyNodes
    pub max_nodes: usize,
}

impl Default for Settings {
    /// Connect within 3 s, wait 5 s for a first list, re-watch every 290 s
    /// (kube's default), at most 10,000 Nodes (twice the 5,000 Kubernetes
    /// is tested to scale to).
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(3),
            initial_list_timeout: Duration::from_secs(5),
            watch_timeout: Duration::from_secs(290),
            max_nodes: 10_000,
        }
    }
}

impl Settings {
    /// The read timeout of workload clients: above the watch timeout.
    pub(super) fn read_timeout(&self) -> Duration {
        self.watch_timeout + READ_TIMEOUT_MARGIN
    }
}
