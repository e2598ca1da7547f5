//! Building blocks of controller tests: provider modules, a Cluster with its
//! infrastructure and kubeconfig, MachinePools with their provider objects,
//! and waiting on an object until a condition holds — on watches, never
//! sleeping, with a limit that names what was awaited.

use std::fmt::Debug;
use std::time::Duration;

use capwasm::api::providermodule::World;
use capwasm::api::{
    Cluster, MachinePool, ProviderModule, WasmBootstrapConfig, WasmCluster, WasmMachinePool,
};
use capwasm::simcloud::{self, RunningSimCloud, SimCloud};
use capwasm::testing::objects::{self, ClusterBuilder, MachinePoolBuilder, ProviderModuleBuilder};
use capwasm::testing::{KUBEADM_JOIN_CONFIG, guest_path};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::{ByteString, NamespaceResourceScope};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams, PostParams,
};
use kube::runtime::wait::await_condition;
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::{ApiServer, CREDENTIALS_NAMESPACE, Error, Result, Stack};

/// How long a test waits for the operator to get somewhere.
pub const WAIT: Duration = Duration::from_secs(90);

/// Looks every `every` until `look` finds what it awaits (`Ok`) and
/// returns it.
///
/// # Panics
///
/// After `within`, with what `look` last said was missing (`Err`).
pub async fn eventually<T, F, Fut>(within: Duration, every: Duration, mut look: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match look().await {
            Ok(found) => return found,
            Err(missing) => assert!(tokio::time::Instant::now() < deadline, "{missing}"),
        }
        tokio::time::sleep(every).await;
    }
}

/// Waits until `done` holds for object `name` (`None`: it does not exist)
/// and returns it.
///
/// # Panics
///
/// After [`WAIT`], naming what was awaited and showing the object as it was
/// then: a test that gives up should say why.
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    done: impl Fn(Option<&K>) -> bool,
) -> Option<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    match watch_until(api, name, what, WAIT, done).await {
        Ok(object) => object,
        Err(now) => {
            panic!("{name}: gave up after {WAIT:?} waiting until {what}; it is now {now:#?}")
        }
    }
}

/// Watches object `name` until `done` holds (`None`: it does not exist) or
/// `within` passes: the object then, or on time-out the object as it is
/// (`None` too when it cannot be read).
///
/// # Errors
///
/// On time-out, with the object as it is.
pub async fn watch_until<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    within: Duration,
    done: impl Fn(Option<&K>) -> bool,
) -> std::result::Result<Option<K>, Box<Option<K>>>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let watched = tokio::time::timeout_at(
            deadline,
            await_condition(api.clone(), name, |o: Option<&K>| done(o)),
        )
        .await;
        match watched {
            Ok(Ok(object)) => return Ok(object),
            // A watch the API server expired under load (410 Gone, "too
            // old resource version"): watch again from a fresh list.
            Ok(Err(e)) => {
                eprintln!("watching {name} while waiting until {what}: {e}; watching again");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(_) => return Err(Box::new(api.get_opt(name).await.ok().flatten())),
        }
    }
}

/// Creates `object` in its namespace.
pub async fn create<K>(client: &Client, object: &K) -> Result<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let namespace = object.meta().namespace.clone().unwrap_or_default();
    Ok(Api::<K>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), object)
        .await?)
}

const BOOTSTRAP_GUEST: &str = "kubeadm_bootstrap.wasm";
const INFRASTRUCTURE_GUEST: &str = "sim_infrastructure.wasm";

/// Makes the objects of a test served by the built guests and a simulated
/// cloud, whichever operator reconciles them.
#[derive(Clone, Debug)]
pub struct Objects {
    /// The cloud's API base URL (`http://<address>:<port>`).
    pub cloud_endpoint: String,
}

impl Objects {
    /// A simulated cloud on loopback that boots and terminates in 300 ms,
    /// holds the instances of a fleet of 1,000 pools and more, and
    /// registers its instances' Nodes through `nodes` (a workload
    /// cluster's client), and the objects it serves.
    pub async fn start_cloud(nodes: Client) -> Result<(RunningSimCloud, Self)> {
        Self::start_cloud_on(std::net::Ipv4Addr::LOCALHOST, nodes).await
    }

    /// The same, listening on `address` (a Pod reaches the host end of a
    /// node's network, not this machine's loopback).
    pub async fn start_cloud_on(
        address: std::net::Ipv4Addr,
        nodes: Client,
    ) -> Result<(RunningSimCloud, Self)> {
        Self::start_cloud_with(address, nodes, None).await
    }

    /// The same, answering only requests that carry `bearer_token` when
    /// one is given.
    pub async fn start_cloud_with(
        address: std::net::Ipv4Addr,
        nodes: Client,
        bearer_token: Option<String>,
    ) -> Result<(RunningSimCloud, Self)> {
        let listener = tokio::net::TcpListener::bind((address, 0))
            .await
            .map_err(|e| Error::Cloud(format!("binding {address}: {e}")))?;
        let cloud = SimCloud::new(simcloud::Settings {
            boot_delay: Duration::from_millis(300),
            termination_delay: Duration::from_millis(300),
            max_instances: 10_000,
            nodes: Some(nodes),
            bearer_token,
            ..simcloud::Settings::default()
        })
        .start(listener)
        .map_err(|e| Error::Cloud(capwasm::report::error_chain(&e)))?;
        let objects = Self {
            cloud_endpoint: cloud.endpoint(),
        };
        Ok((cloud, objects))
    }
}

/// Scales MachinePool `name` to `replicas` as `kubectl scale` does, through
/// the scale subresource.
pub async fn scale(pools: &Api<MachinePool>, name: &str, replicas: i32) -> Result<()> {
    pools
        .patch_scale(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({ "spec": { "replicas": replicas } })),
        )
        .await?;
    Ok(())
}

/// Requests the API server's priority and fairness has rejected (429)
/// since it started.
pub async fn rejected_by_the_api_server(client: &Client) -> Result<f64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("apiserver_flowcontrol_rejected_requests_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        // Not `sum`: it starts at -0, printed "-0" when nothing was rejected
        // (the counter has no series until a first rejection).
        .fold(0.0, |total, n| total + n))
}

/// The ProviderModules a test's objects use.
#[derive(Clone, Debug)]
pub struct Modules {
    /// kubeadm-bootstrap.
    pub bootstrap: String,
    /// sim-infrastructure, allowed to reach 127.0.0.1.
    pub infrastructure: String,
}

impl Objects {
    /// Creates ProviderModules `<prefix>-kubeadm` and `<prefix>-sim` from the
    /// built guests and waits until both are in service.
    pub async fn modules(&self, client: &Client, prefix: &str) -> Result<Modules> {
        self.modules_with(client, prefix, "127.0.0.1", |builder, _| builder)
            .await
    }

    /// The same modules read from ConfigMap `<prefix>-providers` in
    /// `namespace` (an operator in a Pod reads no file of this machine),
    /// sim-infrastructure allowed to reach `host`.
    pub async fn modules_from_config_map(
        &self,
        client: &Client,
        prefix: &str,
        namespace: &str,
        host: &str,
    ) -> Result<Modules> {
        self.modules_from_config_map_in(client, prefix, namespace, host, &guest_path(""))
            .await
    }

    /// [`Self::modules_from_config_map`] with the components in `guests`
    /// (a release's, say) instead of this tree's.
    ///
    /// # Errors
    ///
    /// If a component cannot be read or an object is refused.
    pub async fn modules_from_config_map_in(
        &self,
        client: &Client,
        prefix: &str,
        namespace: &str,
        host: &str,
        guests: &std::path::Path,
    ) -> Result<Modules> {
        let name = format!("{prefix}-providers");
        let mut data = std::collections::BTreeMap::new();
        for file in [BOOTSTRAP_GUEST, INFRASTRUCTURE_GUEST] {
            let path = guests.join(file);
            let bytes = std::fs::read(&path).map_err(|source| Error::Io { path, source })?;
            data.insert(file.to_owned(), ByteString(bytes));
        }
        let config_map = k8s_openapi::api::core::v1::ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.to_owned()),
                ..kube::api::ObjectMeta::default()
            },
            binary_data: Some(data),
            ..k8s_openapi::api::core::v1::ConfigMap::default()
        };
        create(client, &config_map).await?;
        self.modules_with(client, prefix, host, |builder, file| {
            builder.config_map(namespace, &name, file)
        })
        .await
    }

    async fn modules_with(
        &self,
        client: &Client,
        prefix: &str,
        host: &str,
        source: impl Fn(ProviderModuleBuilder, &str) -> ProviderModuleBuilder,
    ) -> Result<Modules> {
        let modules = Modules {
            bootstrap: format!("{prefix}-kubeadm"),
            infrastructure: format!("{prefix}-sim"),
        };
        let api: Api<ProviderModule> = Api::all(client.clone());
        let file = |name: &str, world: World, guest: &str| {
            let builder =
                ProviderModuleBuilder::file(name, world, &guest_path(guest).to_string_lossy());
            source(builder, guest)
        };
        let bootstrap = file(&modules.bootstrap, World::Bootstrap, BOOTSTRAP_GUEST).build();
        let infrastructure = file(
            &modules.infrastructure,
            World::Infrastructure,
            INFRASTRUCTURE_GUEST,
        )
        .allowed_hosts(&[host])
        .build();
        for module in [bootstrap, infrastructure] {
            api.create(&PostParams::default(), &module).await?;
        }
        for name in [&modules.bootstrap, &modules.infrastructure] {
            wait_for_module(&api, name, "Ready").await;
        }
        Ok(modules)
    }

    /// The sim-infrastructure config for this stack's cloud; it looks again
    /// every second, since the simulated cloud boots and terminates in less.
    pub fn sim_config(&self) -> Value {
        json!({ "endpoint": self.cloud_endpoint, "region": "local-1", "pollSeconds": 1 })
    }

    /// Creates Cluster `name` with a WasmCluster of the same name served by
    /// `modules`, and its kubeconfig Secret for `workload`.
    pub async fn create_cluster(
        &self,
        client: &Client,
        workload: &ApiServer,
        namespace: &str,
        name: &str,
        modules: &Modules,
    ) -> Result<()> {
        self.create_cluster_infrastructure(client, workload, namespace, name, modules)
            .await?;
        create(client, &ClusterBuilder::new(namespace, name).build()).await?;
        Ok(())
    }

    /// What Cluster `name` needs besides itself: its WasmCluster served by
    /// `modules` and its kubeconfig Secret for `workload`.
    pub async fn create_cluster_infrastructure(
        &self,
        client: &Client,
        workload: &ApiServer,
        namespace: &str,
        name: &str,
        modules: &Modules,
    ) -> Result<()> {
        let kubeconfig = workload.kubeconfig_secret(namespace, name)?;
        self.create_cluster_objects(client, &kubeconfig, namespace, name, modules)
            .await
    }

    /// The same with `kubeconfig` as the Cluster's kubeconfig Secret.
    pub async fn create_cluster_objects(
        &self,
        client: &Client,
        kubeconfig: &Secret,
        namespace: &str,
        name: &str,
        modules: &Modules,
    ) -> Result<()> {
        create(client, kubeconfig).await?;
        let mut config = self.sim_config();
        config["controlPlaneHost"] = json!("127.0.0.1");
        create(
            client,
            &objects::wasm_cluster(namespace, name, &modules.infrastructure, config),
        )
        .await?;
        Ok(())
    }

    /// The kubeadm-bootstrap and sim-infrastructure configs for `modules`.
    pub fn providers(&self, modules: &Modules) -> Providers {
        Providers {
            bootstrap: (
                modules.bootstrap.clone(),
                serde_json::from_str(KUBEADM_JOIN_CONFIG).unwrap_or_default(),
            ),
            infrastructure: (modules.infrastructure.clone(), self.sim_config()),
        }
    }

    /// Creates MachinePool `name` of `cluster` with `replicas`, and its
    /// WasmBootstrapConfig and WasmMachinePool served by `modules`.
    pub async fn create_pool(
        &self,
        client: &Client,
        namespace: &str,
        name: &str,
        cluster: &str,
        replicas: i32,
        modules: &Modules,
    ) -> Result<()> {
        let pool = MachinePoolBuilder::new(namespace, name, cluster)
            .replicas(replicas)
            .build();
        create_pool(client, &pool, &self.providers(modules)).await
    }
}

/// The modules a pool's provider objects name, each with its config.
#[derive(Clone, Debug)]
pub struct Providers {
    /// The WasmBootstrapConfig's module and config.
    pub bootstrap: (String, Value),
    /// The WasmMachinePool's module and config.
    pub infrastructure: (String, Value),
}

/// Creates `pool`, and its WasmBootstrapConfig and WasmMachinePool of the
/// same name served by `providers`.
pub async fn create_pool(client: &Client, pool: &MachinePool, providers: &Providers) -> Result<()> {
    let namespace = pool.metadata.namespace.as_deref().unwrap_or_default();
    let name = pool.metadata.name.as_deref().unwrap_or_default();
    create_pool_providers(client, namespace, name, providers).await?;
    create(client, pool).await?;
    Ok(())
}

/// Creates the WasmBootstrapConfig and WasmMachinePool `name` served by
/// `providers`, for a MachinePool of the same name.
pub async fn create_pool_providers(
    client: &Client,
    namespace: &str,
    name: &str,
    providers: &Providers,
) -> Result<()> {
    let (bootstrap, config) = &providers.bootstrap;
    create(
        client,
        &objects::bootstrap_config(namespace, name, bootstrap, config.clone()),
    )
    .await?;
    let (infrastructure, config) = &providers.infrastructure;
    create(
        client,
        &objects::wasm_machine_pool(namespace, name, infrastructure, config.clone()),
    )
    .await?;
    Ok(())
}

/// Waits until Cluster `name` is in `phase` (`Provisioned`, say).
///
/// # Panics
///
/// As [`wait_for`], or if the Cluster is deleted meanwhile.
pub async fn wait_for_cluster(api: &Api<Cluster>, name: &str, phase: &str) -> Cluster {
    wait_for(api, name, &format!("the Cluster is {phase}"), |c| {
        c.and_then(|c| c.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some(phase)
    })
    .await
    .unwrap_or_else(|| panic!("Cluster {name} disappeared"))
}

/// Waits until ProviderModule `name` is in `phase` (`Ready`, `Failed`).
///
/// # Panics
///
/// As [`wait_for`], or if the module is deleted meanwhile.
pub async fn wait_for_module(api: &Api<ProviderModule>, name: &str, phase: &str) -> ProviderModule {
    wait_for(
        api,
        name,
        &format!("the module is {phase}"),
        |m: Option<&ProviderModule>| {
            m.and_then(|m| m.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some(phase)
        },
    )
    .await
    .unwrap_or_else(|| panic!("ProviderModule {name} disappeared"))
}

/// Waits until pool `name` is in `phase` with `ready` Ready Nodes.
///
/// # Panics
///
/// As [`wait_for`], or if the pool is deleted meanwhile.
pub async fn wait_for_pool(
    api: &Api<MachinePool>,
    name: &str,
    phase: &str,
    ready: i32,
) -> MachinePool {
    wait_for(
        api,
        name,
        &format!("phase {phase} with {ready} ready replicas"),
        |p: Option<&MachinePool>| {
            p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                s.phase.as_deref() == Some(phase)
                    && s.ready_replicas == Some(ready)
                    && i32::try_from(s.node_refs.len()) == Ok(ready)
            })
        },
    )
    .await
    .unwrap_or_else(|| panic!("MachinePool {name} disappeared"))
}

/// Waits until an Event with `reason` about object `name` exists in
/// `namespace` (any, if empty), and returns its note.
///
/// # Panics
///
/// After [`WAIT`], listing the Events about the object seen until then.
pub async fn wait_for_event(client: &Client, namespace: &str, name: &str, reason: &str) -> String {
    use futures::StreamExt as _;
    use k8s_openapi::api::events::v1::Event;
    use kube::runtime::{WatchStreamExt as _, watcher};

    // Events about cluster-scoped objects: in any namespace.
    let api: Api<Event> = if namespace.is_empty() {
        Api::all(client.clone())
    } else {
        Api::namespaced(client.clone(), namespace)
    };
    let mut seen = Vec::new();
    let mut events = watcher(api, watcher::Config::default())
        .applied_objects()
        .boxed();
    let found = tokio::time::timeout(WAIT, async {
        while let Some(Ok(event)) = events.next().await {
            if event.regarding.as_ref().and_then(|r| r.name.as_deref()) != Some(name) {
                continue;
            }
            if event.reason.as_deref() == Some(reason) {
                return Some(event.note.unwrap_or_default());
            }
            seen.push(event.reason.unwrap_or_default());
        }
        None
    })
    .await;
    match found {
        Ok(Some(note)) => note,
        _ => panic!("no {reason} Event about {name} within {WAIT:?}; saw {seen:?}"),
    }
}

/// Waits until WasmBootstrapConfig `name`'s Ready condition has `reason`,
/// and returns its message.
///
/// # Panics
///
/// If it does not within the wait.
pub async fn config_ready_reason(apis: &Apis, name: &str, reason: &str) -> String {
    let ready = |c: &WasmBootstrapConfig| {
        c.status
            .as_ref()
            .and_then(|s| condition(&s.common.conditions, "Ready"))
    };
    let config = wait_for(
        &apis.configs,
        name,
        &format!("Ready has reason {reason}"),
        |c: Option<&WasmBootstrapConfig>| c.and_then(ready).is_some_and(|(_, r, _)| r == reason),
    )
    .await;
    match config.as_ref().and_then(ready) {
        Some((_, _, message)) => message,
        None => panic!("{name} has no Ready condition"),
    }
}

/// The condition of `type_` in `conditions`, as (status, reason, message).
pub fn condition(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    type_: &str,
) -> Option<(String, String, String)> {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// One controller test's world: its own namespace and provider modules on
/// the shared control plane, cloud and operator.
pub struct Scenario {
    /// The control plane.
    pub env: &'static crate::TestEnv,
    /// The operator and the cloud.
    pub stack: &'static Stack,
    /// An admin client of the management server.
    pub client: Client,
    /// The test's namespace.
    pub ns: String,
    /// Its typed APIs.
    pub apis: Apis,
    /// Its kubeadm-bootstrap and sim-infrastructure modules.
    pub modules: Modules,
}

impl Scenario {
    /// A namespace `<prefix>-<random>` with its modules in service.
    ///
    /// # Panics
    ///
    /// If the environment cannot start or the modules do not load.
    pub async fn new(prefix: &str) -> Self {
        let env = crate::TestEnv::shared().await.expect("control plane");
        let stack = Stack::shared().await.expect("operator and cloud");
        let client = env.management().client().expect("client");
        let ns = env
            .management()
            .create_namespace(prefix)
            .await
            .expect("namespace");
        let modules = stack.objects.modules(&client, &ns).await.expect("modules");
        Self {
            apis: Apis::new(&client, &ns),
            env,
            stack,
            client,
            ns,
            modules,
        }
    }

    /// The same, with Cluster `cluster` of the shared workload server.
    ///
    /// # Panics
    ///
    /// As [`Scenario::new`], or if the Cluster cannot be created.
    pub async fn with_cluster(prefix: &str, cluster: &str) -> Self {
        let scenario = Self::new(prefix).await;
        scenario.cluster(cluster).await;
        scenario
    }

    /// Creates Cluster `name` of the shared workload server, served by this
    /// scenario's modules.
    ///
    /// # Panics
    ///
    /// If the Cluster cannot be created.
    pub async fn cluster(&self, name: &str) {
        let workload = self.env.workload().expect("workload server");
        self.stack
            .objects
            .create_cluster(&self.client, workload, &self.ns, name, &self.modules)
            .await
            .expect("cluster");
    }

    /// Creates pool `name` of `cluster` with `replicas`, served by this scenario's modules.
    ///
    /// # Panics
    ///
    /// If the objects cannot be created.
    pub async fn pool(&self, name: &str, cluster: &str, replicas: i32) {
        self.stack
            .objects
            .create_pool(
                &self.client,
                &self.ns,
                name,
                cluster,
                replicas,
                &self.modules,
            )
            .await
            .expect("pool");
    }
}

/// The typed APIs of one namespace.
#[derive(Clone)]
pub struct Apis {
    /// Clusters.
    pub clusters: Api<Cluster>,
    /// MachinePools.
    pub pools: Api<MachinePool>,
    /// WasmBootstrapConfigs.
    pub configs: Api<WasmBootstrapConfig>,
    /// WasmMachinePools.
    pub infra_pools: Api<WasmMachinePool>,
    /// WasmClusters.
    pub infra_clusters: Api<WasmCluster>,
}

impl Apis {
    /// The APIs of `namespace`.
    pub fn new(client: &Client, namespace: &str) -> Self {
        Self {
            clusters: Api::namespaced(client.clone(), namespace),
            pools: Api::namespaced(client.clone(), namespace),
            configs: Api::namespaced(client.clone(), namespace),
            infra_pools: Api::namespaced(client.clone(), namespace),
            infra_clusters: Api::namespaced(client.clone(), namespace),
        }
    }
}

/// The API of `kind` (`Cluster`, `MachinePool`) in `cluster.x-k8s.io/v1beta1`.
pub fn v1beta1_api(client: &Client, namespace: &str, kind: &str) -> Api<DynamicObject> {
    let resource =
        ApiResource::from_gvk(&GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", kind));
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// Creates `object`, a `cluster.x-k8s.io/v1beta1` manifest.
pub async fn create_v1beta1(
    client: &Client,
    namespace: &str,
    object: &Value,
) -> Result<DynamicObject> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let object: DynamicObject = serde_json::from_value(object.clone())
        .map_err(|e| Error::Manifest(format!("a v1beta1 {kind}: {e}")))?;
    Ok(v1beta1_api(client, namespace, kind)
        .create(&PostParams::default(), &object)
        .await?)
}

/// A v1beta1 reference to capwasm's provider kind `kind` of group
/// `<prefix>.cluster.x-k8s.io`: apiVersion, kind, name.
fn v1beta1_ref(prefix: &str, kind: &str, name: &str) -> Value {
    let version = capwasm::api::provider::VERSION;
    json!({ "apiVersion": format!("{prefix}.cluster.x-k8s.io/{version}"), "kind": kind, "name": name })
}

/// Cluster `name` as a v1beta1 manifest: a reference with apiVersion,
/// kind and name to its WasmCluster.
pub fn v1beta1_cluster(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Cluster",
        "metadata": { "name": name, "namespace": namespace },
        "spec": { "infrastructureRef": v1beta1_ref("infrastructure", "WasmCluster", name)},
    })
}

/// MachinePool `name` of `cluster` as a v1beta1 manifest, with the
/// cluster-name label and the replicas written out as users do, and
/// references to its WasmBootstrapConfig and WasmMachinePool of the same
/// name; no `dataSecretName`.
pub fn v1beta1_pool(namespace: &str, name: &str, cluster: &str, replicas: i32) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "MachinePool",
        "metadata": {
            "name": name, "namespace": namespace,
            "labels": { "cluster.x-k8s.io/cluster-name": cluster },
        },
        "spec": {
            "clusterName": cluster,
            "replicas": replicas,
            "template": { "spec": {
                "clusterName": cluster,
                "bootstrap": { "configRef": v1beta1_ref("bootstrap", "WasmBootstrapConfig", name)},
                "infrastructureRef": v1beta1_ref("infrastructure", "WasmMachinePool", name),
            }},
        },
    })
}

/// Makes [`CREDENTIALS_NAMESPACE`], where the operator reads credentials,
/// verification keys and unpinned component ConfigMaps from.
pub async fn credentials_namespace(client: &Client) {
    // Another test may have made it already.
    let _ = namespace(client, CREDENTIALS_NAMESPACE).await;
}

/// Creates Namespace `name`.
///
/// # Errors
///
/// If it is refused (it exists, say).
pub async fn namespace(client: &Client, name: &str) -> Result<()> {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await?;
    Ok(())
}

/// Writes the credentials Secret `name` (in [`CREDENTIALS_NAMESPACE`], made
/// if missing) with `entries`, replacing what it held.
///
/// # Panics
///
/// If the API server refuses.
pub async fn credentials_secret(client: &Client, name: &str, entries: &[(&str, &str)]) {
    credentials_namespace(client).await;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some(
            entries
                .iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    };
    let params = PatchParams::apply("request-auth-test").force();
    Api::<Secret>::namespaced(client.clone(), CREDENTIALS_NAMESPACE)
        .patch(name, &params, &Patch::Apply(&secret))
        .await
        .unwrap();
}
