"""Outgoing HTTP over ``wasi:http``, for infrastructure providers: one
blocking call per request, with the Rust SDK's timeouts and its mapping of
failures to provider errors (the host allows only the hosts its
ProviderModule names; any other is ``HttpRequestDenied``).

- a status of 408, 409, 425, 429 or 5xx: :class:`RetryAfter` (its
  ``Retry-After`` seconds, else 15); 401, 403, 404 and other 4xx, or
  anything else: :class:`Terminal` (``Unauthorized``, ``Forbidden``,
  ``NotFound``, ``RequestRejected``, ``UnexpectedHttpStatus``);
- a transport failure or the host's request budget: :class:`RetryAfter`
  15 s; a denied destination, a bad request, a body over its limit:
  :class:`Terminal`.
"""

import json

from componentize_py_types import Err
from wit_world.imports import outgoing_handler, streams
from wit_world.imports import wasi_http_types as wasi

from .errors import RetryAfter, Terminal
from .urls import encode_component, is_base_url  # noqa: F401  (the helpers a client needs)

DEFAULT_RETRY_SECONDS = 15
MAX_RETRY_SECONDS = 3600
MAX_RESPONSE_BYTES = 16 << 20
_NANOS = 1_000_000_000
_CONNECT_TIMEOUT = 10 * _NANOS
_RESPONSE_TIMEOUT = 30 * _NANOS
_WRITE_CHUNK = 4096
_READ_CHUNK = 64 * 1024
_ERROR_BODY_SNIPPET = 512
_METHODS = {
    "GET": wasi.Method_Get,
    "HEAD": wasi.Method_Head,
    "POST": wasi.Method_Post,
    "PUT": wasi.Method_Put,
    "PATCH": wasi.Method_Patch,
    "DELETE": wasi.Method_Delete,
}


class Response:
    """A whole response: ``status``, ``headers`` (name, bytes) and ``body``."""

    def __init__(self, method, url, status, headers, body):
        self.method, self.url = method, url
        self.status, self.headers, self.body = status, headers, body

    def header(self, name):
        """The first value of header ``name`` (case-insensitive), or None."""
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def json(self):
        """The body as JSON; one that does not decode is terminal."""
        try:
            return json.loads(self.body)
        except ValueError as error:
            raise Terminal(
                "InvalidResponse",
                f"{self.method} {self.url} returned a body that does not decode: {error}",
            ) from None

    def error_for_status(self):
        """Itself if 2xx, else the status as a provider failure."""
        if 200 <= self.status < 300:
            return self
        snippet = self.body[:_ERROR_BODY_SNIPPET].decode(errors="replace").strip()
        message = f"{self.method} {self.url} returned {self.status}: {snippet}"
        if self.status in (408, 409, 425, 429) or 500 <= self.status <= 599:
            raise RetryAfter(self._retry_after(), message)
        reason = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound"}.get(self.status)
        if reason is None:
            reason = "RequestRejected" if 400 <= self.status <= 499 else "UnexpectedHttpStatus"
        raise Terminal(reason, message)

    def _retry_after(self):
        value = self.header("retry-after")
        try:
            seconds = int(value.decode().strip())
        except (AttributeError, ValueError, UnicodeDecodeError):
            return DEFAULT_RETRY_SECONDS
        return min(max(seconds, 1), MAX_RETRY_SECONDS)


def request(method, url, headers=(), body=b"", json_body=None, max_response_bytes=MAX_RESPONSE_BYTES):
    """Sends a request and reads the whole response (any status)."""
    if json_body is not None:
        body = json.dumps(json_body, separators=(",", ":")).encode()
        headers = [*headers, ("content-type", b"application/json")]
    failure = _Failure(method, url)
    https, authority, path = _target(url, failure)
    if not any(k.lower() == "content-length" for k, _ in headers):
        headers = [*headers, ("content-length", str(len(body)).encode())]
    try:
        fields = wasi.Fields.from_list(list(headers))
    except Err as error:
        raise failure.invalid(f"header not accepted ({error.value})") from None
    outgoing = wasi.OutgoingRequest(fields)
    try:
        outgoing.set_method(_METHODS[method]())
        outgoing.set_scheme(wasi.Scheme_Https() if https else wasi.Scheme_Http())
        outgoing.set_authority(authority)
        outgoing.set_path_with_query(path)
        outgoing_body = outgoing.body()
    except (Err, KeyError):
        raise failure.invalid("method, scheme, host or path not accepted") from None
    options = wasi.RequestOptions()
    for setter, nanos in (
        (options.set_connect_timeout, _CONNECT_TIMEOUT),
        (options.set_first_byte_timeout, _RESPONSE_TIMEOUT),
        (options.set_between_bytes_timeout, _RESPONSE_TIMEOUT),
    ):
        try:
            setter(nanos)
        except Err:
            pass
    try:
        future = outgoing_handler.handle(outgoing, options)
    except Err as error:
        raise failure.of_code(error.value) from None
    written = _write_body(outgoing_body, body)
    response = _wait(future, failure)
    if written is not None:
        raise failure.transport(written)
    return _read(response, method, url, failure, max_response_bytes)


def get(url, **kwargs):
    return request("GET", url, **kwargs)


def post(url, **kwargs):
    return request("POST", url, **kwargs)


def delete(url, **kwargs):
    return request("DELETE", url, **kwargs)


def bearer(token):
    """An ``authorization`` header for ``token`` (bytes)."""
    return ("authorization", b"Bearer " + token)


class _Failure:
    """Provider failures about one request, its method and URL first."""

    def __init__(self, method, url):
        self.prefix = f"{method} {url}: "

    def invalid(self, what):
        return Terminal("InvalidRequest", self.prefix + what)

    def transport(self, what):
        return RetryAfter(DEFAULT_RETRY_SECONDS, self.prefix + what)

    def of_code(self, code):
        what = self.prefix + _describe(code)
        if isinstance(code, (wasi.ErrorCode_HttpRequestDenied, wasi.ErrorCode_DestinationIpProhibited)):
            return Terminal("HttpRequestDenied", what)
        if isinstance(
            code,
            (
                wasi.ErrorCode_HttpRequestMethodInvalid,
                wasi.ErrorCode_HttpRequestUriInvalid,
                wasi.ErrorCode_HttpRequestUriTooLong,
                wasi.ErrorCode_HttpRequestHeaderSectionSize,
                wasi.ErrorCode_HttpRequestHeaderSize,
                wasi.ErrorCode_HttpRequestBodySize,
                wasi.ErrorCode_HttpRequestLengthRequired,
                wasi.ErrorCode_ConfigurationError,
            ),
        ):
            return Terminal("InvalidRequest", what)
        if isinstance(code, wasi.ErrorCode_HttpResponseBodySize):
            return Terminal("ResponseTooLarge", what)
        return RetryAfter(DEFAULT_RETRY_SECONDS, what)


_DESCRIPTIONS = {
    wasi.ErrorCode_HttpRequestDenied: "the host denied the request (destination not allowed for this provider)",
    wasi.ErrorCode_DestinationIpProhibited: "the destination IP is prohibited",
    wasi.ErrorCode_ConnectionRefused: "connection refused",
    wasi.ErrorCode_ConnectionTimeout: "connection timed out",
    wasi.ErrorCode_ConnectionTerminated: "connection terminated",
    wasi.ErrorCode_DnsTimeout: "DNS lookup timed out",
    wasi.ErrorCode_DestinationNotFound: "destination not found",
    wasi.ErrorCode_DestinationUnavailable: "destination unavailable",
    wasi.ErrorCode_HttpResponseTimeout: "response timed out",
    wasi.ErrorCode_ConnectionReadTimeout: "no answer in time (the connection's read timed out)",
    wasi.ErrorCode_ConnectionWriteTimeout: "the request could not be sent in time (the connection's write timed out)",
    wasi.ErrorCode_ConnectionLimitReached: "the host's budget for outgoing requests is used up (requests per call, or in flight)",
}


def _describe(code):
    described = _DESCRIPTIONS.get(type(code))
    if described is not None:
        return described
    if isinstance(code, wasi.ErrorCode_DnsError):
        return f"DNS lookup failed ({code.value.rcode or 'no rcode'})"
    if isinstance(code, wasi.ErrorCode_InternalError) and code.value:
        return f"internal error: {code.value}"
    return type(code).__name__.removeprefix("ErrorCode_")


def _target(url, failure):
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise failure.invalid("invalid URL: no scheme")
    if scheme.lower() not in ("http", "https"):
        raise failure.invalid("invalid URL: only http and https are supported")
    rest = rest.split("#", 1)[0]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, path = rest[:cut], rest[cut:]
    if not authority:
        raise failure.invalid("invalid URL: no host")
    if "@" in authority:
        raise failure.invalid("invalid URL: user info is not supported; pass credentials in headers")
    if any(c.isspace() or ord(c) < 0x20 for c in authority + path):
        raise failure.invalid("invalid URL: whitespace or control characters")
    return scheme.lower() == "https", authority, path if path.startswith("/") else "/" + path


def _write_body(outgoing_body, body):
    """Writes and finishes the body; what went wrong, or None."""
    try:
        stream = outgoing_body.write()
    except Err:
        return "request body stream unavailable"
    try:
        for at in range(0, len(body), _WRITE_CHUNK):
            stream.blocking_write_and_flush(body[at : at + _WRITE_CHUNK])
    except Err as error:
        return f"writing the request body failed: {_stream_error(error.value)}"
    finally:
        stream.__exit__(None, None, None)
    try:
        wasi.OutgoingBody.finish(outgoing_body, None)
    except Err as error:
        return f"finishing the request body failed: {_describe(error.value)}"
    return None


def _wait(future, failure):
    while True:
        result = future.get()
        if result is None:
            future.subscribe().block()
            continue
        if isinstance(result, Err):
            raise failure.transport("the response was already taken")
        inner = result.value
        if isinstance(inner, Err):
            raise failure.of_code(inner.value)
        return inner.value


def _read(response, method, url, failure, limit):
    status = response.status()
    headers = response.headers().entries()
    try:
        incoming = response.consume()
        stream = incoming.stream()
    except Err:
        raise failure.transport("response body unavailable") from None
    chunks, size = [], 0
    try:
        while True:
            try:
                chunk = stream.blocking_read(_READ_CHUNK)
            except Err as error:
                if isinstance(error.value, streams.StreamError_Closed):
                    break
                code = wasi.http_error_code(error.value.value)
                if code is not None:
                    raise failure.of_code(code) from None
                raise failure.transport(
                    f"reading the response body failed: {_stream_error(error.value)}"
                ) from None
            size += len(chunk)
            if size > limit:
                raise Terminal("ResponseTooLarge", f"{failure.prefix}response body exceeds {limit} bytes")
            chunks.append(chunk)
    finally:
        stream.__exit__(None, None, None)
    wasi.IncomingBody.finish(incoming)
    return Response(method, url, status, headers, b"".join(chunks))


def _stream_error(error):
    if isinstance(error, streams.StreamError_Closed):
        return "stream closed"
    return error.value.to_debug_string()
