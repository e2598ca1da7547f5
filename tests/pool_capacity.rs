//! Scaling from zero: a pool reports what its nodes offer before any exists
//! (`status.capacity`, `status.nodeInfo`, from the provider's `node-shapes`),
//! as the cluster-autoscaler reads them; an instance type the provider does
//! not know, or a provider built before `node-shapes`, says the pool cannot
//! scale from zero, and nothing else changes.

use std::collections::BTreeMap;
use std::time::Duration;

use capwasm::api::providermodule::World;
use capwasm::api::{ProviderModule, WasmMachinePool};
use capwasm::testing::objects::{MachinePoolBuilder, ProviderModuleBuilder};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testenv::flows::{
    Apis, Providers, WAIT, condition, create_pool, eventually, scale, wait_for_cluster,
    wait_for_event, wait_for_module, wait_for_pool,
};
use testenv::install::{Core, Install};
use testenv::release::Release;

/// `CapacityKnown` of the pool, once it has reason `reason`, with the pool.
async fn capacity_known(
    pools: &Api<WasmMachinePool>,
    name: &str,
    reason: &str,
) -> (WasmMachinePool, String, String) {
    eventually(WAIT, Duration::from_millis(250), || async {
        let pool = pools.get(name).await.map_err(|e| e.to_string())?;
        let status = pool.status.clone().unwrap_or_default();
        match condition(&status.common.conditions, "CapacityKnown") {
            Some((known, said, message)) if said == reason => Ok((pool, known, message)),
            other => Err(format!(
                "CapacityKnown of {name} is {other:?}, not {reason}"
            )),
        }
    })
    .await
}

/// The pool's capacity as the autoscaler reads it: names to quantity strings.
fn capacity(pool: &WasmMachinePool) -> BTreeMap<String, String> {
    let status = pool.status.clone().unwrap_or_default();
    status.capacity.into_iter().map(|(k, v)| (k, v.0)).collect()
}

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// `capwasm_guest_calls_total` of `export` with outcome `ok`, in `metrics`.
fn calls(metrics: &str, export: &str) -> u64 {
    let export = format!("export=\"{export}\"");
    metrics
        .lines()
        .filter(|l| l.starts_with("capwasm_guest_calls_total{"))
        .filter(|l| l.contains(&export) && l.contains("outcome=\"ok\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

async fn metrics(install: &Install) -> String {
    install.operator.get("/metrics").await.1
}

/// However often the pool is looked at, at rest its provider is not asked
/// again: a change of its metadata brings a reconcile, not a call.
async fn not_asked_again_at_rest(install: &Install, pools: &Api<WasmMachinePool>, name: &str) {
    let asked = calls(&metrics(install).await, "node-shapes.describe");
    assert!(asked >= 1, "the describe call was counted");
    let reconciles = |m: &str| {
        testenv::operator::sample(m, "capwasm_reconcile_total{controller=\"wasmmachinepool\"}")
    };
    // One poke at a time, each waited for: a reconcile under way before the
    // first poke ends the first wait at most, so two at least follow one.
    for poke in 0..3 {
        let before = reconciles(&metrics(install).await);
        let note = json!({"metadata": {"annotations": {"example.com/poke": poke.to_string()}}});
        pools
            .patch(name, &PatchParams::default(), &Patch::Merge(note))
            .await
            .unwrap();
        eventually(WAIT, Duration::from_millis(100), || async {
            let now = reconciles(&metrics(install).await);
            (now > before).then_some(()).ok_or(format!(
                "no reconcile after poke {poke} ({before} before, {now} now)"
            ))
        })
        .await;
    }
    assert_eq!(
        calls(&metrics(install).await, "node-shapes.describe"),
        asked,
        "a pool at rest asked its provider again"
    );
}

/// The workload cluster's first Node of `instance_type`, once its kubelet
/// posted its status (it registers the Node first, then the status).
async fn node_of_type(install: &Install, instance_type: &str) -> Node {
    let workload = install.env.workload().unwrap().client().unwrap();
    let nodes: Api<Node> = Api::all(workload);
    eventually(WAIT, Duration::from_millis(250), || async {
        let listed = nodes
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let of_type = |n: &Node| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("node.kubernetes.io/instance-type"))
                .is_some_and(|t| t == instance_type)
                && n.status
                    .as_ref()
                    .and_then(|s| s.capacity.as_ref())
                    .is_some_and(|c| !c.is_empty())
        };
        listed
            .items
            .into_iter()
            .find(of_type)
            .ok_or_else(|| format!("no Node of type {instance_type} with its status yet"))
    })
    .await
}

/// Creates MachinePool `name` of Cluster `c1` at `replicas`, its
/// WasmMachinePool served by `infrastructure` with `config`.
async fn pool(install: &Install, name: &str, infrastructure: &str, config: Value, replicas: i32) {
    let mut providers: Providers = install.objects.providers(&install.modules);
    providers.infrastructure = (infrastructure.to_owned(), config);
    let pool = MachinePoolBuilder::new(&install.ns, name, "c1")
        .replicas(replicas)
        .build();
    create_pool(&install.client, &pool, &providers)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_at_zero_reports_its_nodes_capacity_and_an_unknown_instance_type_says_it_cannot_scale_from_zero()
 {
    let install = Install::with_core("capacity", Core::Capwasm).await;
    let (client, ns) = (&install.client, &install.ns);
    install.cluster("c1").await;
    let apis = Apis::new(client, ns);
    wait_for_cluster(&apis.clusters, "c1", "Provisioned").await;
    let mut config = install.objects.sim_config();
    config["instanceType"] = json!("gpu");
    pool(&install, "gpu", &install.modules.infrastructure, config, 0).await;

    let pools = &apis.infra_pools;
    let (found, known, _) = capacity_known(pools, "gpu", "CapacityKnown").await;
    assert_eq!(known, "True");
    assert_eq!(
        capacity(&found),
        quantities(&[
            ("cpu", "8"),
            ("memory", "61Gi"),
            ("pods", "110"),
            ("ephemeral-storage", "20Gi"),
            ("nvidia.com/gpu", "1"),
        ])
    );
    let info = found.status.and_then(|s| s.node_info).unwrap();
    assert_eq!(
        (info.architecture.as_str(), info.operating_system.as_str()),
        ("amd64", "linux")
    );

    not_asked_again_at_rest(&install, pools, "gpu").await;

    // A type the cloud does not offer: the pool says so, once as an Event.
    let unknown = json!({"spec": {"config": {"instanceType": "m5.huge"}}});
    pools
        .patch("gpu", &PatchParams::default(), &Patch::Merge(unknown))
        .await
        .unwrap();
    let (found, known, message) = capacity_known(pools, "gpu", "CapacityUnknown").await;
    assert_eq!(known, "False");
    assert!(
        message.contains("UnknownInstanceType") && message.contains("from zero"),
        "{message}"
    );
    assert!(capacity(&found).is_empty(), "{:?}", capacity(&found));
    assert!(found.status.as_ref().unwrap().node_info.is_none());
    let note = wait_for_event(client, ns, "gpu", "CapacityUnknown").await;
    assert!(note.contains("m5.huge"), "{note}");
    // Nothing else of the pool changed: it is still provisioned, with none.
    let status = found.status.unwrap();
    assert!(status.ready && status.instances.is_empty(), "{status:#?}");

    // A type it offers again, then a node of it: what the pool reported is
    // what its Node has.
    let arm = json!({"spec": {"config": {"instanceType": "small-arm"}}});
    pools
        .patch("gpu", &PatchParams::default(), &Patch::Merge(arm))
        .await
        .unwrap();
    let (found, _, _) = capacity_known(pools, "gpu", "CapacityKnown").await;
    let reported = capacity(&found);
    assert_eq!(reported["cpu"], "2");
    assert_eq!(
        found.status.unwrap().node_info.unwrap().architecture,
        "arm64"
    );
    // A scale changes the pool's spec (its providerIDList), not what its
    // nodes offer: the provider is not asked again.
    let asked = calls(&metrics(&install).await, "node-shapes.describe");
    scale(&apis.pools, "gpu", 1).await.unwrap();
    let status = node_of_type(&install, "small-arm").await.status.unwrap();
    let running = wait_for_pool(&apis.pools, "gpu", "Running", 1).await;
    assert_eq!(running.spec.provider_id_list.len(), 1);
    let scaled = pools.get("gpu").await.unwrap();
    assert_eq!(
        scaled.spec.provider_id_list.len(),
        1,
        "the pool's spec changed"
    );
    assert_eq!(
        calls(&metrics(&install).await, "node-shapes.describe"),
        asked,
        "a scale asked the provider again"
    );
    let node_capacity: BTreeMap<String, String> = status
        .capacity
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    assert_eq!(node_capacity, reported);
    assert_eq!(
        status.node_info.map(|i| i.architecture).as_deref(),
        Some("arm64")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_built_before_node_shapes_provisions_as_before_and_says_it_cannot_scale_from_zero()
 {
    let guests = Release::newest_guests().unwrap();
    let install = Install::with_core("capacity-old", Core::Capwasm).await;
    let (client, ns) = (&install.client, &install.ns);
    install.cluster("c1").await;
    let apis = Apis::new(client, ns);
    wait_for_cluster(&apis.clusters, "c1", "Provisioned").await;
    let old = format!("{ns}-sim-0-1-0");
    let path = guests.join("sim_infrastructure.wasm");
    let module = ProviderModuleBuilder::file(&old, World::Infrastructure, &path.to_string_lossy())
        .allowed_hosts(&["127.0.0.1"])
        .build();
    let modules: Api<ProviderModule> = Api::all(client.clone());
    modules
        .create(&PostParams::default(), &module)
        .await
        .unwrap();
    wait_for_module(&modules, &old, "Ready").await;
    pool(&install, "old", &old, install.objects.sim_config(), 1).await;

    wait_for_pool(&apis.pools, "old", "Running", 1).await;
    let (found, known, message) =
        capacity_known(&apis.infra_pools, "old", "CapacityUnsupported").await;
    assert_eq!(known, "False");
    assert!(
        message.contains("does not export node-shapes") && message.contains(&old),
        "{message}"
    );
    let status = found.status.unwrap();
    assert!(status.capacity.is_empty() && status.node_info.is_none());
}
