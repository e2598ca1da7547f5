//! The simulated cloud's error answers: a status, a JSON body naming a
//! code and a message, and the header the status calls for; what each
//! refusal of the inventory and the control planes answers.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::api::ErrorBody;
use super::control_planes::ControlPlaneRefusal;
use super::inventory::Refusal;
use capwasm_runtime::report::error_chain;

/// How long a client is told to wait when the cloud is full: about as long
/// as the guest waits between looks at a pool anyway.
pub(crate) const FULL_RETRY_AFTER_SECONDS: u32 = 10;

/// An error response: a status, a JSON [`ErrorBody`], and a Retry-After or
/// WWW-Authenticate header where the status calls for one.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    pub(crate) headers: HeaderMap,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: String) -> Self {
        Self {
            status,
            code,
            message,
            headers: HeaderMap::new(),
        }
    }

    pub(crate) fn with_header(mut self, name: header::HeaderName, value: HeaderValue) -> Self {
        self.headers.insert(name, value);
        self
    }

    /// A malformed request, as an extractor saw it.
    pub(crate) fn rejected(status: StatusCode, message: String) -> Self {
        let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "RequestTooLarge"
        } else {
            "InvalidRequest"
        };
        Self::new(status, code, message)
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        Self::rejected(rejection.status(), rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        Self::rejected(rejection.status(), rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        Self::rejected(rejection.status(), rejection.body_text())
    }
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        let message = error_chain(&refusal);
        match refusal {
            Refusal::InvalidParameter { .. } => {
                Self::new(StatusCode::BAD_REQUEST, "InvalidParameter", message)
            }
            Refusal::BootstrapEncoding(_) => {
                Self::new(StatusCode::BAD_REQUEST, "InvalidBootstrapData", message)
            }
            Refusal::BootstrapTooLarge { .. } => {
                Self::new(StatusCode::BAD_REQUEST, "BootstrapDataTooLarge", message)
            }
            Refusal::TokenReused { .. } => Self::new(
                StatusCode::BAD_REQUEST,
                "IdempotentParameterMismatch",
                message,
            ),
            // Retryable: instances being terminated free room soon.
            Refusal::InstanceLimit { .. } => Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "InstanceLimitExceeded",
                message,
            )
            .with_header(
                header::RETRY_AFTER,
                HeaderValue::from(FULL_RETRY_AFTER_SECONDS),
            ),
        }
    }
}

impl From<ControlPlaneRefusal> for ApiError {
    fn from(refusal: ControlPlaneRefusal) -> Self {
        let message = error_chain(&refusal);
        match refusal {
            ControlPlaneRefusal::InvalidParameter { .. } => {
                Self::new(StatusCode::BAD_REQUEST, "InvalidParameter", message)
            }
            ControlPlaneRefusal::Downgrade { .. } => {
                Self::new(StatusCode::CONFLICT, "VersionDowngrade", message)
            }
            ControlPlaneRefusal::NameInUse { .. } => {
                Self::new(StatusCode::CONFLICT, "ControlPlaneNameInUse", message)
            }
            // Retryable as a full region is: deleted control planes free room.
            ControlPlaneRefusal::Limit { .. } => Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "ControlPlaneLimitExceeded",
                message,
            )
            .with_header(
                header::RETRY_AFTER,
                HeaderValue::from(FULL_RETRY_AFTER_SECONDS),
            ),
            ControlPlaneRefusal::NoPort(_) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "InsufficientCapacity",
                message,
            ),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            code: self.code.to_owned(),
            message: self.message,
        };
        (self.status, self.headers, Json(body)).into_response()
    }
}
