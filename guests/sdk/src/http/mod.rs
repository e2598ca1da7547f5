//! A small blocking HTTP client over `wasi:http/outgoing-handler`.
//!
//! Only infrastructure and control-plane providers may use it (their worlds
//! share the one set of `wasi:http` bindings it calls): the bootstrap world
//! does not import `wasi:http`, so a bootstrap component that sends a
//! request fails to load. The host lets requests through only to the hosts the
//! ProviderModule allows; any other request fails with an [`HttpError`] of
//! kind [`HttpErrorKind::Denied`].

use core::fmt;

use serde::Serialize;

use crate::prelude::*;
use crate::types::ProviderError;

#[cfg(target_arch = "wasm32")]
mod codes;
mod error;
mod response;
#[cfg(target_arch = "wasm32")]
mod transport;
mod url;

pub use error::{HttpError, HttpErrorKind};
pub use response::Response;
use url::Target;
pub use url::{encode_component, is_base_url};

/// Retry delay for transient failures that do not say how long to wait.
pub const DEFAULT_RETRY_SECONDS: u32 = 15;
/// Responses larger than this fail unless raised with
/// [`Request::max_response_bytes`]; a guest's memory is small.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 << 20;

/// An HTTP method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// GET
    Get,
    /// HEAD
    Head,
    /// POST
    Post,
    /// PUT
    Put,
    /// PATCH
    Patch,
    /// DELETE
    Delete,
}

impl Method {
    /// The method's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Head => "HEAD",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
            Self::Delete => "DELETE",
        }
    }
}

/// An outgoing request, built with chained calls and sent with
/// [`Request::send`].
pub struct Request {
    method: Method,
    url: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    max_response_bytes: usize,
}

impl Request {
    /// A request with no headers and an empty body. `url` is absolute:
    /// `http://host:port/path?query`; encode path segments and query values
    /// with [`encode_component`].
    pub fn new(method: Method, url: impl Into<String>) -> Self {
        Self {
            method,
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// A GET request.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new(Method::Get, url)
    }

    /// A POST request.
    pub fn post(url: impl Into<String>) -> Self {
        Self::new(Method::Post, url)
    }

    /// A PUT request.
    pub fn put(url: impl Into<String>) -> Self {
        Self::new(Method::Put, url)
    }

    /// A DELETE request.
    pub fn delete(url: impl Into<String>) -> Self {
        Self::new(Method::Delete, url)
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Adds `Authorization: Bearer <token>`.
    #[must_use]
    pub fn bearer_auth(self, token: &[u8]) -> Self {
        let mut value = b"Bearer ".to_vec();
        value.extend_from_slice(token);
        self.header("authorization", value)
    }

    /// Sets the body.
    #[must_use]
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets a JSON body and its content type.
    pub fn json<T: Serialize + ?Sized>(self, value: &T) -> Result<Self, ProviderError> {
        let body = serde_json::to_vec(value).map_err(|err| {
            ProviderError::terminal(
                "InvalidRequest",
                format!("cannot encode request body: {err}"),
            )
        })?;
        Ok(self.header("content-type", "application/json").body(body))
    }

    /// Fails responses whose body is larger than `limit` bytes.
    #[must_use]
    pub fn max_response_bytes(mut self, limit: usize) -> Self {
        self.max_response_bytes = limit;
        self
    }

    /// The headers sent: the caller's, and `content-length` (0 for no body)
    /// unless the caller set it. With a declared length the body is not
    /// chunked, so a server that answers before reading it (an early error
    /// status) does not leave the exchange looking like a protocol error.
    #[cfg_attr(
        not(target_arch = "wasm32"),
        allow(dead_code, reason = "only the wasm transport sends")
    )]
    fn wire_headers(&self) -> Vec<(String, Vec<u8>)> {
        let mut headers = self.headers.clone();
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        {
            headers.push((
                "content-length".to_owned(),
                self.body.len().to_string().into_bytes(),
            ));
        }
        headers
    }

    /// An error of `kind` about this request: method and URL, then `what`.
    fn failure(&self, kind: HttpErrorKind, what: &str) -> HttpError {
        HttpError::new(
            kind,
            format!("{} {}: {what}", self.method.as_str(), self.url),
        )
    }

    /// Sends the request and reads the whole response.
    pub fn send(self) -> Result<Response, HttpError> {
        let target = Target::parse(&self.url).map_err(|why| {
            self.failure(
                HttpErrorKind::InvalidRequest,
                &format!("invalid URL: {why}"),
            )
        })?;
        let (status, headers, body) = transport::send(&self, &target)?;
        Ok(Response::new(status, headers, body, self.method, self.url))
    }
}

// Header values stay out of Debug output: they may hold credentials.
impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Request")
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &names)
            .field("body_len", &self.body.len())
            .finish_non_exhaustive()
    }
}

/// A response as the transport hands it over: status, headers, body.
type Parts = (u16, Vec<(String, Vec<u8>)>, Vec<u8>);

#[cfg(not(target_arch = "wasm32"))]
mod transport {
    //! Native builds exist only for unit tests; there is no host to send
    //! through.

    use super::{HttpError, HttpErrorKind, Parts, Request, Target};

    pub(super) fn send(request: &Request, _target: &Target) -> Result<Parts, HttpError> {
        Err(request.failure(
            HttpErrorKind::Transport,
            "outgoing HTTP needs a wasi:http host",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_headers_declare_the_body_length_zero_included() {
        let length = |request: &Request| {
            request
                .wire_headers()
                .into_iter()
                .filter(|(name, _)| name.eq_ignore_ascii_case("content-length"))
                .map(|(_, value)| String::from_utf8_lossy(&value).into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(length(&Request::get("http://h/")), ["0"]);
        assert_eq!(length(&Request::post("http://h/").body("abc")), ["3"]);
        let declared = Request::post("http://h/")
            .header("Content-Length", "3")
            .body("abc");
        assert_eq!(length(&declared), ["3"], "not declared twice");
    }

    #[test]
    fn request_debug_hides_header_values() {
        let request = Request::get("http://h/").bearer_auth(b"secret");
        assert!(!format!("{request:?}").contains("secret"));
    }
}
