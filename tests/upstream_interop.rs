//! Provider mode, proven by upstream's own manager: Cluster API v1.14.2's
//! core controllers (built from its Go module, its CRDs installed) run the
//! Cluster and MachinePool, and `capwasm run --controllers providers` runs
//! only capwasm's provider kinds beside it, with nothing of capwasm's core.

use std::path::PathBuf;

use capwasm::api::{MachinePool, WasmMachinePool};
use capwasm::simcloud::{self, InstanceState};
use capwasm::testing::objects::MachinePoolBuilder;
use k8s_openapi::api::core::v1::Node;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kube::{Api, Client};
use serde_json::json;
use testenv::flows::{
    Apis, Modules, Objects, condition, create_pool, create_pool_providers, scale, wait_for,
    wait_for_cluster, wait_for_pool,
};
use testenv::operator::OperatorProcess;
use testenv::upstream::{UpstreamBuild, UpstreamManager};
use testenv::{Options, TestEnv};

/// capwasm's CRDs a provider-mode install has: the provider kinds and
/// ProviderModule, not Cluster or MachinePool.
fn provider_crds() -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../crds"));
    [
        "bootstrap.cluster.x-k8s.io_wasmbootstrapconfigs.yaml",
        "infrastructure.cluster.x-k8s.io_wasmclusters.yaml",
        "infrastructure.cluster.x-k8s.io_wasmmachinepools.yaml",
        "runtime.capwasm.dev_providermodules.yaml",
    ]
    .iter()
    .map(|file| dir.join(file))
    .collect()
}

/// Upstream's manager and `capwasm run --controllers providers` on an API
/// server of their own, a workload server, and a simulated cloud.
struct ProviderMode {
    env: TestEnv,
    cloud: simcloud::RunningSimCloud,
    objects: Objects,
    modules: Modules,
    client: Client,
    ns: String,
    _upstream: UpstreamManager,
    _operator: OperatorProcess,
}

impl ProviderMode {
    /// Creates Cluster `name` (v1beta2) served by the modules.
    async fn cluster(&self, name: &str) {
        let workload = self.env.workload().unwrap();
        self.objects
            .create_cluster(&self.client, workload, &self.ns, name, &self.modules)
            .await
            .unwrap();
    }

    async fn start(prefix: &str) -> Self {
        let build = UpstreamBuild::locate().unwrap();
        let mut crds = vec![build.crds.clone()];
        crds.extend(provider_crds());
        let env = TestEnv::start(Options {
            crds,
            ..Options::default()
        })
        .await
        .unwrap();
        let upstream = UpstreamManager::start(&build, env.management())
            .await
            .unwrap();
        let client = env.management().client().unwrap();
        let ns = env.management().create_namespace(prefix).await.unwrap();
        let (cloud, objects) = Objects::start_cloud(env.workload().unwrap().client().unwrap())
            .await
            .unwrap();
        let operator = OperatorProcess::start(
            env.management(),
            &ns,
            "providers",
            &["--controllers=providers"],
        )
        .await;
        let modules = objects.modules(&client, &ns).await.unwrap();
        Self {
            env,
            cloud,
            objects,
            modules,
            client,
            ns,
            _upstream: upstream,
            _operator: operator,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_core_runs_scales_and_deletes_a_pool_of_capwasm_providers() {
    let mode = ProviderMode::start("upstream").await;
    let (client, ns, modules) = (&mode.client, &mode.ns, &mode.modules);
    mode.cluster("c1").await;
    let apis = Apis::new(client, ns);
    wait_for_cluster(&apis.clusters, "c1", "Provisioned").await;
    mode.objects
        .create_pool(client, ns, "pool", "c1", 3, modules)
        .await
        .unwrap();
    let pool = wait_for_pool(&apis.pools, "pool", "Running", 3).await;
    assert_eq!(pool.spec.provider_id_list.len(), 3);
    // Upstream's core did it: only its Cluster controller probes the
    // workload cluster's API server as a condition of its own.
    let cluster = apis.clusters.get("c1").await.unwrap();
    let conditions = cluster.status.unwrap_or_default().conditions;
    assert!(
        condition(&conditions, "RemoteConnectionProbe").is_some(),
        "{conditions:?}"
    );

    // Scaled as `kubectl scale` does, through the scale subresource.
    for replicas in [5, 1] {
        scale(&apis.pools, "pool", replicas).await.unwrap();
        let pool = wait_for_pool(&apis.pools, "pool", "Running", replicas).await;
        assert_eq!(
            pool.spec.provider_id_list.len(),
            usize::try_from(replicas).unwrap()
        );
    }

    // Deleting the Cluster leaves nothing: objects, instances, Nodes.
    let nodes: Api<Node> = Api::all(mode.env.workload().unwrap().client().unwrap());
    let node_names: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(!node_names.is_empty());
    apis.clusters
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&apis.clusters, "c1", "the Cluster is gone", |c| c.is_none()).await;
    assert!(apis.pools.get_opt("pool").await.unwrap().is_none());
    assert!(apis.configs.get_opt("pool").await.unwrap().is_none());
    assert!(apis.infra_pools.get_opt("pool").await.unwrap().is_none());
    assert!(apis.infra_clusters.get_opt("c1").await.unwrap().is_none());
    let live: Vec<_> = mode
        .cloud
        .cloud()
        .instances()
        .into_iter()
        .filter(|i| i.instance.state != InstanceState::Terminating)
        .collect();
    assert!(live.is_empty(), "instances left in the cloud: {live:?}");
    for name in node_names {
        wait_for(&nodes, &name, "the Node is deleted", |n| n.is_none()).await;
    }
}

/// `object` in `cluster.x-k8s.io/v1beta1`, as a user's manifest has it.
async fn create_v1beta1(client: &Client, ns: &str, kind: &str, object: serde_json::Value) {
    let resource =
        ApiResource::from_gvk(&GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", kind));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1beta1_manifests_run_under_upstream_core_through_its_conversion_webhook() {
    let mode = ProviderMode::start("v1beta1").await;
    let (client, ns) = (&mode.client, &mode.ns);
    let (workload, modules) = (mode.env.workload().unwrap(), &mode.modules);
    mode.objects
        .create_cluster_infrastructure(client, workload, ns, "c1", modules)
        .await
        .unwrap();
    // v1beta1 references: apiVersion, kind, name.
    let infrastructure = "infrastructure.cluster.x-k8s.io/v1alpha1";
    create_v1beta1(
        client,
        ns,
        "Cluster",
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "Cluster",
            "metadata": { "name": "c1", "namespace": ns },
            "spec": { "infrastructureRef": {
                "apiVersion": infrastructure, "kind": "WasmCluster", "name": "c1",
            }},
        }),
    )
    .await;
    create_pool_providers(client, ns, "pool", &mode.objects.providers(modules))
        .await
        .unwrap();
    // What upstream's defaulting webhook would add is written out: the
    // cluster-name label and the replicas.
    create_v1beta1(
        client,
        ns,
        "MachinePool",
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachinePool",
            "metadata": {
                "name": "pool", "namespace": ns,
                "labels": { "cluster.x-k8s.io/cluster-name": "c1" },
            },
            "spec": {
                "clusterName": "c1",
                "replicas": 2,
                "template": { "spec": {
                    "clusterName": "c1",
                    "bootstrap": { "configRef": {
                        "apiVersion": "bootstrap.cluster.x-k8s.io/v1alpha1",
                        "kind": "WasmBootstrapConfig", "name": "pool",
                    }},
                    "infrastructureRef": {
                        "apiVersion": infrastructure, "kind": "WasmMachinePool", "name": "pool",
                    },
                }},
            },
        }),
    )
    .await;

    // Read back in v1beta2, converted by upstream's webhook, and Running.
    let apis = Apis::new(client, ns);
    let pool = wait_for_pool(&apis.pools, "pool", "Running", 2).await;
    assert_eq!(pool.spec.provider_id_list.len(), 2);
    let reference = &pool.spec.template.spec.infrastructure_ref;
    assert_eq!(
        (reference.api_group.as_str(), reference.kind.as_str()),
        ("infrastructure.cluster.x-k8s.io", "WasmMachinePool")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_provider_config_is_surfaced_by_upstream_on_the_pool_and_fixed_in_place() {
    let mode = ProviderMode::start("badconfig").await;
    let (client, ns) = (&mode.client, &mode.ns);
    mode.cluster("c1").await;
    let mut providers = mode.objects.providers(&mode.modules);
    providers.infrastructure.1["region"] = json!("Not A Region!");
    let pool = MachinePoolBuilder::new(ns, "pool", "c1")
        .replicas(1)
        .build();
    create_pool(client, &pool, &providers).await.unwrap();

    // Upstream v1.14 mirrors the provider object's Ready condition into the
    // pool's v1beta1 InfrastructureReady (`status.deprecated.v1beta1`); its
    // v1beta2 conditions on a MachinePool are only Paused. capwasm's core
    // has InfrastructureReady among the v1beta2 ones.
    let resource = ApiResource::erase::<MachinePool>(&());
    let pools: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    wait_for(
        &pools,
        "pool",
        "v1beta1 InfrastructureReady names $.region",
        |p: Option<&DynamicObject>| {
            p.and_then(|p| p.data.pointer("/status/deprecated/v1beta1/conditions"))
                .and_then(|c| c.as_array())
                .is_some_and(|conditions| {
                    conditions.iter().any(|c| {
                        c["type"] == "InfrastructureReady"
                            && c["status"] == "False"
                            && c["message"]
                                .as_str()
                                .is_some_and(|m| m.contains("$.region"))
                    })
                })
        },
    )
    .await;
    let apis = Apis::new(client, ns);
    let fixed = json!({ "spec": { "config": { "region": "local-1" } } });
    apis.infra_pools
        .patch("pool", &PatchParams::default(), &Patch::Merge(fixed))
        .await
        .unwrap();
    wait_for_pool(&apis.pools, "pool", "Running", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_cluster_holds_its_pool_under_upstream_until_unpaused() {
    let mode = ProviderMode::start("paused").await;
    let (client, ns) = (&mode.client, &mode.ns);
    mode.cluster("c1").await;
    mode.objects
        .create_pool(client, ns, "pool", "c1", 1, &mode.modules)
        .await
        .unwrap();
    let apis = Apis::new(client, ns);
    wait_for_pool(&apis.pools, "pool", "Running", 1).await;

    let pause = |paused: bool| json!({ "spec": { "paused": paused } });
    apis.clusters
        .patch("c1", &PatchParams::default(), &Patch::Merge(pause(true)))
        .await
        .unwrap();
    // Scaled while paused: upstream has seen the new replicas (its Paused
    // condition is at the pool's new generation) and capwasm's provider
    // object says it is paused; the cloud got no new instance.
    scale(&apis.pools, "pool", 2).await.unwrap();
    let generation = apis.pools.get("pool").await.unwrap().metadata.generation;
    wait_for(
        &apis.pools,
        "pool",
        "upstream's pool is Paused at the scaled generation",
        |p: Option<&MachinePool>| {
            p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "Paused" && c.status == "True" && c.observed_generation == generation
                })
            })
        },
    )
    .await;
    wait_for(
        &apis.infra_pools,
        "pool",
        "the WasmMachinePool is Paused",
        |p: Option<&WasmMachinePool>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| condition(&s.common.conditions, "Paused"))
                .is_some_and(|(status, _, _)| status == "True")
        },
    )
    .await;
    let instances = mode.cloud.cloud().instances().len();
    assert_eq!(instances, 1, "no instance made while paused");

    apis.clusters
        .patch("c1", &PatchParams::default(), &Patch::Merge(pause(false)))
        .await
        .unwrap();
    wait_for_pool(&apis.pools, "pool", "Running", 2).await;
}
