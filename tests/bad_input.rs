//! Bad input ends in a condition with a reason a person can act on and an
//! Event, never a crash, and touches nothing else: dangling references, a
//! kind without a CRD, missing, broken or unreachable workload clusters, a
//! config the provider's schema rejects, a provider module that does not
//! exist or did not load, and a guest that traps.

use capwasm::api::providermodule::World;
use capwasm::api::{
    ContractVersionedObjectReference, MachinePool, ProviderModule, WasmMachinePool,
};
use capwasm::testing::objects::{self, ClusterBuilder, MachinePoolBuilder, ProviderModuleBuilder};
use capwasm::testing::{KUBEADM_JOIN_CONFIG, guest_path};
use k8s_openapi::ByteString;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testenv::flows::{
    Apis, Scenario, condition, config_ready_reason, create, wait_for, wait_for_event, wait_for_pool,
};
use testenv::{Stack, TestEnv};

/// Waits until `pool`'s condition `type_` has `reason`, and returns its message.
async fn pool_condition(apis: &Apis, pool: &str, type_: &str, reason: &str) -> String {
    let found = wait_for(
        &apis.pools,
        pool,
        &format!("{type_} has reason {reason}"),
        |p: Option<&MachinePool>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| condition(&s.conditions, type_))
                .is_some_and(|(_, r, _)| r == reason)
        },
    )
    .await
    .unwrap();
    condition(&found.status.unwrap().conditions, type_)
        .unwrap()
        .2
}

#[tokio::test]
async fn pool_with_a_missing_infrastructure_object_says_so_and_recovers_when_it_appears() {
    let scenario = Scenario::with_cluster("dangling", "c1").await;
    let Scenario {
        stack,
        client,
        ns,
        apis,
        modules,
        ..
    } = scenario;
    let kubeadm: Value = serde_json::from_str(KUBEADM_JOIN_CONFIG).unwrap();
    create(
        &client,
        &objects::bootstrap_config(&ns, "pool", &modules.bootstrap, kubeadm),
    )
    .await
    .unwrap();
    create(&client, &MachinePoolBuilder::new(&ns, "pool", "c1").build())
        .await
        .unwrap();

    let message = pool_condition(&apis, "pool", "InfrastructureReady", "ReferenceNotFound").await;
    assert!(
        message.contains("WasmMachinePool") && message.contains("does not exist"),
        "{message}"
    );
    wait_for_event(&client, &ns, "pool", "ReferenceNotFound").await;

    create(
        &client,
        &objects::wasm_machine_pool(
            &ns,
            "pool",
            &modules.infrastructure,
            stack.objects.sim_config(),
        ),
    )
    .await
    .unwrap();
    wait_for_pool(&apis.pools, "pool", "Running", 1).await;
}

#[tokio::test]
async fn pool_referencing_a_kind_without_a_crd_reports_an_invalid_reference() {
    let scenario = Scenario::with_cluster("nocrd", "c1").await;
    let Scenario {
        client, ns, apis, ..
    } = scenario;
    let pool = MachinePoolBuilder::new(&ns, "pool", "c1")
        .infrastructure_ref(ContractVersionedObjectReference::new(
            "infrastructure.example.com",
            "NoSuchPool",
            "pool",
        ))
        .data_secret("user-data")
        .build();
    create(&client, &pool).await.unwrap();
    let message = pool_condition(&apis, "pool", "InfrastructureReady", "ReferenceInvalid").await;
    assert!(message.contains("NoSuchPool"), "{message}");
    // The user's bootstrap Secret is accepted without any config object.
    let (status, reason, _) = condition(
        &apis
            .pools
            .get("pool")
            .await
            .unwrap()
            .status
            .unwrap()
            .conditions,
        "BootstrapConfigReady",
    )
    .unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "DataSecretProvided")
    );
}

#[tokio::test]
async fn pool_waits_for_a_missing_kubeconfig_and_runs_once_it_exists() {
    let env = TestEnv::shared().await.unwrap();
    let stack = Stack::shared().await.unwrap();
    let client = env.management().client().unwrap();
    let workload = env.workload().unwrap();
    let ns = env
        .management()
        .create_namespace("nokubeconfig")
        .await
        .unwrap();
    let apis = Apis::new(&client, &ns);
    let modules = stack.objects.modules(&client, &ns).await.unwrap();
    let mut config = stack.objects.sim_config();
    config["controlPlaneHost"] = json!("127.0.0.1");
    create(
        &client,
        &objects::wasm_cluster(&ns, "c1", &modules.infrastructure, config),
    )
    .await
    .unwrap();
    create(&client, &ClusterBuilder::new(&ns, "c1").build())
        .await
        .unwrap();
    stack
        .objects
        .create_pool(&client, &ns, "pool", "c1", 1, &modules)
        .await
        .unwrap();

    wait_for(
        &apis.clusters,
        "c1",
        "the Cluster waits for its kubeconfig",
        |c| {
            c.and_then(|c| c.status.as_ref())
                .and_then(|s| condition(&s.conditions, "ControlPlaneInitialized"))
                .is_some_and(|(_, reason, _)| reason == "KubeconfigSecretNotFound")
        },
    )
    .await;
    let message = pool_condition(&apis, "pool", "ReplicasReady", "WaitingForReplicasReady").await;
    assert!(message.contains("control plane"), "{message}");

    create(&client, &workload.kubeconfig_secret(&ns, "c1").unwrap())
        .await
        .unwrap();
    wait_for_pool(&apis.pools, "pool", "Running", 1).await;
}

#[tokio::test]
async fn broken_and_unreachable_workload_clusters_are_conditions_not_crashes() {
    let Scenario {
        env,
        stack,
        client,
        ns,
        apis,
        modules,
    } = Scenario::new("broken").await;

    // c1: a kubeconfig Secret that does not parse.
    let mut garbage = env
        .workload()
        .unwrap()
        .kubeconfig_secret(&ns, "c1")
        .unwrap();
    garbage.data = Some([("value".to_owned(), ByteString(b"{not: [yaml".to_vec()))].into());
    create(&client, &garbage).await.unwrap();
    // c2: the kubeconfig of an API server that has stopped.
    let stopped = env.start_workload().await.unwrap();
    create(&client, &stopped.kubeconfig_secret(&ns, "c2").unwrap())
        .await
        .unwrap();
    drop(stopped);
    for cluster in ["c1", "c2"] {
        let mut config = stack.objects.sim_config();
        config["controlPlaneHost"] = json!("127.0.0.1");
        create(
            &client,
            &objects::wasm_cluster(&ns, cluster, &modules.infrastructure, config),
        )
        .await
        .unwrap();
        create(&client, &ClusterBuilder::new(&ns, cluster).build())
            .await
            .unwrap();
        stack
            .objects
            .create_pool(
                &client,
                &ns,
                &format!("{cluster}-pool"),
                cluster,
                1,
                &modules,
            )
            .await
            .unwrap();
    }

    let invalid = pool_condition(&apis, "c1-pool", "ReplicasReady", "KubeconfigInvalid").await;
    assert!(invalid.contains("c1-kubeconfig"), "{invalid}");
    assert!(
        !invalid.contains("not: ["),
        "the message must not quote the Secret: {invalid}"
    );
    wait_for_event(&client, &ns, "c1-pool", "KubeconfigInvalid").await;
    let unreachable = pool_condition(
        &apis,
        "c2-pool",
        "ReplicasReady",
        "WorkloadClusterUnreachable",
    )
    .await;
    assert!(!unreachable.is_empty());
    wait_for_event(&client, &ns, "c2-pool", "WorkloadClusterUnreachable").await;

    // The infrastructure was provisioned all the same: only the node phase is blocked.
    let pool = apis.pools.get("c2-pool").await.unwrap();
    assert_eq!(pool.spec.provider_id_list.len(), 1);
}

#[tokio::test]
async fn config_the_schema_rejects_names_the_field_on_the_object_and_its_pool() {
    let env = TestEnv::shared().await.unwrap();
    let stack = Stack::shared().await.unwrap();
    let client = env.management().client().unwrap();
    let ns = env
        .management()
        .create_namespace("badconfig")
        .await
        .unwrap();
    let apis = Apis::new(&client, &ns);
    let modules = stack.objects.modules(&client, &ns).await.unwrap();
    stack
        .objects
        .create_cluster(&client, env.workload().unwrap(), &ns, "c1", &modules)
        .await
        .unwrap();
    let kubeadm: Value = serde_json::from_str(KUBEADM_JOIN_CONFIG).unwrap();
    create(
        &client,
        &objects::bootstrap_config(&ns, "pool", &modules.bootstrap, kubeadm),
    )
    .await
    .unwrap();
    let mut config = stack.objects.sim_config();
    config["region"] = json!("Not A Region!");
    create(
        &client,
        &objects::wasm_machine_pool(&ns, "pool", &modules.infrastructure, config),
    )
    .await
    .unwrap();
    create(&client, &MachinePoolBuilder::new(&ns, "pool", "c1").build())
        .await
        .unwrap();

    let infra = wait_for(
        &apis.infra_pools,
        "pool",
        "Ready has reason InvalidConfig",
        |p: Option<&WasmMachinePool>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| condition(&s.common.conditions, "Ready"))
                .is_some_and(|(_, reason, _)| reason == "InvalidConfig")
        },
    )
    .await
    .unwrap();
    let (_, _, message) = condition(&infra.status.unwrap().common.conditions, "Ready").unwrap();
    assert!(message.contains("$.region"), "{message}");
    assert!(
        !message.contains("Not A Region"),
        "config values are masked: {message}"
    );
    wait_for_event(&client, &ns, "pool", "InvalidConfig").await;
    // The pool mirrors its infrastructure's Ready message.
    wait_for(
        &apis.pools,
        "pool",
        "InfrastructureReady names $.region",
        |p: Option<&MachinePool>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| condition(&s.conditions, "InfrastructureReady"))
                .is_some_and(|(status, _, message)| {
                    status == "False" && message.contains("$.region")
                })
        },
    )
    .await;

    // Fixing the config is all it takes.
    let fixed = json!({ "spec": { "config": { "region": "local-1" } } });
    apis.infra_pools
        .patch("pool", &PatchParams::default(), &Patch::Merge(fixed))
        .await
        .unwrap();
    wait_for_pool(&apis.pools, "pool", "Running", 1).await;
}

#[tokio::test]
async fn missing_and_unloadable_provider_modules_are_named_on_the_objects_they_serve() {
    let env = TestEnv::shared().await.unwrap();
    // The operator that must name them.
    Stack::shared().await.unwrap();
    let client = env.management().client().unwrap();
    let ns = env.management().create_namespace("nomodule").await.unwrap();
    let apis = Apis::new(&client, &ns);
    let modules: Api<ProviderModule> = Api::all(client.clone());
    let broken = format!("{ns}-pinned");
    let module = ProviderModuleBuilder::file(
        &broken,
        World::Bootstrap,
        &guest_path("kubeadm_bootstrap.wasm").to_string_lossy(),
    )
    .sha256(&"0".repeat(64))
    .build();
    modules
        .create(&PostParams::default(), &module)
        .await
        .unwrap();
    let failed = wait_for(
        &modules,
        &broken,
        "the module Failed",
        |m: Option<&ProviderModule>| {
            m.and_then(|m| m.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Failed")
        },
    )
    .await
    .unwrap();
    let status = failed.status.unwrap();
    assert!(status.message.unwrap().contains("digest mismatch"));
    assert_eq!(
        condition(&status.conditions, "Ready").unwrap().1,
        "DigestMismatch"
    );

    let kubeadm: Value = serde_json::from_str(KUBEADM_JOIN_CONFIG).unwrap();
    for (name, module) in [
        ("missing", format!("{ns}-nothing")),
        ("unloaded", broken.clone()),
    ] {
        let config = objects::bootstrap_config(&ns, name, &module, kubeadm.clone());
        create(&client, &config).await.unwrap();
    }
    create(
        &client,
        &ClusterBuilder::new(&ns, "c1")
            .endpoint("127.0.0.1", 6443)
            .no_infrastructure()
            .build(),
    )
    .await
    .unwrap();
    for name in ["missing", "unloaded"] {
        create(&client, &MachinePoolBuilder::new(&ns, name, "c1").build())
            .await
            .unwrap();
    }
    let reason_of = |name: &'static str, reason: &'static str| {
        let apis = apis.clone();
        async move { config_ready_reason(&apis, name, reason).await }
    };
    let missing = reason_of("missing", "ProviderNotFound").await;
    assert!(missing.contains(&format!("{ns}-nothing")), "{missing}");
    let unloaded = reason_of("unloaded", "ProviderNotReady").await;
    assert!(unloaded.contains("digest mismatch"), "{unloaded}");
    wait_for_event(&client, &ns, "missing", "ProviderNotFound").await;
}

#[tokio::test]
async fn a_trapping_bootstrap_guest_fails_only_its_own_pool() {
    let Scenario {
        env,
        stack,
        client,
        ns,
        apis,
        modules,
    } = Scenario::new("trap").await;
    let hostile = format!("{ns}-panic");
    let module = ProviderModuleBuilder::file(
        &hostile,
        World::Bootstrap,
        &guest_path("hostile_panic.wasm").to_string_lossy(),
    )
    .build();
    Api::<ProviderModule>::all(client.clone())
        .create(&PostParams::default(), &module)
        .await
        .unwrap();
    stack
        .objects
        .create_cluster(&client, env.workload().unwrap(), &ns, "c1", &modules)
        .await
        .unwrap();
    stack
        .objects
        .create_pool(&client, &ns, "good", "c1", 1, &modules)
        .await
        .unwrap();
    create(
        &client,
        &objects::bootstrap_config(&ns, "bad", &hostile, json!({})),
    )
    .await
    .unwrap();
    create(
        &client,
        &objects::wasm_machine_pool(
            &ns,
            "bad",
            &modules.infrastructure,
            stack.objects.sim_config(),
        ),
    )
    .await
    .unwrap();
    create(&client, &MachinePoolBuilder::new(&ns, "bad", "c1").build())
        .await
        .unwrap();

    let message = config_ready_reason(&apis, "bad", "GuestTrapped").await;
    assert!(
        message.contains("panics on purpose") && message.contains("sha256:"),
        "{message}"
    );
    wait_for_event(&client, &ns, "bad", "GuestTrapped").await;
    wait_for_pool(&apis.pools, "good", "Running", 1).await;
    // The bad pool's first status write may still be on its way.
    wait_for(
        &apis.pools,
        "bad",
        "phase Pending",
        |p: Option<&MachinePool>| {
            p.and_then(|p| p.status.as_ref())
                .is_some_and(|s| s.phase.as_deref() == Some("Pending"))
        },
    )
    .await
    .unwrap();
    assert!(stack.cloud.instances_of(&format!("{ns}/bad")).is_empty());
}

#[tokio::test]
async fn credentials_outside_the_allowed_namespace_are_not_handed_to_a_provider() {
    let Scenario {
        client, ns, apis, ..
    } = Scenario::new("creds").await;
    let name = format!("{ns}-creds");
    let mut module = ProviderModuleBuilder::file(
        &name,
        World::Bootstrap,
        &guest_path("kubeadm_bootstrap.wasm").to_string_lossy(),
    )
    .build();
    module.spec.capabilities = Some(capwasm::api::providermodule::ModuleCapabilities {
        allowed_hosts: Vec::new(),
        credentials_secret: Some(capwasm::api::providermodule::SecretReference {
            namespace: ns.clone(),
            name: "anything".into(),
        }),
        ..Default::default()
    });
    Api::<ProviderModule>::all(client.clone())
        .create(&PostParams::default(), &module)
        .await
        .unwrap();
    create(
        &client,
        &ClusterBuilder::new(&ns, "c1")
            .endpoint("127.0.0.1", 6443)
            .no_infrastructure()
            .build(),
    )
    .await
    .unwrap();
    let kubeadm: Value = serde_json::from_str(KUBEADM_JOIN_CONFIG).unwrap();
    create(
        &client,
        &objects::bootstrap_config(&ns, "p", &name, kubeadm),
    )
    .await
    .unwrap();
    create(
        &client,
        &MachinePoolBuilder::new(&ns, "p", "c1")
            .data_secret("unused")
            .build(),
    )
    .await
    .unwrap();
    // The pool does not reference the config; adopt it as its pool would.
    let owner = apis.pools.get("p").await.unwrap();
    let reference = json!({ "metadata": { "ownerReferences": [{
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "p",
        "uid": owner.metadata.uid, "controller": true
    }] } });
    apis.configs
        .patch("p", &PatchParams::default(), &Patch::Merge(reference))
        .await
        .unwrap();
    let message = config_ready_reason(&apis, "p", "CredentialsNotAllowed").await;
    assert!(
        message.contains(testenv::CREDENTIALS_NAMESPACE),
        "{message}"
    );
}
