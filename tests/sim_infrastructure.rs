//! The sim-infrastructure provider, loaded in the real runtime, against
//! the simulated cloud. Every scenario of the infrastructure world's
//! conformance suite (`capwasm::conformance::infrastructure`, what
//! `capwasm provider conformance` runs) and the Nodes it registers in a
//! workload cluster run against each implementation of the provider — the
//! Rust one (`rust::`), the Python one (`python::`) and the JavaScript one
//! (`js::`) — so all are held to the same behaviour. The cloud is served by
//! this test's runtime while guest calls wait on it.

use std::time::Duration;

use anyhow::Result;
use capwasm::conformance::Subject;
use capwasm::conformance::infrastructure::{REGION, cloud, config, instant, token};
use capwasm::simcloud::Settings;
use capwasm::testing::requests;
use capwasm::wasm::machine_pools::{PoolState, ReconcileRequest};
use capwasm::wasm::{
    CallError, Capabilities, Limits, PrecompiledCache, ProviderSource, ProviderSpec, Runtime,
    RuntimeSettings,
};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::wait::await_condition;
use testenv::{TestEnv, guest_path};

const PROVIDER: &str = "sim";
const WAIT: Duration = Duration::from_secs(30);

/// The implementations of sim-infrastructure under test.
const RUST: &str = "sim_infrastructure.wasm";
const PYTHON: &str = "python-sim-infrastructure.wasm";
const JS: &str = "js-sim-infrastructure.wasm";

fn precompiled() -> PrecompiledCache {
    PrecompiledCache::new(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("precompiled"))
}

fn loopback() -> Capabilities {
    Capabilities {
        allowed_hosts: vec!["127.0.0.1".into()],
        ..Capabilities::default()
    }
}

/// `component` as the conformance scenarios take it.
fn subject(component: &str) -> Result<Subject> {
    let bytes = std::fs::read(guest_path(component))
        .map_err(|e| anyhow::anyhow!("{component}: {e} (run `make guests`)"))?;
    Ok(Subject::new(bytes, Limits::default(), Some(precompiled()))?)
}

/// The runtime with `component` in service as [`PROVIDER`].
async fn runtime(component: &str) -> Runtime {
    let settings = RuntimeSettings {
        cache: Some(precompiled()),
        ..RuntimeSettings::default()
    };
    let runtime = Runtime::new(settings, None).expect("runtime");
    runtime
        .swap(ProviderSpec {
            name: String::from(PROVIDER),
            source: ProviderSource::File(guest_path(component)),
            sha256: None,
            limits: Limits::default(),
            capabilities: loopback(),
        })
        .await
        .unwrap_or_else(|e| panic!("loading {component}: {e:#?} (run `make guests`)"));
    runtime
}

async fn reconcile(runtime: &Runtime, request: &ReconcileRequest) -> Result<PoolState, CallError> {
    runtime.reconcile_pool(PROVIDER, request).await
}

fn ids(state: &PoolState) -> std::collections::BTreeSet<String> {
    state.instances.iter().map(|i| i.id.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_created_after_a_hot_swap_to_v2_carry_its_version_label() -> Result<()> {
    const LABEL: &str = "sim.capwasm.dev/provider-version";
    let running = cloud(instant()).await?;
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
            capabilities: loopback(),
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

/// Beyond what the conformance command can check (it starts no workload
/// cluster): the cloud's running instances register as Nodes.
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
    .await?;
    let subject = subject(component)?;
    let provider = subject.load(loopback()).await?;
    let config = serde_json::json!({
        "endpoint": running.endpoint(),
        "region": REGION,
        "nodeLabels": {"tier": "web"},
        "failureDomains": ["zone-a"],
    })
    .to_string();
    let mut request = requests::reconcile_pool(&config, 2);
    let two = provider.reconcile(&request).await?;

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
    provider.reconcile(&request).await?;
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

/// Each scenario of the conformance suite, and this file's own, as a test
/// against each implementation.
macro_rules! each_implementation {
    ($($scenario:ident),* $(,)?) => {
        each_implementation!(@in rust, RUST, [$($scenario),*]);
        each_implementation!(@in python, PYTHON, [$($scenario),*]);
        each_implementation!(@in js, JS, [$($scenario),*]);
    };
    (@in $language:ident, $component:ident, [$($scenario:ident),*]) => {
        mod $language {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() -> anyhow::Result<()> {
                    let subject = super::subject(super::$component)?;
                    capwasm::conformance::infrastructure::$scenario(&subject).await?;
                    Ok(())
                }
            )*

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn running_instances_register_ready_nodes_that_go_when_they_terminate()
            -> anyhow::Result<()> {
                super::running_instances_register_ready_nodes_that_go_when_they_terminate(
                    super::$component,
                )
                .await
            }
        }
    };
}

capwasm::infrastructure_scenarios!(each_implementation);
