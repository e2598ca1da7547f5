//! The webhook's HTTPS server: rustls over the listener, each connection
//! served by hyper (HTTP/1.1) with an axum router of two routes: the
//! conversion webhook and the PlatformCluster admission webhook.
//!
//! Whatever a client can make the server hold is bounded ([`Limits`]): the
//! connections, how long each may take to finish its TLS handshake, to send
//! a request's headers or body, or to read a response, the body's length,
//! and the requests answered at once (a turn, held until the response is
//! sent: it holds the body, the parsed review and the response).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::Body as _;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

use kube::core::admission::{AdmissionResponse, AdmissionReview};

use super::Error;
use super::admission::{self, Admission};
use super::bounds::{self, ParseError};
use super::certs::ServingCert;
use super::review::{Converter, review};
use crate::api::PlatformCluster;
use crate::controllers::Metrics;

/// What a client can make the server hold, each bounded.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections served at once; one more is closed as soon as it is
    /// accepted.
    pub connections: usize,
    /// Requests answered at once; more wait for a turn.
    pub turns: usize,
    /// The longest request body, in bytes.
    pub body: usize,
    /// How long a connection may take to finish its TLS handshake.
    pub handshake: Duration,
    /// How long a connection may take to send a request's headers. hyper
    /// counts from the end of the previous response, so this is also how
    /// long a kept-alive connection may stay idle.
    pub header_read: Duration,
    /// How long a request's body may take to arrive.
    pub body_read: Duration,
    /// How long a write may wait for the client to read.
    pub write: Duration,
    /// How long a request may take, its wait for a turn included.
    pub request: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            // The API server keeps a few connections per replica; 256 hold at most ~20 MiB of buffers.
            connections: 256,
            // A turn holds up to ~18 MiB (body, an object's trees, response: benches/webhook_parse.rs); a conversion takes ms.
            turns: 2,
            // The API server's own limit on request bodies: it sends nothing longer.
            body: bounds::MAX_BODY,
            // The API server's handshake takes milliseconds; 10 s frees the slot of a client that never speaks.
            handshake: Duration::from_secs(10),
            // Headers come at once; 30 s keeps a connection for the API server's next call, and no longer.
            header_read: Duration::from_secs(30),
            // 3 MiB cross a cluster network in milliseconds; 10 s bounds how long a slow sender holds a turn.
            body_read: Duration::from_secs(10),
            // The API server reads a response as it comes; 10 s bounds how long one that stops reading holds a turn.
            write: Duration::from_secs(10),
            // The API server waits 30 s at most (conversion; admission 15 s): a later answer is read by no one.
            request: Duration::from_secs(30),
        }
    }
}

/// hyper's read buffer per connection (400 KiB by default): the API
/// server's request headers take about 1 KiB.
const READ_BUFFER: usize = 64 << 10;

/// A response is sent in pieces this long, so that its turn is held until
/// all but the last piece has gone out.
const RESPONSE_PIECE: usize = 64 << 10;

/// Why a connection or a request was refused before it was answered.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    /// As many connections as allowed are open.
    #[error("{0} connections are open already")]
    Connections(usize),
    /// The TLS handshake did not finish in time.
    #[error("no TLS handshake within {0:?}")]
    Handshake(Duration),
    /// The body is longer than allowed.
    #[error("the request body is longer than {0} bytes, the API server's own limit")]
    BodyTooLarge(usize),
    /// The body did not arrive in time.
    #[error("the request body did not arrive within {0:?}")]
    BodyTimeout(Duration),
    /// The body could not be read.
    #[error("cannot read the request body")]
    Body(#[source] axum::Error),
    /// The review holds more values than allowed.
    #[error("the review holds more than {} JSON values", bounds::MAX_VALUES)]
    TooManyValues,
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

impl Refusal {
    /// The `reason` label of `capwasm_webhook_refused`.
    fn metric_label(&self) -> &'static str {
        match self {
            Self::Connections(_) => "connections",
            Self::Handshake(_) => "handshake_timeout",
            Self::BodyTooLarge(_) => "body_too_large",
            Self::BodyTimeout(_) => "body_timeout",
            Self::Body(_) => "body_error",
            Self::TooManyValues => "too_many_values",
            Self::Timeout(_) => "timeout",
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            Self::BodyTooLarge(_) | Self::TooManyValues => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::Body(_) => StatusCode::BAD_REQUEST,
            Self::Connections(_) | Self::Handshake(_) | Self::Timeout(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
        }
    }
}

/// Counts and logs (at debug: a flood must not flood the log) a refusal.
fn refused(metrics: &Metrics, refusal: &Refusal, peer: Option<SocketAddr>) {
    metrics.webhook_refused(refusal.metric_label());
    tracing::debug!(
        peer = ?peer,
        error = %crate::report::error_chain(refusal),
        "the webhook refused a connection or request"
    );
}

/// What the routes answer with, and within what.
#[derive(Clone)]
struct Handlers {
    convert: Converter,
    admission: Admission,
    limits: Limits,
    turns: Arc<Semaphore>,
    metrics: Metrics,
}

/// A bound webhook server, not serving yet.
pub struct Server {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
    limits: Limits,
    metrics: Metrics,
}

impl Server {
    /// Listens on `bind` with `cert`, within `limits`; `metrics` count what
    /// it refuses.
    pub async fn bind(
        bind: SocketAddr,
        cert: &ServingCert,
        convert: Converter,
        admission: Admission,
        limits: Limits,
        metrics: Metrics,
    ) -> Result<Self, Error> {
        let tls = tls_config(cert)?;
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|e| Error::Bind(bind, e))?;
        let router = Router::new()
            .route(crate::api::WEBHOOK_PATH, post(handle))
            .route(admission::PATH, post(admit))
            .with_state(Handlers {
                convert,
                admission,
                limits,
                turns: Arc::new(Semaphore::new(limits.turns)),
                metrics: metrics.clone(),
            });
        Ok(Self {
            listener,
            acceptor: TlsAcceptor::from(Arc::new(tls)),
            router,
            limits,
            metrics,
        })
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// Serves connections until the task is dropped; a connection that
    /// fails its handshake or its request ends alone.
    pub async fn serve(self) {
        let connections = Arc::new(Semaphore::new(self.limits.connections));
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, say: wait rather than spin.
                    tracing::warn!(%error, "the webhook cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            // Closed at once rather than left waiting: a flood then never
            // queues ahead of the API server's next connection.
            let Ok(slot) = Arc::clone(&connections).try_acquire_owned() else {
                drop(stream);
                let refusal = Refusal::Connections(self.limits.connections);
                refused(&self.metrics, &refusal, Some(peer));
                continue;
            };
            let acceptor = self.acceptor.clone();
            let service = hyper_util::service::TowerToHyperService::new(self.router.clone());
            let (limits, metrics) = (self.limits, self.metrics.clone());
            tokio::spawn(async move {
                let _slot = slot;
                let stream =
                    match tokio::time::timeout(limits.handshake, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(error)) => {
                            tracing::debug!(%peer, %error, "webhook TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            refused(&metrics, &Refusal::Handshake(limits.handshake), Some(peer));
                            return;
                        }
                    };
                let io = hyper_util::rt::TokioIo::new(WriteDeadline::new(stream, limits.write));
                if let Err(error) = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(limits.header_read)
                    .max_buf_size(READ_BUFFER)
                    .serve_connection(io, service)
                    .await
                {
                    tracing::debug!(%peer, %error, "webhook connection ended");
                }
            });
        }
    }
}

async fn handle(State(handlers): State<Handlers>, request: Request) -> Response {
    let answer = async {
        let (body, turn) = handlers.read(request).await?;
        let response = review(&body, handlers.convert.as_ref());
        drop(body);
        Ok(json(response, turn))
    };
    handlers.within_time(answer).await
}

async fn admit(State(handlers): State<Handlers>, request: Request) -> Response {
    let answer = async {
        let (body, turn) = handlers.read(request).await?;
        let review = match bounds::parse::<AdmissionReview<PlatformCluster>>(&body) {
            Ok(review) => review,
            Err(ParseError::TooManyValues) => return Err(Refusal::TooManyValues),
            Err(error) => {
                let reason = format!(
                    "not an AdmissionReview: {}",
                    crate::report::error_chain(&error)
                );
                let invalid = AdmissionResponse::invalid(reason).into_review();
                return Ok(json(serde_json::to_vec(&invalid).unwrap_or_default(), turn));
            }
        };
        drop(body);
        let judged = handlers.admission.review(review).await;
        Ok(json(serde_json::to_vec(&judged).unwrap_or_default(), turn))
    };
    // A judgement awaits API calls and a provider's: its future is large.
    handlers.within_time(Box::pin(answer)).await
}

impl Handlers {
    /// `request`'s body, read in a turn (returned with it) within the limits.
    async fn read(&self, request: Request) -> Result<(Vec<u8>, OwnedSemaphorePermit), Refusal> {
        let body = request.into_body();
        let limit = self.limits.body;
        // A longer Content-Length is refused before a byte is read.
        if body.size_hint().lower() > limit as u64 {
            return Err(Refusal::BodyTooLarge(limit));
        }
        let turn = Arc::clone(&self.turns)
            .acquire_owned()
            .await
            .map_err(|_| Refusal::Timeout(self.limits.request))?;
        let read = tokio::time::timeout(self.limits.body_read, read_body(body, limit));
        let body = read
            .await
            .map_err(|_| Refusal::BodyTimeout(self.limits.body_read))??;
        Ok((body, turn))
    }

    /// The answer, or the refusal, within [`Limits::request`].
    async fn within_time(
        &self,
        answer: impl Future<Output = Result<Response, Refusal>>,
    ) -> Response {
        let refusal = match tokio::time::timeout(self.limits.request, answer).await {
            Ok(Ok(response)) => return response,
            Ok(Err(refusal)) => refusal,
            Err(_) => Refusal::Timeout(self.limits.request),
        };
        refused(&self.metrics, &refusal, None);
        (refusal.status(), crate::report::error_chain(&refusal)).into_response()
    }
}

/// The body, refused as soon as it is longer than `limit`: never more than
/// `limit` bytes are kept.
async fn read_body(mut body: Body, limit: usize) -> Result<Vec<u8>, Refusal> {
    let announced = usize::try_from(body.size_hint().lower()).unwrap_or(limit);
    let mut bytes = Vec::with_capacity(announced.min(limit));
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(Refusal::Body)?.into_data() else {
            continue;
        };
        if bytes.len() + data.len() > limit {
            return Err(Refusal::BodyTooLarge(limit));
        }
        bytes.extend_from_slice(&data);
    }
    Ok(bytes)
}

/// A JSON response sent in pieces, holding `turn` until the last piece is
/// taken: a client that reads slowly keeps its turn (up to
/// [`Limits::write`]) rather than leaving its response behind in memory.
fn json(body: Vec<u8>, turn: OwnedSemaphorePermit) -> Response {
    let pieces =
        futures::stream::unfold((Bytes::from(body), turn), |(mut rest, turn)| async move {
            if rest.is_empty() {
                return None;
            }
            let piece = rest.split_to(rest.len().min(RESPONSE_PIECE));
            Some((Ok::<_, Infallible>(piece), (rest, turn)))
        });
    (
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(pieces),
    )
        .into_response()
}

/// A stream whose writes fail once one has waited `limit` for the peer to
/// read (hyper has no write timeout of its own).
struct WriteDeadline<S> {
    inner: S,
    limit: Duration,
    waiting: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteDeadline<S> {
    fn new(inner: S, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            waiting: None,
        }
    }

    /// `polled` as it is, or a timeout once writes have waited too long.
    fn deadline<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.waiting = None;
            return polled;
        }
        let limit = self.limit;
        let waiting = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match waiting.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::ErrorKind::TimedOut.into())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.deadline(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.deadline(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.deadline(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.deadline(cx, polled)
    }
}

fn tls_config(cert: &ServingCert) -> Result<ServerConfig, Error> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(cert.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| Error::Tls(rustls::Error::General(e.to_string())))?;
    let key = PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes())
        .map_err(|e| Error::Tls(rustls::Error::General(e.to_string())))?;
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(Error::Tls)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(Error::Tls)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
