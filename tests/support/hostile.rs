//! A hostile workload API server: whoever writes a Cluster's kubeconfig
//! Secret can point the operator at a server of their own, and this one
//! answers the Node list with a body of a chosen size, streamed as it is
//! sent (never held in memory), counting what it sent and whether the client
//! hung up before the end. Told to behave, it passes every request on to a
//! real API server instead, as if the same server had come to its senses.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use tokio::net::TcpListener;

use crate::{ApiServer, Result};

/// Requests larger than this are refused (Node patches are far smaller).
const MAX_REQUEST: usize = 4 << 20;

/// The JSON of one Node of the hostile list, with its comma: a 64 KiB
/// annotation keeps the count of Nodes and values low, so the body's size
/// is what it is about.
const NODE_BYTES: usize = 64 << 10;

/// The server; it stops when dropped.
pub struct HostileWorkload {
    address: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

struct Shared {
    /// Bytes of the Node list body.
    body: u64,
    /// Pass requests on to this server's client instead.
    sane: Mutex<Option<Client>>,
    node_lists: AtomicUsize,
    sent: AtomicU64,
    largest: AtomicU64,
    hang_ups: AtomicUsize,
}

impl HostileWorkload {
    /// Serves plain HTTP on a loopback port, answering each Node list with
    /// `body` bytes of NodeList.
    ///
    /// # Errors
    ///
    /// If no loopback port can be bound.
    pub async fn start(body: u64) -> Result<Self> {
        let io = |source| crate::Error::Io {
            path: "127.0.0.1:0".into(),
            source,
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(io)?;
        let address = listener.local_addr().map_err(io)?;
        let shared = Arc::new(Shared {
            body,
            sane: Mutex::new(None),
            node_lists: AtomicUsize::new(0),
            sent: AtomicU64::new(0),
            largest: AtomicU64::new(0),
            hang_ups: AtomicUsize::new(0),
        });
        let app = Router::new().fallback(answer).with_state(shared.clone());
        let task = tokio::spawn(async move {
            // It serves until dropped; an accept error ends it.
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            address,
            shared,
            task,
        })
    }

    /// Cluster API's `<cluster>-kubeconfig` Secret for this server: plain
    /// HTTP, no credentials.
    ///
    /// # Errors
    ///
    /// Never in practice.
    pub fn kubeconfig_secret(&self, namespace: &str, cluster: &str) -> Result<Secret> {
        let value = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hostile\n  cluster:\n    \
             server: http://{}\ncontexts:\n- name: hostile\n  context:\n    cluster: hostile\n    \
             user: hostile\ncurrent-context: hostile\nusers:\n- name: hostile\n  user: {{}}\n",
            self.address
        );
        Ok(crate::apiserver::cluster_secret(
            namespace,
            &format!("{cluster}-kubeconfig"),
            cluster,
            [("value", value)],
        ))
    }

    /// From now on, passes every request on to `server`, as its admin.
    ///
    /// # Errors
    ///
    /// If no client for `server` can be built.
    pub fn behave_as(&self, server: &ApiServer) -> Result<()> {
        let client = server.client()?;
        *self
            .shared
            .sane
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(client);
        Ok(())
    }

    /// Node lists answered with the hostile body so far.
    pub fn node_lists(&self) -> usize {
        self.shared.node_lists.load(Ordering::Relaxed)
    }

    /// Bytes of hostile bodies handed to the connection so far, all lists.
    pub fn bytes_sent(&self) -> u64 {
        self.shared.sent.load(Ordering::Relaxed)
    }

    /// The most bytes one hostile body got to send.
    pub fn largest_response(&self) -> u64 {
        self.shared.largest.load(Ordering::Relaxed)
    }

    /// Hostile bodies whose client went away before their end.
    pub fn hang_ups(&self) -> usize {
        self.shared.hang_ups.load(Ordering::Relaxed)
    }
}

impl Drop for HostileWorkload {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let sane = shared
        .sane
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    if let Some(client) = sane {
        return forward(&client, request).await;
    }
    if request.uri().path() != "/api/v1/nodes" {
        return not_found();
    }
    shared.node_lists.fetch_add(1, Ordering::Relaxed);
    json(Body::from_stream(hostile_list(shared)))
}

/// Sends `request` on with `client`'s credentials, streaming the answer back.
async fn forward(client: &Client, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_REQUEST).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let uri = parts
        .uri
        .path_and_query()
        .map_or("/", http::uri::PathAndQuery::as_str);
    let mut outgoing = http::Request::builder().method(parts.method).uri(uri);
    for name in [header::CONTENT_TYPE, header::ACCEPT] {
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

fn json(body: Body) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "application/json")],
        r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#,
    )
        .into_response()
}

/// A NodeList of `shared.body` bytes or a little more, one Node a chunk,
/// every chunk the same shared bytes.
fn hostile_list(
    shared: Arc<Shared>,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send {
    let head = Bytes::from_static(
        br#"{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":["#,
    );
    let node = {
        let open = r#"{"metadata":{"name":"hostile","annotations":{"padding":""#;
        let close = r#""}}},"#;
        let padding = "x".repeat(NODE_BYTES - open.len() - close.len());
        Bytes::from(format!("{open}{padding}{close}"))
    };
    let tail = Bytes::from_static(b"{\"metadata\":{\"name\":\"last\"}}]}\n");
    let tally = Tally {
        total: shared.body,
        shared,
        sent: 0,
        done: false,
    };
    futures::stream::unfold(tally, move |mut tally| {
        let chunk = if tally.done {
            None
        } else if tally.sent == 0 {
            Some(head.clone())
        } else if tally.sent + (tail.len() as u64) < tally.total {
            Some(node.clone())
        } else {
            tally.done = true;
            Some(tail.clone())
        };
        async move {
            let chunk = chunk?;
            tally.count(chunk.len() as u64);
            Some((Ok(chunk), tally))
        }
    })
}

/// What one hostile body sent; recorded when the connection drops it.
struct Tally {
    shared: Arc<Shared>,
    total: u64,
    sent: u64,
    done: bool,
}

impl Tally {
    fn count(&mut self, bytes: u64) {
        self.sent += bytes;
        self.shared.sent.fetch_add(bytes, Ordering::Relaxed);
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        self.shared.largest.fetch_max(self.sent, Ordering::Relaxed);
        if !self.done {
            self.shared.hang_ups.fetch_add(1, Ordering::Relaxed);
        }
    }
}
