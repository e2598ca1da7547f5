//! A Cluster and a MachinePool from nothing to Running, scaled up and down,
//! with every provider step in Wasm (kubeadm-bootstrap, sim-infrastructure)
//! and Nodes registered in a real workload API server by the simulated cloud.

use std::collections::BTreeSet;

use capwasm::api::MachinePool;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;
use testenv::flows::{Apis, Scenario, scale, wait_for, wait_for_cluster, wait_for_pool};
use testenv::{Stack, TestEnv};

/// Starts counting the writes that change MachinePool `name` (every
/// resourceVersion after the one it was created with); read it with `count`.
fn count_writes(api: Api<MachinePool>, name: &str) -> tokio::sync::watch::Receiver<u32> {
    let (tx, rx) = tokio::sync::watch::channel(0);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    tokio::spawn(async move {
        let mut versions = BTreeSet::new();
        let mut events = watcher(api, config).applied_objects().boxed();
        while let Some(Ok(pool)) = events.next().await {
            if let Some(version) = pool.metadata.resource_version.clone() {
                if versions.insert(version.clone()) {
                    let status = pool.status.clone().unwrap_or_default();
                    let conditions: Vec<String> = status
                        .conditions
                        .iter()
                        .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
                        .collect();
                    eprintln!(
                        "write {version}: finalizers={:?} secret={:?} ids={} phase={:?} ready={:?} refs={} {}",
                        pool.metadata.finalizers,
                        pool.spec.template.spec.bootstrap.data_secret_name,
                        pool.spec.provider_id_list.len(),
                        status.phase,
                        status.ready_replicas,
                        status.node_refs.len(),
                        conditions.join(",")
                    );
                }
                // The first version is the creation, not a controller write.
                let _ =
                    tx.send(u32::try_from(versions.len().saturating_sub(1)).unwrap_or(u32::MAX));
            }
        }
    });
    rx
}

#[tokio::test]
async fn cluster_and_pool_reach_running_with_three_node_refs() {
    let env = TestEnv::shared().await.unwrap();
    let stack = Stack::shared().await.unwrap();
    let client = env.management().client().unwrap();
    let workload = env.workload().unwrap();
    let ns = env
        .management()
        .create_namespace("provision")
        .await
        .unwrap();
    let apis = Apis::new(&client, &ns);
    let modules = stack.objects.modules(&client, &ns).await.unwrap();

    stack
        .objects
        .create_cluster(&client, workload, &ns, "c1", &modules)
        .await
        .unwrap();
    wait_for_cluster(&apis.clusters, "c1", "Provisioned").await;
    let writes = count_writes(apis.pools.clone(), "pool");
    stack
        .objects
        .create_pool(&client, &ns, "pool", "c1", 3, &modules)
        .await
        .unwrap();
    let pool = wait_for_pool(&apis.pools, "pool", "Running", 3).await;

    let status = pool.status.clone().unwrap();
    assert_eq!(status.replicas, Some(3));
    assert_eq!(pool.spec.provider_id_list.len(), 3);
    let nodes: Api<Node> = Api::all(workload.client().unwrap());
    for (id, node_ref) in pool.spec.provider_id_list.iter().zip(&status.node_refs) {
        let node = nodes.get(node_ref.name.as_deref().unwrap()).await.unwrap();
        assert_eq!(
            node.spec.and_then(|s| s.provider_id).as_deref(),
            Some(id.as_str())
        );
        assert_eq!(node.metadata.uid, node_ref.uid);
        let annotations = node.metadata.annotations.unwrap_or_default();
        assert_eq!(annotations["cluster.x-k8s.io/owner-name"], "pool");
        assert_eq!(annotations["cluster.x-k8s.io/cluster-namespace"], ns);
    }
    // The bootstrap contract: data in a Secret the config owns, its name copied into the pool.
    let config = apis.configs.get("pool").await.unwrap();
    let config_status = config.status.unwrap();
    assert!(config_status.ready);
    let secret_name = config_status.data_secret_name.unwrap();
    assert_eq!(
        pool.spec
            .template
            .spec
            .bootstrap
            .data_secret_name
            .as_deref(),
        Some(secret_name.as_str())
    );
    let secret = Api::<Secret>::namespaced(client.clone(), &ns)
        .get(&secret_name)
        .await
        .unwrap();
    let value = &secret.data.unwrap()["value"].0;
    assert!(String::from_utf8_lossy(value).starts_with("#cloud-config"));
    assert_eq!(
        secret.metadata.owner_references.unwrap()[0].kind,
        "WasmBootstrapConfig"
    );
    // The cluster-name label and owner references the contract asks for.
    assert_eq!(
        pool.metadata.labels.unwrap()["cluster.x-k8s.io/cluster-name"],
        "c1"
    );
    let infra = apis.infra_pools.get("pool").await.unwrap();
    let owner = &infra.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("MachinePool", Some(true))
    );

    println!("machinepool-writes-to-running: {}", *writes.borrow());
}

#[tokio::test]
async fn pool_scales_up_to_five_and_down_to_one_removing_nodes() {
    let scenario = Scenario::with_cluster("scale", "c1").await;
    scenario.pool("pool", "c1", 3).await;
    let Scenario {
        env,
        stack,
        ns,
        apis,
        ..
    } = scenario;
    let workload = env.workload().unwrap();
    let three = wait_for_pool(&apis.pools, "pool", "Running", 3).await;

    scale(&apis.pools, "pool", 5).await.unwrap();
    let five = wait_for_pool(&apis.pools, "pool", "Running", 5).await;
    let first_three: Vec<_> = three.status.unwrap().node_refs;
    assert!(
        first_three
            .iter()
            .all(|r| five.status.as_ref().unwrap().node_refs.contains(r))
    );

    scale(&apis.pools, "pool", 1).await.unwrap();
    let one = wait_for_pool(&apis.pools, "pool", "Running", 1).await;
    let kept = one.status.unwrap().node_refs;
    let nodes: Api<Node> = Api::all(workload.client().unwrap());
    for gone in five
        .status
        .unwrap()
        .node_refs
        .iter()
        .filter(|r| !kept.contains(r))
    {
        let name = gone.name.clone().unwrap();
        wait_for(
            &nodes,
            &name,
            "the Node of a removed machine is deleted",
            |n: Option<&Node>| n.is_none(),
        )
        .await;
    }
    assert_eq!(
        stack
            .cloud
            .instances_of(&format!("{ns}/pool"))
            .iter()
            .filter(|i| i.instance.state != capwasm::simcloud::InstanceState::Terminating)
            .count(),
        1
    );
}
