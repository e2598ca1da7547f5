//! The fleet race: the same fleet — `CLUSTERS` Clusters with `POOLS`
//! MachinePools of `REPLICAS` each, every Cluster's kubeconfig pointing at
//! one workload API server, every pool served by kubeadm-bootstrap and
//! sim-infrastructure — driven once by capwasm standalone (`capwasm run`)
//! and once by upstream Cluster API's core manager with `capwasm run
//! --controllers providers` beside it, each on a control plane of its own.
//! For each: seconds until each pool was first Running with all its Nodes
//! (median and last), seconds to delete every Cluster, API writes per pool
//! until all were Running (the management API server's own count of
//! non-read requests, less the fleet's creation and leader Leases; all, and
//! those to MachinePools), and CPU
//! seconds and peak resident memory of the controller processes (the
//! simulated cloud and the API servers excluded); then the ratio.
//!
//!     make fleet-bench FLEET="50 2 3"
//!     cargo run --release -p capwasm-tests --example fleet [CLUSTERS POOLS REPLICAS]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use kube::api::{DeleteParams, ListParams};
use testenv::flows::Apis;
use testenv::install::{Core, Install};
use testenv::usage::{self, Usage};

const TIMEOUT: Duration = Duration::from_secs(900);
const POLL: Duration = Duration::from_millis(200);

/// What one core did with the fleet.
struct Figures {
    running_p50: f64,
    running_last: f64,
    delete: f64,
    /// Writes per pool until all were Running, by resource.
    writes_per_pool: BTreeMap<String, f64>,
    usage: Usage,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut next = |default: i32| -> anyhow::Result<i32> {
        args.next().map_or(Ok(default), |a| {
            a.parse().with_context(|| format!("not a count: {a}"))
        })
    };
    let (clusters, pools, replicas) = (next(50)?, next(2)?, next(3)?);
    let total = clusters * pools;
    println!(
        "fleet race: {clusters} Clusters, {total} MachinePools, {} Nodes, on {} cores",
        total * replicas,
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
    );
    println!(
        "{:<34} {:>11} {:>12} {:>8} {:>11} {:>10} {:>8} {:>9}",
        "core",
        "running p50",
        "running last",
        "delete",
        "writes/pool",
        "MP writes",
        "cpu",
        "peak rss"
    );
    let mut results = Vec::new();
    for (core, label) in [
        (Core::Capwasm, "capwasm standalone"),
        (Core::Upstream, "upstream core + capwasm providers"),
    ] {
        let figures = Box::pin(race(core, clusters, pools, replicas)).await?;
        println!(
            "{label:<34} {:>10.1}s {:>11.1}s {:>7.1}s {:>11.1} {:>10.1} {:>7.1}s {:>6}MiB",
            figures.running_p50,
            figures.running_last,
            figures.delete,
            figures.writes_per_pool.values().sum::<f64>(),
            figures
                .writes_per_pool
                .get("machinepools")
                .copied()
                .unwrap_or(0.0),
            figures.usage.cpu_seconds,
            figures.usage.peak_rss_bytes >> 20,
        );
        let mut by_resource: Vec<(&String, &f64)> = figures
            .writes_per_pool
            .iter()
            .filter(|(_, n)| **n >= 0.05)
            .collect();
        by_resource.sort_by(|a, b| b.1.total_cmp(a.1));
        let by_resource: Vec<String> = by_resource
            .iter()
            .map(|(resource, n)| format!("{resource} {n:.1}"))
            .collect();
        println!(
            "    writes per pool by resource: {}",
            by_resource.join(", ")
        );
        results.push(figures);
    }
    let (ours, theirs) = (&results[0], &results[1]);
    println!(
        "ratio upstream/capwasm: to all Running {:.2}x (median {:.2}x), deletion {:.2}x, cpu {:.2}x",
        theirs.running_last / ours.running_last,
        theirs.running_p50 / ours.running_p50,
        theirs.delete / ours.delete,
        theirs.usage.cpu_seconds / ours.usage.cpu_seconds,
    );
    Ok(())
}

/// The fleet under `core`, from nothing to deleted.
async fn race(core: Core, clusters: i32, pools: i32, replicas: i32) -> anyhow::Result<Figures> {
    let install = Install::with_core("fleet", core).await;
    let client = &install.client;
    let apis = Apis::new(client, &install.ns);
    let processes = || {
        let mut pids = vec![install.operator.process_id()];
        pids.extend(
            install
                .upstream
                .as_ref()
                .map(testenv::upstream::UpstreamManager::process_id),
        );
        pids
    };
    let usage_now = || {
        processes()
            .into_iter()
            .map(usage::of_tree)
            .fold(Usage::default(), |sum, u| Usage {
                cpu_seconds: sum.cpu_seconds + u.cpu_seconds,
                peak_rss_bytes: sum.peak_rss_bytes + u.peak_rss_bytes,
            })
    };
    let before = usage_now();
    let writes_before = writes(client).await?;
    let started = Instant::now();
    for c in 0..clusters {
        let cluster = format!("c{c}");
        install.cluster(&cluster).await;
        for p in 0..pools {
            install
                .objects
                .create_pool(
                    client,
                    &install.ns,
                    &format!("{cluster}-p{p}"),
                    &cluster,
                    replicas,
                    &install.modules,
                )
                .await?;
        }
    }
    let times = running_times(&apis, usize::try_from(clusters * pools)?, replicas, started).await?;
    // Per pool, less the fleet's own creation (per Cluster its kubeconfig
    // Secret, WasmCluster and itself; per pool its provider objects and itself).
    let pool_count = f64::from(clusters * pools);
    let mut writes_per_pool = writes(client).await?;
    for (resource, count) in &mut writes_per_pool {
        let created = match resource.as_str() {
            "secrets" | "wasmclusters" | "clusters" => f64::from(clusters),
            "wasmbootstrapconfigs" | "wasmmachinepools" | "machinepools" => pool_count,
            _ => 0.0,
        };
        let before = writes_before.get(resource).copied().unwrap_or(0.0);
        *count = (*count - before - created) / pool_count;
    }

    let delete = delete_all(&apis).await?;
    let after = usage_now();
    Ok(Figures {
        running_p50: times[times.len() / 2],
        running_last: times[times.len() - 1],
        delete,
        writes_per_pool,
        usage: Usage {
            cpu_seconds: after.cpu_seconds - before.cpu_seconds,
            peak_rss_bytes: after.peak_rss_bytes,
        },
    })
}

/// Requests the management API server has served that wrote, by anyone,
/// leader Leases apart (`apiserver_request_total`, 2xx), by resource
/// (`machinepools` counts spec, status and scale).
async fn writes(client: &kube::Client) -> anyhow::Result<BTreeMap<String, f64>> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await?;
    let mut by_resource = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let label = |name: &str| {
            line.split(&format!("{name}=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_default()
        };
        let read = matches!(label("verb"), "GET" | "LIST" | "WATCH" | "CONNECT");
        // Refused writes (conflicts, say) changed nothing: not counted.
        if read || label("resource") == "leases" || !label("code").starts_with('2') {
            continue;
        }
        let count = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        *by_resource
            .entry(label("resource").to_owned())
            .or_insert(0.0) += count;
    }
    Ok(by_resource)
}

/// Seconds from `started` until each pool was first seen Running with all
/// `replicas` Nodes, sorted.
async fn running_times(
    apis: &Apis,
    total: usize,
    replicas: i32,
    started: Instant,
) -> anyhow::Result<Vec<f64>> {
    let mut running: BTreeMap<String, f64> = BTreeMap::new();
    while running.len() < total {
        if started.elapsed() > TIMEOUT {
            bail!(
                "{} of {total} pools Running after {TIMEOUT:?}",
                running.len()
            );
        }
        for pool in apis.pools.list(&ListParams::default()).await? {
            let done = pool.status.as_ref().is_some_and(|s| {
                s.phase.as_deref() == Some("Running")
                    && i32::try_from(s.node_refs.len()).ok() == Some(replicas)
            });
            if done {
                running
                    .entry(kube::ResourceExt::name_any(&pool))
                    .or_insert_with(|| started.elapsed().as_secs_f64());
            }
        }
        tokio::time::sleep(POLL).await;
    }
    let mut times: Vec<f64> = running.into_values().collect();
    times.sort_by(f64::total_cmp);
    Ok(times)
}

/// Deletes every Cluster; seconds until they and their pools are gone.
async fn delete_all(apis: &Apis) -> anyhow::Result<f64> {
    let deleting = Instant::now();
    apis.clusters
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    loop {
        let left = apis
            .clusters
            .list(&ListParams::default())
            .await?
            .items
            .len()
            + apis.pools.list(&ListParams::default()).await?.items.len();
        if left == 0 {
            return Ok(deleting.elapsed().as_secs_f64());
        }
        if deleting.elapsed() > TIMEOUT {
            bail!("{left} Clusters and MachinePools left after {TIMEOUT:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}
