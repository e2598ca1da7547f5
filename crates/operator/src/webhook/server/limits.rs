//! What a client can make the webhook server hold, each bounded, and the
//! refusal of a connection or request that passes a bound: its status, its
//! metric label, its log line. Apart because the listener and the routes
//! both refuse by them, and each bound reads best beside the reason for its
//! default and what passing it costs the client.

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::StatusCode;

use crate::controllers::Metrics;
use crate::webhook::bounds;

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

/// Why a connection or a request was refused before it was answered.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refusal {
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

    pub(super) fn status(&self) -> StatusCode {
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
pub(super) fn refused(metrics: &Metrics, refusal: &Refusal, peer: Option<SocketAddr>) {
    metrics.webhook_refused(refusal.metric_label());
    tracing::debug!(
        peer = ?peer,
        error = %crate::report::error_chain(refusal),
        "the webhook refused a connection or request"
    );
}
