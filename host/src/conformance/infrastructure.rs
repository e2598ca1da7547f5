//! The infrastructure world against the simulated cloud, each scenario on a
//! cloud of its own on loopback: scaling, idempotency across lost records,
//! deletion, credentials, and how an unusable or unreachable cloud is
//! reported. A provider passes if it provisions in the simulated cloud
//! exactly as sim-infrastructure does, with its config schema
//! (`endpoint`, `region`, `failureDomains`, `nodeLabels`, `controlPlanePort`).

use std::collections::BTreeSet;
use std::time::Duration;

use super::{
    Failure, Provider, Scenario, Subject, ensure, ensure_eq, expect_retry_after, expect_terminal,
    requests,
};
use crate::simcloud::{InstanceRecord, InstanceState, RunningSimCloud, Settings, SimCloud};
use crate::wasm::machine_pools::{PoolState, ReconcileRequest};
use crate::wasm::types::{self, BootstrapData, BootstrapFormat, Credential, DeleteOutcome};
use crate::wasm::{CallError, Capabilities, HostAuth, Scheme};

/// The region every scenario's config names.
pub const REGION: &str = "local-1";
/// `<namespace>/<name>` of the pool in [`requests::reconcile_pool`].
pub const POOL: &str = "default/pool-a";
/// How long the cloud may take to reach what a scenario waits for.
const WAIT: Duration = Duration::from_secs(30);

/// Calls the macro `$then` with the name of every scenario, in the order
/// they run: what [`SCENARIOS`] is made of, and what a test suite makes one
/// test per scenario of.
#[macro_export]
macro_rules! infrastructure_scenarios {
    ($then:ident) => {
        $then!(
            scale_up_creates_sim_instances_and_pool_is_ready_once_they_run,
            reconcile_creates_nothing_when_repeated_with_the_recorded_instances,
            reconcile_creates_no_duplicate_when_a_crash_lost_the_recorded_instances,
            scale_down_terminates_the_highest_ordinals,
            delete_is_done_once_the_cloud_has_no_instance_of_the_pool,
            cloud_requires_the_bearer_token_from_credentials_when_configured,
            reconcile_asks_to_retry_when_bootstrap_data_is_missing,
            instances_end_failed_and_pool_not_ready_when_bootstrap_data_cannot_join,
            reconcile_asks_to_retry_when_the_cloud_is_full,
            reconcile_asks_to_retry_when_the_cloud_is_down,
            reconcile_is_denied_when_the_endpoint_host_is_not_allowed,
            reconcile_cluster_reports_endpoint_and_failure_domains_from_config,
            provider_ids_are_derived_from_config_and_owned_by_scheme,
        );
    };
}

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        /// Every scenario, in the order they run.
        pub const SCENARIOS: &[Scenario] = &[$(Scenario {
            name: stringify!($name),
            run: |subject| Box::pin($name(subject)),
        }),*];
    };
}

crate::infrastructure_scenarios!(scenarios);

/// The simulated cloud with `settings`, on an ephemeral loopback port.
pub async fn cloud(settings: Settings) -> Result<RunningSimCloud, Failure> {
    SimCloud::new(settings)
        .start_on_loopback()
        .await
        .map_err(|e| Failure::Setup(format!("the simulated cloud: {e}")))
}

/// Instances boot and terminate at once: states follow calls deterministically.
pub fn instant() -> Settings {
    Settings {
        boot_delay: Duration::ZERO,
        termination_delay: Duration::ZERO,
        ..Settings::default()
    }
}

/// The provider's config for the cloud at `endpoint`.
pub fn config(endpoint: &str) -> String {
    serde_json::json!({"endpoint": endpoint, "region": REGION}).to_string()
}

/// The request token of the pool's instance `ordinal`: its UID and ordinal.
pub fn token(ordinal: u32) -> String {
    format!("{}-{ordinal}", requests::object("pool-a").uid)
}

/// Allowed to reach 127.0.0.1 only.
fn loopback() -> Capabilities {
    Capabilities {
        allowed_hosts: vec!["127.0.0.1".into()],
        ..Capabilities::default()
    }
}

/// A simulated cloud with `settings`, the component allowed to reach it,
/// and the request to reconcile [`POOL`] in it to `replicas`.
async fn pool_on_cloud(
    subject: &Subject,
    settings: Settings,
    replicas: u32,
) -> Result<(RunningSimCloud, Provider<'_>, ReconcileRequest), Failure> {
    let running = cloud(settings).await?;
    let provider = subject.load(loopback()).await?;
    let request = requests::reconcile_pool(&config(&running.endpoint()), replicas);
    Ok((running, provider, request))
}

/// Waits until `done` holds for the instances of [`POOL`].
async fn wait_for_pool(
    cloud: &SimCloud,
    what: &str,
    mut done: impl FnMut(&[&InstanceRecord]) -> bool,
) -> Result<(), Failure> {
    let waited = tokio::time::timeout(
        WAIT,
        cloud.wait_for(|all| {
            let pool: Vec<_> = all.iter().filter(|r| r.instance.pool == POOL).collect();
            done(&pool)
        }),
    )
    .await;
    match waited {
        Ok(_) => Ok(()),
        Err(_) => Err(Failure::Expected(format!(
            "the cloud did not reach {what} within {WAIT:?}"
        ))),
    }
}

fn ids(state: &PoolState) -> BTreeSet<String> {
    state.instances.iter().map(|i| i.id.clone()).collect()
}

fn cloud_ids(cloud: &SimCloud) -> BTreeSet<String> {
    cloud
        .instances_of(POOL)
        .into_iter()
        .map(|r| r.instance.id)
        .collect()
}

/// Scale up to 3: three instances, not ready while they boot, ready once they run.
pub async fn scale_up_creates_sim_instances_and_pool_is_ready_once_they_run(
    subject: &Subject,
) -> Result<(), Failure> {
    let (running, provider, mut request) = pool_on_cloud(
        subject,
        Settings {
            boot_delay: Duration::from_millis(100),
            ..instant()
        },
        3,
    )
    .await?;

    let state = provider.reconcile(&request).await?;
    ensure_eq!(state.instances.len(), 3, "instances reported");
    ensure!(
        !state.ready,
        "the pool is reported ready while its instances boot"
    );
    ensure!(
        state.requeue_after_seconds.is_some(),
        "no requeue asked while instances boot"
    );
    for instance in &state.instances {
        ensure_eq!(
            instance.provider_id,
            format!("sim://{REGION}/{}", instance.id),
            "providerID of {}",
            instance.id
        );
    }
    ensure_eq!(
        ids(&state),
        cloud_ids(running.cloud()),
        "instances reported vs in the cloud"
    );
    let tokens: Vec<_> = state
        .instances
        .iter()
        .map(|i| i.request_token.clone())
        .collect();
    ensure_eq!(
        tokens,
        [0, 1, 2].map(|n| Some(token(n))).to_vec(),
        "request tokens, by ordinal"
    );

    wait_for_pool(running.cloud(), "3 running instances", |pool| {
        pool.iter()
            .all(|r| r.instance.state == InstanceState::Running)
    })
    .await?;
    request.instances = state.instances;
    let state = provider.reconcile(&request).await?;
    ensure!(state.ready, "the pool is not ready once its instances run");
    ensure_eq!(state.requeue_after_seconds, None, "requeue once ready");
    ensure!(
        state
            .instances
            .iter()
            .all(|i| matches!(i.state, types::InstanceState::Running)),
        "instances not all reported running: {:?}",
        state.instances
    );
    ensure_eq!(running.cloud().total_creations(), 3, "instances created");
    Ok(())
}

/// Reconciling again with what was recorded creates nothing.
pub async fn reconcile_creates_nothing_when_repeated_with_the_recorded_instances(
    subject: &Subject,
) -> Result<(), Failure> {
    let (running, provider, mut request) = pool_on_cloud(subject, instant(), 3).await?;
    let first = provider.reconcile(&request).await?;

    request.instances = first.instances.clone();
    let second = provider.reconcile(&request).await?;
    request.instances = second.instances.clone();
    let third = provider.reconcile(&request).await?;

    ensure_eq!(ids(&second), ids(&first), "instances of the second call");
    ensure_eq!(ids(&third), ids(&first), "instances of the third call");
    ensure!(third.ready, "the pool is not ready");
    ensure_eq!(running.cloud().total_creations(), 3, "instances created");
    Ok(())
}

/// The host lost the records of a call (it crashed): calling again, and
/// scaling up, creates no duplicate; the request tokens find the instances.
pub async fn reconcile_creates_no_duplicate_when_a_crash_lost_the_recorded_instances(
    subject: &Subject,
) -> Result<(), Failure> {
    let (running, provider, mut request) = pool_on_cloud(subject, instant(), 3).await?;
    let first = provider.reconcile(&request).await?;

    let again = provider.reconcile(&request).await?;
    ensure_eq!(ids(&again), ids(&first), "instances after the lost records");
    ensure_eq!(running.cloud().total_creations(), 3, "instances created");

    // Scaling up without the records: ordinals 0-2 are asked for again with
    // their old tokens, and the cloud answers with the existing instances.
    request.replicas = 5;
    let grown = provider.reconcile(&request).await?;
    ensure!(
        ids(&grown).is_superset(&ids(&first)),
        "the first instances are not among the 5: {:?}",
        grown.instances
    );
    ensure_eq!(running.cloud().total_creations(), 5, "instances created");
    for n in 0..5 {
        ensure_eq!(
            running.cloud().creations(REGION, &token(n)),
            1,
            "creations with token {}",
            token(n)
        );
    }
    let tokens: Vec<_> = grown
        .instances
        .iter()
        .map(|i| i.request_token.clone())
        .collect();
    ensure_eq!(
        tokens,
        (0..5).map(|n| Some(token(n))).collect::<Vec<_>>(),
        "request tokens, by ordinal"
    );
    Ok(())
}

/// Scale 3 → 1 terminates ordinals 1 and 2 and keeps 0.
pub async fn scale_down_terminates_the_highest_ordinals(subject: &Subject) -> Result<(), Failure> {
    // Terminating instances stay listed for the whole scenario.
    let (running, provider, mut request) = pool_on_cloud(
        subject,
        Settings {
            termination_delay: Duration::from_secs(600),
            ..instant()
        },
        3,
    )
    .await?;
    let three = provider.reconcile(&request).await?;

    request.instances = three.instances;
    request.replicas = 1;
    let one = provider.reconcile(&request).await?;

    let by_token = |n: u32| {
        running
            .cloud()
            .instances_of(POOL)
            .into_iter()
            .find(|r| r.request_token == token(n))
            .map(|r| r.instance.state)
    };
    ensure_eq!(by_token(0), Some(InstanceState::Running), "ordinal 0");
    ensure_eq!(by_token(1), Some(InstanceState::Terminating), "ordinal 1");
    ensure_eq!(by_token(2), Some(InstanceState::Terminating), "ordinal 2");
    ensure!(
        one.ready,
        "the pool is not ready though its one instance runs"
    );
    ensure!(
        one.requeue_after_seconds.is_some(),
        "no requeue asked while two instances terminate"
    );
    ensure_eq!(running.cloud().total_creations(), 3, "instances created");
    Ok(())
}

/// Deleting a pool is in progress while the cloud has any of its
/// instances, and done once it has none.
pub async fn delete_is_done_once_the_cloud_has_no_instance_of_the_pool(
    subject: &Subject,
) -> Result<(), Failure> {
    let running = cloud(Settings {
        termination_delay: Duration::from_millis(100),
        ..instant()
    })
    .await?;
    let provider = subject.load(loopback()).await?;
    let config = config(&running.endpoint());
    let mut request = requests::delete_pool(&config);
    request.instances = provider
        .reconcile(&requests::reconcile_pool(&config, 3))
        .await?
        .instances;

    let first = provider.delete(&request).await?;
    ensure!(
        matches!(first, DeleteOutcome::InProgress(s) if s > 0),
        "expected in progress with a delay while instances terminate, got {first:?}"
    );
    wait_for_pool(running.cloud(), "no instance of the pool", |pool| {
        pool.is_empty()
    })
    .await?;
    let second = provider.delete(&request).await?;

    ensure!(
        matches!(second, DeleteOutcome::Done),
        "expected done once no instance is left, got {second:?}"
    );
    ensure!(
        running.cloud().instances_of(POOL).is_empty(),
        "instances of the pool are left"
    );
    Ok(())
}

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
                scheme: Scheme::Bearer {
                    token: "token".into(),
                },
            }],
            expose_credentials: false,
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

/// The cluster's endpoint and failure domains come from the config alone.
pub async fn reconcile_cluster_reports_endpoint_and_failure_domains_from_config(
    subject: &Subject,
) -> Result<(), Failure> {
    let provider = subject.load(loopback()).await?;
    let config = serde_json::json!({
        "endpoint": "http://127.0.0.1:1",
        "region": REGION,
        "failureDomains": ["zone-a", "zone-b"],
        "controlPlanePort": 7443,
    })
    .to_string();

    let state = provider
        .reconcile_cluster(&requests::cluster_request(&config))
        .await?;

    ensure!(state.ready, "the cluster is not reported ready");
    let endpoint = state
        .control_plane_endpoint
        .map(|e| (e.host, e.port))
        .ok_or_else(|| Failure::Expected("no control plane endpoint".into()))?;
    ensure_eq!(
        endpoint,
        ("127.0.0.1".to_owned(), 7443),
        "control plane endpoint"
    );
    let domains: Vec<_> = state
        .failure_domains
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    ensure_eq!(domains, ["zone-a", "zone-b"], "failure domains");
    Ok(())
}

/// `provider-id` gives what reconcile reported; `owns` claims `sim://` only.
pub async fn provider_ids_are_derived_from_config_and_owned_by_scheme(
    subject: &Subject,
) -> Result<(), Failure> {
    let running = cloud(instant()).await?;
    let provider = subject.load(loopback()).await?;
    let config = config(&running.endpoint());
    let state = provider
        .reconcile(&requests::reconcile_pool(&config, 1))
        .await?;
    let instance = state
        .instances
        .first()
        .ok_or_else(|| Failure::Expected("no instance reported for 1 replica".into()))?;

    let derived = provider.provider_id(&config, instance).await?;
    ensure_eq!(
        derived,
        instance.provider_id,
        "provider-id of the reported instance"
    );
    ensure!(
        provider.owns(&instance.provider_id).await?,
        "owns refuses its own providerID {}",
        instance.provider_id
    );
    ensure!(
        !provider.owns("aws:///us-east-1a/i-0123").await?,
        "owns claims aws:///us-east-1a/i-0123"
    );
    Ok(())
}
