//! The webhook's HTTPS server: rustls over the listener, each connection
//! served by hyper (HTTP/1.1) with an axum router of two routes: the
//! conversion webhook and the PlatformCluster admission webhook.
//!
//! Whatever a client can make the server hold is bounded ([`Limits`]): the
//! connections, how long each may take to finish its TLS handshake, to send
//! a request's headers or body, or to read a response, the body's length,
//! and the requests answered at once (a turn, held until the response is
//! sent: it holds the body, the parsed review and the response).
//!
//! The certificate is taken per handshake from a [`CertResolver`], which
//! the webhook replaces when its Secret is renewed.
//!
//! This file holds the listener, the TLS and how each connection is served;
//! the certificate presented in `resolver`, the bounds and the refusals of what passes them are in `limits`, the two
//! routes and how they read a request and send an answer in `routes`, and
//! the write timeout hyper lacks in `write_deadline`.

mod limits;
mod resolver;
mod routes;
mod write_deadline;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use super::Error;
use super::admission::Admission;
use super::review::Converter;
use crate::controllers::Metrics;
use limits::{Refusal, refused};
use write_deadline::WriteDeadline;

pub use limits::Limits;
pub use resolver::CertResolver;

/// hyper's read buffer per connection (400 KiB by default): the API
/// server's request headers take about 1 KiB.
const READ_BUFFER: usize = 64 << 10;

/// A bound webhook server, not serving yet.
pub struct Server {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
    limits: Limits,
    metrics: Metrics,
}

impl Server {
    /// Listens on `bind`, presenting what `certs` holds at each handshake,
    /// within `limits`; `metrics` count what it refuses.
    pub async fn bind(
        bind: SocketAddr,
        certs: Arc<CertResolver>,
        convert: Converter,
        admission: Admission,
        limits: Limits,
        metrics: Metrics,
    ) -> Result<Self, Error> {
        let tls = CertResolver::config(certs)?;
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|e| Error::Bind(bind, e))?;
        let router = routes::router(convert, admission, limits, metrics.clone());
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
