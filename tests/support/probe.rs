//! Plain HTTP/1.0 GETs against the loopback endpoints of processes the
//! tests start (health, readiness, metrics).

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// `GET path` on `address`, as (status code, body); `None` if nothing
/// accepts the connection or the request cannot be sent.
pub(crate) async fn get(address: &str, path: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    let code = response
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    Some((code, body))
}
