//! The fleet race: the same fleet — `CLUSTERS` Clusters with `POOLS`
//! MachinePools of `REPLICAS` each, every pool served by kubeadm-bootstrap
//! and sim-infrastructure — driven once by capwasm standalone (`capwasm
//! run`) and once by upstream Cluster API's core manager with `capwasm run
//! --controllers providers` beside it, each on a control plane of its own.
//! Every Cluster's kubeconfig points at one workload API server through a
//! proxy that shows it only its own Nodes, as if each had its own workload
//! cluster.
//!
//! For each core: seconds until each pool was first Running with all its
//! Nodes (median, 99th percentile and last), seconds to delete every
//! Cluster, API writes per pool until all were Running (the management API
//! server's own count of non-read requests, less the fleet's creation and
//! leader Leases; all, and those to MachinePools), MachinePool reconciles
//! per pool, and CPU seconds and peak resident memory of the controller
//! processes alone (the simulated cloud, the harness and the API servers
//! excluded); then the ratio. For capwasm also a restart at rest: the
//! operator stopped and started with every pool Running, the seconds until
//! it had reconciled as many pools as there are, and the writes it made.
//!
//! Then backpressure: every pool scaled at once to one replica more and
//! back, the time until each is Running again, the writes, the most
//! provider calls queued and instances alive (against their slots), and
//! requests the API server's priority and fairness rejected.
//!
//! With `FLEET_SHARDS=N`, capwasm runs as N shards (`--shards N`), each
//! process's CPU and peak memory printed; no restart then. Otherwise
//! `FLEET_ARGS` adds flags to `capwasm run` (`--concurrency 8`, say).
//!
//!     make fleet-bench FLEET="50 2 3"
//!     cargo run --release -p capwasm-tests --example fleet [CLUSTERS POOLS REPLICAS [capwasm|upstream|both]]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use capwasm::testing::objects::{ClusterBuilder, MachinePoolBuilder};
use futures::{FutureExt as _, StreamExt as _, TryStreamExt as _};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{DeleteParams, ListParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;
use testenv::flows::{self, Apis, Providers};
use testenv::install::{Core, Install};
use testenv::operator::OperatorProcess;
use testenv::scoped::{CLUSTER_LABEL, ScopedWorkload};
use testenv::usage::{self, Usage};

#[path = "fleet/flood.rs"]
mod flood;

const TIMEOUT: Duration = Duration::from_secs(900);
const POLL: Duration = Duration::from_millis(200);
const DELETE_POLL: Duration = Duration::from_secs(1);
/// How often progress is printed (to stderr).
const PROGRESS: Duration = Duration::from_secs(10);
/// Clusters created at once: as a CI job or GitOps tool applies a fleet.
const CREATING: usize = 8;
/// How long the management API server must see no write to call the fleet at rest.
const QUIET: Duration = Duration::from_secs(5);

/// What one core did with the fleet.
struct Figures {
    running_p50: f64,
    running_p99: f64,
    running_last: f64,
    delete: f64,
    /// Writes per pool until all were Running, by resource.
    writes_per_pool: BTreeMap<String, f64>,
    /// MachinePool reconciles per pool until all were Running (capwasm's core).
    reconciles_per_pool: Option<f64>,
    usage: Usage,
    restart: Option<Restart>,
    /// Every pool scaled up at once, then down.
    floods: [flood::Flood; 2],
}

/// The operator restarted with every pool at rest.
struct Restart {
    /// From SIGTERM until the new process had reconciled as many
    /// MachinePools as there are.
    seconds: f64,
    /// Writes by anyone (Leases apart) from the restart until at rest
    /// again, by resource.
    writes: BTreeMap<String, f64>,
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
    let cores: &[(Core, &str)] = match args.next().as_deref() {
        None | Some("both") => &[
            (Core::Capwasm, "capwasm standalone"),
            (Core::Upstream, "upstream core + capwasm providers"),
        ],
        Some("capwasm") => &[(Core::Capwasm, "capwasm standalone")],
        Some("upstream") => &[(Core::Upstream, "upstream core + capwasm providers")],
        Some(other) => bail!("not a core: {other} (capwasm, upstream or both)"),
    };
    let total = clusters * pools;
    println!(
        "fleet race: {clusters} Clusters, {total} MachinePools, {} Nodes, on {} cores",
        total * replicas,
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
    );
    println!(
        "{:<34} {:>11} {:>11} {:>12} {:>8} {:>11} {:>10} {:>10} {:>8} {:>9}",
        "core",
        "running p50",
        "running p99",
        "running last",
        "delete",
        "writes/pool",
        "MP writes",
        "reconciles",
        "cpu",
        "peak rss"
    );
    let mut results = Vec::new();
    for &(core, label) in cores {
        let figures = Box::pin(race(core, clusters, pools, replicas)).await?;
        println!(
            "{label:<34} {:>10.1}s {:>10.1}s {:>11.1}s {:>7.1}s {:>11.1} {:>10.1} {:>10} {:>7.1}s {:>6}MiB",
            figures.running_p50,
            figures.running_p99,
            figures.running_last,
            figures.delete,
            figures.writes_per_pool.values().sum::<f64>(),
            figures
                .writes_per_pool
                .get("machinepools")
                .copied()
                .unwrap_or(0.0),
            figures
                .reconciles_per_pool
                .map_or_else(|| "-".to_owned(), |r| format!("{r:.1}")),
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
        if let Some(restart) = &figures.restart {
            println!(
                "    restart at rest: every pool reconciled after {:.1}s, {} writes {:?}, cpu {:.1}s, peak rss {}MiB",
                restart.seconds,
                restart.writes.values().sum::<f64>() + 0.0,
                restart.writes,
                restart.usage.cpu_seconds,
                restart.usage.peak_rss_bytes >> 20
            );
        }
        for flood in &figures.floods {
            println!("    {flood}");
        }
        results.push(figures);
    }
    if let [ours, theirs] = &results[..] {
        println!(
            "ratio upstream/capwasm: to all Running {:.2}x (median {:.2}x), deletion {:.2}x, cpu {:.2}x",
            theirs.running_last / ours.running_last,
            theirs.running_p50 / ours.running_p50,
            theirs.delete / ours.delete,
            theirs.usage.cpu_seconds / ours.usage.cpu_seconds,
        );
    }
    Ok(())
}

/// The fleet under `core`, from nothing to deleted.
async fn race(core: Core, clusters: i32, pools: i32, replicas: i32) -> anyhow::Result<Figures> {
    let mut install = Box::pin(install(core)).await?;
    let scoped =
        ScopedWorkload::start(install.env.workload().context("a workload server")?).await?;
    let client = install.client.clone();
    let apis = Apis::new(&client, &install.ns);
    let before = controllers_usage(&install);
    let writes_before = writes(&client).await?;
    let started = Instant::now();
    let create = futures::stream::iter(0..clusters)
        .map(|c| {
            let cluster = format!("c{c}");
            create_cluster(&install, &scoped, cluster.clone(), pools, replicas)
                .map(move |r| r.with_context(|| format!("creating Cluster {cluster}")))
        })
        .buffer_unordered(CREATING)
        .try_collect::<()>();
    let create = create.map(|created| {
        eprintln!(
            "    {:>5.0}s: every object created",
            started.elapsed().as_secs_f64()
        );
        created
    });
    let total = usize::try_from(clusters * pools)?;
    let pool_count = f64::from(clusters * pools);
    let cpu_before = cpu_by_process(&install);
    let requests_before = requests(&client).await?;
    let profiled = profile(&client, "running");
    let (created, times, ()) = futures::join!(
        create,
        running_times(&apis, total, replicas, started),
        profiled
    );
    created?;
    let times = times?;
    eprintln!(
        "    {:>5.0}s: every pool Running; cpu: {}",
        started.elapsed().as_secs_f64(),
        cpu_since(&install, &cpu_before)
    );
    let sockets: Vec<String> = install
        .operators()
        .map(|o| usage::sockets(o.process_id()).to_string())
        .collect();
    eprintln!("    sockets the operator holds: {}", sockets.join(", "));
    eprintln!(
        "    requests per pool: {}",
        requests_per_pool(&requests_before, &requests(&client).await?, pool_count)
    );
    // Per pool, less the fleet's own creation (per Cluster its kubeconfig
    // Secret, WasmCluster and itself; per pool its provider objects and itself).
    let mut writes_per_pool = writes(&client).await?;
    for (resource, count) in &mut writes_per_pool {
        let created = match resource.as_str() {
            "secrets" | "wasmclusters" | "clusters" => f64::from(clusters),
            "wasmbootstrapconfigs" | "wasmmachinepools" | "machinepools" => pool_count,
            _ => 0.0,
        };
        let before = writes_before.get(resource).copied().unwrap_or(0.0);
        *count = (*count - before - created) / pool_count;
    }
    let reconciles_per_pool = match core {
        Core::Capwasm => Some(pool_reconciles(&install).await? / pool_count),
        Core::Upstream => None,
    };
    let usage = controllers_usage(&install);
    let restart = match core {
        Core::Capwasm if install.shards.is_empty() => {
            Some(restart_at_rest(&mut install, pool_count).await?)
        }
        _ => None,
    };
    let floods = [
        flood::flood(&install, &apis, replicas + 1).await?,
        flood::flood(&install, &apis, replicas).await?,
    ];
    let before_delete = controllers_usage(&install);
    let delete = delete_reporting(&install, &apis, pool_count).await?;
    let after = controllers_usage(&install);
    print_shards(&install);
    Ok(Figures {
        running_p50: percentile(&times, 50),
        running_p99: percentile(&times, 99),
        running_last: times[times.len() - 1],
        delete,
        writes_per_pool,
        reconciles_per_pool,
        usage: Usage {
            cpu_seconds: usage.cpu_seconds - before.cpu_seconds + after.cpu_seconds
                - before_delete.cpu_seconds,
            peak_rss_bytes: usage.peak_rss_bytes.max(after.peak_rss_bytes),
        },
        restart,
        floods,
    })
}

/// The install under `core`: capwasm as `FLEET_SHARDS` shards if set.
async fn install(core: Core) -> anyhow::Result<Install> {
    let shards: u32 = match std::env::var("FLEET_SHARDS") {
        Ok(n) => n
            .parse()
            .with_context(|| format!("FLEET_SHARDS is not a count: {n}"))?,
        Err(_) => 1,
    };
    if core == Core::Upstream || shards < 2 {
        let args: Vec<String> = std::env::var("FLEET_ARGS")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        return Ok(Box::pin(Install::with_args("fleet", core, &args)).await);
    }
    Ok(Box::pin(Install::with_shards("fleet", shards, "info")).await)
}

/// Each shard's CPU seconds and peak memory so far, if there are shards.
fn print_shards(install: &Install) {
    if install.shards.is_empty() {
        return;
    }
    let each: Vec<String> = install
        .operators()
        .map(|o| {
            let usage = usage::of_tree(o.process_id());
            format!(
                "{:.1}s {}MiB",
                usage.cpu_seconds,
                usage.peak_rss_bytes >> 20
            )
        })
        .collect();
    eprintln!("    each shard, cpu and peak rss: {}", each.join(", "));
}

/// Creates Cluster `cluster` seeing its own Nodes through `scoped`, and its
/// `pools` pools of `replicas`, whose Nodes carry the Cluster's label.
async fn create_cluster(
    install: &Install,
    scoped: &ScopedWorkload,
    cluster: String,
    pools: i32,
    replicas: i32,
) -> anyhow::Result<()> {
    let (client, ns, modules) = (&install.client, &install.ns, &install.modules);
    let kubeconfig = scoped.kubeconfig_secret(ns, &cluster)?;
    install
        .objects
        .create_cluster_objects(client, &kubeconfig, ns, &cluster, modules)
        .await?;
    flows::create(client, &ClusterBuilder::new(ns, &cluster).build()).await?;
    let mut providers: Providers = install.objects.providers(modules);
    providers.infrastructure.1["nodeLabels"] = json!({ CLUSTER_LABEL: cluster });
    for p in 0..pools {
        let pool = MachinePoolBuilder::new(ns, &format!("{cluster}-p{p}"), &cluster)
            .replicas(replicas)
            .build();
        flows::create_pool(client, &pool, &providers).await?;
    }
    Ok(())
}

/// Stops the operator with every pool at rest and starts it again.
async fn restart_at_rest(install: &mut Install, pools: f64) -> anyhow::Result<Restart> {
    let client = install.client.clone();
    let at_rest = quiet(&client).await?;
    let statuses_before = statuses(install).await?;
    let seen = tokio::spawn(reasons_seen(Apis::new(&client, &install.ns)));
    let stopped = Instant::now();
    install.restart_operator().await;
    let before = controllers_usage(install);
    while pool_reconciles(install).await? < pools {
        if stopped.elapsed() > TIMEOUT {
            bail!("the restarted operator did not reconcile every pool in {TIMEOUT:?}");
        }
        tokio::time::sleep(POLL).await;
    }
    let seconds = stopped.elapsed().as_secs_f64();
    let rested = quiet(&client).await?;
    let after = controllers_usage(install);
    let statuses_after = statuses(install).await?;
    seen.abort();
    let mut shown = BTreeMap::<&str, usize>::new();
    for (key, before) in &statuses_before {
        let Some(now) = statuses_after.get(key) else {
            continue;
        };
        let mut changed = Vec::new();
        testenv::diff::changes("", before, now, &[], &mut changed);
        let count = shown.entry(key.0).or_default();
        if !changed.is_empty() && *count < 3 {
            *count += 1;
            eprintln!(
                "    changed by the restart: {} {}: {}",
                key.0,
                key.1,
                changed.join("; ")
            );
        }
    }
    Ok(Restart {
        seconds,
        writes: rested
            .into_iter()
            .map(|(resource, n)| {
                let before = at_rest.get(&resource).copied().unwrap_or(0.0);
                (resource, n - before)
            })
            .filter(|(_, n)| *n > 0.0)
            .collect(),
        usage: Usage {
            cpu_seconds: after.cpu_seconds - before.cpu_seconds,
            peak_rss_bytes: after.peak_rss_bytes,
        },
    })
}

/// Prints each condition reason a WasmMachinePool or MachinePool shows
/// that it did not show when the watch began, with how many objects showed it.
async fn reasons_seen(apis: Apis) {
    let mut first: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let infra = watcher(apis.infra_pools.clone(), watcher::Config::default())
        .applied_objects()
        .map_ok(|p| {
            let name = kube::ResourceExt::name_any(&p);
            let conditions = p.status.map(|s| s.common.conditions).unwrap_or_default();
            reasons("WasmMachinePool", &name, &conditions)
        })
        .boxed();
    let pools = watcher(apis.pools.clone(), watcher::Config::default())
        .applied_objects()
        .map_ok(|p| {
            let name = kube::ResourceExt::name_any(&p);
            let conditions = p.status.map(|s| s.conditions).unwrap_or_default();
            reasons("MachinePool", &name, &conditions)
        })
        .boxed();
    let mut both = futures::stream::select(infra, pools);
    while let Some(Ok((object, now))) = both.next().await {
        let Some(initial) = first.get(&object) else {
            first.insert(object, now);
            continue;
        };
        for reason in now.iter().filter(|r| !initial.contains(r)) {
            let kind = object.split(' ').next().unwrap_or_default();
            let count = counts.entry(format!("{kind} {reason}")).or_default();
            *count += 1;
            if *count == 1 || count.is_power_of_two() {
                eprintln!("    during the restart: {kind} {reason} ({count} times)");
            }
        }
    }
}

/// `<kind> <name>`, and its conditions as `<type>=<status>/<reason>`.
fn reasons(kind: &str, name: &str, conditions: &[Condition]) -> (String, Vec<String>) {
    let reasons = conditions
        .iter()
        .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
        .collect();
    (format!("{kind} {name}"), reasons)
}

/// The status of every MachinePool and WasmMachinePool, by (kind, name).
async fn statuses(
    install: &Install,
) -> anyhow::Result<BTreeMap<(&'static str, String), serde_json::Value>> {
    let apis = Apis::new(&install.client, &install.ns);
    let mut all = BTreeMap::new();
    for pool in apis.pools.list(&ListParams::default()).await? {
        let name = kube::ResourceExt::name_any(&pool);
        all.insert(("MachinePool", name), serde_json::to_value(&pool.status)?);
    }
    for pool in apis.infra_pools.list(&ListParams::default()).await? {
        let name = kube::ResourceExt::name_any(&pool);
        all.insert(
            ("WasmMachinePool", name),
            serde_json::to_value(&pool.status)?,
        );
    }
    Ok(all)
}

/// Waits until the management API server has seen no write for [`QUIET`];
/// the writes so far, by resource.
async fn quiet(client: &kube::Client) -> anyhow::Result<BTreeMap<String, f64>> {
    let mut writes_then = writes(client).await?;
    let mut last = writes_then.values().sum::<f64>();
    let mut since = Instant::now();
    let waiting = Instant::now();
    while since.elapsed() < QUIET {
        if waiting.elapsed() > TIMEOUT {
            bail!("the fleet never came to rest");
        }
        tokio::time::sleep(POLL).await;
        let writes_now = writes(client).await?;
        let now = writes_now.values().sum::<f64>();
        if now > last {
            (last, since, writes_then) = (now, Instant::now(), writes_now);
        }
    }
    Ok(writes_then)
}

/// CPU and peak memory of the controller processes.
fn controllers_usage(install: &Install) -> Usage {
    let mut pids: Vec<u32> = install
        .operators()
        .map(OperatorProcess::process_id)
        .collect();
    pids.extend(
        install
            .upstream
            .as_ref()
            .map(testenv::upstream::UpstreamManager::process_id),
    );
    pids.into_iter()
        .map(usage::of_tree)
        .fold(Usage::default(), |sum, u| Usage {
            cpu_seconds: sum.cpu_seconds + u.cpu_seconds,
            peak_rss_bytes: sum.peak_rss_bytes + u.peak_rss_bytes,
        })
}

/// With `FLEET_PROFILE=DIR`: a 30 s CPU profile of the management API
/// server, 10 s into `stage`, as `DIR/apiserver-<stage>.pprof` (read it with
/// `go tool pprof -top`).
async fn profile(client: &kube::Client, stage: &str) {
    let Some(dir) = std::env::var_os("FLEET_PROFILE") else {
        return;
    };
    tokio::time::sleep(Duration::from_secs(10)).await;
    let path = std::path::Path::new(&dir).join(format!("apiserver-{stage}.pprof"));
    let taken = async {
        let request = http::Request::get("/debug/pprof/profile?seconds=30")
            .body(kube::client::Body::empty())?;
        let body = client
            .send(request)
            .await?
            .into_body()
            .collect_bytes()
            .await?;
        std::fs::write(&path, body)?;
        anyhow::Ok(())
    };
    match taken.await {
        Ok(()) => eprintln!("    profile of the API server: {}", path.display()),
        Err(error) => eprintln!("    no profile of the API server: {error:#}"),
    }
}

/// CPU seconds so far of each process on the machine's two cores.
fn cpu_by_process(install: &Install) -> Vec<(&'static str, f64)> {
    let management = install.env.management();
    let mut processes: Vec<(&'static str, u32)> = install
        .operators()
        .map(|o| ("operator", o.process_id()))
        .collect();
    processes.extend([
        ("management apiserver", management.pid()),
        ("etcd", management.etcd_pid()),
        ("harness and cloud", std::process::id()),
    ]);
    if let Some(workload) = install.env.workload() {
        processes.push(("workload apiserver", workload.pid()));
    }
    if let Some(upstream) = &install.upstream {
        processes.push(("upstream manager", upstream.process_id()));
    }
    processes
        .into_iter()
        .map(|(name, pid)| (name, usage::of_process(pid).cpu_seconds))
        .collect()
}

/// What each process spent on the CPU since `before` was taken.
fn cpu_since(install: &Install, before: &[(&'static str, f64)]) -> String {
    let spent: Vec<String> = cpu_by_process(install)
        .iter()
        .zip(before)
        .map(|((name, after), (_, before))| format!("{name} {:.1}s", after - before))
        .collect();
    spent.join(", ")
}

/// MachinePool reconciles capwasm's operators have made since they started.
async fn pool_reconciles(install: &Install) -> anyhow::Result<f64> {
    let mut sum = 0.0;
    for text in metrics(install).await? {
        sum += text
            .lines()
            .find(|l| l.starts_with("capwasm_reconcile_total{controller=\"machinepool\"}"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
    }
    Ok(sum)
}

/// The operators' failed reconciles so far, by controller and error.
async fn failures(install: &Install) -> anyhow::Result<String> {
    Ok(metrics(install)
        .await?
        .iter()
        .flat_map(|text| {
            text.lines()
                .filter_map(|l| l.strip_prefix("capwasm_reconcile_failures_total"))
        })
        .collect::<Vec<_>>()
        .join(", "))
}

/// Each operator's `/metrics`.
async fn metrics(install: &Install) -> anyhow::Result<Vec<String>> {
    let mut all = Vec::new();
    for operator in install.operators() {
        let (status, text) = operator.get("/metrics").await;
        if status != 200 {
            bail!("the operator's /metrics answered {status}");
        }
        all.push(text);
    }
    Ok(all)
}

/// The `p`th percentile of sorted `times`.
fn percentile(times: &[f64], p: usize) -> f64 {
    let index = (times.len() * p).div_ceil(100).saturating_sub(1);
    times.get(index).copied().unwrap_or(f64::NAN)
}

/// Requests the management API server has served that wrote, by anyone,
/// leader Leases apart (`apiserver_request_total`, 2xx), by resource
/// (`machinepools` counts spec, status and scale).
async fn writes(client: &kube::Client) -> anyhow::Result<BTreeMap<String, f64>> {
    let mut by_resource = BTreeMap::new();
    for (request, count) in requests(client).await? {
        let read = matches!(request.verb.as_str(), "GET" | "LIST" | "WATCH" | "CONNECT");
        // Refused writes (conflicts, say) changed nothing: not counted.
        if read || request.resource == "leases" || !request.code.starts_with('2') {
            continue;
        }
        *by_resource.entry(request.resource).or_insert(0.0) += count;
    }
    Ok(by_resource)
}

/// One line of `apiserver_request_total`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Request {
    verb: String,
    resource: String,
    subresource: String,
    code: String,
}

/// Every request the management API server has served, by verb, resource,
/// subresource and code.
async fn requests(client: &kube::Client) -> anyhow::Result<BTreeMap<Request, f64>> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await?;
    let mut counts = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let label = |name: &str| {
            [format!(",{name}=\""), format!("{{{name}=\"")]
                .iter()
                .find_map(|key| line.split_once(key.as_str()))
                .and_then(|(_, rest)| rest.split('"').next())
                .unwrap_or_default()
                .to_owned()
        };
        let count = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        let request = Request {
            verb: label("verb"),
            resource: label("resource"),
            subresource: label("subresource"),
            code: label("code"),
        };
        *counts.entry(request).or_insert(0.0) += count;
    }
    Ok(counts)
}

/// The requests per pool between `before` and `after`, most first.
fn requests_per_pool(
    before: &BTreeMap<Request, f64>,
    after: &BTreeMap<Request, f64>,
    pools: f64,
) -> String {
    let mut delta: Vec<(&Request, f64)> = after
        .iter()
        .map(|(r, n)| (r, (n - before.get(r).copied().unwrap_or(0.0)) / pools))
        .filter(|(_, n)| *n >= 0.05)
        .collect();
    delta.sort_by(|a, b| b.1.total_cmp(&a.1));
    delta
        .iter()
        .take(16)
        .map(|(r, n)| {
            let sub = if r.subresource.is_empty() {
                String::new()
            } else {
                format!("/{}", r.subresource)
            };
            format!("{} {}{sub} {}: {n:.1}", r.verb, r.resource, r.code)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Seconds from `started` until each pool was first seen Running with all
/// `replicas` Nodes, sorted; watched, so that the harness does not load the
/// API server it measures.
async fn running_times(
    apis: &Apis,
    total: usize,
    replicas: i32,
    started: Instant,
) -> anyhow::Result<Vec<f64>> {
    let mut running: BTreeMap<String, f64> = BTreeMap::new();
    let mut pools = watcher(apis.pools.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    let mut report = Instant::now();
    while running.len() < total {
        let left = TIMEOUT.saturating_sub(started.elapsed());
        let Ok(next) = tokio::time::timeout(left, pools.try_next()).await else {
            bail!(
                "{} of {total} pools Running after {TIMEOUT:?}",
                running.len()
            );
        };
        let pool = next
            .context("watching MachinePools")?
            .context("the MachinePool watch ended")?;
        let done = pool.status.as_ref().is_some_and(|s| {
            s.phase.as_deref() == Some("Running")
                && i32::try_from(s.node_refs.len()).ok() == Some(replicas)
        });
        if done {
            running
                .entry(kube::ResourceExt::name_any(&pool))
                .or_insert_with(|| started.elapsed().as_secs_f64());
        }
        if report.elapsed() >= PROGRESS {
            report = Instant::now();
            eprintln!(
                "    {:>5.0}s: {} of {total} pools Running",
                started.elapsed().as_secs_f64(),
                running.len()
            );
        }
    }
    let mut times: Vec<f64> = running.into_values().collect();
    times.sort_by(f64::total_cmp);
    Ok(times)
}

/// [`delete_all`], with the operator's failed reconciles before and after,
/// the first of their log lines, and on request a profile.
async fn delete_reporting(install: &Install, apis: &Apis, pools: f64) -> anyhow::Result<f64> {
    eprintln!(
        "    reconcile failures so far: {}",
        failures(install).await?
    );
    let cpu_before = cpu_by_process(install);
    let requests_before = requests(&install.client).await?;
    let (delete, ()) = futures::join!(delete_all(apis), profile(&install.client, "deleting"));
    let delete = delete?;
    eprintln!(
        "    deleted in {delete:.1}s; cpu: {}",
        cpu_since(install, &cpu_before)
    );
    eprintln!(
        "    requests per pool while deleting: {}",
        requests_per_pool(&requests_before, &requests(&install.client).await?, pools)
    );
    eprintln!(
        "    reconcile failures so far: {}",
        failures(install).await?
    );
    for line in install
        .operator
        .log_lines(|l| l.contains("reconcile failed"))
        .iter()
        .take(4)
    {
        eprintln!("    {}", line.chars().take(600).collect::<String>());
    }
    Ok(delete)
}

/// Deletes every Cluster; seconds until they and their pools are gone.
async fn delete_all(apis: &Apis) -> anyhow::Result<f64> {
    let deleting = Instant::now();
    // One by one, as `kubectl delete clusters --all` does: a single
    // collection delete of a large fleet outlasts the API server's request timeout.
    let names: Vec<String> = apis
        .clusters
        .list_metadata(&ListParams::default())
        .await
        .context("listing Clusters")?
        .items
        .iter()
        .map(kube::ResourceExt::name_any)
        .collect();
    futures::stream::iter(names)
        .map(|name| async move {
            match apis.clusters.delete(&name, &DeleteParams::default()).await {
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                Ok(_) => Ok(()),
                Err(error) => {
                    Err(anyhow::Error::new(error).context(format!("deleting Cluster {name}")))
                }
            }
        })
        .buffer_unordered(CREATING)
        .try_collect::<()>()
        .await?;
    let mut report = Instant::now();
    loop {
        let left = apis
            .clusters
            .list_metadata(&ListParams::default())
            .await
            .context("listing Clusters")?
            .items
            .len()
            + apis
                .pools
                .list_metadata(&ListParams::default())
                .await
                .context("listing MachinePools")?
                .items
                .len();
        if left == 0 {
            return Ok(deleting.elapsed().as_secs_f64());
        }
        if deleting.elapsed() > TIMEOUT {
            bail!("{left} Clusters and MachinePools left after {TIMEOUT:?}");
        }
        if report.elapsed() >= PROGRESS {
            report = Instant::now();
            eprintln!(
                "    {:>5.0}s: {left} Clusters and MachinePools left",
                deleting.elapsed().as_secs_f64()
            );
        }
        tokio::time::sleep(DELETE_POLL).await;
    }
}
