//! Bounds on what a workload API server can make the operator read.
//!
//! The server is the tenant's: whoever writes a Cluster's kubeconfig Secret
//! chooses it. kube reads a response whole before parsing it (and a watch
//! one line, one event, at a time) with no limit of its own, and parsing
//! JSON into Nodes costs far more memory than the JSON: `{},` is a whole
//! `Node` of 1.5 KiB. So every response body of a workload client is
//! wrapped in [`Bounded`], which counts, without buffering anything, what
//! its consumer will hold and parse: bytes, JSON values, and items (objects
//! and arrays on the third level, a list's Nodes), over the whole body, or
//! per line for a watch. A body that crosses a bound ends with
//! [`ResponseTooLarge`] and is dropped, which closes its stream or
//! connection; the request fails, and with it the cluster's Node watch.
//!
//! Neither kube nor tower nor http-body-util has such a bound: kube's
//! `LinesCodec` is built without a maximum, `http_body_util::Limited`
//! counts a body's bytes in total (which would end a healthy watch that
//! runs for hours), and `tower_http`'s limit applies to requests.
//!
//! The bounds keep what one hostile cluster costs (the body, the copy kube
//! makes of it, and the parsed values) near 60 MiB, within the operator's
//! 256 MiB memory limit (`deploy/operator/deployment.yaml`), while an
//! honest page of [`super::watch::PAGE_SIZE`] Nodes stays well below them:
//!
//! - a Node is typically 5–50 KiB of JSON (kubelets report at most 50
//!   images) and never more than etcd's 1.5 MiB request limit; a page of 50
//!   such Nodes is at most 2.5 MiB, a third of [`MAX_BYTES`];
//! - such a Node has 500–1,500 JSON values (most in managed fields), a page
//!   at most 75,000, under a third of [`MAX_VALUES`]; each value costs at
//!   most about 170 bytes once parsed (an empty element of a list of
//!   structs), so the bound caps the parsed page near 40 MiB;
//! - a page has at most 50 items, against [`MAX_ITEMS`]: a 1.5 KiB `Node`
//!   for three bytes of JSON is bounded by the items (3 MiB at most), not
//!   the values.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response, Uri};
use hyper::body::{Body, Frame, SizeHint};
use tower::{BoxError, Layer, Service};

use super::error::{Framing, Measure, ResponseTooLarge};

/// Bytes of one response, or one watch line.
pub(super) const MAX_BYTES: usize = 8 << 20;
/// JSON values of one response, or one watch line, counted by the `{`, `[`,
/// `,` and `:` before them (outside strings).
pub(super) const MAX_VALUES: usize = 250_000;
/// Objects and arrays on the third level of one response, or one watch
/// line: the items of a list, the fields of an event's object.
pub(super) const MAX_ITEMS: usize = 1_000;

/// The bounds [`Bounded`] enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Limits {
    /// See [`MAX_BYTES`].
    pub(super) bytes: usize,
    /// See [`MAX_VALUES`].
    pub(super) values: usize,
    /// See [`MAX_ITEMS`].
    pub(super) items: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            bytes: MAX_BYTES,
            values: MAX_VALUES,
            items: MAX_ITEMS,
        }
    }
}

/// Wraps every response body of a service in [`Bounded`].
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct BoundedLayer {
    limits: Limits,
}

impl<S> Layer<S> for BoundedLayer {
    type Service = BoundedService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BoundedService {
            inner,
            limits: self.limits,
        }
    }
}

/// See [`BoundedLayer`].
#[derive(Clone, Debug)]
pub(super) struct BoundedService<S> {
    inner: S,
    limits: Limits,
}

impl<S, In, Out> Service<Request<In>> for BoundedService<S>
where
    S: Service<Request<In>, Response = Response<Out>>,
    S::Future: Send + 'static,
{
    type Response = Response<Bounded<Out>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<In>) -> Self::Future {
        let framing = framing(request.uri());
        let limits = self.limits;
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| Bounded::new(body, framing, limits)))
        })
    }
}

/// How the consumer reads the response to `uri`: a watch line by line,
/// anything else whole (whatever newlines it holds).
fn framing(uri: &Uri) -> Framing {
    let watch = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .any(|pair| matches!(pair, "watch=true" | "watch=1"));
    if watch { Framing::Line } else { Framing::Body }
}

/// A response body that fails with [`ResponseTooLarge`] once what it
/// passed on crosses a bound; the frame that crosses it is not passed on.
#[derive(Debug)]
pub(super) struct Bounded<B> {
    inner: B,
    scanner: Scanner,
    failed: bool,
}

impl<B> Bounded<B> {
    pub(super) fn new(inner: B, framing: Framing, limits: Limits) -> Self {
        Self {
            inner,
            scanner: Scanner::new(framing, limits),
            failed: false,
        }
    }
}

impl<B> Body for Bounded<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.failed {
            return Poll::Ready(None);
        }
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            // The inner error goes on as it is: kube tells a watch's normal
            // end from a failure by it.
            Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        if let Some(data) = frame.data_ref()
            && let Err(error) = self.scanner.scan(data)
        {
            self.failed = true;
            return Poll::Ready(Some(Err(Box::new(error))));
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Counts what a body holds, across frames, without keeping any of it.
#[derive(Debug)]
struct Scanner {
    framing: Framing,
    limits: Limits,
    bytes: usize,
    values: usize,
    items: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl Scanner {
    fn new(framing: Framing, limits: Limits) -> Self {
        Self {
            framing,
            limits,
            bytes: 0,
            values: 0,
            items: 0,
            depth: 0,
            in_string: false,
            escaped: false,
        }
    }

    fn scan(&mut self, data: &[u8]) -> Result<(), ResponseTooLarge> {
        for &byte in data {
            // A watch is split into lines before parsing, each line on its
            // own: a new line starts afresh (a JSON string holds no raw
            // newline, so this is never inside one).
            if byte == b'\n' && self.framing == Framing::Line {
                *self = Self::new(self.framing, self.limits);
                continue;
            }
            self.bytes += 1;
            if self.in_string {
                match byte {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
            } else {
                match byte {
                    b'"' => self.in_string = true,
                    b'{' | b'[' => {
                        self.values += 1;
                        if self.depth == 2 {
                            self.items += 1;
                        }
                        self.depth += 1;
                    }
                    b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                    b',' | b':' => self.values += 1,
                    _ => {}
                }
            }
            self.check()?;
        }
        Ok(())
    }

    fn check(&self) -> Result<(), ResponseTooLarge> {
        let limits = &self.limits;
        let (measure, limit) = if self.bytes > limits.bytes {
            (Measure::Bytes, limits.bytes)
        } else if self.values > limits.values {
            (Measure::Values, limits.values)
        } else if self.items > limits.items {
            (Measure::Items, limits.items)
        } else {
            return Ok(());
        };
        Err(ResponseTooLarge {
            framing: self.framing,
            measure,
            limit,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::StreamExt as _;
    use futures::stream;
    use http_body_util::{BodyExt as _, StreamBody};

    use super::*;

    type TestBody = StreamBody<stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, BoxError>>>>;

    fn body(chunks: &[&str]) -> TestBody {
        let frames: Vec<Result<Frame<Bytes>, BoxError>> = chunks
            .iter()
            .map(|chunk| Ok(Frame::data(Bytes::copy_from_slice(chunk.as_bytes()))))
            .collect();
        StreamBody::new(stream::iter(frames))
    }

    fn limits(bytes: usize, values: usize, items: usize) -> Limits {
        Limits {
            bytes,
            values,
            items,
        }
    }

    /// What a consumer reads of `chunks` before the body ends or fails.
    async fn read(chunks: &[&str], framing: Framing, limits: Limits) -> (String, Option<BoxError>) {
        let mut body = Bounded::new(body(chunks), framing, limits);
        let mut read = String::new();
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => {
                    if let Some(data) = frame.data_ref() {
                        read.push_str(&String::from_utf8_lossy(data));
                    }
                }
                Err(error) => return (read, Some(error)),
            }
        }
        (read, None)
    }

    fn too_large(error: Option<BoxError>) -> ResponseTooLarge {
        let error = error.expect("the body failed");
        *error
            .downcast::<ResponseTooLarge>()
            .expect("a ResponseTooLarge")
    }

    #[tokio::test]
    async fn watch_passes_lines_within_the_bound_however_long_the_stream() {
        let lines = ["{\"a\":1}\n{\"b\":2}\n", "{\"c\":", "3}\n{\"d\":4}\n"];
        let (read, error) = read(&lines, Framing::Line, limits(8, 100, 100)).await;
        assert!(error.is_none(), "{error:?}");
        assert_eq!(read, lines.concat());
    }

    #[tokio::test]
    async fn watch_line_past_the_byte_bound_fails_before_its_frame_is_passed_on() {
        let lines = ["{\"a\":1}\n{\"b\":", "\"0123456789\"}\n", "{\"c\":3}\n"];
        let (read, error) = read(&lines, Framing::Line, limits(8, 100, 100)).await;
        assert_eq!(read, lines[0]);
        assert_eq!(
            too_large(error),
            ResponseTooLarge {
                framing: Framing::Line,
                measure: Measure::Bytes,
                limit: 8
            }
        );
    }

    #[tokio::test]
    async fn body_with_newlines_is_bounded_as_a_whole() {
        // A list is read whole whatever whitespace it holds.
        let chunks = ["{\"items\":[\n", "1,\n2,\n", "3,\n4]}\n"];
        let (_, error) = read(&chunks, Framing::Body, limits(16, 100, 100)).await;
        assert_eq!(too_large(error).measure, Measure::Bytes);
        let (read, error) = read(&chunks, Framing::Body, limits(64, 100, 100)).await;
        assert!(error.is_none(), "{error:?}");
        assert_eq!(read, chunks.concat());
    }

    #[tokio::test]
    async fn list_with_more_items_than_the_bound_fails() {
        let list = "{\"kind\":\"NodeList\",\"metadata\":{},\"items\":[{},{},{\"metadata\":{}}]}";
        let (_, error) = read(&[list], Framing::Body, limits(1 << 20, 100, 3)).await;
        assert!(error.is_none(), "{error:?}");
        let (_, error) = read(&[list], Framing::Body, limits(1 << 20, 100, 2)).await;
        assert_eq!(too_large(error).measure, Measure::Items);
    }

    #[tokio::test]
    async fn values_are_counted_outside_strings_only() {
        // 4 values: the object, two colons, one comma.
        let object = r#"{"a":"{[,:\"{[,:","b":"\\"}"#;
        let (_, error) = read(&[object], Framing::Body, limits(1 << 20, 4, 100)).await;
        assert!(error.is_none(), "{error:?}");
        let (_, error) = read(&[object], Framing::Body, limits(1 << 20, 3, 100)).await;
        assert_eq!(too_large(error).measure, Measure::Values);
    }

    #[tokio::test]
    async fn string_state_carries_across_frames() {
        let frames = [r#"{"a":"x\"#, r#"",{[:"#, r#"x"}"#];
        let (_, error) = read(&frames, Framing::Body, limits(1 << 20, 2, 100)).await;
        assert!(error.is_none(), "{error:?}");
    }

    #[tokio::test]
    async fn nothing_more_is_read_after_the_failure() {
        let polled = Arc::new(AtomicUsize::new(0));
        let counter = polled.clone();
        let frames = stream::iter(0..1000).map(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
            Ok::<_, BoxError>(Frame::data(Bytes::from_static(b"[1,2,3,4]")))
        });
        let mut body = Bounded::new(
            StreamBody::new(frames),
            Framing::Body,
            limits(100, 1000, 10),
        );
        let mut failures = 0;
        while let Some(frame) = body.frame().await {
            failures += usize::from(frame.is_err());
        }
        assert_eq!(failures, 1);
        assert_eq!(polled.load(Ordering::Relaxed), 12);
        assert!(body.is_end_stream());
    }

    #[tokio::test]
    async fn inner_errors_pass_on_unchanged() {
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = vec![Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "unexpected EOF during chunk size line",
        ))];
        let mut body = Bounded::new(
            StreamBody::new(stream::iter(frames)),
            Framing::Line,
            Limits::default(),
        );
        let error = body.frame().await.and_then(Result::err).expect("an error");
        let io = error.downcast::<std::io::Error>().expect("the io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn watches_are_bounded_by_line_and_everything_else_whole() {
        let cases = [
            ("/api/v1/nodes?limit=50", Framing::Body),
            ("/api/v1/nodes?watch=true&resourceVersion=1", Framing::Line),
            ("/api/v1/nodes?resourceVersion=1&watch=1", Framing::Line),
            ("/api/v1/nodes?watch=false", Framing::Body),
            ("/api/v1/nodes?labelSelector=watch%3Dtrue", Framing::Body),
            ("/version", Framing::Body),
        ];
        for (uri, expected) in cases {
            let uri: Uri = uri.parse().expect("a URI");
            assert_eq!(framing(&uri), expected, "{uri}");
        }
    }

    #[test]
    fn response_too_large_names_the_bound() {
        let error = ResponseTooLarge {
            framing: Framing::Body,
            measure: Measure::Bytes,
            limit: MAX_BYTES,
        };
        assert_eq!(
            error.to_string(),
            "a response from the workload API server holds more than 8 MiB, the most the \
             operator reads"
        );
        let error = ResponseTooLarge {
            framing: Framing::Line,
            measure: Measure::Items,
            limit: MAX_ITEMS,
        };
        assert_eq!(
            error.to_string(),
            "a watch event from the workload API server holds more than 1000 items, the most \
             the operator reads"
        );
    }
}
