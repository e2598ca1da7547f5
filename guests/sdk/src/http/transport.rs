//! The `wasi:http` calls. Order matters: the body stream is taken before
//! `handle` but written after it, because the host buffers only one
//! chunk before someone reads the other end.

use super::codes::{describe, describe_stream, from_code};
use super::{HttpError, HttpErrorKind, Parts, Request, Target};
use crate::bindings::infrastructure::wasi::http::outgoing_handler;
use crate::bindings::infrastructure::wasi::http::types::{
    Fields, FutureIncomingResponse, IncomingBody, IncomingResponse, Method, OutgoingBody,
    OutgoingRequest, RequestOptions, Scheme,
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
    let invalid = |what: &str| request.failure(HttpErrorKind::InvalidRequest, what);

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
    written.map_err(|message| request.failure(HttpErrorKind::Transport, &message))?;
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
    let _ = options.set_between_bytes_timeout(Some(RESPONSE_TIMEOUT_SECONDS * NANOS_PER_SECOND));
    options
}

fn write_body(body: OutgoingBody, bytes: &[u8]) -> Result<(), String> {
    {
        let stream = body
            .write()
            .map_err(|()| "request body stream unavailable".to_owned())?;
        for chunk in bytes.chunks(WRITE_CHUNK) {
            stream.blocking_write_and_flush(chunk).map_err(|err| {
                format!(
                    "writing the request body failed: {}",
                    describe_stream(&err).1
                )
            })?;
        }
        // The stream must be dropped before the body is finished.
    }
    OutgoingBody::finish(body, None)
        .map_err(|code| format!("finishing the request body failed: {}", describe(&code)))
}

fn wait(request: &Request, future: &FutureIncomingResponse) -> Result<IncomingResponse, HttpError> {
    loop {
        match future.get() {
            None => future.subscribe().block(),
            Some(Ok(Ok(response))) => return Ok(response),
            Some(Ok(Err(code))) => return Err(from_code(request, &code)),
            Some(Err(())) => {
                return Err(
                    request.failure(HttpErrorKind::Transport, "the response was already taken")
                );
            }
        }
    }
}

fn read_response(request: &Request, response: &IncomingResponse) -> Result<Parts, HttpError> {
    let transport = |what: &str| request.failure(HttpErrorKind::Transport, what);
    let status = response.status();
    let headers = response.headers().entries();
    let body = response
        .consume()
        .map_err(|()| transport("response body unavailable"))?;
    let mut bytes = Vec::new();
    {
        let stream = body
            .stream()
            .map_err(|()| transport("response body stream unavailable"))?;
        loop {
            match stream.blocking_read(READ_CHUNK) {
                Ok(chunk) => {
                    if bytes.len().saturating_add(chunk.len()) > request.max_response_bytes {
                        let what =
                            format!("response body exceeds {} bytes", request.max_response_bytes);
                        return Err(request.failure(HttpErrorKind::ResponseTooLarge, &what));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Err(StreamError::Closed) => break,
                Err(err) => {
                    // The host's cap on response bodies ends the stream
                    // with the code that says so.
                    let (kind, why) = describe_stream(&err);
                    let what = format!("reading the response body failed: {why}");
                    return Err(request.failure(kind, &what));
                }
            }
        }
        // The stream must be dropped before the body is finished.
    }
    drop(IncomingBody::finish(body));
    Ok((status, headers, bytes))
}
