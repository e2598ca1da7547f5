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
    let endpoint = state
        .endpoint
        .clone()
        .expect("an endpoint once initialized");
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
    assert_eq!(
        kept,
        Some(("127.0.0.1", endpoint.port)),
        "the endpoint stays"
    );

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

/// Through the operator: Cluster `c1` names WasmControlPlane `c1`, served
/// by sim-control-plane against the install's simulated cloud.
mod through_the_operator {
    use capwasm::api::provider::WasmControlPlaneStatus;
    use capwasm::api::providermodule::World;
    use capwasm::api::testing::{ClusterBuilder, ProviderModuleBuilder, wasm_control_plane};
    use capwasm::api::{Cluster, ProviderModule, WasmControlPlane};
    use k8s_openapi::api::core::v1::Secret;
    use kube::Api;
    use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
    use serde_json::json;
    use testenv::flows::{condition, wait_for};
    use testenv::guest_path;
    use testenv::install::{Core, Install};

    fn status(cp: Option<&WasmControlPlane>) -> Option<&WasmControlPlaneStatus> {
        cp?.status.as_ref()
    }

    /// The control-plane module; a WasmControlPlane of an even size
    /// refused by validation; then Cluster `c1` and its WasmControlPlane at
    /// 3 replicas.
    async fn create(install: &Install) -> Api<WasmControlPlane> {
        let (client, ns) = (install.client.clone(), install.ns.clone());
        let module = format!("{ns}-sim-cp");
        let path = guest_path("sim_control_plane.wasm").display().to_string();
        Api::<ProviderModule>::all(client.clone())
            .create(
                &PostParams::default(),
                &ProviderModuleBuilder::file(&module, World::ControlPlane, &path)
                    .allowed_hosts(&["127.0.0.1"])
                    .build(),
            )
            .await
            .expect("the control-plane module");
        let planes: Api<WasmControlPlane> = Api::namespaced(client.clone(), &ns);
        let config = json!({ "endpoint": install.cloud.endpoint() });
        let even = wasm_control_plane(&ns, "even", &module, ("v1.36.3", 2), config.clone());
        let refused = planes.create(&PostParams::default(), &even).await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(e)) if e.code == 422 && e.message.contains("replicas must be odd")),
            "{refused:?}"
        );
        let c1 = wasm_control_plane(&ns, "c1", &module, ("v1.36.3", 3), config);
        planes
            .create(&PostParams::default(), &c1)
            .await
            .expect("the WasmControlPlane");
        // No infrastructure cluster: the endpoint is the control plane's.
        let cluster = ClusterBuilder::new(&ns, "c1")
            .no_infrastructure()
            .control_plane("c1")
            .build();
        Api::<Cluster>::namespaced(client, &ns)
            .create(&PostParams::default(), &cluster)
            .await
            .expect("the Cluster");
        planes
    }

    /// Up as the contract says: initialized, counted, versioned, hosted,
    /// selectable, Available, adopted, its endpoint the cloud's and the
    /// Cluster's. The port.
    async fn up(install: &Install, planes: &Api<WasmControlPlane>) {
        let up = wait_for(planes, "c1", "initialized, 3 available", |cp| {
            status(cp).is_some_and(|s| {
                s.initialization
                    .as_ref()
                    .and_then(|i| i.control_plane_initialized)
                    == Some(true)
                    && s.available_replicas == Some(3)
            })
        })
        .await
        .expect("the control plane");
        let s = up.status.clone().unwrap_or_default();
        assert_eq!(
            (s.replicas, s.ready_replicas, s.up_to_date_replicas),
            (Some(3), Some(3), Some(3))
        );
        assert_eq!(s.version.as_deref(), Some("v1.36.3"));
        assert_eq!(s.external_managed_control_plane, Some(true));
        assert_eq!(
            s.selector.as_deref(),
            Some("cluster.x-k8s.io/cluster-name=c1,cluster.x-k8s.io/control-plane-name=c1")
        );
        let available = condition(&s.common.conditions, "Available").expect("Available");
        assert_eq!(available.0, "True", "{available:?}");
        assert!(
            up.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "Cluster" && o.name == "c1"),
            "the Cluster adopted it"
        );
        let record = install
            .cloud
            .cloud()
            .control_plane(&format!("{}/c1", install.ns))
            .expect("the cloud hosts it");
        let port = i32::from(record.endpoint.map(|e| e.port).expect("a port"));
        let ours = up
            .spec
            .control_plane_endpoint
            .clone()
            .expect("spec.controlPlaneEndpoint");
        assert_eq!((ours.host.as_str(), ours.port), ("127.0.0.1", port));

        let clusters: Api<Cluster> = Api::namespaced(install.client.clone(), &install.ns);
        let cluster = wait_for(&clusters, "c1", "its control plane initialized", |c| {
            c.and_then(|c| c.status.as_ref()).is_some_and(|s| {
                condition(&s.conditions, "ControlPlaneInitialized").is_some_and(|c| c.0 == "True")
            })
        })
        .await
        .expect("the Cluster");
        let theirs = cluster
            .spec
            .control_plane_endpoint
            .expect("the Cluster's endpoint");
        assert_eq!((theirs.host.as_str(), theirs.port), ("127.0.0.1", port));
        certificates_and_kubeconfig(install, &up, port).await;
    }

    /// The host made the cluster's certificate Secrets, owned by the
    /// control plane, and the kubeconfig naming its endpoint.
    async fn certificates_and_kubeconfig(install: &Install, up: &WasmControlPlane, port: i32) {
        let secrets: Api<Secret> = Api::namespaced(install.client.clone(), &install.ns);
        let owned_by_it =
            |s: &Secret| {
                s.metadata.owner_references.iter().flatten().any(|o| {
                    o.kind == "WasmControlPlane" && Some(&o.uid) == up.metadata.uid.as_ref()
                })
            };
        for suffix in ["ca", "etcd", "proxy", "sa"] {
            let secret = secrets
                .get(&format!("c1-{suffix}"))
                .await
                .unwrap_or_else(|e| panic!("c1-{suffix}: {e}"));
            assert!(owned_by_it(&secret), "c1-{suffix} is the control plane's");
            let data = secret.data.unwrap_or_default();
            assert!(
                data.contains_key("tls.crt") && data.contains_key("tls.key"),
                "c1-{suffix}"
            );
        }
        let kubeconfig = wait_for(&secrets, "c1-kubeconfig", "written", |s| s.is_some())
            .await
            .expect("the kubeconfig Secret");
        assert!(
            owned_by_it(&kubeconfig),
            "the kubeconfig is the control plane's"
        );
        let value = kubeconfig
            .data
            .unwrap_or_default()
            .remove("value")
            .expect("a kubeconfig");
        let text = String::from_utf8(value.0).expect("text");
        assert!(
            text.contains(&format!("https://127.0.0.1:{port}")),
            "{text}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cluster_s_control_plane_comes_from_its_provider_rolls_scales_and_goes_with_it() {
        let install = Install::with_core("cp", Core::Capwasm).await;
        let planes = create(&install).await;
        up(&install, &planes).await;

        // The scale subresource, then a new version, rolled.
        let scale = Patch::Merge(json!({"spec": {"replicas": 5}}));
        planes
            .patch_scale("c1", &PatchParams::default(), &scale)
            .await
            .expect("scaled");
        wait_for(&planes, "c1", "5 available", |cp| {
            status(cp).is_some_and(|s| s.available_replicas == Some(5))
        })
        .await;
        let version = Patch::Merge(json!({"spec": {"version": "v1.37.0"}}));
        planes
            .patch("c1", &PatchParams::default(), &version)
            .await
            .expect("a new version");
        wait_for(&planes, "c1", "rolled to v1.37.0", |cp| {
            status(cp).is_some_and(|s| {
                s.version.as_deref() == Some("v1.37.0") && s.up_to_date_replicas == Some(5)
            })
        })
        .await;

        // The CA deleted by hand: not made anew, which would break the
        // cluster; the control plane says what was lost.
        let secrets: Api<Secret> = Api::namespaced(install.client.clone(), &install.ns);
        secrets
            .delete("c1-ca", &DeleteParams::default())
            .await
            .expect("the CA deleted");
        let lost = wait_for(&planes, "c1", "CertificatesLost", |cp| {
            status(cp)
                .and_then(|s| condition(&s.common.conditions, "Ready"))
                .is_some_and(|(_, reason, _)| reason == "CertificatesLost")
        })
        .await
        .expect("the control plane");
        let conditions = lost.status.unwrap_or_default().common.conditions;
        let (_, _, message) = condition(&conditions, "Ready").unwrap_or_default();
        assert!(
            message.contains("c1-ca") && message.contains("backup"),
            "{message}"
        );
        assert!(secrets.get_opt("c1-ca").await.expect("a read").is_none());

        // Deleting the Cluster deletes its control plane, and the cloud's.
        let clusters: Api<Cluster> = Api::namespaced(install.client.clone(), &install.ns);
        clusters
            .delete("c1", &DeleteParams::default())
            .await
            .expect("deleted");
        wait_for(&clusters, "c1", "gone", |c| c.is_none()).await;
        assert!(planes.get_opt("c1").await.expect("a read").is_none());
        let name = format!("{}/c1", install.ns);
        assert!(install.cloud.cloud().control_plane(&name).is_none());
    }

    /// A provider whose control plane never comes up, and which looks
    /// through its every input for key material: it saw the CA's
    /// certificate and no private key; nothing waiting on initialization
    /// was made (no kubeconfig), and the Cluster says it waits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_control_plane_that_never_comes_up_waits_and_its_provider_saw_no_private_key() {
        let install = Install::with_core("cp-dump", Core::Capwasm).await;
        let (client, ns) = (install.client.clone(), install.ns.clone());
        let module = format!("{ns}-dump");
        let path = guest_path("testdata_control_plane_dump.wasm")
            .display()
            .to_string();
        Api::<ProviderModule>::all(client.clone())
            .create(
                &PostParams::default(),
                &ProviderModuleBuilder::file(&module, World::ControlPlane, &path).build(),
            )
            .await
            .expect("the module");
        let planes: Api<WasmControlPlane> = Api::namespaced(client.clone(), &ns);
        let c2 = wasm_control_plane(&ns, "c2", &module, ("v1.36.3", 1), json!({}));
        planes
            .create(&PostParams::default(), &c2)
            .await
            .expect("the WasmControlPlane");
        let cluster = ClusterBuilder::new(&ns, "c2")
            .no_infrastructure()
            .control_plane("c2")
            .build();
        let clusters: Api<Cluster> = Api::namespaced(client.clone(), &ns);
        clusters
            .create(&PostParams::default(), &cluster)
            .await
            .expect("the Cluster");

        let waiting = wait_for(&planes, "c2", "waiting on its provider", |cp| {
            status(cp)
                .and_then(|s| condition(&s.common.conditions, "Ready"))
                .is_some_and(|(_, reason, _)| reason == "WaitingForControlPlane")
        })
        .await
        .expect("the control plane");
        let status = waiting.status.unwrap_or_default();
        let (_, _, message) = condition(&status.common.conditions, "Ready").unwrap_or_default();
        assert_eq!(
            message,
            "certificates in: certificates.caCertificate; private keys in: none"
        );
        assert_eq!(status.initialization, None);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        for suffix in ["ca", "etcd", "proxy", "sa"] {
            let name = format!("c2-{suffix}");
            assert!(
                secrets.get_opt(&name).await.expect("a read").is_some(),
                "{name}"
            );
        }
        assert!(
            secrets
                .get_opt("c2-kubeconfig")
                .await
                .expect("a read")
                .is_none(),
            "no kubeconfig for a control plane that is not up"
        );
        let cluster = wait_for(&clusters, "c2", "waiting for its control plane", |c| {
            c.and_then(|c| c.status.as_ref()).is_some_and(|s| {
                condition(&s.conditions, "ControlPlaneInitialized").is_some_and(|c| c.0 == "False")
            })
        })
        .await
        .expect("the Cluster");
        let conditions = cluster.status.unwrap_or_default().conditions;
        let initialized = condition(&conditions, "ControlPlaneInitialized").unwrap_or_default();
        assert_eq!(initialized.1, "WaitingForControlPlane", "{initialized:?}");
    }
}
