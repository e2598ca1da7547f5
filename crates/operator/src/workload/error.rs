//! Why a workload cluster could not be reached or its Nodes read.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::watcher;

use super::cluster::ClusterKey;

/// Why a workload cluster's client or Nodes are not available.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Cluster's `<name>-kubeconfig` Secret does not exist (yet).
    #[error("kubeconfig Secret {namespace}/{name} not found")]
    KubeconfigSecretNotFound {
        /// The Cluster's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
    },
    /// Reading the kubeconfig Secret from the management cluster failed.
    #[error("reading kubeconfig Secret {namespace}/{name} failed")]
    GetKubeconfigSecret {
        /// The Cluster's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The Secret has no `value` key, where Cluster API keeps the kubeconfig.
    #[error("kubeconfig Secret {namespace}/{name} has no key `value`")]
    KubeconfigMissingKey {
        /// The Cluster's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
    },
    /// The Secret's kubeconfig cannot be used, or is refused.
    #[error("the kubeconfig in Secret {namespace}/{name} is not usable")]
    KubeconfigInvalid {
        /// The Cluster's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
        /// What is wrong with it.
        #[source]
        source: InvalidKubeconfig,
    },
    /// The Node watch of the workload cluster failed its last attempt.
    #[error("workload cluster {cluster} is unreachable")]
    Unreachable {
        /// The Cluster.
        cluster: ClusterKey,
        /// Why the last attempt failed (shared: every caller until the next
        /// successful list sees the same one).
        #[source]
        source: Arc<WatchFailure>,
    },
    /// The first list of the workload cluster's Nodes did not complete in time.
    #[error("workload cluster {cluster} did not list its Nodes within {waited:?}")]
    NodeListTimeout {
        /// The Cluster.
        cluster: ClusterKey,
        /// How long was waited.
        waited: Duration,
    },
    /// The task watching the workload cluster's Nodes ended (it panicked).
    #[error("the Node watch of workload cluster {cluster} stopped")]
    WatchStopped {
        /// The Cluster.
        cluster: ClusterKey,
    },
}

impl Error {
    /// The condition reason for this error: `KubeconfigSecretNotFound`,
    /// `KubeconfigInvalid` or `WorkloadClusterUnreachable`.
    ///
    /// A failed read of the Secret counts as unreachable: the workload
    /// cluster cannot be connected to, the cause is transient as far as
    /// this layer can tell, and the message names the Secret.
    pub fn reason(&self) -> crate::api::Reason {
        use crate::api::Reason;
        match self {
            Self::KubeconfigSecretNotFound { .. } => Reason::KubeconfigSecretNotFound,
            Self::KubeconfigMissingKey { .. } | Self::KubeconfigInvalid { .. } => {
                Reason::KubeconfigInvalid
            }
            Self::GetKubeconfigSecret { .. }
            | Self::Unreachable { .. }
            | Self::NodeListTimeout { .. }
            | Self::WatchStopped { .. } => Reason::WorkloadClusterUnreachable,
        }
    }

    /// A metric label from a closed set, one per kind of failure.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::KubeconfigSecretNotFound { .. } => "kubeconfig_secret_not_found",
            Self::GetKubeconfigSecret { .. } => "get_kubeconfig_secret",
            Self::KubeconfigMissingKey { .. } | Self::KubeconfigInvalid { .. } => {
                "kubeconfig_invalid"
            }
            Self::Unreachable { .. } | Self::NodeListTimeout { .. } | Self::WatchStopped { .. } => {
                "workload_cluster_unreachable"
            }
        }
    }
}

/// Why an attempt of a workload cluster's Node watch failed.
#[derive(Debug, thiserror::Error)]
pub enum WatchFailure {
    /// The watcher failed: the server could not be reached, refused the
    /// request, or answered more than the client reads
    /// ([`ResponseTooLarge`] among its causes).
    #[error(transparent)]
    Watcher(watcher::Error),
    /// The cluster lists more Nodes than one cluster may have cached.
    #[error("it has more than {limit} Nodes, the most the operator watches in one cluster")]
    TooManyNodes {
        /// The bound, [`super::Settings::max_nodes`].
        limit: usize,
    },
}

/// A response of a workload API server crossed a bound on what the
/// operator reads of one (see `workload/bounded.rs`): the body ends with
/// this error, and its request fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{framing} from the workload API server holds more than {}, the most the operator reads", amount(*.limit, *.measure))]
pub struct ResponseTooLarge {
    /// What was bounded: a whole response, or one line of a watch.
    pub framing: Framing,
    /// What was counted.
    pub measure: Measure,
    /// The bound that was crossed.
    pub limit: usize,
}

/// The part of a response a bound applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// The whole body, which kube reads into memory at once.
    Body,
    /// One line of a watch, one event, which kube reads at once.
    Line,
}

/// What a bound counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Bytes.
    Bytes,
    /// JSON values, counted by the separators and brackets before them.
    Values,
    /// Objects and arrays on the third level, such as a list's items.
    Items,
}

impl fmt::Display for Framing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Body => "a response",
            Self::Line => "a watch event",
        })
    }
}

fn amount(limit: usize, measure: Measure) -> String {
    const MIB: usize = 1 << 20;
    match measure {
        Measure::Bytes if limit.is_multiple_of(MIB) => format!("{} MiB", limit / MIB),
        Measure::Bytes => format!("{limit} bytes"),
        Measure::Values => format!("{limit} JSON values"),
        Measure::Items => format!("{limit} items"),
    }
}

/// What is wrong with a kubeconfig taken from a Secret.
#[derive(Debug, thiserror::Error)]
pub enum InvalidKubeconfig {
    /// The value is not UTF-8 text.
    #[error("it is not UTF-8 text")]
    NotUtf8(#[source] std::str::Utf8Error),
    /// The value is not a kubeconfig document. The parser's own message is
    /// left out on purpose: it quotes the offending text, which may be a
    /// credential.
    #[error("it is not a kubeconfig YAML document{}", position(*.line, *.column))]
    Parse {
        /// 1-based line of the error, when the parser knows it.
        line: Option<u64>,
        /// 1-based column of the error, when the parser knows it.
        column: Option<u64>,
    },
    /// A user runs an exec credential plugin.
    #[error(
        "user {user:?} uses an exec credential plugin, which is refused: it would let \
         whoever can write the Secret run a command inside the operator"
    )]
    ExecPlugin {
        /// The `users[].name`.
        user: String,
    },
    /// A user names an auth-provider plugin.
    #[error(
        "user {user:?} uses auth-provider {provider:?}, which is refused: provider plugins \
         run code and read the operator's environment and files; use an inline token or \
         client certificate"
    )]
    AuthProvider {
        /// The `users[].name`.
        user: String,
        /// The provider's name.
        provider: String,
    },
    /// An entry points at a file of the operator's filesystem.
    #[error(
        "{entry} sets {field}, a path, which is refused: a Secret must not make the operator \
         read its own files; use {inline} instead"
    )]
    LocalFile {
        /// `cluster "<name>"` or `user "<name>"`.
        entry: String,
        /// The kubeconfig key, say `client-key`.
        field: &'static str,
        /// The inline key to use instead, say `client-key-data`.
        inline: &'static str,
    },
    /// The client configuration cannot be built from it (no current
    /// context, no server URL, undecodable certificate data, ...).
    #[error("no client configuration can be built from it")]
    Config(#[source] kube::config::KubeconfigError),
    /// The client cannot be built from the configuration (unusable TLS
    /// material, say).
    #[error("no client can be built from it")]
    Client(#[source] kube::Error),
}

fn position(line: Option<u64>, column: Option<u64>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!(" (error at line {line}, column {column})"),
        (Some(line), None) => format!(" (error at line {line})"),
        _ => String::new(),
    }
}
