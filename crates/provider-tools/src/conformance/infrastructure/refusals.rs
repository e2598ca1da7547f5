//! What the provider must refuse or retry, and how: credentials the cloud
//! turns down, missing or unusable bootstrap data, a full, down or
//! forbidden cloud.

use super::{POOL, cloud, config, instant, loopback, pool_on_cloud, requests};
use crate::conformance::{
    Failure, Subject, ensure, ensure_eq, expect_retry_after, expect_terminal,
};
use crate::simcloud::Settings;
use crate::wasm::types::{self, BootstrapData, BootstrapFormat, Credential};
use crate::wasm::{CallError, Capabilities, HostAuth, Scheme};

/// The cloud's bearer token, added by the host from the credentials (the
/// guest never holds it), or handed to the guest where the module exposes
/// the credentials (the weaker, opt-in way): either way the cloud wants it.
pub async fn cloud_requires_the_bearer_token_from_credentials_when_configured(
    subject: &Subject,
) -> Result<(), Failure> {
    let running = cloud(Settings {
        bearer_token: Some("s3cret".into()),
        ..instant()
    })
    .await?;
    let host = running.endpoint().trim_start_matches("http://").to_owned();
    let mut request = requests::reconcile_pool(&config(&running.endpoint()), 1);
    let credential = |value: &[u8]| Credential {
        key: "token".into(),
        value: value.to_vec(),
    };

    let signing = subject
        .load(Capabilities {
            allowed_hosts: vec![host.clone()],
            request_auth: vec![HostAuth {
                host: host.clone(),
                plain_http: true,
                scheme: Scheme::Bearer {
                    token: "token".into(),
                },
            }],
            ..Capabilities::default()
        })
        .await?;
    request.credentials = vec![credential(b"wrong")];
    match signing.reconcile(&request).await {
        Err(CallError::CredentialsRejected {
            host: rejecting,
            status: 401,
            ..
        }) => ensure_eq!(rejecting, host, "the host that refused the credentials"),
        Ok(_) => {
            return Err(Failure::Expected(format!(
                "expected the credentials refused by {host} (401), got a result"
            )));
        }
        Err(other) => {
            return Err(Failure::Expected(format!(
                "expected the credentials refused by {host} (401), got: {}",
                Failure::Call(other)
            )));
        }
    }
    ensure_eq!(
        running.cloud().total_creations(),
        0,
        "instances created with the wrong token"
    );
    request.credentials = vec![credential(b"s3cret")];
    ensure_eq!(
        signing.reconcile(&request).await?.instances.len(),
        1,
        "instances with the right token, signed by the host"
    );

    let exposing = subject
        .load(Capabilities {
            allowed_hosts: vec![host],
            expose_credentials: true,
            ..Capabilities::default()
        })
        .await?;
    request.credentials = Vec::new();
    expect_terminal(exposing.reconcile(&request).await, "Unauthorized")?;
    request.credentials = vec![credential(b"wrong")];
    expect_terminal(exposing.reconcile(&request).await, "Unauthorized")?;
    request.credentials = vec![credential(b"s3cret")];
    ensure_eq!(
        exposing.reconcile(&request).await?.instances.len(),
        1,
        "instances with the right token, exposed to the guest"
    );
    Ok(())
}

/// No bootstrap data yet: retry later, and create nothing.
pub async fn reconcile_asks_to_retry_when_bootstrap_data_is_missing(
    subject: &Subject,
) -> Result<(), Failure> {
    let (running, provider, mut request) = pool_on_cloud(subject, instant(), 2).await?;
    request.bootstrap_data = None;

    expect_retry_after(provider.reconcile(&request).await)?;
    ensure_eq!(running.cloud().total_creations(), 0, "instances created");
    Ok(())
}

/// Bootstrap data a node cannot run: its instances fail, and the pool is not ready.
pub async fn instances_end_failed_and_pool_not_ready_when_bootstrap_data_cannot_join(
    subject: &Subject,
) -> Result<(), Failure> {
    let (running, provider, mut request) = pool_on_cloud(subject, instant(), 2).await?;
    request.bootstrap_data = Some(BootstrapData {
        format: BootstrapFormat::ShellScript,
        value: b"kubeadm join --no-interpreter-line\n".to_vec(),
    });

    let state = provider.reconcile(&request).await?;

    ensure!(!state.ready, "the pool is reported ready");
    ensure!(
        state
            .instances
            .iter()
            .all(|i| matches!(i.state, types::InstanceState::Failed)),
        "instances not all reported failed: {:?}",
        state.instances
    );
    ensure!(
        running
            .cloud()
            .instances_of(POOL)
            .iter()
            .all(|r| r.join_failure.is_some()),
        "the cloud's instances did not all fail to join"
    );
    Ok(())
}

/// The cloud has room for 2 of 3: retry later for the third.
pub async fn reconcile_asks_to_retry_when_the_cloud_is_full(
    subject: &Subject,
) -> Result<(), Failure> {
    let (running, provider, request) = pool_on_cloud(
        subject,
        Settings {
            max_instances: 2,
            ..instant()
        },
        3,
    )
    .await?;

    expect_retry_after(provider.reconcile(&request).await)?;
    ensure_eq!(
        running.cloud().instances_of(POOL).len(),
        2,
        "instances in the full cloud"
    );
    Ok(())
}

/// Nothing listens at the endpoint: retry later, both to reconcile and to delete.
pub async fn reconcile_asks_to_retry_when_the_cloud_is_down(
    subject: &Subject,
) -> Result<(), Failure> {
    // A port that was free a moment ago: nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| Failure::Setup(format!("a free loopback port: {e}")))?
        .port();
    let provider = subject.load(loopback()).await?;
    let config = config(&format!("http://127.0.0.1:{port}"));

    expect_retry_after(
        provider
            .reconcile(&requests::reconcile_pool(&config, 1))
            .await,
    )?;
    expect_retry_after(provider.delete(&requests::delete_pool(&config)).await)?;
    Ok(())
}

/// The endpoint names a host the module may not reach: terminal, nothing created.
pub async fn reconcile_is_denied_when_the_endpoint_host_is_not_allowed(
    subject: &Subject,
) -> Result<(), Failure> {
    let running = cloud(instant()).await?;
    let provider = subject.load(loopback()).await?;
    // The same server under a name the provider may not reach.
    let endpoint = format!("http://localhost:{}", running.addr().port());
    let request = requests::reconcile_pool(&config(&endpoint), 1);

    expect_terminal(provider.reconcile(&request).await, "HttpRequestDenied")?;
    ensure_eq!(running.cloud().total_creations(), 0, "instances created");
    Ok(())
}
