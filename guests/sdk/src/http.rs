//! A small blocking HTTP client over `wasi:http/outgoing-handler`.
//!
//! Only infrastructure providers may use it: the bootstrap world does not
//! import `wasi:http`, so a bootstrap component that sends a request fails
//! to load. The host lets requests through only to the hosts the
//! ProviderModule allows; any other request fails with an [`HttpError`] of
//! kind [`HttpErrorKind::Denied`].

use core::fmt::{self, Write as _};

use crate::prelude::*;

use serde::{Serialize, de::DeserializeOwned};

use crate::types::ProviderError;

/// Retry delay for transient failures that do not say how long to wait.
pub const DEFAULT_RETRY_SECONDS: u32 = 15;
/// Upper bound for a server's `Retry-After`, so a bad header cannot park
/// an object for days.
const MAX_RETRY_SECONDS: u32 = 3600;
/// Responses larger than this fail unless raised with
/// [`Request::max_response_bytes`]; a guest's memory is small.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 << 20;
/// How much of an error response's body goes into an error message.
const ERROR_BODY_SNIPPET: usize = 512;

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

    /// Sends the request and reads the whole response.
    pub fn send(self) -> Result<Response, HttpError> {
        let target = Target::parse(&self.url)?;
        let (status, headers, body) = transport::send(&self, &target)?;
        Ok(Response {
            status,
            headers,
            body,
            method: self.method,
            url: self.url,
        })
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

/// Percent-encodes `value` for use as one URL path segment or query value
/// (everything but RFC 3986 unreserved characters).
pub fn encode_component(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Where a request goes, split the way `wasi:http` wants it.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    https: bool,
    authority: String,
    path_with_query: String,
}

impl Target {
    fn parse(url: &str) -> Result<Self, HttpError> {
        let invalid = |why: &str| {
            HttpError::new(
                HttpErrorKind::InvalidRequest,
                format!("invalid URL {url:?}: {why}"),
            )
        };
        let (scheme, rest) = url.split_once("://").ok_or_else(|| invalid("no scheme"))?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return Err(invalid("only http and https are supported")),
        };
        let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
        let (authority, path) = match rest.find(['/', '?']) {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(invalid("no host"));
        }
        if authority.contains('@') {
            return Err(invalid(
                "user info is not supported; pass credentials in headers",
            ));
        }
        if authority
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
            || path.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(invalid("whitespace or control characters"));
        }
        let path_with_query = if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("/{path}")
        };
        Ok(Self {
            https,
            authority: authority.to_owned(),
            path_with_query,
        })
    }
}

type Parts = (u16, Vec<(String, Vec<u8>)>, Vec<u8>);

#[cfg(target_arch = "wasm32")]
mod transport {
    //! The `wasi:http` calls. Order matters: the body stream is taken before
    //! `handle` but written after it, because the host buffers only one
    //! chunk before someone reads the other end.

    use super::{HttpError, HttpErrorKind, Parts, Request, Target};
    use crate::bindings::infrastructure::wasi::http::outgoing_handler;
    use crate::bindings::infrastructure::wasi::http::types::{
        ErrorCode, Fields, FutureIncomingResponse, IncomingBody, IncomingResponse, Method,
        OutgoingBody, OutgoingRequest, RequestOptions, Scheme, http_error_code,
    };
    use crate::bindings::infrastructure::wasi::io::streams::StreamError;
    use crate::prelude::*;

    const NANOS_PER_SECOND: u64 = 1_000_000_000;
    const CONNECT_TIMEOUT_SECONDS: u64 = 10;
    const RESPONSE_TIMEOUT_SECONDS: u64 = 30;
    /// `blocking-write-and-flush` accepts at most 4096 bytes per call.
    const WRITE_CHUNK: usize = 4096;
    const READ_CHUNK: u64 = 64 * 1024;

    pub(super) fn send(request: &Request, target: &Target) -> Result<Parts, HttpError> {
        let invalid = |what: &str| {
            HttpError::new(
                HttpErrorKind::InvalidRequest,
                format!("{} {}: {what}", request.method.as_str(), request.url),
            )
        };

        let headers = Fields::from_list(&request.wire_headers())
            .map_err(|err| invalid(&format!("header not accepted ({err:?})")))?;
        let outgoing = OutgoingRequest::new(headers);
        outgoing
            .set_method(&method(request.method))
            .map_err(|()| invalid("method not accepted"))?;
        let scheme = if target.https {
            Scheme::Https
        } else {
            Scheme::Http
        };
        outgoing
            .set_scheme(Some(&scheme))
            .map_err(|()| invalid("scheme not accepted"))?;
        outgoing
            .set_authority(Some(&target.authority))
            .map_err(|()| invalid("host not accepted"))?;
        outgoing
            .set_path_with_query(Some(&target.path_with_query))
            .map_err(|()| invalid("path not accepted"))?;
        let body = outgoing
            .body()
            .map_err(|()| invalid("request body unavailable"))?;

        let future = outgoing_handler::handle(outgoing, Some(options()))
            .map_err(|code| from_code(request, &code))?;
        let written = write_body(body, &request.body);
        let response = wait(request, &future)?;
        written.map_err(|message| {
            HttpError::new(
                HttpErrorKind::Transport,
                format!("{} {}: {message}", request.method.as_str(), request.url),
            )
        })?;
        read_response(request, &response)
    }

    fn method(method: super::Method) -> Method {
        match method {
            super::Method::Get => Method::Get,
            super::Method::Head => Method::Head,
            super::Method::Post => Method::Post,
            super::Method::Put => Method::Put,
            super::Method::Patch => Method::Patch,
            super::Method::Delete => Method::Delete,
        }
    }

    // A host may not support every timeout; it then keeps its own, so
    // failures to set them are ignored.
    fn options() -> RequestOptions {
        let options = RequestOptions::new();
        let _ = options.set_connect_timeout(Some(CONNECT_TIMEOUT_SECONDS * NANOS_PER_SECOND));
        let _ = options.set_first_byte_timeout(Some(RESPONSE_TIMEOUT_SECONDS * NANOS_PER_SECOND));
        let _ =
            options.set_between_bytes_timeout(Some(RESPONSE_TIMEOUT_SECONDS * NANOS_PER_SECOND));
        options
    }

    fn write_body(body: OutgoingBody, bytes: &[u8]) -> Result<(), String> {
        {
            let stream = body
                .write()
                .map_err(|()| "request body stream unavailable".to_owned())?;
            for chunk in bytes.chunks(WRITE_CHUNK) {
                stream.blocking_write_and_flush(chunk).map_err(|err| {
                    format!("writing the request body failed: {}", describe_stream(&err))
                })?;
            }
            // The stream must be dropped before the body is finished.
        }
        OutgoingBody::finish(body, None)
            .map_err(|code| format!("finishing the request body failed: {}", describe(&code)))
    }

    fn wait(
        request: &Request,
        future: &FutureIncomingResponse,
    ) -> Result<IncomingResponse, HttpError> {
        loop {
            match future.get() {
                None => future.subscribe().block(),
                Some(Ok(Ok(response))) => return Ok(response),
                Some(Ok(Err(code))) => return Err(from_code(request, &code)),
                Some(Err(())) => {
                    return Err(HttpError::new(
                        HttpErrorKind::Transport,
                        "the response was already taken",
                    ));
                }
            }
        }
    }

    fn read_response(request: &Request, response: &IncomingResponse) -> Result<Parts, HttpError> {
        let transport = |message: String| {
            HttpError::new(
                HttpErrorKind::Transport,
                format!("{} {}: {message}", request.method.as_str(), request.url),
            )
        };
        let status = response.status();
        let headers = response.headers().entries();
        let body = response
            .consume()
            .map_err(|()| transport("response body unavailable".to_owned()))?;
        let mut bytes = Vec::new();
        {
            let stream = body
                .stream()
                .map_err(|()| transport("response body stream unavailable".to_owned()))?;
            loop {
                match stream.blocking_read(READ_CHUNK) {
                    Ok(chunk) => {
                        if bytes.len().saturating_add(chunk.len()) > request.max_response_bytes {
                            return Err(HttpError::new(
                                HttpErrorKind::ResponseTooLarge,
                                format!(
                                    "{} {}: response body exceeds {} bytes",
                                    request.method.as_str(),
                                    request.url,
                                    request.max_response_bytes
                                ),
                            ));
                        }
                        bytes.extend_from_slice(&chunk);
                    }
                    Err(StreamError::Closed) => break,
                    Err(err) => {
                        // The host's cap on response bodies ends the stream
                        // with the code that says so.
                        let kind = match &err {
                            StreamError::LastOperationFailed(e) => {
                                http_error_code(e).map_or(HttpErrorKind::Transport, |c| kind_of(&c))
                            }
                            StreamError::Closed => HttpErrorKind::Transport,
                        };
                        return Err(HttpError::new(
                            kind,
                            format!(
                                "{} {}: reading the response body failed: {}",
                                request.method.as_str(),
                                request.url,
                                describe_stream(&err)
                            ),
                        ));
                    }
                }
            }
            // The stream must be dropped before the body is finished.
        }
        drop(IncomingBody::finish(body));
        Ok((status, headers, bytes))
    }

    fn from_code(request: &Request, code: &ErrorCode) -> HttpError {
        HttpError::new(
            kind_of(code),
            format!(
                "{} {}: {}",
                request.method.as_str(),
                request.url,
                describe(code)
            ),
        )
    }

    fn kind_of(code: &ErrorCode) -> HttpErrorKind {
        match code {
            ErrorCode::HttpRequestDenied | ErrorCode::DestinationIpProhibited => {
                HttpErrorKind::Denied
            }
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

    fn describe_stream(err: &StreamError) -> String {
        match err {
            StreamError::Closed => "stream closed".to_owned(),
            StreamError::LastOperationFailed(e) => match http_error_code(e) {
                Some(code) => describe(&code),
                None => e.to_debug_string(),
            },
        }
    }

    fn describe(code: &ErrorCode) -> String {
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
            ErrorCode::ConnectionLimitReached => {
                "the host's budget for outgoing requests is used up (requests per call, or in flight)"
                    .to_owned()
            }
            ErrorCode::InternalError(Some(message)) => format!("internal error: {message}"),
            other => format!("{other:?}"),
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod transport {
    //! Native builds exist only for unit tests; there is no host to send
    //! through.

    use super::{HttpError, HttpErrorKind, Parts, Request, Target};
    use crate::prelude::*;

    pub(super) fn send(request: &Request, _target: &Target) -> Result<Parts, HttpError> {
        Err(HttpError::new(
            HttpErrorKind::Transport,
            format!(
                "{} {}: outgoing HTTP needs a wasi:http host",
                request.method.as_str(),
                request.url
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Result<Target, HttpErrorKind> {
        Target::parse(url).map_err(|e| e.kind())
    }

    #[test]
    fn target_splits_authority_and_path() {
        assert_eq!(
            target("http://127.0.0.1:8080/v1/regions/r/instances?pool=a%2Fb#frag"),
            Ok(Target {
                https: false,
                authority: "127.0.0.1:8080".to_owned(),
                path_with_query: "/v1/regions/r/instances?pool=a%2Fb".to_owned(),
            })
        );
    }

    #[test]
    fn target_defaults_path_to_root() {
        assert_eq!(
            target("HTTPS://api.example").map(|t| (t.https, t.path_with_query)),
            Ok((true, "/".to_owned()))
        );
        assert_eq!(
            target("http://h?x=1").map(|t| t.path_with_query),
            Ok("/?x=1".to_owned())
        );
    }

    #[test]
    fn target_rejects_other_schemes_and_user_info() {
        assert_eq!(target("ftp://h/"), Err(HttpErrorKind::InvalidRequest));
        assert_eq!(target("h/"), Err(HttpErrorKind::InvalidRequest));
        assert_eq!(target("http://u:p@h/"), Err(HttpErrorKind::InvalidRequest));
        assert_eq!(target("http:///x"), Err(HttpErrorKind::InvalidRequest));
        assert_eq!(target("http://h/a b"), Err(HttpErrorKind::InvalidRequest));
    }

    #[test]
    fn encode_component_escapes_reserved_characters() {
        assert_eq!(encode_component("ns/pool-1_a.b~"), "ns%2Fpool-1_a.b~");
        assert_eq!(encode_component("a b&c=é"), "a%20b%26c%3D%C3%A9");
    }

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

    #[test]
    fn http_error_maps_denied_to_terminal_and_transport_to_retry() {
        let denied: ProviderError = HttpError::new(HttpErrorKind::Denied, "no").into();
        assert!(matches!(denied, ProviderError::Terminal(e) if e.reason == "HttpRequestDenied"));
        let refused: ProviderError = HttpError::new(HttpErrorKind::Transport, "refused").into();
        assert!(matches!(refused, ProviderError::RetryAfter(_)));
    }

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
