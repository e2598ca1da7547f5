//! Every change the operator makes to a Cluster and its pool on their way
//! to Running, in order, with the fields each write changed — where a
//! pool's writes go, seen one by one. Runs capwasm standalone (`capwasm
//! run`, its own API server) by default, or upstream's core with capwasm's
//! providers (`upstream`). With more CLUSTERS or POOLS, all of them are
//! made at once, as a fleet does; the first Cluster's and pool's changes
//! are printed, and the writes of all of them summed up per pool.
//!
//!     cargo run -p capwasm-tests --example write-trace [capwasm|upstream] [REPLICAS] [CLUSTERS] [POOLS]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use anyhow::Context as _;
use futures::{StreamExt as _, stream};
use kube::Api;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher::{self, Event as Change};
use serde_json::Value;
use testenv::flows::Apis;
use testenv::install::{Core, Install};

/// What changes with every write, left out of the changes shown.
const NOISE: [&str; 4] = [
    ".metadata.resourceVersion",
    ".metadata.managedFields",
    ".metadata.generation",
    ".lastTransitionTime",
];

/// The kinds traced, as (group, version, kind, plural).
const KINDS: [(&str, &str, &str, &str); 5] = [
    ("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters"),
    ("cluster.x-k8s.io", "v1beta2", "MachinePool", "machinepools"),
    (
        "infrastructure.cluster.x-k8s.io",
        "v1alpha1",
        "WasmCluster",
        "wasmclusters",
    ),
    (
        "infrastructure.cluster.x-k8s.io",
        "v1alpha1",
        "WasmMachinePool",
        "wasmmachinepools",
    ),
    (
        "bootstrap.cluster.x-k8s.io",
        "v1alpha1",
        "WasmBootstrapConfig",
        "wasmbootstrapconfigs",
    ),
];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let core = match args.next().as_deref() {
        None | Some("capwasm") => Core::Capwasm,
        Some("upstream") => Core::Upstream,
        Some(other) => anyhow::bail!("not a core: {other} (capwasm or upstream)"),
    };
    let replicas: i32 = args
        .next()
        .map_or(Ok(3), |n| n.parse())
        .context("REPLICAS")?;
    let clusters: usize = args
        .next()
        .map_or(Ok(1), |n| n.parse())
        .context("CLUSTERS")?;
    let pools: usize = args.next().map_or(Ok(1), |n| n.parse()).context("POOLS")?;
    let install = Install::with_core("trace", core).await;
    if std::env::var_os("TRACE_LIST").is_some() {
        time_lists(&install.client).await;
    }
    let (client, ns) = (&install.client, &install.ns);
    let started = Instant::now();
    let counts: Arc<Mutex<BTreeMap<String, u32>>> = Arc::default();
    let trace = tokio::spawn(print_changes(
        watch_all(client, ns),
        counts.clone(),
        started,
    ));
    for c in 0..clusters {
        let cluster = format!("c{c}");
        install.cluster(&cluster).await;
        for p in 0..pools {
            let pool = format!("{cluster}-p{p}");
            install
                .objects
                .create_pool(client, ns, &pool, &cluster, replicas, &install.modules)
                .await?;
        }
    }
    let apis = Apis::new(client, ns);
    let total = clusters * pools;
    let deadline = Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let stuck = not_running(&apis, replicas).await?;
        if stuck.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            println!("{} of {total} pools not Running after 300 s:", stuck.len());
            for line in stuck.iter().take(10) {
                println!("  {line}");
            }
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    // Let what follows Running land too.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    trace.abort();
    let (_, metrics) = install.operator.get("/metrics").await;
    let sent: Vec<String> = metrics
        .lines()
        .filter(|l| l.starts_with("capwasm_api_writes_total{"))
        .map(|l| l.trim_start_matches("capwasm_api_writes_total").to_owned())
        .collect();
    println!("writes the operator sent, in all: {}", sent.join(", "));
    if std::env::var_os("TRACE_LOG").is_some() {
        for line in install
            .operator
            .log_lines(|l| l.contains("/c0") || l.contains("c0-p0") || l.contains("watch failed"))
        {
            println!("log: {line}");
        }
    }
    let counts = counts.lock().unwrap_or_else(PoisonError::into_inner);
    let total: u32 = counts.values().sum();
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    let per = |n: u32| f64::from(n) / (clusters * pools) as f64;
    let by_kind: Vec<String> = counts
        .iter()
        .map(|(k, n)| format!("{k} {:.1}", per(*n)))
        .collect();
    println!(
        "\nwrites after creation per pool: {:.1} ({})",
        per(total),
        by_kind.join(", ")
    );
    Ok(())
}

/// How long a LIST of each traced kind takes, across namespaces.
async fn time_lists(client: &kube::Client) {
    for (group, version, kind, plural) in KINDS {
        let resource = ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: format!("{group}/{version}"),
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let started = Instant::now();
        let listed = api
            .list(&kube::api::ListParams::default().match_any())
            .await;
        println!(
            "list {kind}: {:?} {:?}",
            started.elapsed(),
            listed.map(|l| l.items.len())
        );
    }
}

/// The pools not Running with `replicas` Nodes, each with what its
/// provider objects' Ready conditions say.
async fn not_running(apis: &Apis, replicas: i32) -> anyhow::Result<Vec<String>> {
    let ready = |conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]| {
        conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| format!("{} {}: {}", c.status, c.reason, c.message))
            .unwrap_or_default()
    };
    let mut stuck = Vec::new();
    for pool in apis.pools.list(&kube::api::ListParams::default()).await? {
        let status = pool.status.clone().unwrap_or_default();
        if status.phase.as_deref() == Some("Running")
            && i32::try_from(status.node_refs.len()).ok() == Some(replicas)
        {
            continue;
        }
        let name = kube::ResourceExt::name_any(&pool);
        let infra = apis.infra_pools.get_opt(&name).await?;
        let config = apis.configs.get_opt(&name).await?;
        stuck.push(format!(
            "{name} {:?} refs {}: WasmMachinePool [{}] WasmBootstrapConfig [{}]",
            status.phase,
            status.node_refs.len(),
            infra
                .and_then(|i| i.status)
                .map(|s| ready(&s.common.conditions))
                .unwrap_or_default(),
            config
                .and_then(|c| c.status)
                .map(|s| ready(&s.common.conditions))
                .unwrap_or_default(),
        ));
    }
    Ok(stuck)
}

/// Every change of the traced kinds and of Events in namespace `ns`.
fn watch_all(
    client: &kube::Client,
    ns: &str,
) -> impl futures::Stream<Item = (String, Value)> + Unpin + Send + 'static {
    let mut changes = Vec::new();
    for (group, version, kind, plural) in KINDS {
        let resource = ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: format!("{group}/{version}"),
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
        changes.push(
            watcher::watcher(api, watcher::Config::default())
                .filter_map(move |change| async move {
                    match change {
                        Ok(Change::Apply(o) | Change::InitApply(o)) => {
                            Some((kind.to_owned(), serde_json::to_value(o).ok()?))
                        }
                        _ => None,
                    }
                })
                .boxed(),
        );
    }
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    changes.push(
        watcher::watcher(events, watcher::Config::default())
            .filter_map(|change| async move {
                match change {
                    Ok(Change::Apply(o) | Change::InitApply(o)) => {
                        Some(("Event".to_owned(), serde_json::to_value(o).ok()?))
                    }
                    _ => None,
                }
            })
            .boxed(),
    );
    stream::select_all(changes)
}

/// Prints each change of `changes` with the fields it changed, counting
/// the writes (creations aside; every Event) by kind in `counts`.
async fn print_changes(
    mut changes: impl futures::Stream<Item = (String, Value)> + Unpin,
    counts: Arc<Mutex<BTreeMap<String, u32>>>,
    started: Instant,
) {
    let mut last: BTreeMap<String, Value> = BTreeMap::new();
    while let Some((kind, object)) = changes.next().await {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let key = format!("{kind}/{name}");
        let mut diffs = Vec::new();
        match last.get(&key) {
            Some(before) => testenv::diff::changes("", before, &object, &NOISE, &mut diffs),
            None if kind == "Event" => diffs.push(format!(
                "{} {}: {}",
                object["type"].as_str().unwrap_or_default(),
                object["reason"].as_str().unwrap_or_default(),
                object["note"].as_str().unwrap_or_default()
            )),
            None => diffs.push("created".to_owned()),
        }
        if diffs.is_empty() {
            continue;
        }
        let first = name == "c0" || name.starts_with("c0-p0") || name.starts_with("c0.");
        if first {
            println!(
                "{:>6.2}s {key:<40} {}",
                started.elapsed().as_secs_f64(),
                diffs.join("; ")
            );
        }
        if kind == "Event" || last.contains_key(&key) {
            *counts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(kind.clone())
                .or_default() += 1;
        }
        last.insert(key, object);
    }
}
