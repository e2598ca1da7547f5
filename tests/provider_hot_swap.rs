//! Swapping a provider's code while the operator runs: by changing the
//! ProviderModule, or the ConfigMap it loads from. The new version serves
//! the next call, nothing fails in between, and a broken one never replaces
//! a working one.

use std::collections::BTreeMap;

use capwasm::api::providermodule::World;
use capwasm::api::{ProviderModule, WasmMachinePool};
use capwasm::testing::guest_path;
use capwasm::testing::objects::ProviderModuleBuilder;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::CREDENTIALS_NAMESPACE;
use testenv::flows::{Scenario, condition, scale, wait_for, wait_for_module, wait_for_pool};
use testenv::{Stack, TestEnv};

/// The label sim-infrastructure 0.2.0 puts on the Nodes of instances it creates.
const V2_LABEL: &str = "sim.capwasm.dev/provider-version";

/// Not one call of `module` failed, and no pool reconcile failed: no trap,
/// timeout, missing provider, provider error or API error.
fn assert_no_failed_calls(stack: &Stack, module: &str) {
    let guest = stack.context.runtime.metrics().unwrap();
    for outcome in [
        "trap",
        "timeout",
        "memory_limit",
        "output_too_large",
        "instantiate",
        "not_loaded",
        "terminal",
        "invalid_config",
    ] {
        assert_eq!(
            guest.calls(module, "machine-pools.reconcile", outcome),
            0,
            "{outcome}"
        );
    }
    for error in [
        "trap",
        "timeout",
        "instantiate",
        "not_loaded",
        "get",
        "write",
        "reference",
    ] {
        assert_eq!(
            stack.context.metrics.failures("wasmmachinepool", error),
            0,
            "{error}"
        );
        assert_eq!(
            stack.context.metrics.failures("machinepool", error),
            0,
            "{error}"
        );
    }
}

/// Of `refs`, the Nodes in `before` carry no v2 label and those in neither
/// `before` nor `after` carry v2's.
async fn assert_made_by_v2(
    workload: &testenv::ApiServer,
    refs: &[k8s_openapi::api::core::v1::ObjectReference],
    before: &[k8s_openapi::api::core::v1::ObjectReference],
    after: &[k8s_openapi::api::core::v1::ObjectReference],
) {
    let nodes: Api<Node> = Api::all(workload.client().unwrap());
    for node_ref in refs {
        let node = nodes.get(node_ref.name.as_deref().unwrap()).await.unwrap();
        let label = node
            .metadata
            .labels
            .unwrap_or_default()
            .get(V2_LABEL)
            .cloned();
        if before.contains(node_ref) {
            assert_eq!(label, None, "a Node from before the swap");
        } else if !after.contains(node_ref) {
            assert_eq!(
                label.as_deref(),
                Some("0.2.0"),
                "the Node made after the swap"
            );
        }
    }
}

/// Waits until module `name` is Ready with `digest` in service, and returns it.
async fn module_serving(api: &Api<ProviderModule>, name: &str, digest: &str) -> ProviderModule {
    wait_for(
        api,
        name,
        &format!("{digest} is in service"),
        |m: Option<&ProviderModule>| {
            m.and_then(|m| m.status.as_ref()).is_some_and(|s| {
                s.phase.as_deref() == Some("Ready") && s.active_digest.as_deref() == Some(digest)
            })
        },
    )
    .await
    .unwrap()
}

fn digest_of(file: &str) -> String {
    capwasm::wasm::digest_of(&std::fs::read(guest_path(file)).unwrap())
}

#[tokio::test]
async fn swapping_the_infrastructure_provider_mid_scale_fails_nothing_and_serves_the_new_code() {
    let scenario = Scenario::with_cluster("swap", "c1").await;
    scenario.pool("pool", "c1", 2).await;
    let Scenario {
        env,
        stack,
        client,
        apis,
        modules,
        ..
    } = scenario;
    let workload = env.workload().unwrap();
    let before = wait_for_pool(&apis.pools, "pool", "Running", 2)
        .await
        .status
        .unwrap()
        .node_refs;
    let (v1, v2) = (
        digest_of("sim_infrastructure.wasm"),
        digest_of("sim_infrastructure_v2.wasm"),
    );

    // Scale, and ask for the swap at once: before the new machines can have
    // joined (a machine boots, registers its Node, and the pool's status
    // follows half a second later), so calls for the scale meet the swap.
    scale(&apis.pools, "pool", 4).await.unwrap();
    let path = guest_path("sim_infrastructure_v2.wasm")
        .to_string_lossy()
        .into_owned();
    let swap = json!({ "spec": { "source": { "file": { "path": path } }, "sha256": v2 } });
    let module_api: Api<ProviderModule> = Api::all(client.clone());
    module_api
        .patch(
            &modules.infrastructure,
            &PatchParams::default(),
            &Patch::Merge(swap),
        )
        .await
        .unwrap();
    let swapped = module_serving(&module_api, &modules.infrastructure, &v2).await;
    let status = swapped.status.unwrap();
    assert_eq!(status.previous_digest.as_deref(), Some(v1.as_str()));
    assert_eq!(status.version.as_deref(), Some("0.2.0"));

    let after = wait_for_pool(&apis.pools, "pool", "Running", 4)
        .await
        .status
        .unwrap()
        .node_refs;
    wait_for(
        &apis.infra_pools,
        "pool",
        "the pool records the new code",
        |p: Option<&WasmMachinePool>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.common.served_by.as_ref())
                .is_some_and(|s| s.digest == v2 && s.version == "0.2.0")
        },
    )
    .await;
    assert_no_failed_calls(stack, &modules.infrastructure);

    // The next machine is made by v2: its Node carries v2's label; the
    // Nodes from before the swap were left as they were.
    scale(&apis.pools, "pool", 5).await.unwrap();
    let five = wait_for_pool(&apis.pools, "pool", "Running", 5)
        .await
        .status
        .unwrap()
        .node_refs;
    assert_made_by_v2(workload, &five, &before, &after).await;
    assert_no_failed_calls(stack, &modules.infrastructure);
}

#[tokio::test]
async fn a_module_from_a_config_map_reloads_when_it_changes_and_keeps_working_code_when_it_breaks()
{
    let env = TestEnv::shared().await.unwrap();
    let stack = Stack::shared().await.unwrap();
    let client = env.management().client().unwrap();
    let ns = env
        .management()
        .create_namespace("configmap")
        .await
        .unwrap();
    // Code is read, unpinned, only from the namespace credentials are read from.
    testenv::flows::credentials_namespace(&client).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), CREDENTIALS_NAMESPACE);
    let source = format!("{ns}-sim");
    let bytes = |file: &str| ByteString(std::fs::read(guest_path(file)).unwrap());
    let config_map = |data: ByteString| ConfigMap {
        metadata: ObjectMeta {
            name: Some(source.clone()),
            ..ObjectMeta::default()
        },
        binary_data: Some(BTreeMap::from([("component.wasm".to_owned(), data)])),
        ..ConfigMap::default()
    };
    config_maps
        .create(
            &PostParams::default(),
            &config_map(bytes("sim_infrastructure.wasm")),
        )
        .await
        .unwrap();
    let name = format!("{ns}-sim");
    let module = ProviderModuleBuilder::file(&name, World::Infrastructure, "/unused")
        .config_map(CREDENTIALS_NAMESPACE, &source, "component.wasm")
        .build();
    let modules: Api<ProviderModule> = Api::all(client.clone());
    modules
        .create(&PostParams::default(), &module)
        .await
        .unwrap();
    a_config_map_of_another_namespace_is_read_only_pinned(
        &modules,
        &ns,
        &bytes("sim_infrastructure.wasm"),
    )
    .await;
    let (v1, v2) = (
        digest_of("sim_infrastructure.wasm"),
        digest_of("sim_infrastructure_v2.wasm"),
    );
    module_serving(&modules, &name, &v1).await;

    let replace =
        |data: ByteString| Patch::Merge(json!({ "binaryData": { "component.wasm": data } }));
    config_maps
        .patch(
            &source,
            &PatchParams::default(),
            &replace(bytes("sim_infrastructure_v2.wasm")),
        )
        .await
        .unwrap();
    let swapped = module_serving(&modules, &name, &v2).await;
    assert_eq!(
        swapped.status.unwrap().previous_digest.as_deref(),
        Some(v1.as_str())
    );

    config_maps
        .patch(
            &source,
            &PatchParams::default(),
            &replace(ByteString(b"not a component".to_vec())),
        )
        .await
        .unwrap();
    let failed = wait_for(
        &modules,
        &name,
        "the broken version is refused",
        |m: Option<&ProviderModule>| {
            m.and_then(|m| m.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Failed")
        },
    )
    .await
    .unwrap()
    .status
    .unwrap();
    assert_eq!(failed.active_digest.as_deref(), Some(v2.as_str()));
    assert!(failed.message.unwrap().contains("stays in service"));
    let in_service = stack.context.runtime.registry().get(&name).unwrap();
    assert_eq!(in_service.digest, v2);
}

/// A component ConfigMap in a namespace other than the credentials one
/// (`ns`, the test's own, where a tenant may write): refused unpinned,
/// naming the rule; read once `sha256` pins what it must hold.
async fn a_config_map_of_another_namespace_is_read_only_pinned(
    modules: &Api<ProviderModule>,
    ns: &str,
    component: &ByteString,
) {
    let client = modules.clone().into_client();
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some("tenant-sim".into()),
            ..ObjectMeta::default()
        },
        binary_data: Some(BTreeMap::from([(
            "component.wasm".to_owned(),
            component.clone(),
        )])),
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(client, ns)
        .create(&PostParams::default(), &config_map)
        .await
        .unwrap();
    let name = format!("{ns}-tenant-sim");
    let module = ProviderModuleBuilder::file(&name, World::Infrastructure, "/unused")
        .config_map(ns, "tenant-sim", "component.wasm")
        .build();
    modules
        .create(&PostParams::default(), &module)
        .await
        .unwrap();
    let refused = wait_for(modules, &name, "the unpinned ConfigMap is refused", |m| {
        m.and_then(|m| m.status.as_ref())
            .and_then(|s| s.message.as_deref())
            .is_some_and(|m| m.contains("components sha256 does not pin"))
    })
    .await
    .unwrap();
    assert_eq!(refused.status.unwrap().active_digest, None);
    let digest = digest_of("sim_infrastructure.wasm");
    let pin = json!({ "spec": { "sha256": digest } });
    modules
        .patch(&name, &PatchParams::default(), &Patch::Merge(pin))
        .await
        .unwrap();
    module_serving(modules, &name, &digest).await;
}

#[tokio::test]
async fn a_module_paused_and_unpaused_says_so_and_stays_in_service() {
    let env = TestEnv::shared().await.unwrap();
    Stack::shared().await.unwrap();
    let api: Api<ProviderModule> = Api::all(env.management().client().unwrap());
    let name = format!(
        "{}-paused",
        env.management().create_namespace("pause").await.unwrap()
    );
    let module = ProviderModuleBuilder::file(
        &name,
        World::Bootstrap,
        &guest_path("kubeadm_bootstrap.wasm").to_string_lossy(),
    )
    .build();
    api.create(&PostParams::default(), &module).await.unwrap();
    wait_for_module(&api, &name, "Ready").await;

    let paused_is = |value: &'static str| {
        move |m: Option<&ProviderModule>| {
            m.and_then(|m| m.status.as_ref())
                .and_then(|s| condition(&s.conditions, "Paused"))
                .is_some_and(|(status, _, _)| status == value)
        }
    };
    let annotate = |value: serde_json::Value| json!({ "metadata": { "annotations": { capwasm::api::annotations::PAUSED: value } } });
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(annotate(json!(""))),
    )
    .await
    .unwrap();
    wait_for(&api, &name, "Paused is True", paused_is("True")).await;
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(annotate(json!(null))),
    )
    .await
    .unwrap();
    // The load phase's status keeps what the frame says of pausing.
    let resumed = wait_for(&api, &name, "Paused is False again", paused_is("False"))
        .await
        .unwrap();
    let status = resumed.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Ready"));
    assert_eq!(
        condition(&status.conditions, "Ready").map(|(s, _, _)| s),
        Some("True".to_owned())
    );
}
