//! Provider mode, proven by upstream's own manager: Cluster API v1.14.2's
//! core controllers (built from its Go module, its CRDs installed) run the
//! Cluster and MachinePool, and `capwasm run --controllers providers` runs
//! only capwasm's provider kinds beside it, with nothing of capwasm's core.

use std::path::PathBuf;
use std::time::Duration;

use capwasm::simcloud::{self, SimCloud};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_core_runs_a_pool_of_capwasm_providers_to_running() {
    let build = UpstreamBuild::locate().unwrap();
    let mut crds = vec![build.crds.clone()];
    crds.extend(provider_crds());
    let env = TestEnv::start(Options {
        crds,
        ..Options::default()
    })
    .await
    .unwrap();
    let _upstream = UpstreamManager::start(&build, env.management())
        .await
        .unwrap();
    let workload = env.workload().unwrap();
    let client = env.management().client().unwrap();
    let ns = env.management().create_namespace("upstream").await.unwrap();
    let cloud = SimCloud::new(simcloud::Settings {
        boot_delay: Duration::from_millis(300),
        termination_delay: Duration::from_millis(300),
        nodes: Some(workload.client().unwrap()),
        ..simcloud::Settings::default()
    })
    .start_on_loopback()
    .await
    .unwrap();
    let objects = Objects {
        cloud_endpoint: cloud.endpoint(),
    };
    let _operator = OperatorProcess::start(
        env.management(),
        &ns,
        "providers",
        &["--controllers=providers"],
    )
    .await;

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
}
