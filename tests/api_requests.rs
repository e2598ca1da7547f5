//! What the operator asks of the management API server: requests by verb
//! and resource while 20 MachinePools of 4 Clusters are provisioned, while
//! they are at rest, and while every object of theirs is reconciled again
//! for a change that means nothing to capwasm (an annotation on each
//! Cluster, as a resync would), counted by the operator's own client
//! (`capwasm_api_requests`). Kinds the operator watches are read from its
//! caches, each watched once, and a reconcile that finds nothing to do
//! writes nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use prometheus_client::registry::Registry;
use serde_json::json;
use testenv::flows::{Apis, wait_for_pool};
use testenv::{Stack, TestEnv};

const CLUSTERS: usize = 4;
const POOLS_PER_CLUSTER: usize = 5;
const REPLICAS: i32 = 2;

/// How long the fleet is watched at rest.
const REST: Duration = Duration::from_secs(10);

/// The kinds the operator watches: reading one from the server is a read
/// its cache should have served.
const WATCHED: [&str; 9] = [
    "clusters",
    "machinepools",
    "machines",
    "wasmbootstrapconfigs",
    "wasmmachinepools",
    "wasmmachines",
    "wasmclusters",
    "wasmcontrolplanes",
    "providermodules",
];

/// `capwasm_api_requests`, `capwasm_api_writes` and `capwasm_reconcile`
/// as (metric, labels) → count.
fn counters(registry: &Registry) -> BTreeMap<(String, String), u64> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text.lines()
        .filter(|l| {
            [
                "capwasm_api_requests_total{",
                "capwasm_api_writes_total{",
                "capwasm_reconcile_total{",
            ]
            .iter()
            .any(|metric| l.starts_with(metric))
        })
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (name, labels) = series.split_once('{')?;
            Some((
                (name.to_owned(), labels.trim_end_matches('}').to_owned()),
                value.parse::<u64>().ok()?,
            ))
        })
        .collect()
}

fn delta(
    before: &BTreeMap<(String, String), u64>,
    after: &BTreeMap<(String, String), u64>,
) -> BTreeMap<(String, String), u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

fn print(title: &str, counts: &BTreeMap<(String, String), u64>) {
    println!("{title}:");
    for ((name, labels), count) in counts {
        println!("  {name}{{{labels}}} {count}");
    }
}

/// Reconciles by `controller` in `counts`.
fn reconciles(counts: &BTreeMap<(String, String), u64>, controller: &str) -> u64 {
    counts
        .get(&(
            "capwasm_reconcile_total".to_owned(),
            format!("controller=\"{controller}\""),
        ))
        .copied()
        .unwrap_or(0)
}

/// Writes in `counts`.
fn writes(counts: &BTreeMap<(String, String), u64>) -> Vec<String> {
    counts
        .iter()
        .filter(|((name, _), _)| name == "capwasm_api_writes_total")
        .map(|((_, labels), count)| format!("{labels}: {count}"))
        .collect()
}

/// Reads (get, list) of watched kinds in `counts`.
fn watched_reads(counts: &BTreeMap<(String, String), u64>) -> Vec<String> {
    requests_of_watched(counts, &["get", "list"])
}

/// Requests of watched kinds in `counts` with one of `verbs`.
fn requests_of_watched(counts: &BTreeMap<(String, String), u64>, verbs: &[&str]) -> Vec<String> {
    counts
        .iter()
        .filter(|((name, labels), _)| {
            name == "capwasm_api_requests_total"
                && verbs
                    .iter()
                    .any(|verb| labels.contains(&format!("verb=\"{verb}\"")))
                && WATCHED
                    .iter()
                    .any(|kind| labels.contains(&format!("resource=\"{kind}\"")))
        })
        .map(|((_, labels), count)| format!("{labels}: {count}"))
        .collect()
}

/// Creates [`CLUSTERS`] Clusters of [`POOLS_PER_CLUSTER`] pools in `ns`.
async fn create_fleet(stack: &Stack, env: &TestEnv, ns: &str, modules: &testenv::flows::Modules) {
    let (client, workload) = (&env.management().client().unwrap(), env.workload().unwrap());
    for c in 0..CLUSTERS {
        let cluster = format!("c{c}");
        stack
            .objects
            .create_cluster(client, workload, ns, &cluster, modules)
            .await
            .unwrap();
        for p in 0..POOLS_PER_CLUSTER {
            stack
                .objects
                .create_pool(
                    client,
                    ns,
                    &format!("{cluster}-p{p}"),
                    &cluster,
                    REPLICAS,
                    modules,
                )
                .await
                .unwrap();
        }
    }
}

#[tokio::test]
async fn watched_kinds_are_read_from_the_caches() {
    let env = TestEnv::shared().await.unwrap();
    // An operator of this test's own: its counters count only this test.
    let stack = Stack::of(env).await.unwrap();
    let client = env.management().client().unwrap();
    let ns = env.management().create_namespace("requests").await.unwrap();
    let apis = Apis::new(&client, &ns);
    let modules = stack.objects.modules(&client, &ns).await.unwrap();

    let start = counters(&stack.registry);
    create_fleet(&stack, env, &ns, &modules).await;
    for c in 0..CLUSTERS {
        for p in 0..POOLS_PER_CLUSTER {
            wait_for_pool(&apis.pools, &format!("c{c}-p{p}"), "Running", REPLICAS).await;
        }
    }
    let running = counters(&stack.registry);
    let provisioning = delta(&start, &running);
    let pools = CLUSTERS * POOLS_PER_CLUSTER;
    print(
        &format!("requests while {pools} pools ({CLUSTERS} Clusters) are provisioned"),
        &provisioning,
    );
    // The core reads the provider objects its pools and Clusters reference
    // from the caches the providers' controllers fill: no second watch.
    let watches = requests_of_watched(&provisioning, &["list", "watch"]);
    assert!(
        watches.is_empty(),
        "watched kinds were listed or watched again: {watches:?}"
    );

    tokio::time::sleep(REST).await;
    let rested = counters(&stack.registry);
    let rest = delta(&running, &rested);
    print(&format!("requests in {REST:?} at rest"), &rest);
    let reads = watched_reads(&rest);
    assert!(
        reads.is_empty(),
        "watched kinds were read from the API server at rest: {reads:?}"
    );

    // Every object of every Cluster reconciles again, and finds nothing to do.
    let touch = json!({ "metadata": { "annotations": { "example.com/touched": "yes" } } });
    for c in 0..CLUSTERS {
        apis.clusters
            .patch(
                &format!("c{c}"),
                &PatchParams::default(),
                &Patch::Merge(&touch),
            )
            .await
            .unwrap();
    }
    let expected = [
        ("cluster", CLUSTERS),
        ("wasmcluster", CLUSTERS),
        ("machinepool", pools),
        ("bootstrap", pools),
        ("wasmmachinepool", pools),
    ];
    let resynced = tokio::time::timeout(testenv::flows::WAIT, async {
        loop {
            let now = counters(&stack.registry);
            if expected.iter().all(|(controller, n)| {
                reconciles(&now, controller) >= reconciles(&rested, controller) + *n as u64
            }) {
                // Let the reconciles in flight end.
                tokio::time::sleep(Duration::from_secs(2)).await;
                return counters(&stack.registry);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("every object of the touched Clusters reconciles");
    let resync = delta(&rested, &resynced);
    print("requests while every object reconciles again", &resync);
    let reads = watched_reads(&resync);
    assert!(
        reads.is_empty(),
        "watched kinds were read from the API server by reconciles: {reads:?}"
    );
    let writes = writes(&resync);
    assert!(
        writes.is_empty(),
        "reconciles that had nothing to do wrote: {writes:?}"
    );
}
