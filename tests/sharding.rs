//! Three shards against one API server, each `capwasm run --shards 3
//! --shard-index I`: every Cluster's objects are reconciled by the one shard
//! its hash picks and no other; a shard killed with SIGKILL is taken over by
//! a replacement on its Lease; a second claimant of a shard and a replica of
//! another shard count wait instead of writing.

use std::collections::BTreeMap;
use std::time::Duration;

use capwasm::api::MachinePool;
use capwasm::controllers::shard;
use kube::Api;
use testenv::flows::{scale, wait_for_pool};
use testenv::install::{Install, RECONCILES};
use testenv::operator::{Launch, OperatorProcess};

const SHARDS: u32 = 3;
/// Clusters per shard, one pool each.
const PER_SHARD: usize = 2;

#[tokio::test]
async fn each_cluster_is_reconciled_by_its_shard_alone_and_a_killed_shard_is_taken_over() {
    let log = format!("info,{RECONCILES}=debug");
    let mut install = Install::sharded("shards", SHARDS, &log).await;
    let ns = install.ns.clone();
    let mut shards = vec![None, None];
    for index in 1..SHARDS {
        let process = install
            .start_shard(index, &format!("shard-{index}"), true)
            .await;
        shards[index as usize - 1] = Some(process);
    }

    let clusters = clusters_per_shard(&ns);
    let pools: Api<MachinePool> = Api::namespaced(install.client.clone(), &ns);
    for cluster in clusters.keys() {
        install.cluster(cluster).await;
        let workload = &install.modules;
        install
            .objects
            .create_pool(
                &install.client,
                &ns,
                &pool_of(cluster),
                cluster,
                2,
                workload,
            )
            .await
            .unwrap();
    }
    for cluster in clusters.keys() {
        wait_for_pool(&pools, &pool_of(cluster), "Running", 2).await;
    }
    let processes = |install: &Install, shards: &[Option<OperatorProcess>]| -> Vec<Vec<String>> {
        std::iter::once(&install.operator)
            .chain(shards.iter().flatten())
            .map(|process| process.log_lines(|line| line.contains("reconciling")))
            .collect()
    };
    let logs = processes(&install, &shards);
    each_by_its_shard(&logs, &ns, &clusters, "provisioned");

    // Shard 1 dies; its replacement waits for the Lease to expire, then
    // takes the shard's Clusters over while every pool scales.
    let mut killed = shards[0].take().unwrap();
    killed.kill().await;
    for cluster in clusters.keys() {
        scale(&pools, &pool_of(cluster), 3).await.unwrap();
    }
    shards[0] = Some(install.start_shard(1, "shard-1-replacement", true).await);
    for cluster in clusters.keys() {
        wait_for_pool(&pools, &pool_of(cluster), "Running", 3).await;
    }
    let mut logs = processes(&install, &shards);
    logs.push(killed.log_lines(|line| line.contains("reconciling")));
    each_by_its_shard(&logs, &ns, &clusters, "after the take-over");
    // The replacement, not a neighbour, scaled shard 1's pools.
    let replacement = [shards[0]
        .as_ref()
        .map(|p| p.log_lines(|line| line.contains("reconciling")))
        .unwrap_or_default()];
    for (cluster, _) in clusters.iter().filter(|(_, owner)| **owner == 1) {
        let by = reconcilers(&replacement, &ns, "MachinePool", &pool_of(cluster));
        assert_eq!(
            by,
            [1],
            "the replacement did not reconcile the pool of {cluster}"
        );
    }
    let instances = install.cloud.cloud().instances().len();
    assert_eq!(instances, 3 * clusters.len(), "cloud instances");

    other_claimants_wait(&install).await;
    install.operator.terminate(Duration::from_secs(30)).await;
}

/// Cluster names, each with its shard, until each shard has [`PER_SHARD`].
fn clusters_per_shard(ns: &str) -> BTreeMap<String, u32> {
    let mut clusters = BTreeMap::new();
    let mut per_shard = [0usize; SHARDS as usize];
    for n in 0.. {
        let name = format!("c{n}");
        let owner = shard::of(ns, &name, SHARDS);
        if per_shard[owner as usize] < PER_SHARD {
            per_shard[owner as usize] += 1;
            clusters.insert(name, owner);
        }
        if per_shard.iter().all(|&count| count == PER_SHARD) {
            break;
        }
    }
    clusters
}

/// A second replica of shard 2 and a replica of another shard count start;
/// neither leads while the shards run, and the latter says why.
async fn other_claimants_wait(install: &Install) {
    let second = install.start_shard(2, "shard-2-second", false).await;
    let mut other_count = OperatorProcess::launch(
        install.env.management(),
        &install.ns,
        "two-shards-0",
        &["--shards=2", "--shard-index=0", "--controllers=providers"],
        Launch {
            wait_to_lead: false,
            ..Launch::default()
        },
    )
    .await;
    let says_it_waits = || {
        !other_count
            .log_lines(|line| line.contains("a replica of another shard count holds its Lease"))
            .is_empty()
    };
    let mut waited = false;
    for _ in 0..60 {
        waited = says_it_waits();
        if waited {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        waited,
        "the 2-shard replica did not say it waits: {:?}",
        other_count.log_lines(|_| true)
    );
    assert!(
        !other_count.leads(),
        "a replica of another shard count leads"
    );
    assert!(!second.leads(), "two replicas lead shard 2");
    other_count.terminate(Duration::from_secs(30)).await;
}

/// The pool of Cluster `cluster`.
fn pool_of(cluster: &str) -> String {
    format!("{cluster}-pool")
}

/// Asserts that every Cluster and its pool were reconciled by the Cluster's
/// shard alone, as the shards' `logs` say, at `stage`.
fn each_by_its_shard(
    logs: &[Vec<String>],
    ns: &str,
    clusters: &BTreeMap<String, u32>,
    stage: &str,
) {
    for (cluster, owner) in clusters {
        for (kind, name) in [
            ("Cluster", cluster.clone()),
            ("MachinePool", pool_of(cluster)),
        ] {
            let reconciled_by = reconcilers(logs, ns, kind, &name);
            assert_eq!(
                reconciled_by,
                vec![*owner],
                "{stage}: {kind} {name} of {cluster} (shard {owner} by its hash) reconciled by shards {reconciled_by:?}"
            );
        }
    }
}

/// The shards whose logs say they reconciled `kind` (of
/// `cluster.x-k8s.io/v1beta2`) `name`.
fn reconcilers(logs: &[Vec<String>], ns: &str, kind: &str, name: &str) -> Vec<u32> {
    let object = format!("object={kind}.v1beta2.cluster.x-k8s.io/{name}.{ns} ");
    let mut shards: Vec<u32> = logs
        .iter()
        .flatten()
        .filter(|line| line.contains(&object))
        .filter_map(|line| {
            let index = line.split("shard=").nth(1)?;
            index.split_whitespace().next()?.parse().ok()
        })
        .collect();
    shards.sort_unstable();
    shards.dedup();
    shards
}
