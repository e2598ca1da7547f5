//! The webhook's HTTPS server: rustls over the listener, each connection
//! served by hyper (HTTP/1.1) with an axum router of two routes: the
//! conversion webhook and the PlatformCluster admission webhook.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use kube::core::DynamicObject;
use kube::core::admission::AdmissionReview;

use super::Error;
use super::admission::{self, Admission};
use super::certs::ServingCert;
use super::review::{Converter, review};
use crate::api::PlatformCluster;

/// What the routes answer with.
#[derive(Clone)]
struct Handlers {
    convert: Converter,
    admission: Admission,
}

/// The most a ConversionReview may weigh: the API server sends one object
/// per request for writes and a page of them for lists.
const MAX_BODY: usize = 16 << 20;

/// A bound webhook server, not serving yet.
pub struct Server {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
}

impl Server {
    /// Listens on `bind` with `cert`.
    pub async fn bind(
        bind: SocketAddr,
        cert: &ServingCert,
        convert: Converter,
        admission: Admission,
    ) -> Result<Self, Error> {
        let tls = tls_config(cert)?;
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|e| Error::Bind(bind, e))?;
        let router = Router::new()
            .route(crate::api::WEBHOOK_PATH, post(handle))
            .route(admission::PATH, post(admit))
            .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
            .with_state(Handlers { convert, admission });
        Ok(Self {
            listener,
            acceptor: TlsAcceptor::from(Arc::new(tls)),
            router,
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
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, say: wait rather than spin.
                    tracing::warn!(%error, "the webhook cannot accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let acceptor = self.acceptor.clone();
            let service = hyper_util::service::TowerToHyperService::new(self.router.clone());
            tokio::spawn(async move {
                let stream = match acceptor.accept(stream).await {
                    Ok(stream) => stream,
                    Err(error) => {
                        tracing::debug!(%peer, %error, "webhook TLS handshake failed");
                        return;
                    }
                };
                let io = hyper_util::rt::TokioIo::new(stream);
                if let Err(error) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await
                {
                    tracing::debug!(%peer, %error, "webhook connection ended");
                }
            });
        }
    }
}

async fn handle(
    State(handlers): State<Handlers>,
    axum::Json(request): axum::Json<serde_json::Value>,
) -> axum::Json<serde_json::Value> {
    axum::Json(review(request, handlers.convert.as_ref()))
}

async fn admit(
    State(handlers): State<Handlers>,
    axum::Json(request): axum::Json<AdmissionReview<PlatformCluster>>,
) -> axum::Json<AdmissionReview<DynamicObject>> {
    axum::Json(handlers.admission.review(request).await)
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
