//! The HTTP stack of a workload cluster's client: kube's own layers over a
//! connection that speaks HTTP/2 when the server offers it, as client-go
//! does. Over HTTP/1.1 each request in flight needs a connection of its
//! own beside the Node watch's; over HTTP/2 they share one. Every response
//! body is bounded ([`super::bounded`]): the server is the tenant's.

use std::time::Duration;

use http::{Request, Response};
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder, ConfigExt as _};
use kube::{Client, Config};
use tower::BoxError;
use tower::ServiceBuilder;
use tower::retry::{Policy, RetryLayer};

use super::bounded::BoundedLayer;

/// How long an unused connection is kept: longer than the Node watch's
/// restarts are apart, so a cluster keeps its one connection.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// A client for `config`, negotiating HTTP/2 or HTTP/1.1 by ALPN.
pub(super) fn client(config: Config) -> Result<Client, kube::Error> {
    if config.proxy_url.is_some() {
        // kube's own stack tunnels through proxies (HTTP/1.1 only).
        return Ok(ClientBuilder::try_from(config)?
            .with_layer(&BoundedLayer::default())
            .build());
    }
    let mut tls = config.rustls_client_config()?;
    // Connections live for hours: resuming a session would save one
    // handshake per reconnect at the cost of a session cache per cluster.
    tls.resumption = rustls::client::Resumption::disabled();
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    let mut https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = rustls::pki_types::ServerName::try_from(name.clone()).map_err(|source| {
            kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(source))
        })?;
        https = https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let https = https.enable_http1().enable_http2().wrap_connector(tcp);
    let mut connector = TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE)
        .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(NotEvictions(RetryPolicy::server_retry()))),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .layer(BoundedLayer::default())
        .map_err(tower::BoxError::from)
        .service(http);
    Ok(ClientBuilder::new(service, config.default_namespace).build())
}

/// kube's retry of 429, 503 and 504, but not of evictions: an eviction's
/// 429 is a PodDisruptionBudget's refusal, which the drain looks at again
/// on its own time, not a server asking to be called again in a moment.
#[derive(Clone)]
struct NotEvictions(RetryPolicy);

/// Whether `request` is an eviction (kube marks each request with its verb).
fn is_eviction(request: &Request<Body>) -> bool {
    request.extensions().get::<&'static str>() == Some(&"evict")
}

impl<Res> Policy<Request<Body>, Response<Res>, BoxError> for NotEvictions {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        request: &mut Request<Body>,
        result: &mut Result<Response<Res>, BoxError>,
    ) -> Option<Self::Future> {
        if is_eviction(request) {
            return None;
        }
        <RetryPolicy as Policy<Request<Body>, Response<Res>, BoxError>>::retry(
            &mut self.0,
            request,
            result,
        )
    }

    fn clone_request(&mut self, request: &Request<Body>) -> Option<Request<Body>> {
        if is_eviction(request) {
            return None;
        }
        <RetryPolicy as Policy<Request<Body>, Response<Res>, BoxError>>::clone_request(
            &mut self.0,
            request,
        )
    }
}
