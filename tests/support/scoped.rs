//! One workload API server seen as many: a loopback HTTPS proxy through
//! which each Cluster's kubeconfig sees only the Nodes labelled with its
//! name, as if every Cluster had a workload cluster of its own.
//!
//! A fleet of Clusters pointing at one workload server would otherwise each
//! watch every Node of the fleet, which no real fleet does and which makes
//! the operator's memory grow with the square of the fleet. Like a real API
//! server it offers HTTP/2 and HTTP/1.1 over TLS, so clients hold the
//! connections they would hold against one.
//!
//! A Cluster's kubeconfig has `https://<proxy>/clusters/<cluster>` as its
//! server; everything under that prefix, the prefix itself (the server's
//! root, which upstream Cluster API's cluster cache probes) included, goes
//! on to the workload server, and nothing outside it does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse as _, Response};
use axum::routing::any;
use base64::Engine as _;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::config::Kubeconfig;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::certs::Ca;
use crate::{ApiServer, Result};

/// The Node label saying which Cluster a Node belongs to.
pub const CLUSTER_LABEL: &str = "tests.capwasm.dev/cluster";

/// Requests larger than this are refused (Nodes and Secrets are far smaller).
const MAX_REQUEST: usize = 4 << 20;

/// The proxy; it stops when dropped.
pub struct ScopedWorkload {
    address: SocketAddr,
    /// The workload server's own kubeconfig, its server and CA replaced.
    kubeconfig: Kubeconfig,
    /// The proxy's CA, PEM.
    ca: String,
    counts: Arc<Counts>,
    task: tokio::task::JoinHandle<()>,
}

/// What the proxy has served so far.
#[derive(Default)]
struct Counts {
    connections: AtomicUsize,
    http1_requests: AtomicUsize,
}

/// Which Cluster a request is for, and its path on the workload server
/// without the leading slash: empty for the server's root.
#[derive(serde::Deserialize)]
struct Scope {
    cluster: String,
    #[serde(default)]
    path: String,
}

#[derive(Clone)]
struct Forward {
    client: Client,
    counts: Arc<Counts>,
}

impl ScopedWorkload {
    /// Serves `workload` on a loopback port.
    ///
    /// # Errors
    ///
    /// If no loopback port can be bound, or no client for `workload` built.
    pub async fn start(workload: &ApiServer) -> Result<Self> {
        let io = |source| crate::Error::Io {
            path: "127.0.0.1:0".into(),
            source,
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(io)?;
        let address = listener.local_addr().map_err(io)?;
        let ca = Ca::new("capwasm-testenv-scoped")?;
        let acceptor = TlsAcceptor::from(Arc::new(tls_config(&ca)?));
        let counts = Arc::new(Counts::default());
        // A Cluster's prefix is its server's root: upstream's cluster cache
        // connects and probes with `GET /clusters/{cluster}/`.
        let app = Router::new()
            .route("/clusters/{cluster}", any(forward))
            .route("/clusters/{cluster}/", any(forward))
            .route("/clusters/{cluster}/{*path}", any(forward))
            .with_state(Forward {
                client: workload.client()?,
                counts: counts.clone(),
            });
        let task = tokio::spawn(serve(listener, acceptor, app, counts.clone()));
        Ok(Self {
            address,
            kubeconfig: workload.kubeconfig().clone(),
            ca: ca.cert_pem(),
            counts,
            task,
        })
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.counts.connections.load(Ordering::Relaxed)
    }

    /// Requests served over HTTP/1.x so far (the rest came over HTTP/2).
    pub fn http1_requests(&self) -> usize {
        self.counts.http1_requests.load(Ordering::Relaxed)
    }

    /// Cluster API's `<cluster>-kubeconfig` Secret for `cluster`'s view:
    /// the workload server's kubeconfig (its CA and credentials, as a real
    /// one holds) with the proxy as its server.
    ///
    /// # Errors
    ///
    /// Never in practice: the kubeconfig is serialized from a value.
    pub fn kubeconfig_secret(&self, namespace: &str, cluster: &str) -> Result<Secret> {
        let mut kubeconfig = self.kubeconfig.clone();
        for named in &mut kubeconfig.clusters {
            if let Some(entry) = named.cluster.as_mut() {
                entry.server = Some(format!("https://{}/clusters/{cluster}", self.address));
                entry.certificate_authority_data =
                    Some(base64::engine::general_purpose::STANDARD.encode(&self.ca));
            }
        }
        let value = serde_yaml_ng::to_string(&kubeconfig)?;
        Ok(crate::apiserver::cluster_secret(
            namespace,
            &format!("{cluster}-kubeconfig"),
            cluster,
            [("value", value)],
        ))
    }
}

impl Drop for ScopedWorkload {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A serving certificate for 127.0.0.1 from `ca`, offering HTTP/2 first.
fn tls_config(ca: &Ca) -> Result<ServerConfig> {
    let serving = ca.serving()?;
    let invalid = |error: rustls::pki_types::pem::Error| rustls::Error::General(error.to_string());
    let chain = CertificateDer::pem_slice_iter(serving.cert.as_bytes())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(invalid)?;
    let key = PrivateKeyDer::from_pem_slice(serving.key.as_bytes()).map_err(invalid)?;
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Accepts connections until dropped, each served as HTTP/2 or HTTP/1.1.
async fn serve(listener: TcpListener, acceptor: TlsAcceptor, app: Router, counts: Arc<Counts>) {
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            Err(error) => {
                tracing::warn!(%error, "the scoped workload proxy cannot accept");
                continue;
            }
        };
        counts.connections.fetch_add(1, Ordering::Relaxed);
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = TowerToHyperService::new(app);
            // A connection ends when its client goes; nothing to report.
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}

/// Sends the request on with the admin's credentials; a Node list or watch
/// gets the Cluster's label added to its selector.
async fn forward(
    State(Forward { client, counts }): State<Forward>,
    Path(Scope { cluster, path }): Path<Scope>,
    request: Request,
) -> Response {
    if request.version() != http::Version::HTTP_2 {
        counts.http1_requests.fetch_add(1, Ordering::Relaxed);
    }
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_REQUEST).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let mut query: Vec<(String, String)> =
        form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    if path == "api/v1/nodes" {
        let scope = format!("{CLUSTER_LABEL}={cluster}");
        match query.iter_mut().find(|(k, _)| k == "labelSelector") {
            Some((_, selector)) if !selector.is_empty() => {
                *selector = format!("{selector},{scope}");
            }
            Some((_, selector)) => *selector = scope,
            None => query.push(("labelSelector".into(), scope)),
        }
    }
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&query)
        .finish();
    let uri = if query.is_empty() {
        format!("/{path}")
    } else {
        format!("/{path}?{query}")
    };
    let mut outgoing = http::Request::builder().method(parts.method).uri(uri);
    for name in [http::header::CONTENT_TYPE, http::header::ACCEPT] {
        if let Some(value) = parts.headers.get(&name) {
            outgoing = outgoing.header(name, value);
        }
    }
    let Ok(outgoing) = outgoing.body(kube::client::Body::from(body.to_vec())) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    match client.send(outgoing).await {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            Response::from_parts(parts, Body::new(body))
        }
        Err(error) => (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    }
}
