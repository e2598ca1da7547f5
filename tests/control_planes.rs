//! The control-plane world: the sim-control-plane provider, loaded in the
//! real runtime, against the simulated cloud's hosted control planes. It
//! brings one up, rolls it to a new version a replica at a time, is refused
//! a downgrade by name, and deletes it; the cloud's own records say each
//! step happened.

use anyhow::Result;
use capwasm::conformance::infrastructure::{cloud, instant};
use capwasm::testing::requests;
use capwasm::wasm::control_planes::{ControlPlaneRequest, ControlPlaneState};
use capwasm::wasm::types::{DeleteOutcome, ProviderError};
use capwasm::wasm::{
    CallError, Capabilities, Limits, PrecompiledCache, ProviderSource, ProviderSpec, Runtime,
    RuntimeSettings,
};
use testenv::guest_path;

const PROVIDER: &str = "sim-cp";

/// The runtime with sim-control-plane in service as [`PROVIDER`], allowed
/// to reach loopback only.
async fn runtime() -> Result<Runtime> {
    let settings = RuntimeSettings {
        cache: Some(PrecompiledCache::new(
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("precompiled"),
        )),
        ..RuntimeSettings::default()
    };
    let runtime = Runtime::new(settings, None)?;
    runtime
        .swap(ProviderSpec {
            name: PROVIDER.into(),
            source: ProviderSource::File(guest_path("sim_control_plane.wasm")),
            sha256: None,
            limits: Limits::default(),
            capabilities: Capabilities {
                allowed_hosts: vec!["127.0.0.1".into()],
                ..Capabilities::default()
            },
        })
        .await?;
    Ok(runtime)
}

async fn reconcile(runtime: &Runtime, request: &ControlPlaneRequest) -> Result<ControlPlaneState> {
    Ok(runtime.reconcile_control_plane(PROVIDER, request).await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_control_plane_comes_up_rolls_to_a_new_version_and_goes() -> Result<()> {
    let running = cloud(instant()).await?;
    let runtime = runtime().await?;
    let config = serde_json::json!({"endpoint": running.endpoint()}).to_string();
    let mut request = requests::control_plane(&config, "v1.36.3", 3);

    let state = reconcile(&runtime, &request).await?;
    assert!(state.initialized, "{state:?}");
    assert!(state.externally_managed);
    assert_eq!(
        (
            state.replicas,
            state.ready_replicas,
            state.available_replicas,
            state.up_to_date_replicas
        ),
        (3, 3, 3, 3)
    );
    assert_eq!(state.version.as_deref(), Some("v1.36.3"));
    let endpoint = state.endpoint.clone().expect("an endpoint once initialized");
    assert_eq!(endpoint.host, "127.0.0.1");
    let record = running
        .cloud()
        .control_plane("default/cp-a")
        .expect("the cloud holds the control plane");
    assert_eq!(record.endpoint.map(|e| e.port), Some(endpoint.port));

    // A new version: the replicas are replaced one at a time, the oldest
    // version reported until the last one goes.
    request.version = "v1.37.0".into();
    let mut up_to_date = Vec::new();
    let mut state = reconcile(&runtime, &request).await?;
    for _ in 0..10 {
        up_to_date.push(state.up_to_date_replicas);
        if state.up_to_date_replicas == 3 {
            break;
        }
        assert_eq!(state.version.as_deref(), Some("v1.36.3"), "{state:?}");
        assert!(state.requeue_after_seconds.is_some(), "{state:?}");
        state = reconcile(&runtime, &request).await?;
    }
    assert_eq!(up_to_date, [0, 1, 2, 3]);
    assert_eq!(state.version.as_deref(), Some("v1.37.0"));
    let kept = state.endpoint.as_ref().map(|e| (e.host.as_str(), e.port));
    assert_eq!(kept, Some(("127.0.0.1", endpoint.port)), "the endpoint stays");

    // Back a minor: the provider's own terminal reason.
    request.version = "v1.36.3".into();
    match runtime.reconcile_control_plane(PROVIDER, &request).await {
        Err(CallError::Provider {
            error: ProviderError::Terminal(terminal),
            ..
        }) => assert_eq!(terminal.reason, "VersionDowngrade", "{}", terminal.message),
        other => panic!("a downgrade answered {other:?}"),
    }

    let outcome = runtime.delete_control_plane(PROVIDER, &request).await?;
    assert!(matches!(outcome, DeleteOutcome::Done), "{outcome:?}");
    assert!(running.cloud().control_plane("default/cp-a").is_none());
    Ok(())
}
