//! Requests that got no complete response, by kind.

use core::fmt;

use super::DEFAULT_RETRY_SECONDS;
use crate::prelude::*;
use crate::types::ProviderError;

/// What kind of failure an [`HttpError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpErrorKind {
    /// The request is malformed (URL, method, headers); retrying will not
    /// help.
    InvalidRequest,
    /// The host refused the request: the destination is not in the
    /// ProviderModule's allowed hosts.
    Denied,
    /// Connecting, sending or receiving failed; likely transient.
    Transport,
    /// The response body exceeded [`Request::max_response_bytes`], or
    /// the host's cap on response bodies.
    ResponseTooLarge,
    /// The host's budget for outgoing requests is used up: requests per
    /// call, or requests in flight for the call or the whole provider
    /// (the ProviderModule's `http…` limits). Later calls get a fresh
    /// budget; retrying the object later helps, retrying now does not.
    LimitReached,
}

/// A request that got no complete response.
#[derive(Clone, Debug)]
pub struct HttpError {
    kind: HttpErrorKind,
    message: String,
}

impl HttpError {
    pub(crate) fn new(kind: HttpErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> HttpErrorKind {
        self.kind
    }

    /// What went wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl core::error::Error for HttpError {}

impl From<HttpError> for ProviderError {
    fn from(err: HttpError) -> Self {
        match err.kind {
            HttpErrorKind::InvalidRequest => ProviderError::terminal("InvalidRequest", err.message),
            HttpErrorKind::Denied => ProviderError::terminal("HttpRequestDenied", err.message),
            HttpErrorKind::Transport | HttpErrorKind::LimitReached => {
                ProviderError::retry_after(DEFAULT_RETRY_SECONDS, err.message)
            }
            HttpErrorKind::ResponseTooLarge => {
                ProviderError::terminal("ResponseTooLarge", err.message)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_error_maps_denied_to_terminal_and_transport_to_retry() {
        let denied: ProviderError = HttpError::new(HttpErrorKind::Denied, "no").into();
        assert!(matches!(denied, ProviderError::Terminal(e) if e.reason == "HttpRequestDenied"));
        let refused: ProviderError = HttpError::new(HttpErrorKind::Transport, "refused").into();
        assert!(matches!(refused, ProviderError::RetryAfter(_)));
    }
}
