//! A response with its whole body, and what its status means for a provider.

use serde::de::DeserializeOwned;

use super::{DEFAULT_RETRY_SECONDS, Method};
use crate::prelude::*;
use crate::types::ProviderError;

/// Upper bound for a server's `Retry-After`, so a bad header cannot park
/// an object for days.
const MAX_RETRY_SECONDS: u32 = 3600;
/// How much of an error response's body goes into an error message.
const ERROR_BODY_SNIPPET: usize = 512;

/// A response with its whole body.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, names in lower case.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
    method: Method,
    url: String,
}

impl Response {
    pub(super) fn new(
        status: u16,
        headers: Vec<(String, Vec<u8>)>,
        body: Vec<u8>,
        method: Method,
        url: String,
    ) -> Self {
        Self {
            status,
            headers,
            body,
            method,
            url,
        }
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// Decodes the body as JSON. A body that does not decode is a terminal
    /// error: the server does not speak the API the provider expects.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, ProviderError> {
        serde_json::from_slice(&self.body).map_err(|err| {
            ProviderError::terminal(
                "InvalidResponse",
                format!(
                    "{} {} returned a body that does not decode: {err}",
                    self.method.as_str(),
                    self.url
                ),
            )
        })
    }

    /// Passes 2xx responses through and turns any other into
    /// [`Response::status_error`].
    pub fn error_for_status(self) -> Result<Self, ProviderError> {
        if self.is_success() {
            Ok(self)
        } else {
            Err(self.status_error())
        }
    }

    /// The error a non-2xx status stands for: retry-after for 408, 409,
    /// 425, 429 and 5xx (honouring a `Retry-After` in seconds), terminal for
    /// anything else.
    pub fn status_error(&self) -> ProviderError {
        let snippet = String::from_utf8_lossy(
            self.body
                .get(..ERROR_BODY_SNIPPET)
                .unwrap_or(self.body.as_slice()),
        );
        let message = format!(
            "{} {} returned {}: {}",
            self.method.as_str(),
            self.url,
            self.status,
            snippet.trim()
        );
        match self.status {
            408 | 409 | 425 | 429 | 500..=599 => {
                ProviderError::retry_after(self.retry_after_seconds(), message)
            }
            401 => ProviderError::terminal("Unauthorized", message),
            403 => ProviderError::terminal("Forbidden", message),
            404 => ProviderError::terminal("NotFound", message),
            400..=499 => ProviderError::terminal("RequestRejected", message),
            _ => ProviderError::terminal("UnexpectedHttpStatus", message),
        }
    }

    fn retry_after_seconds(&self) -> u32 {
        self.header("retry-after")
            .and_then(|v| core::str::from_utf8(v).ok())
            .and_then(|v| v.trim().parse::<u32>().ok())
            .map_or(DEFAULT_RETRY_SECONDS, |s| s.clamp(1, MAX_RETRY_SECONDS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, retry_after: Option<&str>) -> Response {
        Response {
            status,
            headers: retry_after
                .map(|v| vec![("retry-after".to_owned(), v.as_bytes().to_vec())])
                .unwrap_or_default(),
            body: b"nope".to_vec(),
            method: Method::Get,
            url: "http://h/".to_owned(),
        }
    }

    #[test]
    fn status_error_retries_throttling_and_server_errors() {
        assert!(matches!(
            response(429, Some("7")).status_error(),
            ProviderError::RetryAfter(e) if e.seconds == 7
        ));
        assert!(matches!(
            response(503, None).status_error(),
            ProviderError::RetryAfter(e) if e.seconds == DEFAULT_RETRY_SECONDS
        ));
        assert!(matches!(
            response(503, Some("999999")).status_error(),
            ProviderError::RetryAfter(e) if e.seconds == MAX_RETRY_SECONDS
        ));
    }

    #[test]
    fn status_error_is_terminal_for_client_errors() {
        assert!(matches!(
            response(403, None).status_error(),
            ProviderError::Terminal(e) if e.reason == "Forbidden" && e.message.contains("nope")
        ));
        assert!(matches!(
            response(422, None).status_error(),
            ProviderError::Terminal(e) if e.reason == "RequestRejected"
        ));
    }
}
