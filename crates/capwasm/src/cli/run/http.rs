//! `/metrics`, `/healthz` and `/readyz`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;

use crate::readiness::Readiness;

/// `/healthz` answers as soon as the server does (liveness stays cheap);
/// `/readyz` once every readiness check holds: the webhook serving, on
/// every replica, and the caches filled, on the one reconciling.
pub(super) fn router(registry: Arc<Registry>, readiness: Readiness) -> Router {
    Router::new()
        .route("/metrics", get(metrics).with_state(registry))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz).with_state(readiness))
}

async fn readyz(State(readiness): State<Readiness>) -> impl IntoResponse {
    let (ready, text) = readiness.report();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, [(header::CONTENT_TYPE, "text/plain")], text)
}

async fn metrics(State(registry): State<Arc<Registry>>) -> impl IntoResponse {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        ),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain")],
            "cannot encode the metrics".to_owned(),
        ),
    }
}
