//! Provider mode, proven by upstream's own manager: Cluster API v1.14.2's
//! core controllers (built from its Go module, its CRDs installed) run the
//! Cluster and MachinePool, and `capwasm run --controllers providers` runs
//! only capwasm's provider kinds beside it, with nothing of capwasm's core.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use capwasm::api::{Cluster, MachinePool, WasmBootstrapConfig, WasmCluster, WasmMachinePool};
use capwasm::simcloud::InstanceState;
use capwasm::testing::objects::MachinePoolBuilder;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use testenv::flows::{
    Apis, condition, create_pool, scale, wait_for, wait_for_cluster, wait_for_pool,
};
use testenv::install::{Core, Identity, Install};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_core_runs_scales_and_deletes_a_pool_of_capwasm_providers() {
    let mode = Install::start("upstream").await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1beta1_manifests_run_under_upstream_core_through_its_conversion_webhook() {
    let mode = Install::start("v1beta1").await;
    let (client, ns) = (&mode.client, &mode.ns);
    mode.v1beta1_cluster_and_pool("c1", "pool").await;

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
    let mode = Install::start("badconfig").await;
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
    let mode = Install::start("paused").await;
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

/// Without a controlPlaneRef, upstream counts the control plane initialized
/// once a control-plane Machine has a Node, which a Cluster of MachinePools
/// never has: its Cluster stays `Available=Unknown`. capwasm's workload
/// clusters bring their own control plane; it is initialized once the API
/// server of the Cluster's kubeconfig answers, and the Cluster is Available.
const CONTROL_PLANE: &str =
    "control plane initialized by its API server answering, not by a Machine";
/// Summaries of Machines (MachineDeployments, MachineSets, control-plane
/// Machines, MachineHealthChecks), kinds capwasm does not serve.
const MACHINES: &str = "summary of Machines, which capwasm does not have";
/// Upstream's cluster cache probes every workload API server all the time;
/// capwasm reaches it only for a pool's Nodes, and says when it cannot on
/// the pool (`ReplicasReady`/`WorkloadClusterUnreachable`).
const PROBE: &str = "no standing connection probe; unreachable workload clusters show on the pools";
/// Upstream v1.14's MachinePool controller writes only `Paused` of the
/// v1beta2 conditions its API declares; capwasm writes them, and
/// `ReplicasReady` for the Nodes (the v1beta1 name).
const POOL_CONDITIONS: &str =
    "v1beta2 MachinePool conditions upstream declares but does not write yet";

/// Differences between upstream's core and capwasm's in what a user sees of
/// a Running pool, each deliberate and why. The paths are those of
/// [`observe`].
const DEVIATIONS: &[(&str, &str)] = &[
    ("Cluster.status.conditions[Available]", CONTROL_PLANE),
    (
        "Cluster.status.conditions[ControlPlaneAvailable]",
        CONTROL_PLANE,
    ),
    (
        "Cluster.status.conditions[ControlPlaneInitialized]",
        CONTROL_PLANE,
    ),
    (
        "Cluster.status.initialization.controlPlaneInitialized",
        CONTROL_PLANE,
    ),
    (
        "Cluster.status.conditions[ControlPlaneMachinesReady]",
        MACHINES,
    ),
    (
        "Cluster.status.conditions[ControlPlaneMachinesUpToDate]",
        MACHINES,
    ),
    ("Cluster.status.conditions[WorkerMachinesReady]", MACHINES),
    (
        "Cluster.status.conditions[WorkerMachinesUpToDate]",
        MACHINES,
    ),
    ("Cluster.status.conditions[RollingOut]", MACHINES),
    ("Cluster.status.conditions[Remediating]", MACHINES),
    ("Cluster.status.conditions[RemoteConnectionProbe]", PROBE),
    (
        "Cluster.status.deprecated.v1beta1.conditions[ControlPlaneInitialized]",
        CONTROL_PLANE,
    ),
    ("MachinePool.status.conditions[Available]", POOL_CONDITIONS),
    (
        "MachinePool.status.conditions[BootstrapConfigReady]",
        POOL_CONDITIONS,
    ),
    ("MachinePool.status.conditions[Deleting]", POOL_CONDITIONS),
    (
        "MachinePool.status.conditions[InfrastructureReady]",
        POOL_CONDITIONS,
    ),
    (
        "MachinePool.status.conditions[ReplicasReady]",
        POOL_CONDITIONS,
    ),
    // A pool's instances are Machines once its Cluster's control plane is
    // initialized: capwasm's core counts it so, upstream's does not here.
    (
        "WasmMachinePool.status.infrastructureMachineKind",
        CONTROL_PLANE,
    ),
];

/// What a user can observe of Cluster `c1`, pool `pool` and their provider
/// objects, as path → value, without what differs by run (uids, times,
/// Node names, ports): each Node reference is checked against the
/// providerID at its index instead.
async fn observe(install: &Install) -> BTreeMap<String, String> {
    let client = &install.client;
    let nodes: Api<Node> = Api::all(install.env.workload().unwrap().client().unwrap());
    let mut seen = BTreeMap::new();
    let objects = [
        (ApiResource::erase::<Cluster>(&()), "c1"),
        (ApiResource::erase::<MachinePool>(&()), "pool"),
        (ApiResource::erase::<WasmCluster>(&()), "c1"),
        (ApiResource::erase::<WasmMachinePool>(&()), "pool"),
        (ApiResource::erase::<WasmBootstrapConfig>(&()), "pool"),
    ];
    for (resource, name) in objects {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &install.ns, &resource);
        let Some(object) = api.get_opt(name).await.unwrap() else {
            seen.insert(resource.kind.clone(), "absent".into());
            continue;
        };
        let kind = &resource.kind;
        let meta = &object.metadata;
        for (key, value) in meta.labels.iter().flatten() {
            seen.insert(format!("{kind}.metadata.labels.{key}"), value.clone());
        }
        for key in meta.annotations.iter().flatten().map(|(k, _)| k) {
            seen.insert(format!("{kind}.metadata.annotations.{key}"), "set".into());
        }
        let mut finalizers = meta.finalizers.clone().unwrap_or_default();
        finalizers.sort();
        seen.insert(format!("{kind}.metadata.finalizers"), finalizers.join(","));
        for owner in meta.owner_references.iter().flatten() {
            seen.insert(
                format!("{kind}.metadata.ownerReferences.{}", owner.kind),
                format!(
                    "{} controller={:?} blockOwnerDeletion={:?}",
                    owner.api_version, owner.controller, owner.block_owner_deletion
                ),
            );
        }
        let generation = meta.generation;
        let mut data = object.data.clone();
        if let Some(generation_seen) = data.pointer_mut("/status/observedGeneration") {
            let current = generation_seen.as_i64() == generation;
            *generation_seen = json!(if current { "current" } else { "behind" });
        }
        if let Some(port) = data.pointer_mut("/spec/controlPlaneEndpoint/port") {
            *port = json!("set");
        }
        let ids = data
            .pointer_mut("/spec/providerIDList")
            .map(std::mem::take)
            .unwrap_or_default();
        let ids: Vec<String> = serde_json::from_value(ids).unwrap_or_default();
        if !ids.is_empty() {
            seen.insert(
                format!("{kind}.spec.providerIDList"),
                format!("{} IDs", ids.len()),
            );
        }
        if let Some(refs) = data.pointer_mut("/status/nodeRefs").map(std::mem::take) {
            let refs: Vec<ObjectReference> = serde_json::from_value(refs).unwrap();
            for (i, node) in refs.iter().enumerate() {
                let node_id = nodes
                    .get_opt(node.name.as_deref().unwrap_or_default())
                    .await
                    .unwrap()
                    .and_then(|n| n.spec)
                    .and_then(|s| s.provider_id);
                let at_index = node_id.is_some() && node_id.as_ref() == ids.get(i);
                seen.insert(
                    format!("{kind}.status.nodeRefs[{i}]"),
                    format!(
                        "{} {} the Node of providerIDList[{i}]: {at_index}",
                        node.api_version.as_deref().unwrap_or_default(),
                        node.kind.as_deref().unwrap_or_default(),
                    ),
                );
            }
        }
        for part in ["spec", "status"] {
            if let Some(value) = data.get(part) {
                flatten(&format!("{kind}.{part}"), value, &mut seen);
            }
        }
    }
    // What each install names its own way: its namespace (in module
    // names), its cloud's address, the cloud's instance IDs, and the digest
    // of the pool's config that names that address.
    for (path, value) in &mut seen {
        if path.contains(".status.instances[") || path.ends_with(".status.capacityRevision") {
            *value = "set".into();
        }
        *value = value
            .replace(&install.ns, "<namespace>")
            .replace(&install.objects.cloud_endpoint, "<cloud>");
    }
    seen
}

/// Leaves of `value` under `path`; conditions as type → status, without
/// times, reasons or messages.
fn flatten(path: &str, value: &Value, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(fields) => {
            for (key, value) in fields {
                flatten(&format!("{path}.{key}"), value, out);
            }
        }
        Value::Array(items) if path.ends_with("conditions") => {
            for item in items {
                out.insert(
                    format!("{path}[{}]", item["type"].as_str().unwrap_or_default()),
                    item["status"].as_str().unwrap_or_default().into(),
                );
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                flatten(&format!("{path}[{i}]"), item, out);
            }
        }
        leaf => {
            out.insert(path.into(), leaf.to_string());
        }
    }
}

/// `observe`, once it gives the same answer three times a second apart:
/// both cores at rest.
async fn observe_at_rest(install: &Install) -> BTreeMap<String, String> {
    let mut last = observe(install).await;
    let mut same = 0;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = observe(install).await;
        same = if now == last { same + 1 } else { 0 };
        if same == 2 {
            return now;
        }
        last = now;
    }
    panic!("never at rest; last seen {last:#?}")
}

/// The same inputs, a Cluster and a 3-replica pool, under upstream's core
/// and under capwasm's: every observable difference is listed in
/// [`DEVIATIONS`] with its reason, and every listed one still happens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_core_and_capwasm_core_end_in_the_same_observable_state() {
    let mut states = Vec::new();
    for core in [Core::Upstream, Core::Capwasm] {
        let install = Install::with_core("differential", core).await;
        install.cluster("c1").await;
        let (client, ns) = (&install.client, &install.ns);
        install
            .objects
            .create_pool(client, ns, "pool", "c1", 3, &install.modules)
            .await
            .unwrap();
        let apis = Apis::new(client, ns);
        wait_for_pool(&apis.pools, "pool", "Running", 3).await;
        states.push(observe_at_rest(&install).await);
    }
    let (upstream, capwasm) = (&states[0], &states[1]);
    let paths: BTreeSet<&String> = upstream.keys().chain(capwasm.keys()).collect();
    let differences: BTreeMap<&str, (Option<&String>, Option<&String>)> = paths
        .into_iter()
        .filter(|path| upstream.get(*path) != capwasm.get(*path))
        .map(|path| (path.as_str(), (upstream.get(path), capwasm.get(path))))
        .collect();
    let listed: BTreeSet<&str> = DEVIATIONS.iter().map(|(path, _)| *path).collect();
    let show = |v: Option<&String>| v.map_or("-", String::as_str).to_owned();
    let unlisted: Vec<String> = differences
        .iter()
        .filter(|(path, _)| !listed.contains(*path))
        .map(|(path, (up, us))| format!("{path}: upstream {} capwasm {}", show(*up), show(*us)))
        .collect();
    let gone: Vec<_> = listed
        .iter()
        .filter(|path| !differences.contains_key(*path))
        .collect();
    assert!(
        unlisted.is_empty() && gone.is_empty(),
        "differences not listed:\n{}\nlisted but not seen: {gone:?}",
        unlisted.join("\n")
    );
}

/// The operator as `deploy/provider-mode/` runs it — its ServiceAccount,
/// only its roles — beside upstream's core: a pool to Running, scaled, and
/// its Cluster deleted with nothing left, and no request of the operator's
/// forbidden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provider_mode_roles_are_all_the_operator_needs_beside_upstream() {
    let mode = Install::with("rbac", Core::Upstream, Identity::ProviderModeRoles).await;
    let (client, ns) = (&mode.client, &mode.ns);
    mode.cluster("c1").await;
    mode.objects
        .create_pool(client, ns, "pool", "c1", 2, &mode.modules)
        .await
        .unwrap();
    let apis = Apis::new(client, ns);
    wait_for_pool(&apis.pools, "pool", "Running", 2).await;
    scale(&apis.pools, "pool", 1).await.unwrap();
    wait_for_pool(&apis.pools, "pool", "Running", 1).await;
    apis.clusters
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&apis.clusters, "c1", "the Cluster is gone", |c| c.is_none()).await;
    assert!(apis.infra_pools.get_opt("pool").await.unwrap().is_none());
    assert!(apis.configs.get_opt("pool").await.unwrap().is_none());
    let refused = mode.operator.refusals();
    assert!(
        refused.is_empty(),
        "a rule of deploy/provider-mode/ is missing:\n{}",
        refused.join("\n")
    );
}
