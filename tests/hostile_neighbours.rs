//! Hostile providers beside good pools, through `capwasm run` as a process:
//! one of each kind in guests/hostile that can load (blocked in a timer,
//! bombing its memory, returning results that break the contract or strings
//! of 400 KB, flooding an allowed host with requests) serving pools of their
//! own, and those that must not load (a schema bomb, an `info` that never
//! returns, a bootstrap component importing `wasi:http`). The good pools
//! still reach Running, `/healthz` answers throughout, the process's memory
//! stays under its bound, SIGTERM ends it, and each hostile object says
//! which limit it crossed.
//!
//! Then tenants of one provider: one namespace's pools whose calls all run
//! into their deadline beside another namespace's pools on the same
//! provider, which must not be throttled or held up for them.
//!
//! It prints its figures (a good pool's time to Running alone and beside the
//! hostile ones, the slowest health answer, peak RSS, time to exit after
//! SIGTERM); only the bounds the operator promises are asserted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use capwasm::api::providermodule::World;
use capwasm::api::{HasStatus, ObjectStatus as _, ProviderModule};
use capwasm::testing::guest_path;
use capwasm::testing::objects::{MachinePoolBuilder, ProviderModuleBuilder};
use kube::api::PostParams;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use testenv::flows::{
    Apis, Modules, Objects, Providers, condition, create_pool, wait_for, wait_for_cluster,
    wait_for_event, wait_for_module, wait_for_pool,
};
use testenv::operator::OperatorProcess;
use testenv::{Options, TestEnv};

/// Pools whose bootstrap call waits a minute on a timer, each holding a
/// call slot for its whole deadline on every try.
const SLEEPERS: usize = 24;
/// The deadline of the hostile modules' calls.
const DEADLINE_MILLIS: u32 = 2000;
/// The operator's resident memory bound (docs/operating.md, deploy/operator/deployment.yaml).
const RSS_BOUND: u64 = 256 << 20;
/// How long `/healthz` may take to answer, and SIGTERM to end the process.
const HEALTH_BOUND: Duration = Duration::from_secs(1);
const SIGTERM_BOUND: Duration = Duration::from_secs(10);

/// ProviderModule `name` serving `file` in `world`, with `hosts` allowed,
/// its calls ending at [`DEADLINE_MILLIS`].
async fn module(client: &Client, name: &str, world: World, file: &str, hosts: &[&str]) {
    let module = ProviderModuleBuilder::file(name, world, &guest_path(file).to_string_lossy())
        .timeout_millis(DEADLINE_MILLIS)
        .allowed_hosts(hosts)
        .build();
    Api::<ProviderModule>::all(client.clone())
        .create(&PostParams::default(), &module)
        .await
        .unwrap();
}

/// Waits until the provider object `name` is not Ready for `reason`, and
/// returns the condition's message.
async fn not_ready_for<K>(api: &Api<K>, name: &str, reason: &str) -> String
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + DeserializeOwned + Send + 'static,
    K: HasStatus,
{
    let ready = |o: &K| condition(o.status()?.conditions(), "Ready");
    let found = wait_for(api, name, &format!("Ready has reason {reason}"), |o| {
        o.and_then(ready)
            .is_some_and(|(status, r, _)| status == "False" && r == reason)
    })
    .await
    .unwrap_or_else(|| panic!("{name} disappeared"));
    let (_, _, message) = ready(&found).unwrap();
    eprintln!("{name}: {reason}: {message}");
    message
}

/// The provider modules, and the Clusters `good` and `hostile` provisioned
/// with them: the good pools' providers.
async fn good_and_hostile_clusters(
    client: &Client,
    workload: &testenv::ApiServer,
    objects: &Objects,
    apis: &Apis,
) -> Providers {
    let ns = apis.pools.namespace().unwrap_or_default();
    let modules = objects.modules(client, ns).await.unwrap();
    for cluster in ["good", "hostile"] {
        objects
            .create_cluster(client, workload, ns, cluster, &modules)
            .await
            .unwrap();
        wait_for_cluster(&apis.clusters, cluster, "Provisioned").await;
    }
    objects.providers(&modules)
}

/// A good pool `name` of Cluster `good`: how long it took to be Running.
async fn good_pool(client: &Client, apis: &Apis, name: &str, providers: &Providers) -> Duration {
    let ns = apis.pools.namespace().unwrap_or_default();
    let started = Instant::now();
    let pool = MachinePoolBuilder::new(ns, name, "good")
        .replicas(2)
        .build();
    create_pool(client, &pool, providers).await.unwrap();
    wait_for_pool(&apis.pools, name, "Running", 2).await;
    started.elapsed()
}

/// Asks `/healthz` every 100 ms until stopped: the slowest answer, and how
/// many were not 200 or slower than [`HEALTH_BOUND`].
struct HealthProbe {
    slowest_micros: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl HealthProbe {
    fn start(operator: &Arc<OperatorProcess>) -> Self {
        let slowest_micros: Arc<AtomicU64> = Arc::default();
        let failures: Arc<AtomicU64> = Arc::default();
        let stop: Arc<AtomicBool> = Arc::default();
        let (slowest, failed, stopped) = (slowest_micros.clone(), failures.clone(), stop.clone());
        let operator = operator.clone();
        let task = tokio::spawn(async move {
            while !stopped.load(Ordering::Relaxed) {
                let asked = Instant::now();
                let answer = tokio::time::timeout(HEALTH_BOUND, operator.get("/healthz")).await;
                let took = asked.elapsed();
                slowest.fetch_max(
                    u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
                    Ordering::Relaxed,
                );
                if !matches!(answer, Ok((200, _))) {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Self {
            slowest_micros,
            failures,
            stop,
            task,
        }
    }

    /// Stops the probe: the slowest answer, and the failures.
    async fn stop(self) -> (Duration, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        (
            Duration::from_micros(self.slowest_micros.load(Ordering::Relaxed)),
            self.failures.load(Ordering::Relaxed),
        )
    }
}

/// Modules refused at load: name, guest, and what the refusal names.
const REFUSED: [(&str, &str, &str); 3] = [
    (
        "schema-bomb",
        "hostile_schema_bomb.wasm",
        "values with its $refs",
    ),
    ("slow-load", "hostile_slow_load.wasm", "deadline"),
    (
        "bootstrap-http",
        "hostile_bootstrap_http.wasm",
        "wasi:http/",
    ),
];

/// Modules that load and misbehave in their calls: name, world, guest,
/// and whether they may reach 127.0.0.1.
const LOADED: [(&str, World, &str, bool); 5] = [
    (
        "timer-sleep",
        World::Bootstrap,
        "hostile_timer_sleep.wasm",
        false,
    ),
    (
        "memory-bomb",
        World::Bootstrap,
        "hostile_memory_bomb.wasm",
        false,
    ),
    (
        "huge-strings",
        World::Bootstrap,
        "hostile_huge_strings.wasm",
        false,
    ),
    (
        "bad-results",
        World::Infrastructure,
        "hostile_bad_results.wasm",
        false,
    ),
    (
        "http-flood",
        World::Infrastructure,
        "hostile_http_flood.wasm",
        true,
    ),
];

/// Held by each test for its whole run, on API servers of its own: an
/// operator reconciles every namespace it can see, so on a shared server
/// each test's operator would also serve (and write the status of) the
/// other's hostile pools; and run at once on two cores, neither figure
/// would be of one operator beside its neighbours.
static ONE_OPERATOR_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Creates the hostile modules and waits until each is in service or refused.
async fn hostile_modules(client: &Client) {
    for (name, file, _) in REFUSED {
        module(client, name, World::Bootstrap, file, &[]).await;
    }
    for (name, world, file, reaches) in LOADED {
        let hosts: &[&str] = if reaches { &["127.0.0.1"] } else { &[] };
        module(client, name, world, file, hosts).await;
    }
    let api: Api<ProviderModule> = Api::all(client.clone());
    for (name, ..) in LOADED {
        wait_for_module(&api, name, "Ready").await;
    }
    for (name, _, bound) in REFUSED {
        let module = wait_for_module(&api, name, "Failed").await;
        let message = module.status.and_then(|s| s.message).unwrap_or_default();
        eprintln!("{name}: {message}");
        assert!(message.contains(bound), "{name}: {message}");
    }
}

/// A pool of the hostile Cluster, and what its hostile provider object
/// must come to say.
struct HostilePool {
    name: String,
    providers: Providers,
    /// Whether the hostile side is the bootstrap (else the infrastructure).
    bootstrap: bool,
    reason: &'static str,
    says: &'static str,
}

/// The hostile pools: [`SLEEPERS`] blocked in a timer, and one of each other kind.
fn hostile_pools(good: &Providers, cloud_endpoint: &str) -> Vec<HostilePool> {
    let bootstrap = |name: &str, module: &str, config: Value, reason, says| HostilePool {
        name: name.into(),
        providers: Providers {
            bootstrap: (module.into(), config),
            infrastructure: good.infrastructure.clone(),
        },
        bootstrap: true,
        reason,
        says,
    };
    let infrastructure = |name: &str, module: &str, config: Value, reason, says| HostilePool {
        name: name.into(),
        providers: Providers {
            bootstrap: good.bootstrap.clone(),
            infrastructure: (module.into(), config),
        },
        bootstrap: false,
        reason,
        says,
    };
    let sleep = json!({ "seconds": 60 });
    let mut pools: Vec<HostilePool> = (0..SLEEPERS)
        .map(|i| {
            let name = format!("sleeper-{i}");
            // Each runs into its deadline; a few in a row throttle the module.
            bootstrap(
                &name,
                "timer-sleep",
                sleep.clone(),
                "ProviderThrottled",
                "ran into their deadline",
            )
        })
        .collect();
    let flood = json!({ "mode": "inARow", "url": format!("{cloud_endpoint}/"), "count": 1000 });
    pools.extend([
        // Two bombs: at their cap of 64 MiB each, together they cross the
        // budget all calls share; each condition names the bound it met.
        bootstrap(
            "memory-bomb",
            "memory-bomb",
            json!({}),
            "GuestMemoryLimit",
            "memory",
        ),
        bootstrap(
            "memory-bomb-2",
            "memory-bomb",
            json!({}),
            "GuestMemoryLimit",
            "memory",
        ),
        bootstrap(
            "huge-strings",
            "huge-strings",
            json!({ "field": "terminalMessage" }),
            "ProviderFailed",
            "…[+",
        ),
        infrastructure(
            "foreign-scheme",
            "bad-results",
            json!({ "mode": "foreignScheme" }),
            "InvalidProviderResult",
            "providerIDPrefix",
        ),
        infrastructure(
            "empty-addresses",
            "bad-results",
            json!({ "mode": "emptyAddresses" }),
            "GuestOutputTooLarge",
            "output limit",
        ),
        infrastructure(
            "http-flood",
            "http-flood",
            flood,
            "ProviderFailed",
            "first=LimitReached",
        ),
    ]);
    pools
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_providers_leave_good_pools_health_memory_and_shutdown_alone() {
    let _alone = ONE_OPERATOR_AT_A_TIME.lock().await;
    let env = TestEnv::start(Options::default()).await.unwrap();
    let workload = env.workload().unwrap();
    let client = env.management().client().unwrap();
    let ns = env
        .management()
        .create_namespace("neighbours")
        .await
        .unwrap();
    let apis = Apis::new(&client, &ns);
    let (_cloud, objects) = Objects::start_cloud(workload.client().unwrap())
        .await
        .unwrap();
    // The memory flags of deploy/operator/deployment.yaml, whose limit is RSS_BOUND.
    let memory = [
        "--max-provider-memory-mib=64",
        "--guest-memory-budget-mib=96",
    ];
    let operator =
        Arc::new(OperatorProcess::start(env.management(), &ns, "neighbours", &memory).await);
    let probe = HealthProbe::start(&operator);

    // A good pool alone, its Cluster provisioned first.
    let good = good_and_hostile_clusters(&client, workload, &objects, &apis).await;
    let alone = good_pool(&client, &apis, "alone", &good).await;

    // The hostile pools, in a Cluster of their own; a good pool beside
    // them once the sleepers are timing out.
    hostile_modules(&client).await;
    let hostile = hostile_pools(&good, &objects.cloud_endpoint);
    for pool in &hostile {
        let object = MachinePoolBuilder::new(&ns, &pool.name, "hostile")
            .replicas(3)
            .build();
        create_pool(&client, &object, &pool.providers)
            .await
            .unwrap();
    }
    not_ready_for(&apis.configs, "sleeper-0", "ProviderThrottled").await;
    let beside = good_pool(&client, &apis, "beside", &good).await;

    // Each hostile object says which limit it crossed, in a bounded message.
    for pool in &hostile {
        let message = if pool.bootstrap {
            not_ready_for(&apis.configs, &pool.name, pool.reason).await
        } else {
            not_ready_for(&apis.infra_pools, &pool.name, pool.reason).await
        };
        assert!(message.contains(pool.says), "{}: {message}", pool.name);
        assert!(
            message.len() < 2048,
            "{}: {} bytes",
            pool.name,
            message.len()
        );
    }
    // Nothing of a refused result reached the pool.
    let pool = apis.pools.get("foreign-scheme").await.unwrap();
    assert!(pool.spec.provider_id_list.is_empty(), "{pool:?}");

    let (slowest, failures) = probe.stop().await;
    let peak = operator.peak_rss_bytes();
    let mut operator = Arc::into_inner(operator).expect("the probe let go of the process");
    let (status, exit) = operator.terminate(SIGTERM_BOUND).await;
    eprintln!(
        "good pool to Running: alone {alone:.1?}, beside {} hostile pools {beside:.1?} ({:.2}x); \
         slowest /healthz {slowest:.1?}; peak RSS {} MiB; exit after SIGTERM {exit:.1?}",
        hostile.len(),
        beside.as_secs_f64() / alone.as_secs_f64(),
        peak >> 20,
    );
    assert_eq!(failures, 0, "/healthz failed or took over {HEALTH_BOUND:?}");
    assert!(peak < RSS_BOUND, "peak RSS {} MiB", peak >> 20);
    assert!(status.success(), "{status:?}");
}

/// Pools served by a bootstrap provider whose every call computes without
/// end, beside good pools: the endless one is throttled (its objects back
/// off, its ProviderModule says so with an Event) and the good pools reach
/// Running. Prints how long the good pools took alone and beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_computing_without_end_is_throttled_and_good_pools_go_on() {
    let _alone = ONE_OPERATOR_AT_A_TIME.lock().await;
    let env = TestEnv::start(Options::default()).await.unwrap();
    let workload = env.workload().unwrap();
    let client = env.management().client().unwrap();
    let ns = env.management().create_namespace("endless").await.unwrap();
    let apis = Apis::new(&client, &ns);
    let (_cloud, objects) = Objects::start_cloud(workload.client().unwrap())
        .await
        .unwrap();
    let mut operator = OperatorProcess::start(env.management(), &ns, "endless", &[]).await;
    let good = good_and_hostile_clusters(&client, workload, &objects, &apis).await;
    let alone = good_pools(&client, &apis, "alone", &good).await;

    let endless_module = format!("{ns}-endless");
    let module = ProviderModuleBuilder::file(
        &endless_module,
        World::Bootstrap,
        &guest_path("hostile_infinite_loop.wasm").to_string_lossy(),
    )
    .timeout_millis(ENDLESS_DEADLINE_MILLIS)
    .build();
    let modules_api = Api::<ProviderModule>::all(client.clone());
    modules_api
        .create(&PostParams::default(), &module)
        .await
        .unwrap();
    wait_for_module(&modules_api, &endless_module, "Ready").await;
    let endless = Providers {
        bootstrap: (endless_module.clone(), json!({})),
        infrastructure: good.infrastructure.clone(),
    };
    for i in 0..ENDLESS_POOLS {
        let pool = MachinePoolBuilder::new(&ns, &format!("endless-{i}"), "hostile")
            .replicas(1)
            .build();
        create_pool(&client, &pool, &endless).await.unwrap();
    }
    let beside = good_pools(&client, &apis, "beside", &good).await;

    // The module says it is throttled, with a Warning Event; its objects
    // back off saying so.
    let throttled = wait_for(&modules_api, &endless_module, "Throttled", |m| {
        m.and_then(|m| condition(m.status()?.conditions(), "Throttled"))
            .is_some_and(|(status, reason, _)| status == "True" && reason == "ProviderThrottled")
    })
    .await
    .unwrap();
    let (_, _, message) = condition(throttled.status().unwrap().conditions(), "Throttled").unwrap();
    assert!(message.contains("ran into their deadline"), "{message}");
    let note = wait_for_event(&client, "", &endless_module, "ProviderThrottled").await;
    assert!(note.contains("ran into their deadline"), "{note}");
    let config_message = not_ready_for(&apis.configs, "endless-0", "ProviderThrottled").await;
    assert!(config_message.contains("throttled"), "{config_message}");

    eprintln!(
        "{GOOD_POOLS} good pools to Running: alone {alone:.1?}, beside {ENDLESS_POOLS} endless ones {beside:.1?} ({:.2}x)",
        beside.as_secs_f64() / alone.as_secs_f64()
    );
    operator.terminate(SIGTERM_BOUND).await;
}

/// The endless module's calls' deadline, and its pools.
const ENDLESS_DEADLINE_MILLIS: u32 = 10_000;
const ENDLESS_POOLS: usize = 40;
/// Good pools at a time.
const GOOD_POOLS: usize = 10;

/// [`GOOD_POOLS`] good pools `<prefix>-<i>` of Cluster `good`, created at
/// once: how long until all were Running.
async fn good_pools(client: &Client, apis: &Apis, prefix: &str, providers: &Providers) -> Duration {
    let started = Instant::now();
    let names: Vec<String> = (0..GOOD_POOLS).map(|i| format!("{prefix}-{i}")).collect();
    let running = names
        .iter()
        .map(|name| good_pool(client, apis, name, providers));
    futures::future::join_all(running).await;
    started.elapsed()
}

/// Tenant A's pools, in a namespace of their own.
const BLACK_HOLED_POOLS: usize = 40;

/// A loopback endpoint that accepts connections and never answers: a call
/// that sends a request there waits on it until its deadline. The task
/// holds the connections; abort it to let them go.
async fn black_hole() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            held.push(connection);
        }
    });
    (endpoint, task)
}

/// kubeadm-bootstrap and a sim-infrastructure module whose calls end at
/// [`DEADLINE_MILLIS`], named after `prefix`, in service.
async fn short_deadline_modules(client: &Client, prefix: &str) -> Modules {
    let modules = Modules {
        bootstrap: format!("{prefix}-kubeadm"),
        infrastructure: format!("{prefix}-sim"),
    };
    module(
        client,
        &modules.bootstrap,
        World::Bootstrap,
        "kubeadm_bootstrap.wasm",
        &[],
    )
    .await;
    module(
        client,
        &modules.infrastructure,
        World::Infrastructure,
        "sim_infrastructure.wasm",
        &["127.0.0.1"],
    )
    .await;
    let api = Api::<ProviderModule>::all(client.clone());
    for name in [&modules.bootstrap, &modules.infrastructure] {
        wait_for_module(&api, name, "Ready").await;
    }
    modules
}

/// The Ready reason of a pool whose calls ran into their deadline, and of
/// one whose calls are refused for that.
const DEADLINE_REASONS: [&str; 2] = ["GuestTimedOut", "ProviderThrottled"];

/// Tenant A's 40 pools point the sim-infrastructure provider they share
/// with tenant B at an endpoint that never answers, so each of their calls
/// waits on HTTP until its deadline (a config mistake, or a hostile
/// tenant). A's calls hold at most half the provider's turns and only A's
/// are throttled: B's pools reach Running, none of B's objects is ever
/// throttled, and the ProviderModule names A's namespace as throttled.
/// Prints B's pools' time to Running alone and beside A's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_s_pools_on_a_black_holed_endpoint_leave_another_tenant_s_pools_on_the_same_provider_alone()
 {
    let _alone = ONE_OPERATOR_AT_A_TIME.lock().await;
    let env = TestEnv::start(Options::default()).await.unwrap();
    let workload = env.workload().unwrap();
    let client = env.management().client().unwrap();
    let tenant_b = env.management().create_namespace("tenant-b").await.unwrap();
    let tenant_a = env.management().create_namespace("tenant-a").await.unwrap();
    let (b, a) = (Apis::new(&client, &tenant_b), Apis::new(&client, &tenant_a));
    let (_cloud, objects) = Objects::start_cloud(workload.client().unwrap())
        .await
        .unwrap();
    let (silent_endpoint, silence) = black_hole().await;
    let mut operator = OperatorProcess::start(env.management(), &tenant_b, "tenants", &[]).await;

    // One provider for both tenants; each tenant's Cluster served well.
    let modules = short_deadline_modules(&client, &tenant_b).await;
    let sim_module = modules.infrastructure.clone();
    for (ns, cluster, apis) in [(&tenant_b, "good", &b), (&tenant_a, "hostile", &a)] {
        objects
            .create_cluster(&client, workload, ns, cluster, &modules)
            .await
            .unwrap();
        wait_for_cluster(&apis.clusters, cluster, "Provisioned").await;
    }
    let good = objects.providers(&modules);
    let alone = good_pools(&client, &b, "alone", &good).await;

    // A's pools, their infrastructure config pointing at the black hole.
    let mut silent = good.clone();
    silent.infrastructure.1["endpoint"] = json!(silent_endpoint);
    for i in 0..BLACK_HOLED_POOLS {
        let pool = MachinePoolBuilder::new(&tenant_a, &format!("silent-{i}"), "hostile")
            .replicas(1)
            .build();
        create_pool(&client, &pool, &silent).await.unwrap();
    }
    // B's pools beside them once A's calls run into their deadline.
    wait_for(&a.infra_pools, "silent-0", "a deadline reason", |p| {
        p.and_then(|p| condition(p.status()?.conditions(), "Ready"))
            .is_some_and(|(_, reason, _)| DEADLINE_REASONS.contains(&reason.as_str()))
    })
    .await;
    let beside = good_pools(&client, &b, "beside", &good).await;

    // A's fault took: every one of its pools says its calls ran into their
    // deadline or are refused for it.
    let mut reasons = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..BLACK_HOLED_POOLS {
        let name = format!("silent-{i}");
        let pool = wait_for(&a.infra_pools, &name, "a deadline reason", |p| {
            p.and_then(|p| condition(p.status()?.conditions(), "Ready"))
                .is_some_and(|(_, reason, _)| DEADLINE_REASONS.contains(&reason.as_str()))
        })
        .await
        .unwrap();
        let (_, reason, _) = condition(pool.status().unwrap().conditions(), "Ready").unwrap();
        *reasons.entry(reason).or_default() += 1;
    }
    // The module says that A's namespace, and not B's, is throttled.
    let modules_api = Api::<ProviderModule>::all(client.clone());
    let throttled = wait_for(&modules_api, &sim_module, "Throttled", |m| {
        m.and_then(|m| condition(m.status()?.conditions(), "Throttled"))
            .is_some_and(|(status, reason, _)| status == "True" && reason == "ProviderThrottled")
    })
    .await
    .unwrap();
    let (_, _, message) = condition(throttled.status().unwrap().conditions(), "Throttled").unwrap();
    eprintln!("{sim_module}: Throttled: {message}");
    assert!(message.contains(&format!("{tenant_a:?}")), "{message}");
    assert!(!message.contains(&tenant_b), "{message}");
    let note = wait_for_event(&client, "", &sim_module, "ProviderThrottled").await;
    assert!(note.contains(&format!("{tenant_a:?}")), "{note}");
    // None of B's objects was ever throttled: each would have said so with
    // a Warning Event.
    let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), &tenant_b)
        .list(&kube::api::ListParams::default())
        .await
        .unwrap();
    let warned: Vec<String> = events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("ProviderThrottled"))
        .map(|e| format!("{:?}: {:?}", e.regarding, e.note))
        .collect();
    assert!(warned.is_empty(), "B's objects were throttled: {warned:?}");

    eprintln!(
        "tenant B's {GOOD_POOLS} pools to Running: alone {alone:.1?}, beside tenant A's \
         {BLACK_HOLED_POOLS} black-holed pools on the same provider {beside:.1?} ({:.2}x); \
         A's pools by Ready reason: {reasons:?}",
        beside.as_secs_f64() / alone.as_secs_f64()
    );
    operator.terminate(SIGTERM_BOUND).await;
    silence.abort();
}
