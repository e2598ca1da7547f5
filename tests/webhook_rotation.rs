//! The webhook's certificate over its life: two replicas making it at once
//! end with one CA (the second write refused with 409 Conflict, and that
//! replica serving the first's), and a serving certificate of a few seconds
//! is renewed and served without a restart while every call to the webhook
//! succeeds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use capwasm::controllers::Metrics;
use capwasm::webhook::{Certs, Settings, Validity, Wrote, pems, serial_and_expiry};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use testenv::TestEnv;
use testenv::flows::wait_for;
use testenv::operator::{Launch, OperatorProcess, free_address, sample};

const SECRET: &str = "capwasm-webhook-cert";
/// What a replica logs when another wrote the certificate first.
const LOST: &str = "409 Conflict";

/// A TLS client trusting the CAs of `bundle` (PEM), each handshake a full
/// one (a resumed session would not show the certificate served now), as
/// the API server's client makes them.
fn tls_client(bundle: &[u8]) -> anyhow::Result<TlsConnector> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(bundle) {
        roots.add(cert?)?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    Ok(TlsConnector::from(Arc::new(config)))
}

/// The CA bundle of the Secret, once there is one.
async fn bundle(secrets: &Api<Secret>) -> anyhow::Result<Vec<u8>> {
    let secret = wait_for(secrets, SECRET, "the certificate Secret is made", |s| {
        s.is_some()
    })
    .await
    .context("the Secret")?;
    secret
        .data
        .and_then(|d| d.get("ca.crt").map(|v| v.0.clone()))
        .context("ca.crt")
}

/// A TLS handshake with the webhook at `address` (as `localhost`): the
/// connection and the serial and expiry of the certificate it presented.
async fn handshake(
    address: &str,
    tls: &TlsConnector,
) -> anyhow::Result<(TlsStream<TcpStream>, (String, i64))> {
    let tcp = TcpStream::connect(address).await?;
    let stream = tls
        .connect(ServerName::try_from("localhost")?, tcp)
        .await
        .context("the TLS handshake")?;
    let served = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|der| serial_and_expiry(der))
        .context("a serving certificate")?;
    Ok((stream, served))
}

/// A ConversionReview of one v1beta2 Cluster to v1beta1.
fn conversion_review(uid: usize) -> String {
    format!(
        r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{{"uid":"u-{uid}","desiredAPIVersion":"cluster.x-k8s.io/v1beta1","objects":[{{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","metadata":{{"name":"c","namespace":"default","uid":"c-1"}},"spec":{{}}}}]}}}}"#
    )
}

/// POSTs a ConversionReview on `stream` (kept open) and checks that the
/// Cluster came back converted.
async fn convert(stream: &mut TlsStream<TcpStream>, uid: usize) -> anyhow::Result<()> {
    let body = conversion_review(uid);
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        capwasm::api::WEBHOOK_PATH,
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await?;
    let mut response = Vec::new();
    let mut buffer = [0; 4096];
    let split = loop {
        if let Some(at) = response.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut buffer).await?;
        if n == 0 {
            bail!("the connection closed before a response");
        }
        response.extend_from_slice(&buffer[..n]);
    };
    let head = String::from_utf8_lossy(&response[..split]).to_lowercase();
    let mut rest = response.split_off(split);
    let body = if let Some(length) = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        fill(stream, &mut rest, length).await?;
        rest.truncate(length);
        rest
    } else {
        dechunk(stream, rest).await?
    };
    let body = String::from_utf8_lossy(&body);
    ensure!(head.starts_with("http/1.1 200"), "{head}");
    ensure!(
        body.contains(r#""status":"Success""#)
            && body.contains(r#""apiVersion":"cluster.x-k8s.io/v1beta1""#),
        "{body}"
    );
    Ok(())
}

/// Reads from `stream` into `buffer` until it holds `length` bytes.
async fn fill(
    stream: &mut TlsStream<TcpStream>,
    buffer: &mut Vec<u8>,
    length: usize,
) -> anyhow::Result<()> {
    let mut read = [0; 4096];
    while buffer.len() < length {
        let n = stream.read(&mut read).await?;
        if n == 0 {
            bail!("the connection closed within a response");
        }
        buffer.extend_from_slice(&read[..n]);
    }
    Ok(())
}

/// A chunked body from `stream`, `buffer` holding what came after the
/// head; the connection left at the next response.
async fn dechunk(
    stream: &mut TlsStream<TcpStream>,
    mut buffer: Vec<u8>,
) -> anyhow::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line = loop {
            if let Some(at) = buffer.windows(2).position(|w| w == b"\r\n") {
                break at;
            }
            let more = buffer.len() + 1;
            fill(stream, &mut buffer, more).await?;
        };
        let size = usize::from_str_radix(String::from_utf8_lossy(&buffer[..line]).trim(), 16)?;
        fill(stream, &mut buffer, line + 2 + size + 2).await?;
        body.extend_from_slice(&buffer[line + 2..line + 2 + size]);
        buffer.drain(..line + 2 + size + 2);
        if size == 0 {
            return Ok(body);
        }
    }
}

/// `capwasm run` in `namespace` as `instance`, its webhook at `webhook`,
/// its serving certificate valid `validity` seconds.
async fn replica(
    env: &TestEnv,
    namespace: &str,
    instance: &str,
    webhook: &str,
    validity: u64,
) -> OperatorProcess {
    let args = [
        format!("--webhook-bind-address={webhook}"),
        format!("--webhook-cert-validity-seconds={validity}"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let launch = Launch {
        wait_to_lead: false,
        ..Launch::default()
    };
    OperatorProcess::launch(env.management(), namespace, instance, &args, launch).await
}

/// Waits until `operator` serves its endpoints (it was launched without
/// waiting to lead), then until `/readyz` says its webhook serves.
async fn ready(operator: &OperatorProcess) {
    let until = Instant::now() + Duration::from_secs(60);
    while operator
        .log_lines(|line| line.contains("capwasm is running"))
        .is_empty()
    {
        assert!(Instant::now() < until, "capwasm run did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    operator.ready().await;
}

/// The certificate writes `operator` counted as `outcome`.
async fn writes(operator: &OperatorProcess, outcome: &str) -> u64 {
    let (_, metrics) = operator.get("/metrics").await;
    sample(
        &metrics,
        &format!("capwasm_webhook_certificate_writes_total{{outcome=\"{outcome}\"}}"),
    )
}

#[tokio::test]
async fn two_settles_of_the_same_read_write_once_and_the_second_serves_the_firsts() {
    let env = TestEnv::shared().await.unwrap();
    let ns = env
        .management()
        .create_namespace("certs-race")
        .await
        .unwrap();
    let client = env.management().client().unwrap();
    let settings = Settings {
        bind: "127.0.0.1:0".parse().unwrap(),
        namespace: ns.clone(),
        secret: SECRET.into(),
        endpoint: capwasm::api::WebhookClient::Url("https://127.0.0.1:9443/convert".into()),
        validity: Validity {
            serving: Duration::from_secs(3),
            ..Validity::default()
        },
    };
    let metrics = Metrics::default();
    let certs = Certs::new(client, &settings, metrics.clone());

    // Both found no Secret: both make one, one is refused.
    let (a, b) = tokio::join!(certs.settle(None, false), certs.settle(None, false));
    let (a, b) = (a.unwrap(), b.unwrap());
    let mut made = [a.wrote, b.wrote];
    made.sort_by_key(|w| w.metric_label());
    assert_eq!(made, [Wrote::Lost, Wrote::Created]);
    assert_eq!(a.stored.served, b.stored.served);
    assert_eq!(metrics.webhook_certificate_writes("conflict"), 1);

    // Both read it once due, and both renew: one is refused.
    let due = a.next.unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let wait = u64::try_from(due).unwrap().saturating_sub(now) + 1;
    tokio::time::sleep(Duration::from_secs(wait)).await;
    let read = certs.read().await.unwrap().unwrap();
    let (a2, b2) = tokio::join!(
        certs.settle(Some(read.clone()), false),
        certs.settle(Some(read.clone()), false)
    );
    let (a2, b2) = (a2.unwrap(), b2.unwrap());
    let mut renewed = [a2.wrote, b2.wrote];
    renewed.sort_by_key(|w| w.metric_label());
    assert_eq!(renewed, [Wrote::Lost, Wrote::Renewed]);
    assert_eq!(a2.stored.served, b2.stored.served);
    assert_ne!(a2.stored.served.cert_pem, read.served.cert_pem);
    // The same CA signed it: the caBundle stays.
    assert_eq!(a2.stored.served.ca_pem, read.served.ca_pem);
    assert_eq!(pems(&a2.stored.served.ca_pem).len(), 1);
    assert_eq!(metrics.webhook_certificate_writes("conflict"), 2);
}

/// How long the replicas' certificates are watched.
const WATCHED: Duration = Duration::from_secs(16);

#[tokio::test]
async fn two_replicas_started_together_end_with_one_ca_and_the_loser_serves_the_winners() {
    let env = TestEnv::shared().await.unwrap();
    let ns = env
        .management()
        .create_namespace("certs-two")
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(env.management().client().unwrap(), &ns);
    let (address_a, address_b) = (free_address(), free_address());
    // Started together, no Secret yet; a serving certificate of 6 s, so
    // that both renew it at the same moment every 4 s.
    let (a, b) = tokio::join!(
        replica(env, &ns, "replica-a", &address_a, 6),
        replica(env, &ns, "replica-b", &address_b, 6),
    );
    ready(&a).await;
    ready(&b).await;
    let ca = bundle(&secrets).await.unwrap();
    assert_eq!(pems(&String::from_utf8_lossy(&ca)).len(), 1, "one CA");
    let tls = tls_client(&ca).unwrap();

    // Every 200 ms, a handshake with each: both chain to the one CA.
    let started = Instant::now();
    let mut seen = Vec::new();
    while started.elapsed() < WATCHED {
        for address in [&address_a, &address_b] {
            let (_, served) = handshake(address, &tls).await.unwrap();
            if !seen.contains(&served) {
                seen.push(served);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Both end serving the Secret's certificate.
    let now = secrets.get(SECRET).await.unwrap();
    assert_eq!(
        now.data
            .as_ref()
            .and_then(|d| d.get("ca.crt"))
            .map(|v| &v.0),
        Some(&ca),
        "the CA stayed"
    );
    let latest = now
        .data
        .as_ref()
        .and_then(|d| d.get("tls.crt"))
        .and_then(|v| CertificateDer::pem_slice_iter(&v.0).next())
        .and_then(Result::ok)
        .and_then(|der| serial_and_expiry(&der))
        .unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    let mut served = Vec::new();
    for address in [&address_a, &address_b] {
        loop {
            let (_, now_served) = handshake(address, &tls).await.unwrap();
            if now_served == latest || Instant::now() > until {
                served.push(now_served);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    let lost: Vec<String> = [&a, &b]
        .iter()
        .flat_map(|p| p.log_lines(|line| line.contains(LOST)))
        .collect();
    let mut counted = Vec::new();
    for (name, replica) in [("a", &a), ("b", &b)] {
        counted.push((
            name,
            writes(replica, "created").await,
            writes(replica, "renewed").await,
            writes(replica, "conflict").await,
        ));
    }
    eprintln!(
        "{} serving certificates seen in {WATCHED:?}; writes (replica, created, renewed, conflict): {counted:?}",
        seen.len()
    );
    for line in &lost {
        eprintln!("lost: {line}");
    }
    assert_eq!(served, [latest.clone(), latest], "both serve the Secret's");
    assert!(seen.len() >= 3, "renewed: {seen:?}");
    let created: u64 = counted.iter().map(|c| c.1).sum();
    let conflicts: u64 = counted.iter().map(|c| c.3).sum();
    assert_eq!(created, 1, "one replica made it");
    assert!(conflicts >= 1 && !lost.is_empty(), "no replica lost a race");
}

#[tokio::test]
async fn a_short_lived_serving_certificate_is_renewed_without_a_restart_while_every_call_succeeds()
{
    let env = TestEnv::shared().await.unwrap();
    let ns = env
        .management()
        .create_namespace("certs-renew")
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(env.management().client().unwrap(), &ns);
    let address = free_address();
    let operator = replica(env, &ns, "replica-1", &address, 6).await;
    ready(&operator).await;
    let pid = operator.process_id();
    let tls = tls_client(&bundle(&secrets).await.unwrap()).unwrap();

    // A connection opened before any renewal, kept for the whole test.
    let (mut kept, first) = handshake(&address, &tls).await.unwrap();
    convert(&mut kept, 0).await.unwrap();
    // A new connection and a ConversionReview every 100 ms.
    let started = Instant::now();
    let (mut calls, mut failures) = (0usize, Vec::new());
    let mut seen = vec![(first, Duration::ZERO)];
    while started.elapsed() < WATCHED {
        calls += 1;
        let call = async {
            let (mut stream, served) = handshake(&address, &tls).await?;
            convert(&mut stream, calls).await?;
            anyhow::Ok(served)
        };
        match call.await {
            Ok(served) => {
                if seen.iter().all(|(s, _)| *s != served) {
                    seen.push((served, started.elapsed()));
                }
            }
            Err(error) => failures.push(format!("{error:#}")),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let kept_still_works = convert(&mut kept, calls + 1).await;

    eprintln!(
        "{calls} calls in {WATCHED:?}, {} failed; serving certificates (serial, notAfter, first seen): {seen:?}; \
         the connection opened first: {kept_still_works:?}",
        failures.len()
    );
    assert!(failures.is_empty(), "{failures:?}");
    assert!(seen.len() >= 3, "renewed at least twice: {seen:?}");
    assert!(
        seen.windows(2).all(|w| w[1].0.1 > w[0].0.1),
        "each later than the last"
    );
    kept_still_works.unwrap();
    assert_eq!(operator.process_id(), pid, "the same process");
    assert!(
        writes(&operator, "renewed").await >= 2,
        "{:?}",
        operator.log_lines(|l| l.contains("certificate"))
    );
}

/// The certificate Secret as an older version made it (no `ca.key`), and
/// what it holds.
fn older_versions_secret() -> (Secret, capwasm::webhook::ServingCert) {
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let old = capwasm::webhook::generate_cert(&names, Validity::default()).unwrap();
    let pem = |text: &str| k8s_openapi::ByteString(text.as_bytes().to_vec());
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(SECRET.into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(
            [
                ("tls.crt".to_owned(), pem(&old.cert_pem)),
                ("tls.key".to_owned(), pem(&old.key_pem)),
                ("ca.crt".to_owned(), pem(&old.ca_pem)),
            ]
            .into(),
        ),
        ..Default::default()
    };
    (secret, old)
}

/// The caBundle the Cluster CRD converts with.
async fn crd_ca_bundle(client: &kube::Client) -> Option<Vec<u8>> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.get("clusters.cluster.x-k8s.io")
        .await
        .unwrap()
        .spec
        .conversion
        .and_then(|c| c.webhook)
        .and_then(|w| w.client_config)
        .and_then(|c| c.ca_bundle)
        .map(|b| b.0)
}

/// Once `operator` has pointed the CRDs at itself and the API server
/// (which takes up a CRD's change on its own time) converts through it: a
/// readiness that does not wait for the CRDs, and the installed CRDs name a
/// Service this test has none of. The v1beta1 Cluster made here is `c-first`.
async fn converting(operator: &OperatorProcess, client: &kube::Client, ns: &str) {
    let until = Instant::now() + Duration::from_secs(60);
    while operator
        .log_lines(|l| l.contains("trust the webhook"))
        .is_empty()
    {
        assert!(
            Instant::now() < until,
            "the CRDs were never pointed at the webhook"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cluster = testenv::flows::v1beta1_cluster(ns, "c-first");
    while let Err(error) = testenv::flows::create_v1beta1(client, ns, &cluster).await {
        let error = capwasm::report::error_chain(&error);
        assert!(
            Instant::now() < until,
            "the API server never converted: {error}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_older_versions_secret_gets_a_kept_ca_trusted_before_it_signs_while_the_api_server_converts()
 {
    // An API server of its own: the CRDs' caBundle is read here, and the
    // other tests' replicas point the shared server's CRDs at theirs.
    let env = TestEnv::start(testenv::Options {
        workload: false,
        ..testenv::Options::default()
    })
    .await
    .unwrap();
    let client = env.management().client().unwrap();
    let ns = env
        .management()
        .create_namespace("certs-migrate")
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let (secret, old) = older_versions_secret();
    secrets
        .create(&kube::api::PostParams::default(), &secret)
        .await
        .unwrap();

    let address = free_address();
    let args = [
        format!("--webhook-bind-address={address}"),
        format!(
            "--webhook-url=https://{address}{}",
            capwasm::api::WEBHOOK_PATH
        ),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let launch = Launch {
        wait_to_lead: false,
        ..Launch::default()
    };
    let operator = OperatorProcess::launch(env.management(), &ns, "replica-1", &args, launch).await;
    ready(&operator).await;
    converting(&operator, &client, &ns).await;

    // A v1beta1 Cluster created (converted by the webhook, called by the
    // API server with the CRD's caBundle) every 200 ms, until the Secret
    // serves a certificate of the new CA, and 2 s beyond.
    let started = Instant::now();
    let (mut created, mut failures, mut migrated) = (0, Vec::new(), None);
    while migrated.is_none_or(|at: Duration| started.elapsed() < at + Duration::from_secs(2))
        && started.elapsed() < Duration::from_secs(60)
    {
        let cluster = testenv::flows::v1beta1_cluster(&ns, &format!("c{created}"));
        match testenv::flows::create_v1beta1(&client, &ns, &cluster).await {
            Ok(_) => created += 1,
            // When (beside the migration's time) and the whole chain:
            // which request failed, and why (TLS, a 5xx).
            Err(error) => failures.push(format!(
                "at {:?}: {}",
                started.elapsed(),
                capwasm::report::error_chain(&error)
            )),
        }
        if migrated.is_none() {
            let now = secrets.get(SECRET).await.unwrap();
            let data = now.data.unwrap_or_default();
            let text = |key: &str| String::from_utf8_lossy(&data[key].0).into_owned();
            if data.contains_key("ca.key") && text("tls.crt") != old.cert_pem {
                migrated = Some(started.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let now = secrets.get(SECRET).await.unwrap();
    let data = now.data.unwrap_or_default();
    let bundle = String::from_utf8_lossy(&data["ca.crt"].0).into_owned();
    let cas = pems(&bundle);
    let ca_bundle = crd_ca_bundle(&client).await;
    let order: Vec<String> = operator
        .log_lines(|l| {
            l.contains("wrote the webhook certificate") || l.contains("trust the webhook")
        })
        .iter()
        .map(|l| {
            l.split_once("capwasm_operator")
                .map_or(l.clone(), |(_, r)| r.to_owned())
        })
        .collect();
    eprintln!(
        "{created} v1beta1 Clusters created, {} refused; the new CA's certificate served after {migrated:?}; \
         {} CAs in the bundle; the operator: {order:#?}",
        failures.len(),
        cas.len()
    );
    assert!(failures.is_empty(), "{failures:?}");
    assert!(migrated.is_some(), "not migrated");
    assert_eq!(cas.len(), 2, "the new CA, then the old one");
    assert_eq!(cas[1].trim(), old.ca_pem.trim());
    assert_eq!(
        ca_bundle.as_deref(),
        Some(bundle.as_bytes()),
        "the CRD trusts both"
    );
    // The certificate served chains to the new CA alone.
    let tls = tls_client(cas[0].as_bytes()).unwrap();
    handshake(&address, &tls).await.unwrap();
}
