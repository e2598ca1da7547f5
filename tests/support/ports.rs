//! Free loopback ports.

use std::collections::HashSet;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::Mutex;

use crate::{Error, Result};

/// Ports handed out by this process, never handed out twice: the listener is
/// closed before the child binds, so the kernel could offer the same port to
/// the next caller in between.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A port on 127.0.0.1 that was free a moment ago. The race with other
/// processes between close and the child's bind is handled by retrying the
/// whole start (see `env.rs`).
pub(crate) fn free_port() -> Result<u16> {
    let mut handed_out = HANDED_OUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let handed_out = handed_out.get_or_insert_with(HashSet::new);
    loop {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|source| Error::Io {
            path: "127.0.0.1:0".into(),
            source,
        })?;
        let port = listener
            .local_addr()
            .map_err(|source| Error::Io {
                path: "127.0.0.1:0".into(),
                source,
            })?
            .port();
        if handed_out.insert(port) {
            return Ok(port);
        }
    }
}
