//! Errors of running the simulated cloud.

use std::net::SocketAddr;

/// Why the simulated cloud could not serve, or could not keep a Node in step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listening socket could not be bound.
    #[error("cannot bind the simulated cloud to {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Serving in the background needs a Tokio runtime, and there is none.
    #[error("the simulated cloud must be started from within a Tokio runtime")]
    NoRuntime(#[source] tokio::runtime::TryCurrentError),
    /// The listener's own address could not be read.
    #[error("cannot read the address the simulated cloud listens on")]
    LocalAddr(#[source] std::io::Error),
    /// The HTTP server stopped with an error.
    #[error("serving the simulated cloud's API failed")]
    Serve(#[source] std::io::Error),
    /// The server task was cancelled or panicked.
    #[error("the simulated cloud's server task did not complete")]
    Join(#[source] tokio::task::JoinError),
    /// A running instance's Node could not be created or updated.
    #[error("cannot register Node {node}")]
    RegisterNode {
        /// The Node (the instance id).
        node: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A running instance's Node could not be marked Ready.
    #[error("cannot set the Ready condition of Node {node}")]
    MarkNodeReady {
        /// The Node (the instance id).
        node: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The Node of an instance that stopped running could not be deleted.
    #[error("cannot delete Node {node}")]
    DeleteNode {
        /// The Node (the instance id).
        node: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}
