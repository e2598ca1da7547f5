//! The fault suite: a fleet provisioned, scaled and partly deleted while
//! faults are injected — `capwasm run` SIGKILLed and restarted, etcd
//! paused (SIGSTOP) and slowed (stopped 100 ms of every 500), the
//! management kube-apiserver killed and restarted, the workload API server
//! paused, the cloud answering 503, holding answers
//! past every timeout or cutting them off, the infrastructure provider
//! hot-swapped — each phase ending, once the faults stop, with an inventory:
//! every pool Running at its replicas, cloud instances = replicas (none
//! duplicated, none leaked), Nodes = instances, nothing of a deleted
//! Cluster left behind a finalizer. Every pool scaled at once is never
//! turned away by the API server's priority and fairness (429). It prints
//! what it injected and found.
//!
//! `make test` runs it reduced (20 pools, one operator); `FAULTS_POOLS=N`
//! sets the fleet and `FAULTS_SHARDS=N` runs capwasm as N shards, a random
//! one of which each SIGKILL hits (`make fault-suite` runs 200 pools on 3
//! shards). Each SIGKILL falls at a random moment of its phase, from a seed
//! the suite prints; `FAULTS_SEED=N` repeats a run's kill points.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use capwasm::api::{Cluster, MachinePool, WasmBootstrapConfig, WasmMachinePool};
use capwasm::simcloud::{Faults, InstanceState};
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt as _};
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use serde_json::json;
use testenv::flows::scale;
use testenv::guest_path;
use testenv::install::{Core, Install};

/// Pools per Cluster.
const POOLS_PER_CLUSTER: usize = 2;
/// How long the fleet gets to settle once the faults stop.
const SETTLE: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(500);

/// The cloud's bad minutes while faults are on.
const CLOUD_FAULTS: Faults = Faults {
    unavailable_percent: 10,
    hang_percent: 2,
    drop_percent: 5,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_under_faults_ends_with_nothing_lost_duplicated_or_stuck() {
    let pools: usize = setting("FAULTS_POOLS", 20);
    let shards: u32 = setting("FAULTS_SHARDS", 1);
    let seed: u64 = setting("FAULTS_SEED", fastrand::u64(..));
    let clusters = pools.div_ceil(POOLS_PER_CLUSTER);
    let mut install = if shards > 1 {
        Box::pin(Install::with_shards("faults", shards, "info")).await
    } else {
        Box::pin(Install::with_core("faults", Core::Capwasm)).await
    };
    let mut log = Log::new(seed);
    let ns = install.ns.clone();
    let client = install.client.clone();
    let pools_api: Api<MachinePool> = Api::namespaced(client.clone(), &ns);
    let names: Vec<String> = (0..clusters).map(|c| format!("c{c}")).collect();

    // Provisioning: the operator killed twice, etcd paused, the cloud failing.
    install.cloud.cloud().set_faults(CLOUD_FAULTS);
    let started = Instant::now();
    create_fleet(&install, &names).await;
    kill_operator(&mut install, &mut log, "provisioning").await;
    pause(
        &mut log,
        "etcd",
        install.env.management().etcd_pid(),
        Duration::from_secs(3),
    )
    .await;
    kill_operator(&mut install, &mut log, "provisioning").await;
    install.cloud.cloud().set_faults(Faults::default());
    let expected: BTreeMap<String, i32> = names
        .iter()
        .flat_map(|c| (0..POOLS_PER_CLUSTER).map(move |p| (format!("{c}-p{p}"), 2)))
        .collect();
    inventory(&install, &expected, &[], "provisioned", &mut log).await;
    log.say(format!("provisioned in {:.0?}", started.elapsed()));

    // Scaling: every pool to 3 while the API servers go away and come
    // back, the operator is killed, and the provider is swapped.
    install.cloud.cloud().set_faults(CLOUD_FAULTS);
    for pool in expected.keys() {
        scale(&pools_api, pool, 3).await.unwrap();
    }
    kill_operator(&mut install, &mut log, "scaling").await;
    control_planes_falter(&mut install, &mut log).await;
    hot_swap(&client, &install.modules.infrastructure).await;
    log.say("scaling: sim-infrastructure hot-swapped to v2");
    kill_operator(&mut install, &mut log, "scaling").await;
    install.cloud.cloud().set_faults(Faults::default());
    let expected: BTreeMap<String, i32> = expected.into_keys().map(|p| (p, 3)).collect();
    inventory(&install, &expected, &[], "scaled", &mut log).await;

    // Deletion: half the Clusters go while the operator is killed.
    install.cloud.cloud().set_faults(CLOUD_FAULTS);
    let clusters_api: Api<Cluster> = Api::namespaced(client.clone(), &ns);
    let (deleted, kept) = names.split_at(names.len() / 2);
    for cluster in deleted {
        clusters_api
            .delete(cluster, &DeleteParams::default())
            .await
            .unwrap();
    }
    kill_operator(&mut install, &mut log, "deletion").await;
    install.cloud.cloud().set_faults(Faults::default());
    let expected: BTreeMap<String, i32> = expected
        .into_iter()
        .filter(|(pool, _)| kept.iter().any(|c| pool.starts_with(&format!("{c}-"))))
        .collect();
    inventory(&install, &expected, deleted, "after deletion", &mut log).await;

    serves_v2(&client, &install.modules.infrastructure).await;

    let injected = install.cloud.cloud().injected();
    log.say(format!(
        "the cloud answered 503 {} times, held {} answers past every timeout, cut {} off",
        injected.unavailable, injected.hung, injected.dropped
    ));
    // Each kind of the cloud's faults was met at least once: a fleet that
    // holds without having met one has not shown that it survives it.
    assert!(
        injected.unavailable > 0 && injected.hung > 0 && injected.dropped > 0,
        "a kind of fault was never injected: {injected:?}\n{}",
        log.lines.join("\n")
    );
    eprintln!(
        "fault suite, {pools} pools, {shards} operator(s):\n{}",
        log.lines.join("\n")
    );
}

/// The management etcd slowed, the workload API server paused, the
/// management kube-apiserver killed and restarted; between them, a check
/// that every pool scaled at once stayed within the API server's own
/// limits (priority and fairness rejected nothing).
async fn control_planes_falter(install: &mut Install, log: &mut Log) {
    slow(
        log,
        "etcd",
        install.env.management().etcd_pid(),
        Duration::from_secs(10),
    )
    .await;
    let workload = install.env.workload().map(testenv::ApiServer::pid).unwrap();
    pause(
        log,
        "the workload API server",
        workload,
        Duration::from_secs(8),
    )
    .await;
    // Every pool scaled at once stayed within the API server's own limits.
    let rejected = testenv::flows::rejected_by_the_api_server(&install.client)
        .await
        .unwrap();
    log.say(format!(
        "scaling: requests the API server's priority and fairness rejected: {rejected}"
    ));
    assert!(
        rejected < 1.0,
        "the flood was throttled by the API server: {rejected}"
    );
    let restarted = Instant::now();
    install
        .env
        .management_mut()
        .kill_and_restart()
        .await
        .unwrap();
    log.say(format!(
        "scaling: management kube-apiserver killed, ready again after {:.1?}",
        restarted.elapsed()
    ));
}

/// Variable `name` of the environment, or `default` if it is not set or
/// not a number.
fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// What was injected and found, in order.
struct Log {
    lines: Vec<String>,
    started: Option<Instant>,
    /// Where the kills fall.
    kill_points: fastrand::Rng,
}

impl Log {
    fn new(seed: u64) -> Self {
        let mut log = Self {
            lines: Vec::new(),
            started: None,
            kill_points: fastrand::Rng::with_seed(seed),
        };
        log.say(format!("kill points from FAULTS_SEED={seed}"));
        log
    }

    fn say(&mut self, line: impl std::fmt::Display) {
        let started = *self.started.get_or_insert_with(Instant::now);
        self.lines
            .push(format!("{:>6.1}s  {line}", started.elapsed().as_secs_f64()));
    }
}

/// SIGKILLs `capwasm run` (a random shard of several) at a random moment
/// of the next 4 s of `phase` (when its reconciles may be anywhere between
/// a read and a write) and starts it again.
async fn kill_operator(install: &mut Install, log: &mut Log, phase: &str) {
    let after = Duration::from_millis(log.kill_points.u64(100..4_000));
    let shards = u32::try_from(install.operators().count()).unwrap();
    let shard = log.kill_points.u32(0..shards);
    tokio::time::sleep(after).await;
    let process = |install: &Install| {
        install
            .operators()
            .nth(shard as usize)
            .unwrap()
            .process_id()
    };
    let killed = process(install);
    install.kill_and_restart_shard(shard).await;
    assert!(
        !testenv::is_running(killed),
        "process {killed} survived SIGKILL"
    );
    let which = if shards > 1 {
        format!("shard {shard}")
    } else {
        "operator".to_owned()
    };
    log.say(format!(
        "{phase}: {which} SIGKILLed {after:.1?} in and started again (process {killed} → {})",
        process(install)
    ));
}

/// Stops process `pid` for `how_long` (SIGSTOP), then lets it go on.
async fn pause(log: &mut Log, what: &str, pid: u32, how_long: Duration) {
    let pid = Pid::from_raw(i32::try_from(pid).unwrap());
    signal::kill(pid, Signal::SIGSTOP).unwrap();
    tokio::time::sleep(how_long).await;
    signal::kill(pid, Signal::SIGCONT).unwrap();
    log.say(format!("{what} paused for {how_long:?}"));
}

/// Slows process `pid` for `how_long`: stopped (SIGSTOP) for 100 ms of
/// every 500, as a disk that stalls now and then.
async fn slow(log: &mut Log, what: &str, pid: u32, how_long: Duration) {
    let pid = Pid::from_raw(i32::try_from(pid).unwrap());
    let started = Instant::now();
    while started.elapsed() < how_long {
        signal::kill(pid, Signal::SIGSTOP).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        signal::kill(pid, Signal::SIGCONT).unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    log.say(format!(
        "{what} slowed for {how_long:?} (stopped 100 ms of every 500)"
    ));
}

/// Creates Clusters `names`, each with [`POOLS_PER_CLUSTER`] pools of 2.
async fn create_fleet(install: &Install, names: &[String]) {
    for cluster in names {
        install.cluster(cluster).await;
        for p in 0..POOLS_PER_CLUSTER {
            let pool = format!("{cluster}-p{p}");
            install
                .objects
                .create_pool(
                    &install.client,
                    &install.ns,
                    &pool,
                    cluster,
                    2,
                    &install.modules,
                )
                .await
                .unwrap();
        }
    }
}

/// Asserts that ProviderModule `name` serves sim-infrastructure v2.
async fn serves_v2(client: &Client, name: &str) {
    let v2 =
        capwasm::wasm::digest_of(&std::fs::read(guest_path("sim_infrastructure_v2.wasm")).unwrap());
    let module = Api::<capwasm::api::ProviderModule>::all(client.clone())
        .get(name)
        .await
        .unwrap();
    let active = module.status.and_then(|s| s.active_digest);
    assert_eq!(
        active.as_deref(),
        Some(v2.as_str()),
        "v2 serves after the swap"
    );
}

/// Points ProviderModule `name` at sim-infrastructure v2.
async fn hot_swap(client: &Client, name: &str) {
    let path = guest_path("sim_infrastructure_v2.wasm")
        .to_string_lossy()
        .into_owned();
    let swap = json!({ "spec": { "source": { "file": { "path": path } } } });
    Api::<capwasm::api::ProviderModule>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&swap))
        .await
        .unwrap();
}

/// Waits (at most [`SETTLE`]) until the fleet is `expected` (pool →
/// replicas) and nothing of `deleted` Clusters is left, then says so;
/// fails with what differs if it never is.
async fn inventory(
    install: &Install,
    expected: &BTreeMap<String, i32>,
    deleted: &[String],
    stage: &str,
    log: &mut Log,
) {
    let started = Instant::now();
    let mut last = Vec::new();
    while started.elapsed() < SETTLE {
        last = differences(install, expected, deleted).await;
        if last.is_empty() {
            log.say(format!(
                "{stage}: inventory holds after {:.1?}: {} pools Running, {} instances and Nodes, nothing stuck",
                started.elapsed(),
                expected.len(),
                expected.values().sum::<i32>()
            ));
            return;
        }
        tokio::time::sleep(POLL).await;
    }
    eprintln!("{}", log.lines.join("\n"));
    panic!(
        "{stage}: after {SETTLE:?} the inventory differs:\n{}",
        last.join("\n")
    );
}

/// How the fleet differs from `expected`, and what of `deleted` is left.
async fn differences(
    install: &Install,
    expected: &BTreeMap<String, i32>,
    deleted: &[String],
) -> Vec<String> {
    let (client, ns) = (&install.client, &install.ns);
    let mut found = Vec::new();
    // A list that fails is a difference, never "nothing left".
    let pools: Vec<MachinePool> = match Api::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list.items,
        Err(error) => return vec![format!("cannot list MachinePools: {error}")],
    };
    let mut seen = std::collections::BTreeSet::new();
    for pool in &pools {
        let name = pool.name_any();
        let status = pool.status.clone().unwrap_or_default();
        seen.insert(name.clone());
        let Some(&replicas) = expected.get(&name) else {
            found.push(format!(
                "pool {name} left (finalizers {:?})",
                pool.finalizers()
            ));
            continue;
        };
        let running = status.phase.as_deref() == Some("Running")
            && status.ready_replicas == Some(replicas)
            && status.node_refs.len() == usize::try_from(replicas).unwrap_or_default();
        if !running {
            found.push(format!(
                "pool {name}: {:?} with {:?} ready of {replicas}, {} nodeRefs",
                status.phase,
                status.ready_replicas,
                status.node_refs.len()
            ));
        }
    }
    for name in expected.keys().filter(|p| !seen.contains(*p)) {
        found.push(format!("pool {name} is missing"));
    }

    // The cloud: live instances per pool, none of a pool not expected.
    let mut instances: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for record in install.cloud.cloud().instances() {
        if record.instance.state == InstanceState::Terminating {
            continue;
        }
        let pool = record
            .instance
            .pool
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        instances.entry(pool).or_default().push(record.instance.id);
    }
    for (pool, ids) in &instances {
        let want = expected.get(pool).copied().unwrap_or(0);
        if usize::try_from(want).ok() != Some(ids.len()) {
            found.push(format!(
                "cloud: pool {pool} has {} instances, wants {want}",
                ids.len()
            ));
        }
    }
    for (pool, want) in expected {
        if *want > 0 && !instances.contains_key(pool) {
            found.push(format!("cloud: pool {pool} has no instance"));
        }
    }

    // Nodes: one per live instance, none of another.
    let ids: std::collections::BTreeSet<&String> = instances.values().flatten().collect();
    found.extend(node_differences(install, &ids).await);

    // Nothing of a deleted Cluster is left.
    if !deleted.is_empty() {
        let gone = |name: &str| {
            deleted
                .iter()
                .any(|c| name == c || name.starts_with(&format!("{c}-")))
        };
        let lists = [
            names_of::<Cluster>(client, ns).await,
            names_of::<WasmBootstrapConfig>(client, ns).await,
            names_of::<WasmMachinePool>(client, ns).await,
        ];
        for list in lists {
            match list {
                Err(error) => found.push(error),
                Ok(names) => found.extend(
                    names
                        .iter()
                        .filter(|name| gone(name))
                        .map(|name| format!("{name} of a deleted Cluster is left")),
                ),
            }
        }
    }
    found
}

/// How the workload cluster's Nodes differ from one per live instance
/// (`ids`), if they do.
async fn node_differences(
    install: &Install,
    ids: &std::collections::BTreeSet<&String>,
) -> Option<String> {
    let workload = install
        .env
        .workload()
        .expect("the fault suite has a workload cluster");
    match Api::<Node>::all(workload.client().unwrap())
        .list(&ListParams::default())
        .await
    {
        Err(error) => return Some(format!("cannot list Nodes: {error}")),
        Ok(nodes) => {
            let names: std::collections::BTreeSet<String> = nodes
                .items
                .iter()
                .map(kube::ResourceExt::name_any)
                .collect();
            let orphans: Vec<&String> = names.iter().filter(|n| !ids.contains(n)).collect();
            let missing: Vec<&&String> = ids.iter().filter(|i| !names.contains(**i)).collect();
            if !orphans.is_empty() || !missing.is_empty() {
                return Some(format!("Nodes: orphans {orphans:?}, missing {missing:?}"));
            }
        }
    }
    None
}

/// The names of the objects of kind `K`, or why they could not be listed.
async fn names_of<K>(client: &Client, ns: &str) -> Result<Vec<String>, String>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map(|l| l.items.iter().map(kube::ResourceExt::name_any).collect())
        .map_err(|error| format!("cannot list {}s: {error}", K::kind(&())))
}
