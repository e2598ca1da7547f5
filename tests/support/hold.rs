//! A loopback TCP proxy in front of a server that holds back the answer to
//! the first request carrying a marker: the server did the work, the client
//! never hears of it. From outside, that is a crash between a cloud call
//! and its record — what an operator killed during `RunInstances` leaves.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A running proxy; stopped when dropped.
pub struct HoldingProxy {
    /// `127.0.0.1:<port>`: where clients send their requests.
    pub authority: String,
    held: watch::Receiver<bool>,
    task: JoinHandle<()>,
}

impl Drop for HoldingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HoldingProxy {
    /// Forwards every connection to `upstream` (`host:port`), byte for
    /// byte (headers included, so a signature over `Host` still holds),
    /// and withholds every answer on the connection of the first request
    /// whose bytes contain `marker`.
    pub async fn start(upstream: &str, marker: &'static str) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let authority = listener.local_addr()?.to_string();
        let (tell, held) = watch::channel(false);
        let armed = Arc::new(AtomicBool::new(true));
        let upstream = upstream.to_owned();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, armed, tell) = (upstream.clone(), armed.clone(), tell.clone());
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(&upstream).await {
                        relay(client, server, marker.as_bytes(), &armed, &tell).await;
                    }
                });
            }
        });
        Ok(Self {
            authority,
            held,
            task,
        })
    }

    /// Waits (at most `limit`) until an answer is being held; whether one is.
    pub async fn held(&mut self, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.held.wait_for(|held| *held))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

/// Copies both ways until either side closes. The request side is scanned
/// for `marker` before its bytes go on, so the hold is in place before the
/// server can have answered.
async fn relay(
    mut client: TcpStream,
    mut server: TcpStream,
    marker: &[u8],
    armed: &AtomicBool,
    tell: &watch::Sender<bool>,
) {
    let hold = AtomicBool::new(false);
    let (mut client_read, mut client_write) = client.split();
    let (mut server_read, mut server_write) = server.split();
    let requests = async {
        let mut buffer = vec![0; 16 * 1024];
        // The end of the last read, for a marker split between two reads.
        let mut tail: Vec<u8> = Vec::new();
        loop {
            let n = match client_read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            tail.extend_from_slice(&buffer[..n]);
            if tail.windows(marker.len()).any(|w| w == marker)
                && armed.swap(false, Ordering::SeqCst)
            {
                hold.store(true, Ordering::SeqCst);
                tell.send_replace(true);
            }
            let keep = tail.len().saturating_sub(marker.len());
            tail.drain(..keep);
            if server_write.write_all(&buffer[..n]).await.is_err() {
                break;
            }
        }
    };
    let answers = async {
        let mut buffer = vec![0; 16 * 1024];
        loop {
            let n = match server_read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if !hold.load(Ordering::SeqCst) && client_write.write_all(&buffer[..n]).await.is_err() {
                break;
            }
        }
        // A held connection stays open, unanswered, until its client goes.
        if hold.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = requests => {}
        () = answers => {}
    }
}
