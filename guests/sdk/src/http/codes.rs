//! `wasi:http` error codes as [`HttpError`]s: their kind and their words.

use super::{HttpError, HttpErrorKind, Request};
use crate::bindings::infrastructure::wasi::http::types::{ErrorCode, http_error_code};
use crate::bindings::infrastructure::wasi::io::streams::StreamError;
use crate::prelude::*;

/// The error `request` failed with, as the host coded it.
pub(super) fn from_code(request: &Request, code: &ErrorCode) -> HttpError {
    request.failure(kind_of(code), &describe(code))
}

/// The kind of failure `code` is.
fn kind_of(code: &ErrorCode) -> HttpErrorKind {
    match code {
        ErrorCode::HttpRequestDenied | ErrorCode::DestinationIpProhibited => HttpErrorKind::Denied,
        ErrorCode::HttpRequestMethodInvalid
        | ErrorCode::HttpRequestUriInvalid
        | ErrorCode::HttpRequestUriTooLong
        | ErrorCode::HttpRequestHeaderSectionSize(_)
        | ErrorCode::HttpRequestHeaderSize(_)
        | ErrorCode::HttpRequestBodySize(_)
        | ErrorCode::HttpRequestLengthRequired
        | ErrorCode::ConfigurationError => HttpErrorKind::InvalidRequest,
        ErrorCode::HttpResponseBodySize(_) => HttpErrorKind::ResponseTooLarge,
        ErrorCode::ConnectionLimitReached => HttpErrorKind::LimitReached,
        _ => HttpErrorKind::Transport,
    }
}

/// A failed stream's kind, by the code the host attached if any, and what
/// it says.
pub(super) fn describe_stream(err: &StreamError) -> (HttpErrorKind, String) {
    match err {
        StreamError::Closed => (HttpErrorKind::Transport, "stream closed".to_owned()),
        StreamError::LastOperationFailed(e) => match http_error_code(e) {
            Some(code) => (kind_of(&code), describe(&code)),
            None => (HttpErrorKind::Transport, e.to_debug_string()),
        },
    }
}

/// What `code` means, in words.
pub(super) fn describe(code: &ErrorCode) -> String {
    match code {
        ErrorCode::HttpRequestDenied => {
            "the host denied the request (destination not allowed for this provider)".to_owned()
        }
        ErrorCode::DestinationIpProhibited => "the destination IP is prohibited".to_owned(),
        ErrorCode::ConnectionRefused => "connection refused".to_owned(),
        ErrorCode::ConnectionTimeout => "connection timed out".to_owned(),
        ErrorCode::ConnectionTerminated => "connection terminated".to_owned(),
        ErrorCode::DnsTimeout => "DNS lookup timed out".to_owned(),
        ErrorCode::DnsError(payload) => format!(
            "DNS lookup failed ({})",
            payload.rcode.as_deref().unwrap_or("no rcode")
        ),
        ErrorCode::DestinationNotFound => "destination not found".to_owned(),
        ErrorCode::DestinationUnavailable => "destination unavailable".to_owned(),
        ErrorCode::HttpResponseTimeout => "response timed out".to_owned(),
        ErrorCode::ConnectionReadTimeout => {
            "no answer in time (the connection's read timed out)".to_owned()
        }
        ErrorCode::ConnectionWriteTimeout => {
            "the request could not be sent in time (the connection's write timed out)".to_owned()
        }
        ErrorCode::ConnectionLimitReached => {
            "the host's budget for outgoing requests is used up (requests per call, or in flight)"
                .to_owned()
        }
        ErrorCode::InternalError(Some(message)) => format!("internal error: {message}"),
        other => format!("{other:?}"),
    }
}
