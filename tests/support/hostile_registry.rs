//! A registry that misbehaves on purpose, speaking just enough of the OCI
//! distribution API (`GET /v2/`, `HEAD`/`GET` of manifests and blobs, a
//! token service) for a pull to reach its misbehaviour: answers without
//! end, a declared gigabyte, or a byte at a time. Bodies are streamed, never
//! held, and every byte handed to the connection is counted, so a test can
//! say how much the client took before it hung up.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use axum::routing::{any, get};
use sha2::{Digest as _, Sha256};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::{Error, Result};

/// How a [`HostileRegistry`] misbehaves.
#[derive(Clone, Copy, Debug)]
pub enum Misbehaviour {
    /// Every manifest is endless (chunked, no length), its HEAD naming no
    /// digest so that a client must GET it.
    EndlessManifest,
    /// Every manifest declares a gigabyte (`Content-Length`) and streams it.
    GigabyteManifest,
    /// Every manifest GET is refused (404) with an endless body (its HEAD
    /// names no digest, so that a client must GET it).
    EndlessError,
    /// `/v2/` asks for a Bearer token from a service whose answer is endless.
    EndlessToken,
    /// Every manifest comes one byte per interval.
    TricklingManifest(Duration),
    /// Manifests are honest and quick; the one layer comes one byte per interval.
    TricklingBlob(Duration),
}

/// The size of each chunk of an endless body.
const CHUNK: usize = 64 << 10;
/// The size of the trickling layer, far more than a test waits for.
const LAYER_SIZE: i64 = 1 << 20;

/// A running hostile registry; stopped when dropped.
pub struct HostileRegistry {
    /// `127.0.0.1:<port>`.
    pub authority: String,
    tally: Arc<Tally>,
    open: watch::Receiver<usize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HostileRegistry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What was handed to connections, and how many bodies are still being sent.
struct Tally {
    sent: AtomicU64,
    open: watch::Sender<usize>,
}

#[derive(Clone)]
struct Served {
    misbehaviour: Misbehaviour,
    authority: String,
    tally: Arc<Tally>,
}

/// Counts one body as open while it lives.
struct Open(Arc<Tally>);

impl Open {
    fn new(tally: &Arc<Tally>) -> Self {
        tally.open.send_modify(|n| *n += 1);
        Self(tally.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.send_modify(|n| *n -= 1);
    }
}

impl HostileRegistry {
    /// Serves `misbehaviour` on a loopback port.
    ///
    /// # Errors
    ///
    /// If no loopback port can be bound.
    pub async fn start(misbehaviour: Misbehaviour) -> Result<Self> {
        let io = |source| Error::Io {
            path: "127.0.0.1:0".into(),
            source,
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(io)?;
        let authority = listener.local_addr().map_err(io)?.to_string();
        let (open, open_rx) = watch::channel(0);
        let tally = Arc::new(Tally {
            sent: AtomicU64::new(0),
            open,
        });
        let served = Served {
            misbehaviour,
            authority: authority.clone(),
            tally: tally.clone(),
        };
        let app = Router::new()
            .route("/v2/", get(version))
            .route("/v2/{*path}", any(distribution))
            .route("/token", get(token))
            .with_state(served);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            authority,
            tally,
            open: open_rx,
            task,
        })
    }

    /// `127.0.0.1:<port>/<repository>:<tag>`.
    pub fn image(&self, repository: &str, tag: &str) -> String {
        format!("{}/{repository}:{tag}", self.authority)
    }

    /// The bytes handed to connections so far, once every body being sent
    /// has ended (its client hung up), or `None` if one is still going
    /// after `within`.
    pub async fn sent_once_hung_up(&self, within: Duration) -> Option<u64> {
        let mut open = self.open.clone();
        tokio::time::timeout(within, open.wait_for(|n| *n == 0))
            .await
            .ok()?
            .ok()?;
        Some(self.tally.sent.load(Ordering::Relaxed))
    }
}

async fn version(State(served): State<Served>) -> Response {
    match served.misbehaviour {
        Misbehaviour::EndlessToken => (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                format!(
                    r#"Bearer realm="http://{}/token",service="hostile""#,
                    served.authority
                ),
            )],
        )
            .into_response(),
        _ => "{}".into_response(),
    }
}

async fn token(State(served): State<Served>) -> Response {
    Response::new(endless(&served.tally, None))
}

/// `HEAD`/`GET` of `<name>/manifests/<reference>` and `<name>/blobs/<digest>`.
async fn distribution(
    State(served): State<Served>,
    method: Method,
    Path(path): Path<String>,
) -> Response {
    let manifest = path.contains("/manifests/");
    if !manifest && !path.contains("/blobs/") {
        return StatusCode::NOT_FOUND.into_response();
    }
    let head = method == Method::HEAD;
    match served.misbehaviour {
        Misbehaviour::EndlessManifest | Misbehaviour::EndlessToken if manifest => {
            if head {
                return StatusCode::OK.into_response();
            }
            Response::new(endless(&served.tally, None))
        }
        Misbehaviour::GigabyteManifest if manifest => {
            const GIGABYTE: u64 = 1 << 30;
            if head {
                return StatusCode::OK.into_response();
            }
            let mut response = Response::new(endless(&served.tally, Some(GIGABYTE)));
            response
                .headers_mut()
                .insert(header::CONTENT_LENGTH, GIGABYTE.into());
            response
        }
        Misbehaviour::EndlessError if manifest => {
            if head {
                return StatusCode::OK.into_response();
            }
            let mut response = Response::new(endless(&served.tally, None));
            *response.status_mut() = StatusCode::NOT_FOUND;
            response
        }
        Misbehaviour::TricklingManifest(interval) if manifest => {
            if head {
                return StatusCode::OK.into_response();
            }
            Response::new(trickle(&served.tally, interval))
        }
        Misbehaviour::TricklingBlob(interval) => {
            let (manifest_bytes, digest) = one_layer_manifest();
            if !manifest {
                return Response::new(trickle(&served.tally, interval));
            }
            let mut headers = HeaderMap::new();
            headers.insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/vnd.oci.image.manifest.v1+json"),
            );
            if let Ok(digest) = header::HeaderValue::from_str(&digest) {
                headers.insert("docker-content-digest", digest);
            }
            if head {
                (headers, Body::empty()).into_response()
            } else {
                (headers, manifest_bytes).into_response()
            }
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

/// An image manifest whose one layer is [`LAYER_SIZE`] bytes, and its digest.
fn one_layer_manifest() -> (Vec<u8>, String) {
    let layer = format!(
        "sha256:{}",
        hex::encode(Sha256::digest(b"never sent whole"))
    );
    let config = format!("sha256:{}", hex::encode(Sha256::digest(b"{}")));
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": config, "size": 2},
        "layers": [{"mediaType": "application/wasm", "digest": layer, "size": LAYER_SIZE}],
    });
    let bytes = serde_json::to_vec(&manifest).unwrap_or_default();
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
    (bytes, digest)
}

/// Spaces in [`CHUNK`]s, up to `total` bytes or without end, each counted
/// as it is handed to the connection.
fn endless(tally: &Arc<Tally>, total: Option<u64>) -> Body {
    let chunk = Bytes::from(vec![b' '; CHUNK]);
    let stream = futures::stream::unfold((Open::new(tally), 0_u64), move |(open, sent)| {
        let chunk = chunk.clone();
        async move {
            if total.is_some_and(|total| sent >= total) {
                return None;
            }
            let n = chunk.len() as u64;
            open.0.sent.fetch_add(n, Ordering::Relaxed);
            Some((Ok::<_, Infallible>(chunk), (open, sent + n)))
        }
    });
    Body::from_stream(stream)
}

/// One space at once, then one per `interval`, without end.
fn trickle(tally: &Arc<Tally>, interval: Duration) -> Body {
    let stream =
        futures::stream::unfold((Open::new(tally), true), move |(open, first)| async move {
            if !first {
                tokio::time::sleep(interval).await;
            }
            open.0.sent.fetch_add(1, Ordering::Relaxed);
            Some((Ok::<_, Infallible>(Bytes::from_static(b" ")), (open, false)))
        });
    Body::from_stream(stream)
}
