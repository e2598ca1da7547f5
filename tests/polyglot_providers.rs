//! Providers in Python and JavaScript through the operator, as Rust ones:
//! the Python kubeadm bootstrap provider brings a pool to Running with byte
//! for byte the cloud-config the Rust one writes for its neighbour; a pool
//! served by the Python providers alone, and one served by the TypeScript
//! and JavaScript ones alone, scales and is deleted with nothing left in the
//! cloud;
//! a Python provider that raises leaves its traceback's last line in the
//! condition.

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
async fn bootstrap_module(scenario: &Scenario, name: &str, file: &str) -> String {
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

/// Creates the scenario's Cluster `c1`, its infrastructure served by the Rust provider.
async fn cluster(scenario: &Scenario) {
    let workload = scenario.env.workload().unwrap();
    scenario
        .stack
        .objects
        .create_cluster(
            &scenario.client,
            workload,
            &scenario.ns,
            "c1",
            &scenario.modules,
        )
        .await
        .unwrap();
}

/// Creates MachinePool `name` of `c1` with `replicas`, its bootstrap config
/// served by `bootstrap` (module, config) and its infrastructure by module
/// `infrastructure` with the stack's sim config.
async fn pool(
    scenario: &Scenario,
    (name, replicas): (&str, i32),
    bootstrap: (String, Value),
    infrastructure: &str,
) {
    let providers = Providers {
        bootstrap,
        infrastructure: (
            infrastructure.to_owned(),
            scenario.stack.objects.sim_config(),
        ),
    };
    let built = MachinePoolBuilder::new(&scenario.ns, name, "c1")
        .replicas(replicas)
        .build();
    create_pool(&scenario.client, &built, &providers)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_pool_served_by_the_python_bootstrap_provider_reaches_running() {
    let scenario = Scenario::new("py-kubeadm").await;
    let python = bootstrap_module(&scenario, "py", "python-kubeadm-bootstrap.wasm").await;
    cluster(&scenario).await;
    let rust = &scenario.modules;
    let join: Value = serde_json::from_str(KUBEADM_JOIN_CONFIG).unwrap();
    pool(
        &scenario,
        ("rust", 1),
        (rust.bootstrap.clone(), join.clone()),
        &rust.infrastructure,
    )
    .await;
    pool(
        &scenario,
        ("python", 1),
        (python, join),
        &rust.infrastructure,
    )
    .await;

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
    let hostile = bootstrap_module(&scenario, "hostile", "python-hostile.wasm").await;
    cluster(&scenario).await;
    let bootstrap = (hostile.clone(), json!({"do": "raise"}));
    pool(
        &scenario,
        ("bad", 1),
        bootstrap,
        &scenario.modules.infrastructure,
    )
    .await;

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
    scales_and_goes(
        "py-pool",
        "python-kubeadm-bootstrap.wasm",
        "python-sim-infrastructure.wasm",
    )
    .await;
}

#[tokio::test]
async fn a_pool_served_by_typescript_and_javascript_providers_alone_scales_and_goes() {
    scales_and_goes(
        "js-pool",
        "js-kubeadm-bootstrap.wasm",
        "js-sim-infrastructure.wasm",
    )
    .await;
}

/// A pool bootstrapped by `bootstrap` (a kubeadm-bootstrap component), its
/// infrastructure served by `infrastructure` (a sim-infrastructure
/// component), to Running at 2, 3 and 1, then deleted.
async fn scales_and_goes(prefix: &str, bootstrap: &str, infrastructure: &str) {
    let scenario = Scenario::new(prefix).await;
    let bootstrap = bootstrap_module(&scenario, "langboot", bootstrap).await;
    let infrastructure =
        module_of(&scenario, "langsim", infrastructure, World::Infrastructure).await;
    cluster(&scenario).await;
    let join = serde_json::from_str(KUBEADM_JOIN_CONFIG).unwrap();
    pool(&scenario, ("pool", 2), (bootstrap, join), &infrastructure).await;
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
    let left = cloud.instances_of(&format!("{}/pool", scenario.ns));
    // The pool went only once its WasmMachinePool's deletion was done:
    // the cloud lists none of its instances.
    assert!(left.is_empty(), "{left:?}");
}
