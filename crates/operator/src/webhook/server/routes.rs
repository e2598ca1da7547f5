//! The webhook server's two routes, conversion and PlatformCluster
//! admission, and how each reads a request and sends its answer: the body
//! read within its length and time in a turn, the answer within the
//! request's time, sent in pieces that keep the turn. Apart from the
//! listener, which serves connections and knows nothing of reviews.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::Body as _;
use kube::core::admission::{AdmissionResponse, AdmissionReview};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::limits::{Limits, Refusal, refused};
use crate::api::PlatformCluster;
use crate::controllers::Metrics;
use crate::webhook::admission::{self, Admission};
use crate::webhook::bounds::{self, ParseError};
use crate::webhook::review::{Converter, review};

/// A response is sent in pieces this long, so that its turn is held until
/// all but the last piece has gone out.
const RESPONSE_PIECE: usize = 64 << 10;

/// What the routes answer with, and within what.
#[derive(Clone)]
struct Handlers {
    convert: Converter,
    admission: Admission,
    limits: Limits,
    turns: Arc<Semaphore>,
    metrics: Metrics,
}

/// The two routes, answering within `limits`; `metrics` count what they
/// refuse.
pub(super) fn router(
    convert: Converter,
    admission: Admission,
    limits: Limits,
    metrics: Metrics,
) -> Router {
    Router::new()
        .route(crate::api::WEBHOOK_PATH, post(handle))
        .route(admission::PATH, post(admit))
        .with_state(Handlers {
            convert,
            admission,
            limits,
            turns: Arc::new(Semaphore::new(limits.turns)),
            metrics,
        })
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
