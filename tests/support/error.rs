use std::path::PathBuf;

/// Why the control plane could not be started or used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The control-plane binaries are neither configured nor buildable.
    #[error("control-plane binaries unavailable: {0}")]
    Binaries(String),
    /// Preparing the run directory or a file in it failed.
    #[error("cannot write {path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Generating a certificate or key failed.
    #[error("generating certificates")]
    Certificate(#[from] rcgen::Error),
    /// A TLS server configuration was refused.
    #[error("setting up TLS")]
    Tls(#[from] rustls::Error),
    /// A process could not be spawned.
    #[error("cannot start {name} ({binary})")]
    Spawn {
        /// etcd or kube-apiserver.
        name: &'static str,
        /// The binary that was run.
        binary: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A process exited or never became ready; the log tail says why.
    #[error("{name} did not become ready: {reason}\n--- last lines of {log} ---\n{tail}")]
    NotReady {
        /// etcd or kube-apiserver.
        name: &'static str,
        /// What was observed (exit status or timeout).
        reason: String,
        /// Where the full log is (removed with the run directory).
        log: PathBuf,
        /// The last lines of the log.
        tail: String,
    },
    /// Building a client or kubeconfig failed.
    #[error("building the client configuration")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// Serialising the kubeconfig failed.
    #[error("serialising the kubeconfig")]
    KubeconfigYaml(#[from] serde_yaml_ng::Error),
    /// A request to the API server failed.
    #[error("API request failed")]
    Kube(#[from] kube::Error),
    /// A raw request to the API server could not be built.
    #[error("building a request")]
    Request(#[from] http::Error),
    /// A CRD file could not be read or parsed.
    #[error("invalid CRD file {path}: {message}")]
    CrdFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The environment shared by this test binary failed to start earlier.
    #[error("the shared test environment failed to start: {0}")]
    SharedStart(String),
    /// The simulated cloud did not start.
    #[error("the simulated cloud did not start: {0}")]
    Cloud(String),
    /// A manifest is not a Kubernetes object capwasm's tests can apply.
    #[error("invalid manifest: {0}")]
    Manifest(String),
    /// An outside tool the harness runs failed.
    #[error("{0}")]
    Tool(String),
    /// A CRD did not become established in time.
    #[error("CRD {0} was not established within the deadline")]
    CrdNotEstablished(String),
    /// A part of the one-node Kubernetes could not be set up.
    #[error("node: {0}")]
    Node(String),
    /// The install running as Pods did not get where it was awaited; what
    /// a user would look at (the Pods' states and logs) follows.
    #[error("{0}")]
    Pods(String),
    /// A container's memory could not be read from the node's cgroups.
    #[error("reading the memory of {container}: {message}")]
    Cgroup {
        /// The Pod and container.
        container: String,
        /// What went wrong.
        message: String,
    },
}
