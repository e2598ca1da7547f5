//! A fleet at once: creates `CLUSTERS` Clusters with `POOLS` MachinePools of
//! `REPLICAS` each (every Cluster's kubeconfig points at the one workload
//! API server, every pool served by kubeadm-bootstrap and sim-infrastructure),
//! waits until every pool is Running with all its Nodes, then deletes the
//! Clusters and waits until they are gone. Prints one line of figures:
//!
//!     fleet: clusters=10 pools=20 nodes=60 running-p50=<s> running-max=<s> delete=<s> cpu=<s> rss=<MiB>
//!
//! `cpu` and `rss` are this process's: the operator, the simulated cloud and
//! the harness (kube-apiserver and etcd run as their own processes).
//!
//!     make fleet-bench     (or: cargo run --release -p capwasm-tests --example fleet [CLUSTERS POOLS REPLICAS])

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use kube::api::{DeleteParams, ListParams};
use testenv::flows::Scenario;

const TIMEOUT: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(200);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut next = |default: i32| -> anyhow::Result<i32> {
        args.next().map_or(Ok(default), |a| {
            a.parse().with_context(|| format!("not a count: {a}"))
        })
    };
    let (clusters, pools, replicas) = (next(10)?, next(2)?, next(3)?);

    let scenario = Scenario::new("fleet").await;
    let cpu_before = cpu_seconds()?;
    let started = Instant::now();
    for c in 0..clusters {
        let cluster = format!("c{c}");
        scenario.cluster(&cluster).await;
        for p in 0..pools {
            scenario
                .pool(&format!("{cluster}-p{p}"), &cluster, replicas)
                .await;
        }
    }

    // Seconds from the start until each pool was first seen Running with all its Nodes.
    let total = usize::try_from(clusters * pools)?;
    let mut running: BTreeMap<String, f64> = BTreeMap::new();
    while running.len() < total {
        if started.elapsed() > TIMEOUT {
            bail!(
                "{} of {total} pools Running after {TIMEOUT:?}",
                running.len()
            );
        }
        for pool in scenario.apis.pools.list(&ListParams::default()).await? {
            let done = pool.status.as_ref().is_some_and(|s| {
                s.phase.as_deref() == Some("Running")
                    && i32::try_from(s.node_refs.len()).ok() == Some(replicas)
            });
            if done {
                let name = kube::ResourceExt::name_any(&pool);
                running
                    .entry(name)
                    .or_insert_with(|| started.elapsed().as_secs_f64());
            }
        }
        tokio::time::sleep(POLL).await;
    }
    let mut times: Vec<f64> = running.into_values().collect();
    times.sort_by(f64::total_cmp);

    let deleting = Instant::now();
    scenario
        .apis
        .clusters
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    loop {
        let left = scenario
            .apis
            .clusters
            .list(&ListParams::default())
            .await?
            .items
            .len()
            + scenario
                .apis
                .pools
                .list(&ListParams::default())
                .await?
                .items
                .len();
        if left == 0 {
            break;
        }
        if deleting.elapsed() > TIMEOUT {
            bail!("{left} Clusters and MachinePools left after {TIMEOUT:?}");
        }
        tokio::time::sleep(POLL).await;
    }
    let delete = deleting.elapsed().as_secs_f64();
    let cpu = cpu_seconds()? - cpu_before;

    println!(
        "fleet: clusters={clusters} pools={total} nodes={} running-p50={:.1}s running-max={:.1}s delete={delete:.1}s cpu={cpu:.1}s rss={}MiB",
        total * usize::try_from(replicas)?,
        times[times.len() / 2],
        times[times.len() - 1],
        resident_mib()?,
    );
    Ok(())
}

/// User and system CPU time of this process so far.
fn cpu_seconds() -> anyhow::Result<f64> {
    use nix::sys::resource::{UsageWho, getrusage};
    use nix::sys::time::TimeValLike as _;
    let usage = getrusage(UsageWho::RUSAGE_SELF)?;
    let micros = usage.user_time().num_microseconds() + usage.system_time().num_microseconds();
    Ok(Duration::from_micros(u64::try_from(micros)?).as_secs_f64())
}

/// Resident memory of this process (`/proc/self/status`), in MiB.
fn resident_mib() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .context("no VmRSS in /proc/self/status")?
        .parse()?;
    Ok(kib / 1024)
}
