//! Provider mode, proven by upstream's own manager: Cluster API v1.14.2's
//! core controllers (built from its Go module, its CRDs installed) run the
//! Cluster and MachinePool, and `capwasm run --controllers providers` runs
//! only capwasm's provider kinds beside it, with nothing of capwasm's core.

use std::path::PathBuf;
use std::time::Duration;

use capwasm::simcloud::{self, InstanceState, SimCloud};
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use testenv::flows::{Apis, Objects, condition, wait_for, wait_for_pool};
use testenv::operator::OperatorProcess;
use testenv::upstream::{UpstreamBuild, UpstreamManager};
use testenv::{Options, TestEnv};

/// capwasm's CRDs a provider-mode install has: the provider kinds and
/// ProviderModule, not Cluster or MachinePool.
fn provider_crds() -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../crds"));
    [
        "bootstrap.cluster.x-k8s.io_wasmbootstrapconfigs.yaml",
        "infrastructure.cluster.x-k8s.io_wasmclusters.yaml",
        "infrastructure.cluster.x-k8s.io_wasmmachinepools.yaml",
        "runtime.capwasm.dev_providermodules.yaml",
    ]
    .iter()
    .map(|file| dir.join(file))
    .collect()
}

/// Upstream's manager and `capwasm run --controllers providers` on an API
/// server of their own, a workload server, and a simulated cloud.
struct ProviderMode {
    env: TestEnv,
    cloud: simcloud::RunningSimCloud,
    objects: Objects,
    client: Client,
    ns: String,
    _upstream: UpstreamManager,
    _operator: OperatorProcess,
}

impl ProviderMode {
    async fn start(prefix: &str) -> Self {
        let build = UpstreamBuild::locate().unwrap();
        let mut crds = vec![build.crds.clone()];
        crds.extend(provider_crds());
        let env = TestEnv::start(Options {
            crds,
            ..Options::default()
        })
        .await
        .unwrap();
        let upstream = UpstreamManager::start(&build, env.management())
            .await
            .unwrap();
        let client = env.management().client().unwrap();
        let ns = env.management().create_namespace(prefix).await.unwrap();
        let cloud = SimCloud::new(simcloud::Settings {
            boot_delay: Duration::from_millis(300),
            termination_delay: Duration::from_millis(300),
            nodes: Some(env.workload().unwrap().client().unwrap()),
            ..simcloud::Settings::default()
        })
        .start_on_loopback()
        .await
        .unwrap();
        let objects = Objects {
            cloud_endpoint: cloud.endpoint(),
        };
        let operator = OperatorProcess::start(
            env.management(),
            &ns,
            "providers",
            &["--controllers=providers"],
        )
        .await;
        Self {
            env,
            cloud,
            objects,
            client,
            ns,
            _upstream: upstream,
            _operator: operator,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_core_runs_scales_and_deletes_a_pool_of_capwasm_providers() {
    let ProviderMode {
        env,
        cloud,
        objects,
        client,
        ns,
        _upstream,
        _operator,
    } = ProviderMode::start("upstream").await;
    let workload = env.workload().unwrap();
    let apis = Apis::new(&client, &ns);
    let modules = objects.modules(&client, &ns).await.unwrap();
    objects
        .create_cluster(&client, workload, &ns, "c1", &modules)
        .await
        .unwrap();
    wait_for(&apis.clusters, "c1", "the Cluster is Provisioned", |c| {
        c.and_then(|c| c.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Provisioned")
    })
    .await;
    objects
        .create_pool(&client, &ns, "pool", "c1", 3, &modules)
        .await
        .unwrap();
    let pool = wait_for_pool(&apis.pools, "pool", "Running", 3).await;
    assert_eq!(pool.spec.provider_id_list.len(), 3);
    // Upstream's core did it: only its Cluster controller probes the
    // workload cluster's API server as a condition of its own.
    let cluster = apis.clusters.get("c1").await.unwrap();
    let conditions = cluster.status.unwrap_or_default().conditions;
    assert!(
        condition(&conditions, "RemoteConnectionProbe").is_some(),
        "{conditions:?}"
    );

    // Scaled as `kubectl scale` does, through the scale subresource.
    for replicas in [5, 1] {
        apis.pools
            .patch_scale(
                "pool",
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "replicas": replicas } })),
            )
            .await
            .unwrap();
        let pool = wait_for_pool(&apis.pools, "pool", "Running", replicas).await;
        assert_eq!(
            pool.spec.provider_id_list.len(),
            usize::try_from(replicas).unwrap()
        );
    }

    // Deleting the Cluster leaves nothing: objects, instances, Nodes.
    let nodes: Api<Node> = Api::all(workload.client().unwrap());
    let node_names: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(!node_names.is_empty());
    apis.clusters
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&apis.clusters, "c1", "the Cluster is gone", |c| c.is_none()).await;
    assert!(apis.pools.get_opt("pool").await.unwrap().is_none());
    assert!(apis.configs.get_opt("pool").await.unwrap().is_none());
    assert!(apis.infra_pools.get_opt("pool").await.unwrap().is_none());
    assert!(apis.infra_clusters.get_opt("c1").await.unwrap().is_none());
    let live: Vec<_> = cloud
        .cloud()
        .instances()
        .into_iter()
        .filter(|i| i.instance.state != InstanceState::Terminating)
        .collect();
    assert!(live.is_empty(), "instances left in the cloud: {live:?}");
    for name in node_names {
        wait_for(&nodes, &name, "the Node is deleted", |n| n.is_none()).await;
    }
}
