//! A guest's stderr: accepted without bound and kept as its last bytes, so
//! what it said last before dying (the end of a Python traceback, say)
//! reaches the error, and a chatty guest is never stopped for talking.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// The stream; clones share what was written.
#[derive(Clone)]
pub(crate) struct Tail {
    capacity: usize,
    kept: Arc<Mutex<Kept>>,
}

#[derive(Default)]
struct Kept {
    bytes: VecDeque<u8>,
    /// Bytes written before those kept.
    dropped: usize,
}

impl Tail {
    /// Keeps the last `capacity` bytes written.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            kept: Arc::default(),
        }
    }

    fn push(&self, bytes: &[u8]) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes = match bytes.len().checked_sub(self.capacity) {
            Some(skip) if skip > 0 => {
                kept.dropped += skip;
                &bytes[skip..]
            }
            _ => bytes,
        };
        let over = (kept.bytes.len() + bytes.len()).saturating_sub(self.capacity);
        kept.bytes.drain(..over);
        kept.dropped += over;
        kept.bytes.extend(bytes);
    }

    /// What is kept, lossily decoded, and how many bytes came before it.
    pub(crate) fn contents(&self) -> (String, usize) {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let (front, back) = kept.bytes.as_slices();
        let text = String::from_utf8_lossy(&[front, back].concat()).into_owned();
        (text, kept.dropped)
    }
}

impl IsTerminal for Tail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Tail {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for Tail {
    async fn ready(&mut self) {}
}

impl OutputStream for Tail {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Any amount: what does not fit pushes out the oldest bytes.
        Ok(usize::MAX)
    }
}

impl AsyncWrite for Tail {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_bytes_and_counts_the_rest() {
        let tail = Tail::new(8);
        tail.push(b"abc");
        tail.push(b"defghij");
        assert_eq!(tail.contents(), ("cdefghij".to_owned(), 2));
        tail.push(b"0123456789XY");
        assert_eq!(tail.contents(), ("456789XY".to_owned(), 14));
    }

    #[test]
    fn within_capacity_everything_is_kept() {
        let tail = Tail::new(8);
        tail.push(b"");
        tail.push(b"12345678");
        assert_eq!(tail.contents(), ("12345678".to_owned(), 0));
    }
}
