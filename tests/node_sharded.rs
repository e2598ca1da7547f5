//! capwasm as its users run it beyond one replica, and beside a hostile
//! provider, in a real one-node Kubernetes (tests/node_deploy.rs says what
//! the node is): `deploy/sharded/` — the StatefulSet of 3 shards — and
//! `deploy/`, each unmodified but for the image, named by digest.
//!
//! The shards: every Pod Ready on the Lease of its ordinal; Clusters in
//! several namespaces, spread by their hash over the shards, each reconciled
//! by its shard's Pod alone (the Events about its objects name the Pod that
//! wrote them); a shard's Pod deleted while one of its pools scales comes
//! back under the same name and Lease and takes the pool to its new size.
//!
//! The memory limit: the standalone operator, with deploy/'s memory limit
//! as the kernel enforces it, serves a good pool beside pools of a provider
//! that allocates until it is stopped; the container is never OOM-killed,
//! the good pool reaches Running and scales, each hostile object says it
//! met its memory limit. The container's memory, read from its cgroup on
//! the node, is printed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use capwasm::api::providermodule::World;
use capwasm::api::{
    Cluster, HasStatus, MachinePool, ObjectStatus as _, ProviderModule, WasmBootstrapConfig,
    WasmMachinePool,
};
use capwasm::controllers::shard;
use capwasm::simcloud::RunningSimCloud;
use capwasm::testing::guest_path;
use capwasm::testing::objects::{ClusterBuilder, MachinePoolBuilder, ProviderModuleBuilder};
use k8s_openapi::ByteString;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, LogParams, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testenv::flows::{self, Modules, Objects, Providers, condition, create, create_pool, scale};
use testenv::image::OperatorImage;
use testenv::memory::{ContainerMemory, MemoryWatch};
use testenv::node::{HOST_ADDRESS, Node};
use testenv::pods::{
    self, CONTAINER, NAMESPACE, apply_all, describe, rendered, wait_ready_pods, wait_until,
};

/// The StatefulSet (and, in deploy/, the Deployment) of the operator.
const WORKLOAD: &str = "capwasm-controller-manager";
/// deploy/sharded/'s shard count.
const SHARDS: u32 = 3;
/// The namespaces the Clusters are spread over.
const NAMESPACES: [&str; 3] = ["team-a", "team-b", "team-c"];
/// Clusters per shard, one pool each.
const PER_SHARD: usize = 2;
/// From apply to Ready Pods: the image is in containerd already; each Pod
/// waits for its readiness probe (every 10 s), three at once on two cores.
const READY: Duration = Duration::from_secs(180);
/// For the operator to get an object somewhere, on a busy node.
const WAIT: Duration = Duration::from_secs(180);

/// The Pod that runs shard `index`.
fn pod_of(index: u32) -> String {
    format!("{WORKLOAD}-{index}")
}

/// The Lease shard `index` leads on.
fn lease_of(index: u32) -> String {
    format!("capwasm-shard-{index}-of-{SHARDS}")
}

/// A Cluster of the test, the shard its hash picks, and its one pool.
#[derive(Clone, Debug)]
struct Placed {
    ns: &'static str,
    cluster: String,
    pool: String,
    shard: u32,
}

/// Clusters `c<n>` over [`NAMESPACES`] in turn, until each shard has
/// [`PER_SHARD`] of them.
fn placement() -> Vec<Placed> {
    let mut placed = Vec::new();
    let mut per_shard = [0usize; SHARDS as usize];
    'names: for n in 0.. {
        for ns in NAMESPACES {
            let cluster = format!("c{n}");
            let owner = shard::of(ns, &cluster, SHARDS);
            if per_shard[owner as usize] < PER_SHARD {
                per_shard[owner as usize] += 1;
                placed.push(Placed {
                    ns,
                    pool: format!("{cluster}-pool"),
                    cluster,
                    shard: owner,
                });
            }
            if per_shard.iter().all(|&count| count == PER_SHARD) {
                break 'names;
            }
        }
    }
    placed
}

/// Whether `pool` is Running with `ready` Ready Nodes it refers to.
fn running_with(pool: Option<&MachinePool>, ready: i32) -> bool {
    pool.and_then(|p| p.status.as_ref()).is_some_and(|s| {
        s.phase.as_deref() == Some("Running")
            && s.ready_replicas == Some(ready)
            && i32::try_from(s.node_refs.len()) == Ok(ready)
    })
}

/// Cluster `cluster` of `ns` on the node's workload API server, its
/// infrastructure served by `modules`.
async fn cluster(
    node: &Node,
    client: &Client,
    objects: &Objects,
    modules: &Modules,
    ns: &str,
    cluster: &str,
) -> Result<()> {
    let kubeconfig = node.workload_kubeconfig_secret(ns, cluster)?;
    objects
        .create_cluster_objects(client, &kubeconfig, ns, cluster, modules)
        .await?;
    create(client, &ClusterBuilder::new(ns, cluster).build()).await?;
    Ok(())
}

/// Events by the object they are about, (kind, name): each as its
/// `reportingInstance`, reason and note.
type Reported = BTreeMap<(String, String), Vec<(String, String, String)>>;

/// Who reported the Events about each object of `ns`: (kind, name) to the
/// Events' `reportingInstance`s, each with its reason and note.
async fn reporters(client: &Client, ns: &str) -> Result<Reported> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let mut by_object = Reported::new();
    for event in events.list(&ListParams::default()).await? {
        let Some(regarding) = event.regarding else {
            continue;
        };
        by_object
            .entry((
                regarding.kind.unwrap_or_default(),
                regarding.name.unwrap_or_default(),
            ))
            .or_default()
            .push((
                event.reporting_instance.unwrap_or_default(),
                event.reason.unwrap_or_default(),
                event.note.unwrap_or_default(),
            ));
    }
    Ok(by_object)
}

/// Asserts that every Event about `placed`'s objects was reported by its
/// shard's Pod, and that its pool has some (its Node references set).
async fn each_by_its_shard(client: &Client, placed: &[Placed], stage: &str) -> Result<()> {
    let mut by_ns = BTreeMap::new();
    for ns in NAMESPACES {
        by_ns.insert(ns, reporters(client, ns).await?);
    }
    for p in placed {
        let events = &by_ns[p.ns];
        let objects = [
            ("Cluster", &p.cluster),
            ("WasmCluster", &p.cluster),
            ("MachinePool", &p.pool),
            ("WasmBootstrapConfig", &p.pool),
            ("WasmMachinePool", &p.pool),
        ];
        let mut seen = BTreeSet::new();
        for (kind, name) in objects {
            for (instance, reason, note) in events
                .get(&(kind.to_owned(), name.clone()))
                .into_iter()
                .flatten()
            {
                ensure!(
                    *instance == pod_of(p.shard),
                    "{stage}: {kind} {}/{name} is shard {}'s by its hash, yet Pod {instance:?} \
                     reported {reason}: {note}",
                    p.ns,
                    p.shard
                );
                seen.insert(format!("{kind}:{reason}"));
            }
        }
        ensure!(
            seen.iter().any(|s| s.starts_with("MachinePool:")),
            "{stage}: no Event about MachinePool {}/{} (it has Node references): {events:#?}",
            p.ns,
            p.pool
        );
        eprintln!(
            "{stage}: {}/{} (shard {}): Events only from {}: {seen:?}",
            p.ns,
            p.cluster,
            p.shard,
            pod_of(p.shard)
        );
    }
    Ok(())
}

/// The holder of Lease `name`, if any.
fn holder(lease: Option<&Lease>) -> Option<String> {
    lease
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())
}

/// Asserts that Pod `pod`'s log (of its current container) says it became
/// the leader on `lease`.
async fn says_it_leads(client: &Client, pod: &str, lease: &str) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let logs = pods.logs(pod, &LogParams::default()).await?;
    let led = logs.lines().any(|line| {
        serde_json::from_str::<Value>(line).is_ok_and(|l| {
            l.pointer("/fields/message").and_then(Value::as_str) == Some("became the leader")
                && l.pointer("/fields/lease").and_then(Value::as_str) == Some(lease)
        })
    });
    ensure!(
        led,
        "{pod} does not log that it became the leader on {lease}\n{}",
        describe(client, NAMESPACE).await
    );
    Ok(())
}

/// deploy/sharded/: three shard Pods Ready, each on its own Lease; six
/// Clusters in three namespaces, two a shard, their pools Running, each
/// reconciled by its shard's Pod alone; shard 1's Pod deleted, one of its
/// pools scaled from 2 to 3 while it is away: the StatefulSet brings the
/// Pod back under its name, it leads its Lease again and the pool ends
/// with exactly 3 instances; the other pools stay as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sharded_statefulset_spreads_pools_over_its_shards_and_a_deleted_shard_pod_returns()
-> Result<()> {
    let placed = placement();
    let namespaces: BTreeSet<&str> = placed.iter().map(|p| p.ns).collect();
    ensure!(namespaces.len() > 1, "the Clusters are in {namespaces:?}");

    let image = OperatorImage::build()?;
    let node = Node::start(&[&image.archive]).await?;
    let client = node.client()?;
    apply_all(
        &client,
        &rendered(&pods::deploy_dir("sharded"), &image.reference())?,
        pods::MANAGER,
    )
    .await?;
    let started = tokio::time::Instant::now();
    let pods = wait_ready_pods(&client, SHARDS as usize, READY).await?;
    eprintln!(
        "{SHARDS} shard Pods Ready {:.1} s after the apply",
        started.elapsed().as_secs_f64()
    );
    for pod in &pods {
        let spec = pod.spec.as_ref().context("a Pod spec")?;
        let container = spec.containers.first().context("a container")?;
        assert_eq!(container.image.as_deref(), Some(image.reference().as_str()));
    }
    let names: BTreeSet<String> = pods.iter().map(ResourceExt::name_any).collect();
    let expected: BTreeSet<String> = (0..SHARDS).map(pod_of).collect();
    assert_eq!(names, expected, "the StatefulSet's Pods");

    // Each shard leads on its own Lease, under its Pod's name.
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    for index in 0..SHARDS {
        let pod = pod_of(index);
        wait_until(
            &client,
            &leases,
            &lease_of(index),
            &format!("held by {pod}"),
            WAIT,
            |l| holder(l).as_deref() == Some(pod.as_str()),
        )
        .await?;
        says_it_leads(&client, &pod, &lease_of(index)).await?;
    }

    // The Clusters and their pools, served by modules from a ConfigMap and
    // a cloud on the host end of the node's network.
    for ns in &namespaces {
        flows::namespace(&client, ns).await?;
    }
    let workload = node.workload_client().await?;
    let (cloud, objects) = Objects::start_cloud_on(HOST_ADDRESS, workload).await?;
    let modules = objects
        .modules_from_config_map(&client, "sharded", NAMESPACE, &HOST_ADDRESS.to_string())
        .await?;
    for p in &placed {
        cluster(&node, &client, &objects, &modules, p.ns, &p.cluster).await?;
        objects
            .create_pool(&client, p.ns, &p.pool, &p.cluster, 2, &modules)
            .await?;
    }
    for p in &placed {
        let clusters: Api<Cluster> = Api::namespaced(client.clone(), p.ns);
        wait_until(&client, &clusters, &p.cluster, "Provisioned", WAIT, |c| {
            c.and_then(|c| c.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Provisioned")
        })
        .await?;
        let pools: Api<MachinePool> = Api::namespaced(client.clone(), p.ns);
        wait_until(&client, &pools, &p.pool, "Running with 2", WAIT, |pool| {
            running_with(pool, 2)
        })
        .await?;
    }
    each_by_its_shard(&client, &placed, "provisioned").await?;
    for pod in &pods {
        let memory = ContainerMemory::of(pod, CONTAINER)?.read()?;
        eprintln!(
            "{}: the kernel's max usage {} MiB of {} MiB, RSS now {} MiB",
            pod.name_any(),
            memory.max_usage >> 20,
            memory.limit >> 20,
            memory.rss >> 20
        );
    }

    Box::pin(a_shard_pod_returns_and_its_pool_scales(
        &client, &cloud, &placed,
    ))
    .await?;
    each_by_its_shard(&client, &placed, "after the return").await?;
    drop(node);
    Ok(())
}

/// Shard 1's Pod deleted; once it is gone, one of its pools scaled from 2
/// to 3; the Pod back under its name, leading its Lease, the pool at 3.
async fn a_shard_pod_returns_and_its_pool_scales(
    client: &Client,
    cloud: &RunningSimCloud,
    placed: &[Placed],
) -> Result<()> {
    const VICTIM: u32 = 1;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let name = pod_of(VICTIM);
    let before = pods.get(&name).await?;
    let old_uid = before.uid().context("the Pod's uid")?;
    let scaled = placed
        .iter()
        .find(|p| p.shard == VICTIM)
        .context("a pool of the shard")?;

    let deleted = tokio::time::Instant::now();
    pods.delete(&name, &DeleteParams::default()).await?;
    wait_until(client, &pods, &name, "gone", WAIT, |pod| {
        pod.and_then(ResourceExt::uid).as_deref() != Some(old_uid.as_str())
    })
    .await?;
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), scaled.ns);
    scale(&pools, &scaled.pool, 3).await?;
    eprintln!(
        "{name} gone {:.1} s after the delete; {}/{} scaled to 3",
        deleted.elapsed().as_secs_f64(),
        scaled.ns,
        scaled.pool
    );

    let ready = wait_ready_pods(client, SHARDS as usize, READY).await?;
    let back = ready
        .iter()
        .find(|p| p.name_any() == name)
        .context("the shard's Pod back")?;
    assert_ne!(back.uid(), Some(old_uid), "{name} is a new Pod");
    assert_eq!(
        back.labels().get("apps.kubernetes.io/pod-index"),
        Some(&VICTIM.to_string()),
        "{name} keeps its ordinal"
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let lease = wait_until(
        client,
        &leases,
        &lease_of(VICTIM),
        &format!("held by {name}"),
        WAIT,
        |l| holder(l).as_deref() == Some(name.as_str()),
    )
    .await?;
    let spec = lease.and_then(|l| l.spec).context("the Lease's spec")?;
    eprintln!(
        "{name} Ready again {:.1} s after the delete; Lease {}: {spec:?}",
        deleted.elapsed().as_secs_f64(),
        lease_of(VICTIM),
    );
    // Taken by the Pod that came back, not left to the one that went.
    says_it_leads(client, &name, &lease_of(VICTIM)).await?;
    let acquired = spec.acquire_time.map(|t| t.0);
    let created = back.metadata.creation_timestamp.as_ref().map(|t| t.0);
    assert!(
        acquired.is_some() && acquired >= created,
        "the Lease acquired at {acquired:?}, the Pod made at {created:?}"
    );

    let pool = wait_until(client, &pools, &scaled.pool, "Running with 3", WAIT, |p| {
        running_with(p, 3)
    })
    .await?
    .context("the scaled pool")?;
    assert_eq!(
        pool.spec.provider_id_list.len(),
        3,
        "{:?}",
        pool.spec.provider_id_list
    );
    let instances = cloud
        .cloud()
        .instances_of(&format!("{}/{}", scaled.ns, scaled.pool));
    assert_eq!(
        instances.len(),
        3,
        "exactly the pool's 3 instances, none made twice or left behind: {instances:?}"
    );
    // The returning Pod set the third Node reference: the one it replaced
    // was gone before the pool was scaled, and no other shard writes it.
    let events = reporters(client, scaled.ns).await?;
    let set_by: Vec<&String> = events
        .get(&("MachinePool".to_owned(), scaled.pool.clone()))
        .into_iter()
        .flatten()
        .filter(|(_, reason, note)| {
            reason == "SuccessfulSetNodeRefs" && note.starts_with("3 Node references")
        })
        .map(|(instance, ..)| instance)
        .collect();
    assert_eq!(set_by, [&name], "who set the pool's 3 Node references");

    // The others stay as they were.
    for p in placed.iter().filter(|p| p.pool != scaled.pool) {
        let pools: Api<MachinePool> = Api::namespaced(client.clone(), p.ns);
        wait_until(client, &pools, &p.pool, "Running with 2", WAIT, |pool| {
            running_with(pool, 2)
        })
        .await?;
        let instances = cloud.cloud().instances_of(&format!("{}/{}", p.ns, p.pool));
        assert_eq!(instances.len(), 2, "{}/{}: {instances:?}", p.ns, p.pool);
    }
    Ok(())
}

/// A hostile provider and the pools it serves.
struct Hostile {
    module: &'static str,
    world: World,
    file: &'static str,
    /// Its objects' `spec.config`.
    config: Value,
    pools: usize,
    /// The Ready reasons its objects may come to, each with what its
    /// message names; besides [`SHARED_BUDGET`].
    bounds: &'static [(&'static str, &'static str)],
}

/// What any guest's call may meet while the bombs hold the memory all
/// guests share: growing past it fails the call.
const SHARED_BUDGET: (&str, &str) = ("GuestMemoryLimit", "memory budget all providers share");

/// The deadline of the hostile modules' calls.
const HOSTILE_DEADLINE_MILLIS: u32 = 2000;
/// Calls of the memory bomb that met a memory bound before the figures
/// are taken: the load kept up while the good pool scales, and after.
const BOMBS_MET: f64 = 40.0;

/// The neighbours: bombs allocating until stopped (at 64 MiB each, two
/// calls at once already cross the 96 MiB all guests share), calls asleep
/// on a timer or spinning until their deadline, each holding an instance
/// slot, strings of 400 KB, results over the output limit.
fn neighbours() -> Vec<Hostile> {
    let deadline: &[(&str, &str)] = &[
        ("GuestTimedOut", "deadline"),
        ("ProviderThrottled", "deadline"),
    ];
    vec![
        Hostile {
            module: "memory-bomb",
            world: World::Bootstrap,
            file: "hostile_memory_bomb.wasm",
            config: json!({}),
            pools: 8,
            bounds: &[("GuestMemoryLimit", "memory limit")],
        },
        Hostile {
            module: "timer-sleep",
            world: World::Bootstrap,
            file: "hostile_timer_sleep.wasm",
            config: json!({ "seconds": 60 }),
            pools: 6,
            bounds: deadline,
        },
        Hostile {
            module: "infinite-loop",
            world: World::Bootstrap,
            file: "hostile_infinite_loop.wasm",
            config: json!({}),
            pools: 2,
            bounds: deadline,
        },
        Hostile {
            module: "huge-strings",
            world: World::Bootstrap,
            file: "hostile_huge_strings.wasm",
            config: json!({ "field": "terminalMessage" }),
            pools: 2,
            bounds: &[("ProviderFailed", "…[+")],
        },
        Hostile {
            module: "bad-results",
            world: World::Infrastructure,
            file: "hostile_bad_results.wasm",
            config: json!({ "mode": "emptyAddresses" }),
            pools: 1,
            bounds: &[("GuestOutputTooLarge", "output limit")],
        },
    ]
}

/// `256Mi`, `1Gi`, `512Ki` or plain bytes, as a Pod's memory limit is written.
fn bytes_of(quantity: &str) -> Result<u64> {
    let (number, unit) = quantity
        .find(|c: char| !c.is_ascii_digit())
        .map_or((quantity, ""), |at| quantity.split_at(at));
    let shift = match unit {
        "" => 0,
        "Ki" => 10,
        "Mi" => 20,
        "Gi" => 30,
        other => bail!("memory quantity {quantity:?}: unit {other:?} not handled"),
    };
    Ok(number.parse::<u64>()? << shift)
}

/// The memory limit of the operator's container as deploy/ writes it.
fn written_limit(objects: &[kube::api::DynamicObject]) -> Result<u64> {
    let deployment = objects
        .iter()
        .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "Deployment"))
        .context("deploy/ has a Deployment")?;
    let limit = deployment
        .data
        .pointer("/spec/template/spec/containers/0/resources/limits/memory")
        .and_then(|l| l.as_str())
        .context("the operator's container has a memory limit")?;
    bytes_of(limit)
}

/// deploy/ as written: the operator's container under its memory limit
/// (the kernel's, read from its cgroup, is the one written), serving a good
/// pool beside the pools of hostile providers ([`neighbours`]). The
/// container is never OOM-killed or restarted, the good pool reaches
/// Running and scales from 2 to 4, each hostile object says which bound
/// it met; the bombs go on until they have met a memory bound
/// [`BOMBS_MET`] times. Prints the container's memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standalone_operator_holds_its_memory_limit_beside_hostile_providers() -> Result<()> {
    let image = OperatorImage::build()?;
    let node = Node::start(&[&image.archive]).await?;
    let client = node.client()?;
    let install = rendered(&pods::deploy_dir(""), &image.reference())?;
    let written = written_limit(&install)?;
    apply_all(&client, &install, pods::MANAGER).await?;
    let pod = wait_ready_pods(&client, 1, READY)
        .await?
        .into_iter()
        .next()
        .context("the operator's Pod")?;
    let memory = ContainerMemory::of(&pod, CONTAINER)?;
    let at_start = memory.read()?;
    assert_eq!(
        at_start.limit, written,
        "the kernel enforces the limit deploy/ writes"
    );
    let watch = MemoryWatch::start(memory);

    let ns = "neighbours";
    flows::namespace(&client, ns).await?;
    let workload = node.workload_client().await?;
    let (cloud, objects) = Objects::start_cloud_on(HOST_ADDRESS, workload).await?;
    let modules = objects
        .modules_from_config_map(&client, "good", NAMESPACE, &HOST_ADDRESS.to_string())
        .await?;
    let neighbours = neighbours();
    for hostile in &neighbours {
        hostile_module(&client, hostile).await?;
    }
    for name in ["good", "hostile"] {
        cluster(&node, &client, &objects, &modules, ns, name).await?;
    }
    let good = objects.providers(&modules);
    hostile_pools(&client, ns, &good, &neighbours).await?;
    let pool = MachinePoolBuilder::new(ns, "good-pool", "good")
        .replicas(2)
        .build();
    create_pool(&client, &pool, &good).await?;

    // The good pool reaches Running beside them, and scales.
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), ns);
    wait_until(&client, &pools, "good-pool", "Running with 2", WAIT, |p| {
        running_with(p, 2)
    })
    .await?;
    scale(&pools, "good-pool", 4).await?;
    wait_until(&client, &pools, "good-pool", "Running with 4", WAIT, |p| {
        running_with(p, 4)
    })
    .await?;
    let instances = cloud.cloud().instances_of(&format!("{ns}/good-pool"));
    assert_eq!(instances.len(), 4, "{instances:?}");

    // Each hostile object says which bound it met.
    for hostile in &neighbours {
        for i in 0..hostile.pools {
            let name = format!("{}-{i}", hostile.module);
            let (reason, message) = hostile_ready(&client, ns, hostile, &name).await?;
            let shown: String = message.chars().take(160).collect();
            eprintln!("{name}: {reason}: {shown}");
            let said = hostile
                .bounds
                .iter()
                .chain([&SHARED_BUDGET])
                .any(|(r, says)| *r == reason && message.contains(says));
            assert!(said, "{name}: {reason}: {message}");
            assert!(message.len() < 2048, "{name}: {} bytes", message.len());
        }
    }
    let calls = guest_calls(&client, &pod.name_any(), BOMBS_MET).await?;

    let calls: Vec<String> = calls
        .iter()
        .map(|((provider, outcome), count)| format!("{provider} {outcome}: {count}"))
        .collect();
    eprintln!("provider calls by outcome: {}", calls.join(", "));
    never_killed(&client, &pod.name_any(), watch).await?;
    drop(node);
    Ok(())
}

/// Pools of Cluster `hostile`, `<module>-<i>`, each of `neighbours`
/// serving one side of them, `good` the other.
async fn hostile_pools(
    client: &Client,
    ns: &str,
    good: &Providers,
    neighbours: &[Hostile],
) -> Result<()> {
    for hostile in neighbours {
        let mut providers = good.clone();
        let side = if hostile.world == World::Bootstrap {
            &mut providers.bootstrap
        } else {
            &mut providers.infrastructure
        };
        *side = (hostile.module.to_owned(), hostile.config.clone());
        for i in 0..hostile.pools {
            let pool = MachinePoolBuilder::new(ns, &format!("{}-{i}", hostile.module), "hostile")
                .replicas(1)
                .build();
            create_pool(client, &pool, &providers).await?;
        }
    }
    Ok(())
}

/// Stops `watch` on Pod `pod`'s operator container and asserts that it was
/// never restarted nor had a process OOM-killed; prints its memory.
async fn never_killed(client: &Client, pod: &str, watch: MemoryWatch) -> Result<()> {
    let peaks = watch.stop().await;
    let now = Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .get(pod)
        .await?;
    let status = now
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|s| s.iter().find(|c| c.name == CONTAINER))
        .context("the container's status")?;
    let restarted = status.restart_count != 0
        || status
            .last_state
            .as_ref()
            .is_some_and(|s| s.terminated.is_some());
    if restarted {
        bail!(
            "the operator's container was restarted: {status:#?}\n{}",
            describe(client, NAMESPACE).await
        );
    }
    let peaks = peaks?;
    let mib = |bytes: u64| f64::from(u32::try_from(bytes >> 10).unwrap_or(u32::MAX)) / 1024.0;
    eprintln!(
        "operator container, limit {:.0} MiB: peak working set {:.1} MiB, peak RSS {:.1} MiB \
         (read every 250 ms), the kernel's max usage {:.1} MiB (page cache included), usage \
         met the limit {} times, OOM kills {:?}; {} readings",
        mib(peaks.last.limit),
        mib(peaks.working_set),
        mib(peaks.rss),
        mib(peaks.last.max_usage),
        peaks.last.failcnt,
        peaks.last.oom_kills,
        peaks.readings,
    );
    assert_eq!(
        peaks.last.oom_kills.unwrap_or(0),
        0,
        "the kernel killed in the container's cgroup\n{}",
        describe(client, NAMESPACE).await
    );
    Ok(())
}

/// Waits until the hostile object of pool `name` (its bootstrap config or
/// its infrastructure pool, whichever `hostile` serves) is not Ready for
/// one of `hostile`'s reasons or [`SHARED_BUDGET`]'s: the reason and message.
async fn hostile_ready(
    client: &Client,
    ns: &str,
    hostile: &Hostile,
    name: &str,
) -> Result<(String, String)> {
    async fn not_ready<K>(
        client: &Client,
        api: &Api<K>,
        name: &str,
        reasons: &[&str],
    ) -> Result<(String, String)>
    where
        K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
        K: HasStatus,
    {
        let ready = |o: &K| condition(o.status()?.conditions(), "Ready");
        let object = wait_until(
            client,
            api,
            name,
            &format!("Ready False for one of {reasons:?}"),
            WAIT,
            |o| {
                o.and_then(ready).is_some_and(|(status, reason, _)| {
                    status == "False" && reasons.contains(&reason.as_str())
                })
            },
        )
        .await?
        .context("the hostile object")?;
        let (_, reason, message) = ready(&object).context("its Ready condition")?;
        Ok((reason, message))
    }
    let reasons: Vec<&str> = hostile
        .bounds
        .iter()
        .chain([&SHARED_BUDGET])
        .map(|(reason, _)| *reason)
        .collect();
    if hostile.world == World::Bootstrap {
        let api: Api<WasmBootstrapConfig> = Api::namespaced(client.clone(), ns);
        not_ready(client, &api, name, &reasons).await
    } else {
        let api: Api<WasmMachinePool> = Api::namespaced(client.clone(), ns);
        not_ready(client, &api, name, &reasons).await
    }
}

/// The operator's `capwasm_guest_calls_total`, by provider and outcome,
/// read through the API server's proxy to the Pod once the memory bomb's
/// calls have met a memory bound `bombs_met` times.
async fn guest_calls(
    client: &Client,
    pod: &str,
    bombs_met: f64,
) -> Result<BTreeMap<(String, String), f64>> {
    let path = format!("/api/v1/namespaces/{NAMESPACE}/pods/{pod}:8080/proxy/metrics");
    let started = tokio::time::Instant::now();
    loop {
        let request = http::Request::get(&path).body(Vec::new())?;
        let text = client.request_text(request).await?;
        let mut calls = BTreeMap::new();
        for line in text
            .lines()
            .filter(|l| l.starts_with("capwasm_guest_calls_total{"))
        {
            let label = |name: &str| {
                line.split(&format!("{name}=\""))
                    .nth(1)?
                    .split('"')
                    .next()
                    .map(str::to_owned)
            };
            let (Some(provider), Some(outcome), Some(count)) = (
                label("provider"),
                label("outcome"),
                line.rsplit(' ').next().and_then(|n| n.parse::<f64>().ok()),
            ) else {
                continue;
            };
            *calls.entry((provider, outcome)).or_insert(0.0) += count;
        }
        let met = calls
            .get(&("memory-bomb".to_owned(), "memory_limit".to_owned()))
            .copied()
            .unwrap_or(0.0);
        if met >= bombs_met {
            return Ok(calls);
        }
        if started.elapsed() > WAIT {
            bail!(
                "the memory bomb met a memory bound {met} times, not {bombs_met}, within {WAIT:?}: \
                 {calls:#?}\n{}",
                describe(client, NAMESPACE).await
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// ProviderModule `hostile.module` from a ConfigMap of the operator's
/// namespace (the only one it reads components from), in service.
async fn hostile_module(client: &Client, hostile: &Hostile) -> Result<()> {
    let bytes = std::fs::read(guest_path(hostile.file))
        .with_context(|| format!("reading {}", hostile.file))?;
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(hostile.module.into()),
            namespace: Some(NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        binary_data: Some([(hostile.file.to_owned(), ByteString(bytes))].into()),
        ..ConfigMap::default()
    };
    create(client, &config_map).await?;
    let module = ProviderModuleBuilder::file(hostile.module, hostile.world, hostile.file)
        .config_map(NAMESPACE, hostile.module, hostile.file)
        .timeout_millis(HOSTILE_DEADLINE_MILLIS)
        .build();
    let api: Api<ProviderModule> = Api::all(client.clone());
    api.create(&PostParams::default(), &module).await?;
    wait_until(client, &api, hostile.module, "Ready", WAIT, |m| {
        m.and_then(|m| m.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Ready")
    })
    .await?;
    Ok(())
}

#[test]
fn memory_quantities_are_read_as_written() -> Result<()> {
    assert_eq!(bytes_of("256Mi")?, 256 << 20);
    assert_eq!(bytes_of("1Gi")?, 1 << 30);
    assert_eq!(bytes_of("1000")?, 1000);
    assert!(bytes_of("1G").is_err());
    Ok(())
}
