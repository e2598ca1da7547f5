//! One workload API server seen as many: a loopback HTTP proxy through
//! which each Cluster's kubeconfig sees only the Nodes labelled with its
//! name, as if every Cluster had a workload cluster of its own.
//!
//! A fleet of Clusters pointing at one workload server would otherwise each
//! watch every Node of the fleet, which no real fleet does and which makes
//! the operator's memory grow with the square of the fleet.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse as _, Response};
use axum::routing::any;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::config::Kubeconfig;

use crate::{ApiServer, Result};

/// The Node label saying which Cluster a Node belongs to.
pub const CLUSTER_LABEL: &str = "tests.capwasm.dev/cluster";

/// Requests larger than this are refused (Nodes and Secrets are far smaller).
const MAX_REQUEST: usize = 4 << 20;

/// The proxy; it stops when dropped.
pub struct ScopedWorkload {
    address: SocketAddr,
    /// The workload server's own kubeconfig, its server replaced per Cluster.
    kubeconfig: Kubeconfig,
    task: tokio::task::JoinHandle<()>,
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
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(io)?;
        let address = listener.local_addr().map_err(io)?;
        let app = Router::new()
            .route("/clusters/{cluster}/{*path}", any(forward))
            .with_state(workload.client()?);
        let task = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::warn!(%error, "the scoped workload proxy stopped");
            }
        });
        Ok(Self {
            address,
            kubeconfig: workload.kubeconfig().clone(),
            task,
        })
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
                entry.server = Some(format!("http://{}/clusters/{cluster}", self.address));
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

/// Sends the request on with the admin's credentials; a Node list or watch
/// gets the Cluster's label added to its selector.
async fn forward(
    State(client): State<Client>,
    Path((cluster, path)): Path<(String, String)>,
    request: Request,
) -> Response {
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
