//! The sim-infrastructure provider, loaded in the real runtime, against
//! the simulated cloud: scaling, idempotency across lost records, deletion,
//! credentials, and how an unusable or unreachable cloud is reported.
//!
//! Every scenario runs against each implementation of the provider — the
//! Rust one (`rust::`), the Python one (`python::`) and the JavaScript one
//! (`js::`) — so all are held to the same behaviour. The cloud is served by this test's runtime while
//! guest calls wait on it.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Result;
use capwasm::simcloud::{InstanceRecord, InstanceState, RunningSimCloud, Settings, SimCloud};
use capwasm::testing::requests;
use capwasm::wasm::machine_pools::{DeleteRequest, PoolState, ReconcileRequest};
use capwasm::wasm::types::{
    self, BootstrapData, BootstrapFormat, Credential, DeleteOutcome, ProviderError,
};
use capwasm::wasm::{
    CallError, Capabilities, HostAuth, Limits, PrecompiledCache, ProviderSource, ProviderSpec,
    Runtime, RuntimeSettings, Scheme,
};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::wait::await_condition;
use testenv::{TestEnv, guest_path};

const PROVIDER: &str = "sim";
const REGION: &str = "local-1";
/// `<namespace>/<name>` of the pool in `requests::reconcile_pool`.
const POOL: &str = "default/pool-a";
const WAIT: Duration = Duration::from_secs(30);

/// The implementations of sim-infrastructure under test.
const RUST: &str = "sim_infrastructure.wasm";
const PYTHON: &str = "python-sim-infrastructure.wasm";
const JS: &str = "js-sim-infrastructure.wasm";

/// One compilation at a time: the first of a component fills the cache and
/// the others load from it (a Python component takes seconds to compile).
static LOADING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The runtime with `component` loaded, allowed to reach 127.0.0.1 only.
async fn runtime(component: &str) -> Runtime {
    runtime_with(
        component,
        Capabilities {
            allowed_hosts: vec!["127.0.0.1".into()],
            ..Capabilities::default()
        },
    )
    .await
}

/// The runtime with `component` loaded under `capabilities`.
async fn runtime_with(component: &str, capabilities: Capabilities) -> Runtime {
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("precompiled");
    let settings = RuntimeSettings {
        cache: Some(PrecompiledCache::new(cache)),
        ..RuntimeSettings::default()
    };
    let runtime = Runtime::new(settings, None).expect("runtime");
    let loading = LOADING.lock().await;
    runtime
        .swap(ProviderSpec {
            name: String::from(PROVIDER),
            source: ProviderSource::File(guest_path(component)),
            sha256: None,
            limits: Limits::default(),
            capabilities,
        })
        .await
        .unwrap_or_else(|e| panic!("loading {component}: {e:#?} (run `make guests`)"));
    drop(loading);
    runtime
}

async fn cloud(settings: Settings) -> RunningSimCloud {
    SimCloud::new(settings)
        .start_on_loopback()
        .await
        .expect("sim cloud starts")
}

/// Instances boot and terminate at once: states follow calls deterministically.
fn instant() -> Settings {
    Settings {
        boot_delay: Duration::ZERO,
        termination_delay: Duration::ZERO,
        ..Settings::default()
    }
}

fn config(endpoint: &str) -> String {
    serde_json::json!({"endpoint": endpoint, "region": REGION}).to_string()
}

async fn reconcile(runtime: &Runtime, request: &ReconcileRequest) -> Result<PoolState, CallError> {
    runtime.reconcile_pool(PROVIDER, request).await
}

async fn delete(runtime: &Runtime, request: &DeleteRequest) -> Result<DeleteOutcome, CallError> {
    runtime.delete_pool(PROVIDER, request).await
}

/// Waits until `done` holds for the instances of [`POOL`].
async fn wait_for_pool(
    cloud: &SimCloud,
    mut done: impl FnMut(&[&InstanceRecord]) -> bool,
) -> Vec<InstanceRecord> {
    let waited = tokio::time::timeout(
        WAIT,
        cloud.wait_for(|all| {
            let pool: Vec<_> = all.iter().filter(|r| r.instance.pool == POOL).collect();
            done(&pool)
        }),
    )
    .await
    .expect("the cloud reached the expected state in time");
    waited
        .into_iter()
        .filter(|r| r.instance.pool == POOL)
        .collect()
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

fn provider_error(result: Result<impl std::fmt::Debug, CallError>) -> ProviderError {
    match result {
        Err(CallError::Provider { error, .. }) => error,
        other => panic!("expected the provider's own error, got {other:?}"),
    }
}

fn assert_retry_after(result: Result<impl std::fmt::Debug, CallError>) {
    let error = provider_error(result);
    assert!(
        matches!(error, ProviderError::RetryAfter(ref r) if r.seconds > 0),
        "{error:?}"
    );
}

fn assert_terminal(result: Result<impl std::fmt::Debug, CallError>, reason: &str) {
    let error = provider_error(result);
    assert!(
        matches!(error, ProviderError::Terminal(ref t) if t.reason == reason),
        "expected terminal {reason}, got {error:?}"
    );
}

fn token(ordinal: u32) -> String {
    format!("{}-{ordinal}", requests::object("pool-a").uid)
}

async fn scale_up_creates_sim_instances_and_pool_is_ready_once_they_run(
    component: &str,
) -> Result<()> {
    let running = cloud(Settings {
        boot_delay: Duration::from_millis(100),
        ..instant()
    })
    .await;
    let runtime = runtime(component).await;
    let mut request = requests::reconcile_pool(&config(&running.endpoint()), 3);

    let state = reconcile(&runtime, &request).await?;
    assert_eq!(state.instances.len(), 3);
    assert!(!state.ready, "instances are still booting");
    assert!(state.requeue_after_seconds.is_some());
    for instance in &state.instances {
        assert_eq!(
            instance.provider_id,
            format!("sim://{REGION}/{}", instance.id)
        );
    }
    assert_eq!(ids(&state), cloud_ids(running.cloud()));
    let tokens: Vec<_> = state
        .instances
        .iter()
        .map(|i| i.request_token.clone())
        .collect();
    assert_eq!(tokens, [0, 1, 2].map(|n| Some(token(n))).to_vec());

    wait_for_pool(running.cloud(), |pool| {
        pool.iter()
            .all(|r| r.instance.state == InstanceState::Running)
    })
    .await;
    request.instances = state.instances;
    let state = reconcile(&runtime, &request).await?;
    assert!(state.ready);
    assert_eq!(state.requeue_after_seconds, None);
    assert!(
        state
            .instances
            .iter()
            .all(|i| matches!(i.state, types::InstanceState::Running))
    );
    assert_eq!(running.cloud().total_creations(), 3);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_created_after_a_hot_swap_to_v2_carry_its_version_label() -> Result<()> {
    const LABEL: &str = "sim.capwasm.dev/provider-version";
    let running = cloud(instant()).await;
    let runtime = runtime(RUST).await;
    assert_eq!(runtime.info(PROVIDER).await?.version, "0.1.0");
    let mut request = requests::reconcile_pool(&config(&running.endpoint()), 1);
    let before = reconcile(&runtime, &request).await?;

    let (v2, previous) = runtime
        .swap(ProviderSpec {
            name: String::from(PROVIDER),
            source: ProviderSource::File(guest_path("sim_infrastructure_v2.wasm")),
            sha256: None,
            limits: Limits::default(),
            capabilities: Capabilities {
                allowed_hosts: vec!["127.0.0.1".into()],
                ..Capabilities::default()
            },
        })
        .await?;
    assert_eq!(
        previous.map(|p| p.info.version.clone()).as_deref(),
        Some("0.1.0")
    );
    assert_eq!(v2.info.version, "0.2.0");
    assert_eq!(runtime.info(PROVIDER).await?.version, "0.2.0");

    request.instances = before.instances.clone();
    request.replicas = 2;
    let after = reconcile(&runtime, &request).await?;
    assert_eq!(after.instances.len(), 2);
    for instance in &after.instances {
        let labels = running
            .cloud()
            .instance(&instance.id)
            .map(|r| r.node_labels)
            .unwrap_or_default();
        let expected = if ids(&before).contains(&instance.id) {
            None
        } else {
            Some("0.2.0")
        };
        assert_eq!(
            labels.get(LABEL).map(String::as_str),
            expected,
            "{}",
            instance.id
        );
    }
    Ok(())
}

async fn reconcile_creates_nothing_when_repeated_with_the_recorded_instances(
    component: &str,
) -> Result<()> {
    let running = cloud(instant()).await;
    let runtime = runtime(component).await;
    let mut request = requests::reconcile_pool(&config(&running.endpoint()), 3);
    let first = reconcile(&runtime, &request).await?;

    request.instances = first.instances.clone();
    let second = reconcile(&runtime, &request).await?;
    request.instances = second.instances.clone();
    let third = reconcile(&runtime, &request).await?;

    assert_eq!(ids(&second), ids(&first));
    assert_eq!(ids(&third), ids(&first));
    assert!(third.ready);
    assert_eq!(running.cloud().total_creations(), 3);
    Ok(())
}

async fn reconcile_creates_no_duplicate_when_a_crash_lost_the_recorded_instances(
    component: &str,
) -> Result<()> {
    let running = cloud(instant()).await;
    let runtime = runtime(component).await;
    let mut request = requests::reconcile_pool(&config(&running.endpoint()), 3);
    let first = reconcile(&runtime, &request).await?;

    // The host crashed before recording `first`: it calls again with nothing.
    let again = reconcile(&runtime, &request).await?;
    assert_eq!(ids(&again), ids(&first));
    assert_eq!(running.cloud().total_creations(), 3);

    // Scaling up without the records: the provider retries ordinals 0-2 with
    // their old tokens, and the cloud answers with the existing instances.
    request.replicas = 5;
    let grown = reconcile(&runtime, &request).await?;
    assert!(ids(&grown).is_superset(&ids(&first)));
    assert_eq!(running.cloud().total_creations(), 5);
    for n in 0..5 {
        assert_eq!(running.cloud().creations(REGION, &token(n)), 1, "token {n}");
    }
    let tokens: Vec<_> = grown
        .instances
        .iter()
        .map(|i| i.request_token.clone())
        .collect();
    assert_eq!(
        tokens,
        (0..5).map(|n| Some(token(n))).collect::<Vec<_>>(),
        "every instance is known by its token again"
    );
    Ok(())
}

async fn scale_down_terminates_the_highest_ordinals(component: &str) -> Result<()> {
    // Terminating instances stay listed for the whole test.
    let running = cloud(Settings {
        termination_delay: Duration::from_secs(600),
        ..instant()
    })
    .await;
    let runtime = runtime(component).await;
    let mut request = requests::reconcile_pool(&config(&running.endpoint()), 3);
    let three = reconcile(&runtime, &request).await?;

    request.instances = three.instances;
    request.replicas = 1;
    let one = reconcile(&runtime, &request).await?;

    let by_token = |n: u32| {
        running
            .cloud()
            .instances_of(POOL)
            .into_iter()
            .find(|r| r.request_token == token(n))
            .map(|r| r.instance.state)
    };
    assert_eq!(by_token(0), Some(InstanceState::Running));
    assert_eq!(by_token(1), Some(InstanceState::Terminating));
    assert_eq!(by_token(2), Some(InstanceState::Terminating));
    assert!(one.ready, "the one desired instance runs");
    assert!(
        one.requeue_after_seconds.is_some(),
        "two are still terminating"
    );
    assert_eq!(running.cloud().total_creations(), 3);
    Ok(())
}

async fn delete_is_done_once_the_cloud_has_no_instance_of_the_pool(component: &str) -> Result<()> {
    let running = cloud(Settings {
        termination_delay: Duration::from_millis(100),
        ..instant()
    })
    .await;
    let runtime = runtime(component).await;
    let config = config(&running.endpoint());
    let mut request = requests::delete_pool(&config);
    request.instances = reconcile(&runtime, &requests::reconcile_pool(&config, 3))
        .await?
        .instances;

    let first = delete(&runtime, &request).await?;
    assert!(
        matches!(first, DeleteOutcome::InProgress(s) if s > 0),
        "{first:?}"
    );
    wait_for_pool(running.cloud(), |pool| pool.is_empty()).await;
    let second = delete(&runtime, &request).await?;

    assert!(matches!(second, DeleteOutcome::Done), "{second:?}");
    assert!(running.cloud().instances_of(POOL).is_empty());
    Ok(())
}

/// The cloud's bearer token, added by the host from the credentials (the
/// guest never holds it), or handed to the guest where the module exposes
/// the credentials (the weaker, opt-in way): either way the cloud wants it.
async fn cloud_requires_the_bearer_token_from_credentials_when_configured(
    component: &str,
) -> Result<()> {
    let running = cloud(Settings {
        bearer_token: Some("s3cret".into()),
        ..instant()
    })
    .await;
    let host = running.endpoint().trim_start_matches("http://").to_owned();
    let mut request = requests::reconcile_pool(&config(&running.endpoint()), 1);
    let credential = |value: &[u8]| Credential {
        key: "token".into(),
        value: value.to_vec(),
    };

    let signing = runtime_with(
        component,
        Capabilities {
            allowed_hosts: vec![host.clone()],
            request_auth: vec![HostAuth {
                host: host.clone(),
                scheme: Scheme::Bearer {
                    token: "token".into(),
                },
            }],
            expose_credentials: false,
        },
    )
    .await;
    request.credentials = vec![credential(b"wrong")];
    match reconcile(&signing, &request).await {
        Err(CallError::CredentialsRejected {
            host: rejecting,
            status: 401,
            ..
        }) => assert_eq!(rejecting, host),
        other => panic!("expected the credentials rejected by {host}, got {other:?}"),
    }
    assert_eq!(running.cloud().total_creations(), 0);
    request.credentials = vec![credential(b"s3cret")];
    assert_eq!(reconcile(&signing, &request).await?.instances.len(), 1);

    let exposing = runtime_with(
        component,
        Capabilities {
            allowed_hosts: vec![host],
            expose_credentials: true,
            ..Capabilities::default()
        },
    )
    .await;
    request.credentials = Vec::new();
    assert_terminal(reconcile(&exposing, &request).await, "Unauthorized");
    request.credentials = vec![credential(b"wrong")];
    assert_terminal(reconcile(&exposing, &request).await, "Unauthorized");
    request.credentials = vec![credential(b"s3cret")];
    assert_eq!(reconcile(&exposing, &request).await?.instances.len(), 1);
    Ok(())
}

async fn reconcile_asks_to_retry_when_bootstrap_data_is_missing(component: &str) -> Result<()> {
    let running = cloud(instant()).await;
    let runtime = runtime(component).await;
    let mut request = requests::reconcile_pool(&config(&running.endpoint()), 2);
    request.bootstrap_data = None;

    assert_retry_after(reconcile(&runtime, &request).await);
    assert_eq!(running.cloud().total_creations(), 0);
    Ok(())
}

async fn instances_end_failed_and_pool_not_ready_when_bootstrap_data_cannot_join(
    component: &str,
) -> Result<()> {
    let running = cloud(instant()).await;
    let runtime = runtime(component).await;
    let mut request = requests::reconcile_pool(&config(&running.endpoint()), 2);
    request.bootstrap_data = Some(BootstrapData {
        format: BootstrapFormat::ShellScript,
        value: b"kubeadm join --no-interpreter-line\n".to_vec(),
    });

    let state = reconcile(&runtime, &request).await?;

    assert!(!state.ready);
    assert!(
        state
            .instances
            .iter()
            .all(|i| matches!(i.state, types::InstanceState::Failed)),
        "{:?}",
        state.instances
    );
    assert!(
        running
            .cloud()
            .instances_of(POOL)
            .iter()
            .all(|r| r.join_failure.is_some())
    );
    Ok(())
}

async fn reconcile_asks_to_retry_when_the_cloud_is_full(component: &str) -> Result<()> {
    let running = cloud(Settings {
        max_instances: 2,
        ..instant()
    })
    .await;
    let runtime = runtime(component).await;
    let request = requests::reconcile_pool(&config(&running.endpoint()), 3);

    assert_retry_after(reconcile(&runtime, &request).await);
    assert_eq!(running.cloud().instances_of(POOL).len(), 2);
    Ok(())
}

async fn reconcile_asks_to_retry_when_the_cloud_is_down(component: &str) -> Result<()> {
    // A port that was free a moment ago: nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let runtime = runtime(component).await;
    let request = requests::reconcile_pool(&config(&format!("http://127.0.0.1:{port}")), 1);

    assert_retry_after(reconcile(&runtime, &request).await);
    let delete_request = requests::delete_pool(&config(&format!("http://127.0.0.1:{port}")));
    assert_retry_after(delete(&runtime, &delete_request).await);
    Ok(())
}

async fn reconcile_is_denied_when_the_endpoint_host_is_not_allowed(component: &str) -> Result<()> {
    let running = cloud(instant()).await;
    let runtime = runtime(component).await;
    // The same server under a name the provider may not reach.
    let endpoint = format!("http://localhost:{}", running.addr().port());
    let request = requests::reconcile_pool(&config(&endpoint), 1);

    assert_terminal(reconcile(&runtime, &request).await, "HttpRequestDenied");
    assert_eq!(running.cloud().total_creations(), 0);
    Ok(())
}

async fn reconcile_cluster_reports_endpoint_and_failure_domains_from_config(
    component: &str,
) -> Result<()> {
    let runtime = runtime(component).await;
    let config = serde_json::json!({
        "endpoint": "http://127.0.0.1:1",
        "region": REGION,
        "failureDomains": ["zone-a", "zone-b"],
        "controlPlanePort": 7443,
    })
    .to_string();
    let request = requests::cluster_request(&config);

    let state = runtime.reconcile_cluster(PROVIDER, &request).await?;

    assert!(state.ready);
    let endpoint = state.control_plane_endpoint.expect("an endpoint");
    assert_eq!((endpoint.host.as_str(), endpoint.port), ("127.0.0.1", 7443));
    let domains: Vec<_> = state
        .failure_domains
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(domains, ["zone-a", "zone-b"]);
    Ok(())
}

async fn provider_ids_are_derived_from_config_and_owned_by_scheme(component: &str) -> Result<()> {
    let running = cloud(instant()).await;
    let runtime = runtime(component).await;
    let config = config(&running.endpoint());
    let state = reconcile(&runtime, &requests::reconcile_pool(&config, 1)).await?;
    let instance = state.instances[0].clone();

    let derived = runtime.provider_id(PROVIDER, &config, &instance).await?;
    let owned = runtime.owns(PROVIDER, &instance.provider_id).await?;
    let foreign = runtime.owns(PROVIDER, "aws:///us-east-1a/i-0123").await?;

    assert_eq!(derived, state.instances[0].provider_id);
    assert!(owned);
    assert!(!foreign);
    Ok(())
}

async fn running_instances_register_ready_nodes_that_go_when_they_terminate(
    component: &str,
) -> Result<()> {
    let env = TestEnv::shared().await?;
    let workload = env.workload().expect("a workload cluster").client()?;
    let nodes: Api<Node> = Api::all(workload.clone());
    let running = cloud(Settings {
        nodes: Some(workload),
        ..instant()
    })
    .await;
    let runtime = runtime(component).await;
    let config = serde_json::json!({
        "endpoint": running.endpoint(),
        "region": REGION,
        "nodeLabels": {"tier": "web"},
        "failureDomains": ["zone-a"],
    })
    .to_string();
    let mut request = requests::reconcile_pool(&config, 2);
    let two = reconcile(&runtime, &request).await?;

    for instance in &two.instances {
        let node =
            tokio::time::timeout(WAIT, await_condition(nodes.clone(), &instance.id, is_ready))
                .await??
                .expect("the Node exists");
        let spec = node.spec.unwrap_or_default();
        assert_eq!(
            spec.provider_id.as_deref(),
            Some(instance.provider_id.as_str())
        );
        let labels = node.metadata.labels.unwrap_or_default();
        assert_eq!(labels.get("tier").map(String::as_str), Some("web"));
        assert_eq!(
            labels
                .get("topology.kubernetes.io/zone")
                .map(String::as_str),
            Some("zone-a")
        );
    }

    request.instances = two.instances.clone();
    request.replicas = 1;
    reconcile(&runtime, &request).await?;
    let removed = &two.instances[1];
    assert_eq!(removed.request_token, Some(token(1)));
    // Instance ids are never reused, so absence means this Node was deleted.
    tokio::time::timeout(
        WAIT,
        await_condition(nodes.clone(), &removed.id, |node: Option<&Node>| {
            node.is_none()
        }),
    )
    .await??;
    assert!(
        nodes.get_opt(&two.instances[0].id).await?.is_some(),
        "the remaining instance keeps its Node"
    );
    Ok(())
}

fn is_ready(node: Option<&Node>) -> bool {
    node.and_then(|n| n.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

/// Each scenario as a test against each implementation.
macro_rules! conformance {
    ($($scenario:ident),* $(,)?) => {
        mod rust {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() -> anyhow::Result<()> {
                    super::$scenario(super::RUST).await
                }
            )*
        }
        mod python {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() -> anyhow::Result<()> {
                    super::$scenario(super::PYTHON).await
                }
            )*
        }
        mod js {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() -> anyhow::Result<()> {
                    super::$scenario(super::JS).await
                }
            )*
        }
    };
}

conformance!(
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
    running_instances_register_ready_nodes_that_go_when_they_terminate,
);
