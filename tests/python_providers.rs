//! Python providers through the operator, as Rust ones: the Python kubeadm
//! bootstrap provider brings a pool to Running with byte for byte the
//! cloud-config the Rust one writes for its neighbour; a pool served by
//! Python providers alone scales and is deleted with nothing left in the
//! cloud; a Python provider that raises leaves its traceback's last line in
//! the condition.

use capwasm::api::providermodule::World;
use capwasm::api::{MachinePool, ProviderModule};
use capwasm::testing::objects::{MachinePoolBuilder, ProviderModuleBuilder};
use capwasm::testing::{KUBEADM_JOIN_CONFIG, guest_path};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};
use testenv::flows::{
    Providers, Scenario, config_ready_reason, create_pool, scale, wait_for, wait_for_event,
    wait_for_module, wait_for_pool,
};

/// Creates ProviderModule `<ns>-<name>` serving `file` in the bootstrap world.
async fn python_module(scenario: &Scenario, name: &str, file: &str) -> String {
    module_of(scenario, name, file, World::Bootstrap).await
}

/// Creates ProviderModule `<ns>-<name>` serving `file` in `world`; an
/// infrastructure module may reach 127.0.0.1.
async fn module_of(scenario: &Scenario, name: &str, file: &str, world: World) -> String {
    let module = format!("{}-{name}", scenario.ns);
    let api = Api::<ProviderModule>::all(scenario.client.clone());
    let built = ProviderModuleBuilder::file(&module, world, &guest_path(file).to_string_lossy())
        .allowed_hosts(&["127.0.0.1"])
        .build();
    api.create(&PostParams::default(), &built).await.unwrap();
    wait_for_module(&api, &module, "Ready").await;
    module
}

/// The bootstrap data of pool `name`, once it is Running.
async fn bootstrap_data(scenario: &Scenario, name: &str) -> Vec<u8> {
    let pool = wait_for_pool(&scenario.apis.pools, name, "Running", 1).await;
    let secret = pool.spec.template.spec.bootstrap.data_secret_name.unwrap();
    let secret = Api::<Secret>::namespaced(scenario.client.clone(), &scenario.ns)
        .get(&secret)
        .await
        .unwrap();
    secret.data.unwrap()["value"].0.clone()
}

#[tokio::test]
async fn a_pool_served_by_the_python_bootstrap_provider_reaches_running() {
    let scenario = Scenario::new("py-kubeadm").await;
    let (client, ns, modules) = (&scenario.client, &scenario.ns, &scenario.modules);
    let python = python_module(&scenario, "py", "python-kubeadm-bootstrap.wasm").await;
    let workload = scenario.env.workload().unwrap();
    let objects = &scenario.stack.objects;
    objects
        .create_cluster(client, workload, ns, "c1", modules)
        .await
        .unwrap();
    objects
        .create_pool(client, ns, "rust", "c1", 1, modules)
        .await
        .unwrap();
    let join: Value = serde_json::from_str(KUBEADM_JOIN_CONFIG).unwrap();
    let providers = Providers {
        bootstrap: (python, join),
        infrastructure: (modules.infrastructure.clone(), objects.sim_config()),
    };
    let pool = MachinePoolBuilder::new(ns, "python", "c1")
        .replicas(1)
        .build();
    create_pool(client, &pool, &providers).await.unwrap();

    let python = bootstrap_data(&scenario, "python").await;
    let rust = bootstrap_data(&scenario, "rust").await;
    assert!(python.starts_with(b"#cloud-config\n"));
    assert_eq!(
        String::from_utf8_lossy(&python),
        String::from_utf8_lossy(&rust),
        "the same cloud-config from both languages"
    );
}

#[tokio::test]
async fn a_python_provider_that_raises_names_its_exception_in_the_condition() {
    let scenario = Scenario::new("py-raise").await;
    let (client, ns, modules) = (&scenario.client, &scenario.ns, &scenario.modules);
    let hostile = python_module(&scenario, "hostile", "python-hostile.wasm").await;
    let objects = &scenario.stack.objects;
    objects
        .create_cluster(client, scenario.env.workload().unwrap(), ns, "c1", modules)
        .await
        .unwrap();
    let providers = Providers {
        bootstrap: (hostile.clone(), json!({"do": "raise"})),
        infrastructure: (modules.infrastructure.clone(), objects.sim_config()),
    };
    let pool = MachinePoolBuilder::new(ns, "bad", "c1").build();
    create_pool(client, &pool, &providers).await.unwrap();

    let message = config_ready_reason(&scenario.apis, "bad", "GuestTrapped").await;
    assert!(
        message.contains("RuntimeError: the hostile provider raised, as asked")
            && message.contains(&hostile)
            && message.contains("sha256:"),
        "{message}"
    );
    wait_for_event(&scenario.client, &scenario.ns, "bad", "GuestTrapped").await;
}

#[tokio::test]
async fn a_pool_served_by_python_providers_alone_scales_and_goes() {
    let scenario = Scenario::new("py-pool").await;
    let (client, ns, modules) = (&scenario.client, &scenario.ns, &scenario.modules);
    let bootstrap = python_module(&scenario, "py", "python-kubeadm-bootstrap.wasm").await;
    let infrastructure = module_of(
        &scenario,
        "pysim",
        "python-sim-infrastructure.wasm",
        World::Infrastructure,
    )
    .await;
    let objects = &scenario.stack.objects;
    objects
        .create_cluster(client, scenario.env.workload().unwrap(), ns, "c1", modules)
        .await
        .unwrap();
    let providers = Providers {
        bootstrap: (
            bootstrap,
            serde_json::from_str(KUBEADM_JOIN_CONFIG).unwrap(),
        ),
        infrastructure: (infrastructure, objects.sim_config()),
    };
    let pool = MachinePoolBuilder::new(ns, "pool", "c1")
        .replicas(2)
        .build();
    create_pool(client, &pool, &providers).await.unwrap();
    let pools = &scenario.apis.pools;
    wait_for_pool(pools, "pool", "Running", 2).await;
    scale(pools, "pool", 3).await.unwrap();
    let three = wait_for_pool(pools, "pool", "Running", 3).await;
    assert_eq!(three.spec.provider_id_list.len(), 3);
    assert!(
        three
            .spec
            .provider_id_list
            .iter()
            .all(|id| id.starts_with("sim://"))
    );
    scale(pools, "pool", 1).await.unwrap();
    wait_for_pool(pools, "pool", "Running", 1).await;

    pools
        .delete("pool", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(pools, "pool", "gone", |p: Option<&MachinePool>| p.is_none()).await;
    let cloud = &scenario.stack.cloud;
    let left = cloud.instances_of(&format!("{ns}/pool"));
    // The pool went only once its WasmMachinePool's deletion was done:
    // the cloud lists none of its instances.
    assert!(left.is_empty(), "{left:?}");
}
