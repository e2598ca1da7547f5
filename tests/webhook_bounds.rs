//! The webhook server of `capwasm run` against a hostile client: a body
//! far over the API server's own limit and thousands of idle connections
//! are refused, cost the operator little memory, and leave its health
//! endpoint and the API server's conversions working.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use testenv::flows::v1beta1_api;
use testenv::install::Install;
use testenv::operator::OperatorProcess;

/// The body sent: what the server accepted before it had bounds.
const BODY: usize = 16 << 20;
/// Idle connections opened at once.
const IDLE: usize = 10_000;
/// The most the faults may add to the operator's resident memory at their
/// peak. The server before its bounds built a 16 MiB body of small values
/// into ~300 MiB of `serde_json::Value`s.
const RSS_BOUND: u64 = 64 << 20;
/// How long the test waits on any one step.
const PATIENCE: Duration = Duration::from_secs(60);

/// Raises this process's open-file limit to its hard limit, and returns
/// how many idle connections it can then hold (at most [`IDLE`]).
/// Processes started after inherit it, as a container inherits its
/// runtime's (much higher) limit.
fn raise_file_limit() -> usize {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    }
    // Room for the API servers, the operator's client and the test's own files.
    let room = usize::try_from(hard)
        .unwrap_or(usize::MAX)
        .saturating_sub(1024);
    room.min(IDLE)
}

/// The TLS client of the webhook: its CA from the certificate Secret the
/// operator made.
async fn tls_client(install: &Install) -> TlsConnector {
    let secrets: Api<Secret> = Api::namespaced(install.client.clone(), &install.ns);
    let secret = secrets.get("capwasm-webhook-cert").await.unwrap();
    let ca = secret.data.unwrap()["ca.crt"].0.clone();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&ca) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// An AdmissionReview of a PlatformCluster whose `spec.values` holds
/// zeros: `len` bytes of JSON, its values 2 bytes each (`0,`).
fn admission_review(len: usize) -> Vec<u8> {
    let head = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","kind":{"group":"platform.capwasm.dev","version":"v1alpha1","kind":"PlatformCluster"},"resource":{"group":"platform.capwasm.dev","version":"v1alpha1","resource":"platformclusters"},"operation":"CREATE","userInfo":{},"object":{"apiVersion":"platform.capwasm.dev/v1alpha1","kind":"PlatformCluster","metadata":{"name":"big","namespace":"default"},"spec":{"templateName":"t","values":{"zeros":[0"#;
    let tail = br"]}}}}}";
    let zeros = (len - head.len() - tail.len()) / 2;
    let mut body = Vec::with_capacity(len);
    body.extend_from_slice(head);
    for _ in 0..zeros {
        body.extend_from_slice(b",0");
    }
    body.extend_from_slice(tail);
    // A space or two to make up the length exactly.
    while body.len() < len {
        body.insert(head.len() - 1, b' ');
    }
    body
}

/// What became of one request.
#[derive(Debug)]
struct Sent {
    /// Body bytes the server took before it answered or closed.
    written: usize,
    /// The response's status, if one came before the connection closed.
    status: Option<u16>,
}

/// POSTs `body` to the admission webhook at `address`, with a
/// Content-Length or chunked, writing and reading at once as the API
/// server's client does.
async fn post(address: &str, tls: &TlsConnector, body: &[u8], chunked: bool) -> Sent {
    let tcp = TcpStream::connect(address).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let stream = tls.connect(name, tcp).await.unwrap();
    let (mut reader, mut writer) = tokio::io::split(stream);
    let framing = if chunked {
        "Transfer-Encoding: chunked".to_owned()
    } else {
        format!("Content-Length: {}", body.len())
    };
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n{framing}\r\n\r\n",
        capwasm::webhook::admission::PATH
    );
    let write = async {
        let mut written = 0;
        if writer.write_all(head.as_bytes()).await.is_err() {
            return written;
        }
        for piece in body.chunks(64 << 10) {
            let sent = if chunked {
                let size = format!("{:x}\r\n", piece.len());
                writer.write_all(size.as_bytes()).await.is_ok()
                    && writer.write_all(piece).await.is_ok()
                    && writer.write_all(b"\r\n").await.is_ok()
            } else {
                writer.write_all(piece).await.is_ok()
            };
            if !sent {
                return written;
            }
            written += piece.len();
        }
        if chunked {
            let _ = writer.write_all(b"0\r\n\r\n").await;
        }
        let _ = writer.flush().await;
        written
    };
    let read = async {
        let mut response = Vec::new();
        let mut buffer = [0; 4096];
        while !response.windows(4).any(|w| w == b"\r\n\r\n") {
            match reader.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => response.extend_from_slice(&buffer[..n]),
            }
        }
        String::from_utf8_lossy(&response)
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
    };
    let (written, status) = tokio::time::timeout(PATIENCE, async { tokio::join!(write, read) })
        .await
        .expect("the webhook answers or closes the connection");
    Sent { written, status }
}

/// `/healthz`'s status code and how long it took.
async fn healthz(operator: &OperatorProcess) -> (u16, Duration) {
    let started = Instant::now();
    let (code, _) = tokio::time::timeout(PATIENCE, operator.get("/healthz"))
        .await
        .expect("/healthz answers");
    (code, started.elapsed())
}

/// How many of `connections` the server has closed (a read sees the end or
/// a reset at once); the others are open, with nothing to read.
fn closed(connections: &[TcpStream]) -> usize {
    let mut buffer = [0; 1];
    connections
        .iter()
        .filter(|c| match c.try_read(&mut buffer) {
            Ok(_) => true,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        })
        .count()
}

/// The value of `capwasm_webhook_refused_total{reason="<reason>"}`, or 0.
fn refusals(metrics: &str, reason: &str) -> u64 {
    testenv::operator::sample(
        metrics,
        &format!("capwasm_webhook_refused_total{{reason=\"{reason}\"}}"),
    )
}

/// `bytes` in MiB, to a tenth.
fn mib(bytes: u64) -> String {
    format!("{}.{}", bytes >> 20, ((bytes & 0xf_ffff) * 10) >> 20)
}

/// What became of the idle connections.
struct Idle {
    opened: usize,
    opened_in: Duration,
    closed_at_once: usize,
    kept: usize,
    healthz_while_kept: (u16, Duration),
    rss_while_kept: u64,
    closed_in_the_end: usize,
    closed_in: Duration,
}

/// Opens `count` connections to `address` and sends nothing; waits until
/// the server has closed those over its `limit`, measures the operator
/// meanwhile, then waits until it has closed the rest.
async fn idle_connections(
    address: &str,
    count: usize,
    limit: usize,
    operator: &OperatorProcess,
) -> Idle {
    let opening = Instant::now();
    let mut connections = Vec::with_capacity(count);
    for _ in 0..count {
        connections.push(TcpStream::connect(address).await.unwrap());
    }
    let opened_in = opening.elapsed();
    let over = count.saturating_sub(limit);
    let deadline = Instant::now() + PATIENCE;
    let mut closed_at_once = closed(&connections);
    while closed_at_once < over && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        closed_at_once = closed(&connections);
    }
    let healthz_while_kept = healthz(operator).await;
    let rss_while_kept = operator.rss_bytes();
    let waiting = Instant::now();
    while closed(&connections) < count && waiting.elapsed() < PATIENCE {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Idle {
        opened: count,
        opened_in,
        closed_at_once,
        kept: count - closed_at_once,
        healthz_while_kept,
        rss_while_kept,
        closed_in_the_end: closed(&connections),
        closed_in: waiting.elapsed(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_16_mib_admission_review_and_10000_idle_connections_leave_the_operators_rss_and_healthz_as_they_were()
 {
    let idle = raise_file_limit();
    let install = Install::standalone("bounds").await;
    let operator = &install.operator;
    let webhook = install
        .webhook_address()
        .expect("standalone serves the webhook");
    let limits = capwasm::webhook::Limits::default();
    // The API server converts through the webhook.
    install.cluster("c1").await;
    let clusters = v1beta1_api(&install.client, &install.ns, "Cluster");
    clusters.get("c1").await.unwrap();
    let tls = tls_client(&install).await;

    let rss_before = operator.rss_bytes();
    let healthz_before = healthz(operator).await;
    operator.reset_peak_rss();

    // A 16 MiB AdmissionReview, announced and chunked.
    let body = admission_review(BODY);
    assert_eq!(body.len(), BODY);
    let announced = post(webhook, &tls, &body, false).await;
    let chunked = post(webhook, &tls, &body, true).await;
    drop(body);

    // Idle connections: connected, never a byte sent.
    let idle = idle_connections(webhook, idle, limits.connections, operator).await;

    let rss_peak = operator.peak_rss_bytes();
    let rss_after = operator.rss_bytes();
    let healthz_after = healthz(operator).await;
    let (_, metrics) = operator.get("/metrics").await;
    eprintln!(
        "RSS: {} MiB before, {} MiB with {} idle connections kept, {} MiB after; \
         peak {} MiB (+{} MiB)",
        mib(rss_before),
        mib(idle.rss_while_kept),
        idle.kept,
        mib(rss_after),
        mib(rss_peak),
        mib(rss_peak.saturating_sub(rss_before)),
    );
    eprintln!(
        "/healthz: {:?} before, {:?} with the connections kept, {:?} after",
        healthz_before, idle.healthz_while_kept, healthz_after
    );
    eprintln!("16 MiB body: announced {announced:?}, chunked {chunked:?}");
    eprintln!(
        "{} idle connections opened in {:?}: {} closed at once, {} kept; {} closed {:?} later; \
         refused: {} over the limit, {} handshakes overdue, {} bodies too long",
        idle.opened,
        idle.opened_in,
        idle.closed_at_once,
        idle.kept,
        idle.closed_in_the_end,
        idle.closed_in,
        refusals(&metrics, "connections"),
        refusals(&metrics, "handshake_timeout"),
        refusals(&metrics, "body_too_large"),
    );

    assert!(
        rss_peak < rss_before + RSS_BOUND,
        "the faults took the operator from {} to {} MiB",
        mib(rss_before),
        mib(rss_peak)
    );
    for (code, _) in [healthz_before, idle.healthz_while_kept, healthz_after] {
        assert_eq!(code, 200);
    }

    // The body was delivered and refused, none of it judged.
    for sent in [&announced, &chunked] {
        assert!(
            sent.status == Some(413) || (sent.status.is_none() && sent.written < BODY),
            "{sent:?}"
        );
    }
    assert_eq!(refusals(&metrics, "body_too_large"), 2);
    // The connections were delivered: all accepted, those over the limit
    // closed at once, the rest once their handshake was overdue.
    let over = idle.opened.saturating_sub(limits.connections);
    assert!(
        idle.closed_at_once >= over,
        "{} closed at once",
        idle.closed_at_once
    );
    assert!(idle.kept <= limits.connections, "{} kept", idle.kept);
    assert_eq!(
        idle.closed_in_the_end, idle.opened,
        "idle connections still open"
    );
    let refused = refusals(&metrics, "connections") + refusals(&metrics, "handshake_timeout");
    assert!(
        refused >= u64::try_from(idle.opened).unwrap(),
        "{refused} of {} refused",
        idle.opened
    );

    // The API server still converts through the webhook.
    clusters.get("c1").await.unwrap();
}
