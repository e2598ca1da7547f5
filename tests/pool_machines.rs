//! MachinePool Machines: each instance of a provider that removes instances
//! one by one (WIT 0.1.2 `pool-machines`, which sim-infrastructure exports)
//! is a WasmMachine and a Machine, made by either core. Deleting a Machine
//! drains its Node (evictions a PodDisruptionBudget may refuse) and then
//! removes exactly its instance, which the pool replaces; a scale-down
//! removes the instances whose Machines carry `cluster.x-k8s.io/delete-machine`
//! first.

use std::collections::BTreeSet;
use std::time::Duration;

use capwasm::api::provider::{InstanceState, InstanceStatus};
use capwasm::api::{WasmMachine, WasmMachinePool};
use capwasm::simcloud::{InstanceState as CloudState, RunningSimCloud, SimCloud};
use k8s_openapi::api::core::v1::Node;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use testenv::budget::{allow_one, pod_with_budget};
use testenv::flows::{
    Apis, WAIT, condition, eventually, scale, wait_for, wait_for_cluster, wait_for_event,
    wait_for_pool,
};
use testenv::install::{Core, Install};

const POOL_LABEL: &str = "cluster.x-k8s.io/pool-name=pool";

/// The pool's instances up, as its WasmMachinePool records them.
fn up(pool: &WasmMachinePool) -> Vec<InstanceStatus> {
    pool.status
        .as_ref()
        .map(|s| s.instances.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|i| i.state != InstanceState::Terminating)
        .collect()
}

fn ids<'a>(items: impl IntoIterator<Item = &'a String>) -> BTreeSet<String> {
    items.into_iter().cloned().collect()
}

/// Waits until the pool has `count` instances up, all running, each with
/// one provisioned WasmMachine reporting it, and no other WasmMachine.
async fn settled(
    machines: &Api<WasmMachine>,
    pools: &Api<WasmMachinePool>,
    count: usize,
) -> (Vec<WasmMachine>, Vec<InstanceStatus>) {
    eventually(WAIT, Duration::from_millis(250), || async {
        let pool = pools.get("pool").await.unwrap();
        let instances = up(&pool);
        let params = ListParams::default().labels(POOL_LABEL);
        let listed = machines.list(&params).await.unwrap().items;
        let reported = |m: &WasmMachine| {
            instances.iter().any(|i| {
                i.id == m.spec.instance_id
                    && i.state == InstanceState::Running
                    && m.spec.provider_id.as_deref() == Some(i.provider_id.as_str())
                    && m.status.as_ref().is_some_and(|s| {
                        s.ready
                            && s.initialization.as_ref().and_then(|i| i.provisioned) == Some(true)
                    })
            })
        };
        if instances.len() == count
            && listed.len() == count
            && listed
                .iter()
                .all(|m| reported(m) && m.metadata.deletion_timestamp.is_none())
        {
            Ok((listed, instances))
        } else {
            Err(format!(
                "never {count} instances each with its WasmMachine: instances {instances:#?}, WasmMachines {listed:#?}"
            ))
        }
    })
    .await
}

/// An install of `core` with Cluster `c1` and its pool `pool` Running with
/// 3 Nodes; the APIs of its namespace and its WasmMachines.
async fn pool_of_three(core: Core) -> (Install, Apis, Api<WasmMachine>, Writes) {
    let install = Install::with_core("machines", core).await;
    let (client, ns) = (&install.client, &install.ns);
    install.cluster("c1").await;
    let apis = Apis::new(client, ns);
    wait_for_cluster(&apis.clusters, "c1", "Provisioned").await;
    let writes = count_writes(Api::namespaced(client.clone(), ns));
    install
        .objects
        .create_pool(client, ns, "pool", "c1", 3, &install.modules)
        .await
        .unwrap();
    wait_for_pool(&apis.pools, "pool", "Running", 3).await;
    let machines = Api::namespaced(client.clone(), ns);
    (install, apis, machines, writes)
}

/// How many versions of WasmMachines were written, creations included.
type Writes = tokio::sync::watch::Receiver<usize>;

/// Starts counting the versions of the WasmMachines of `api` as they are
/// written (each creation, spec and status write is one).
fn count_writes(api: Api<WasmMachine>) -> Writes {
    use futures::StreamExt as _;
    use kube::runtime::{WatchStreamExt as _, watcher};
    let (tx, rx) = tokio::sync::watch::channel(0);
    tokio::spawn(async move {
        let mut versions = BTreeSet::new();
        let mut events = watcher(api, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(Ok(machine)) = events.next().await {
            if let Some(version) = machine.metadata.resource_version {
                versions.insert(version);
                let _ = tx.send(versions.len());
            }
        }
    });
    rx
}

/// The cloud's state of instance `id`, if it still lists it.
fn cloud_state(cloud: &RunningSimCloud, id: &str) -> Option<CloudState> {
    cloud
        .cloud()
        .instances()
        .into_iter()
        .find(|r| r.instance.id == id)
        .map(|r| r.instance.state)
}

/// Core's Machines in `namespace`.
fn machines_api(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "Machine"),
        "machines",
    );
    Api::namespaced_with(client.clone(), namespace, &resource)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_instance_is_a_wasm_machine_and_deleting_one_replaces_exactly_its_instance() {
    let (install, apis, machines, writes) = Box::pin(pool_of_three(Core::Capwasm)).await;
    let (three, instances) = settled(&machines, &apis.infra_pools, 3).await;
    // Creation, and status as the instance starts and runs: the cost of
    // Machines to a pool of 3.
    println!(
        "wasmmachine-writes-to-running (3 instances): {}",
        *writes.borrow()
    );

    let infra = apis.infra_pools.get("pool").await.unwrap();
    assert_eq!(
        infra
            .status
            .as_ref()
            .unwrap()
            .infrastructure_machine_kind
            .as_deref(),
        Some("WasmMachine")
    );
    for machine in &three {
        assert_eq!(
            machine
                .labels()
                .get("cluster.x-k8s.io/cluster-name")
                .map(String::as_str),
            Some("c1")
        );
        assert!(
            machine
                .owner_references()
                .iter()
                .any(|o| o.kind == "WasmMachinePool"
                    && Some(&o.uid) == infra.metadata.uid.as_ref()
                    && o.block_owner_deletion == Some(true)),
            "{:?}",
            machine.owner_references()
        );
        assert_eq!(
            machine.finalizers(),
            ["wasmmachine.infrastructure.cluster.x-k8s.io"]
        );
    }

    // Deleting a WasmMachine removes exactly its instance; the pool, still
    // at 3, makes another.
    let victim = three[1].clone();
    let victim_id = victim.spec.instance_id.clone();
    machines
        .delete(&victim.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    // A second delete of what is going changes nothing.
    machines
        .delete(&victim.name_any(), &DeleteParams::default())
        .await
        .ok();
    wait_for(&machines, &victim.name_any(), "its instance is gone", |m| {
        m.is_none()
    })
    .await;
    assert_ne!(
        cloud_state(&install.cloud, &victim_id),
        Some(CloudState::Running),
        "the instance of the deleted WasmMachine still runs"
    );
    // Its Machine has nothing left to stand for, and goes too.
    let core = machines_api(&install.client, &install.ns);
    wait_for(&core, &victim.name_any(), "its Machine is gone", |m| {
        m.is_none()
    })
    .await;
    let (_, after) = settled(&machines, &apis.infra_pools, 3).await;
    let before_ids = ids(instances.iter().map(|i| &i.id));
    let after_ids = ids(after.iter().map(|i| &i.id));
    let kept: BTreeSet<_> = before_ids
        .iter()
        .filter(|id| **id != victim_id)
        .cloned()
        .collect();
    assert!(
        after_ids.is_superset(&kept),
        "{before_ids:?} → {after_ids:?}"
    );
    assert!(!after_ids.contains(&victim_id));
    assert_eq!(
        install.cloud.cloud().total_creations(),
        4,
        "instances created"
    );
    wait_for_pool(&apis.pools, "pool", "Running", 3).await;

    // Scaling down removes one instance, through its WasmMachine.
    scale(&apis.pools, "pool", 2).await.unwrap();
    let (_, two) = settled(&machines, &apis.infra_pools, 2).await;
    let two_ids = ids(two.iter().map(|i| &i.id));
    assert!(
        after_ids.is_superset(&two_ids),
        "{after_ids:?} → {two_ids:?}"
    );
    wait_for_pool(&apis.pools, "pool", "Running", 2).await;
    assert_eq!(
        install.cloud.cloud().total_creations(),
        4,
        "instances created"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_upstream_core_each_instance_is_a_machine_whose_deletion_removes_its_instance() {
    let (install, apis, machines, _) = Box::pin(pool_of_three(Core::Upstream)).await;
    let (client, ns) = (&install.client, &install.ns);
    // No Machines while the Cluster's control plane is not initialized:
    // upstream could count none of them ready.
    let infra = apis.infra_pools.get("pool").await.unwrap();
    assert_eq!(infra.status.unwrap().infrastructure_machine_kind, None);
    let listed = machines.list(&ListParams::default()).await.unwrap().items;
    assert!(listed.is_empty(), "{listed:#?}");

    control_plane_machine(&install, "c1").await;
    let (three, _) = settled(&machines, &apis.infra_pools, 3).await;

    // Upstream makes a Machine of each WasmMachine, of the same name, and
    // becomes its controller.
    let core = machines_api(client, ns);
    let names = ids(three.iter().map(|m| m.metadata.name.as_ref().unwrap()));
    let listed = core_machines(&core, POOL_LABEL, |listed| {
        ids(listed.iter().map(|m| m.metadata.name.as_ref().unwrap())) == names
    })
    .await;
    for machine in &listed {
        assert_eq!(
            machine.data["spec"]["infrastructureRef"]["kind"], "WasmMachine",
            "{machine:?}"
        );
        assert!(
            machine
                .owner_references()
                .iter()
                .any(|o| o.kind == "MachinePool"),
            "{machine:?}"
        );
    }
    for name in &names {
        wait_for(&machines, name, "its Machine controls it", |m| {
            m.is_some_and(|m| {
                m.owner_references()
                    .iter()
                    .any(|o| o.kind == "Machine" && o.controller == Some(true))
            })
        })
        .await;
    }

    // The Machine annotated delete-machine goes first on scale-down.
    let chosen = names.iter().nth(1).unwrap().clone();
    let chosen_id = three
        .iter()
        .find(|m| m.name_any() == chosen)
        .unwrap()
        .spec
        .instance_id
        .clone();
    core.patch(
        &chosen,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"cluster.x-k8s.io/delete-machine": ""}}}),
        ),
    )
    .await
    .unwrap();
    scale(&apis.pools, "pool", 2).await.unwrap();
    wait_for(&core, &chosen, "the annotated Machine is gone", |m| {
        m.is_none()
    })
    .await;
    let (_, two) = settled(&machines, &apis.infra_pools, 2).await;
    assert!(!two.iter().any(|i| i.id == chosen_id), "{two:#?}");
    assert_ne!(
        cloud_state(&install.cloud, &chosen_id),
        Some(CloudState::Running)
    );
    let two_names = ids(names.iter().filter(|n| **n != chosen));
    core_machines(&core, POOL_LABEL, |listed| {
        ids(listed.iter().map(|m| m.metadata.name.as_ref().unwrap())) == two_names
    })
    .await;

    // Deleting a Machine removes its instance; the pool, still at 2, makes another.
    let deleted = two_names.iter().next().unwrap().clone();
    let deleted_id = two_names_id(&machines, &deleted).await;
    core.delete(&deleted, &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&core, &deleted, "the deleted Machine is gone", |m| {
        m.is_none()
    })
    .await;
    let (_, refilled) = settled(&machines, &apis.infra_pools, 2).await;
    assert!(
        !refilled.iter().any(|i| i.id == deleted_id),
        "{refilled:#?}"
    );
    assert_ne!(
        cloud_state(&install.cloud, &deleted_id),
        Some(CloudState::Running)
    );
    wait_for_pool(&apis.pools, "pool", "Running", 2).await;
}

/// The control plane of Cluster `cluster` as upstream's core recognises one
/// without a control-plane provider: a Machine labelled
/// `cluster.x-k8s.io/control-plane` whose Node (here one registered in the
/// workload API server the Cluster borrows) has the providerID its
/// infrastructure machine reports. The infrastructure machine is a
/// WasmMachine no pool owns, which no controller of capwasm's touches.
/// Returns once the Cluster's control plane is initialized.
async fn control_plane_machine(install: &Install, cluster: &str) {
    let (client, ns) = (&install.client, &install.ns);
    let name = format!("{ns}-cp");
    let provider_id = format!("sim://local-1/{name}");
    let workload = install.env.workload().unwrap().client().unwrap();
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"node-role.kubernetes.io/control-plane": ""}},
        "spec": {"providerID": provider_id},
    }))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Node>::all(workload)
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    let infra: WasmMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
        "kind": "WasmMachine",
        "metadata": {"name": "cp", "namespace": ns, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "spec": {"instanceID": "cp", "providerID": provider_id},
    }))
    .unwrap();
    let machines: Api<WasmMachine> = Api::namespaced(client.clone(), ns);
    machines
        .create(&PostParams::default(), &infra)
        .await
        .unwrap();
    machines
        .patch_status(
            "cp",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"ready": true, "initialization": {"provisioned": true}}}),
            ),
        )
        .await
        .unwrap();
    let machine: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Machine",
        "metadata": {"name": "cp", "namespace": ns, "labels": {
            "cluster.x-k8s.io/cluster-name": cluster,
            "cluster.x-k8s.io/control-plane": "",
        }},
        "spec": {
            "clusterName": cluster,
            "bootstrap": {"dataSecretName": ""},
            "infrastructureRef": {
                "apiGroup": "infrastructure.cluster.x-k8s.io",
                "kind": "WasmMachine",
                "name": "cp",
            },
        },
    }))
    .unwrap();
    machines_api(client, ns)
        .create(&PostParams::default(), &machine)
        .await
        .unwrap();
    wait_for(
        &Apis::new(client, ns).clusters,
        cluster,
        "its control plane is initialized",
        |c| {
            c.and_then(|c| c.status.as_ref()).is_some_and(|s| {
                condition(&s.conditions, "ControlPlaneInitialized")
                    .is_some_and(|(status, _, _)| status == "True")
            })
        },
    )
    .await;
}

/// The instance id of WasmMachine `name`.
async fn two_names_id(machines: &Api<WasmMachine>, name: &str) -> String {
    machines.get(name).await.unwrap().spec.instance_id
}

/// Waits until core's Machines of `selector` are as `done` says, and
/// returns them.
async fn core_machines(
    core: &Api<DynamicObject>,
    selector: &str,
    done: impl Fn(&[DynamicObject]) -> bool,
) -> Vec<DynamicObject> {
    eventually(WAIT, Duration::from_millis(250), || async {
        let params = ListParams::default().labels(selector);
        let listed = core.list(&params).await.unwrap().items;
        if done(&listed) {
            Ok(listed)
        } else {
            Err(format!("core's Machines never as awaited: {listed:#?}"))
        }
    })
    .await
}

/// The Machines of capwasm's core, and a drain a PodDisruptionBudget holds
/// up: the Node is cordoned, its Pod stays and so do the WasmMachine and the
/// instance until the budget allows the eviction; then the Pod, the
/// instance, the Machine and the Node go, and the pool makes another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_capwasm_core_a_deleted_machine_drains_its_node_as_its_budget_allows_then_its_instance_goes()
 {
    let held = Box::pin(held_drain("web")).await;
    let Held {
        install,
        machines,
        core,
        chosen_name,
        node,
        instance_id,
        workload,
        app,
        pods,
        budgets,
        budget,
        ..
    } = &held;

    core.delete(chosen_name, &DeleteParams::default())
        .await
        .unwrap();
    let draining = wait_for(
        core,
        chosen_name,
        "the drain is held up by the budget",
        |m| m.is_some_and(|m| deleting_with(m, "DrainingNode", "disruption budget")),
    )
    .await;
    println!(
        "held up: {}",
        draining.unwrap().data["status"]["conditions"]
    );
    let nodes: Api<Node> = Api::all(workload.clone());
    let cordoned = nodes.get(node).await.unwrap();
    assert_eq!(cordoned.spec.unwrap().unschedulable, Some(true), "cordoned");
    assert!(pods.get_opt(app).await.unwrap().is_some(), "the Pod stays");
    let kept = machines.get(chosen_name).await.unwrap();
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "its WasmMachine waits for the drain"
    );
    assert_eq!(
        cloud_state(&install.cloud, instance_id),
        Some(CloudState::Running)
    );

    // The budget allows one disruption (as the disruption controller would
    // write it): the Pod is evicted, and everything of the Machine goes.
    allow_one(budgets, budget).await;
    wait_for(core, chosen_name, "the drained Machine is gone", |m| {
        m.is_none()
    })
    .await;
    assert!(
        pods.get_opt(app).await.unwrap().is_none(),
        "the Pod was evicted"
    );
    replaced_once(&held).await;
}

/// A pool of three under capwasm's core with one of its Machines chosen,
/// and on its Node a Pod `<ns>-<app>` whose budget allows no eviction yet.
struct Held {
    install: Install,
    apis: Apis,
    machines: Api<WasmMachine>,
    core: Api<DynamicObject>,
    chosen_name: String,
    node: String,
    instance_id: String,
    workload: Client,
    app: String,
    pods: Api<k8s_openapi::api::core::v1::Pod>,
    budgets: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
    budget: k8s_openapi::api::policy::v1::PodDisruptionBudget,
}

async fn held_drain(app: &str) -> Held {
    let (install, apis, machines, _) = Box::pin(pool_of_three(Core::Capwasm)).await;
    let (client, ns) = (&install.client, &install.ns);
    let (three, _) = settled(&machines, &apis.infra_pools, 3).await;
    let names = ids(three.iter().map(|m| m.metadata.name.as_ref().unwrap()));
    let core = machines_api(client, ns);
    // One Machine per WasmMachine, of its name, controlled by the pool,
    // each Running on its Node.
    let pool_uid = apis.pools.get("pool").await.unwrap().metadata.uid;
    let listed = running_machines(&core, &machines, &names, pool_uid.as_ref()).await;
    let chosen_name = listed[0].name_any();
    let node = listed[0].data["status"]["nodeRef"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let instance_id = two_names_id(&machines, &chosen_name).await;
    let workload = install.env.workload().unwrap().client().unwrap();
    let app = format!("{ns}-{app}");
    let (pods, budgets, budget) = pod_with_budget(&workload, &node, &app).await;
    Held {
        install,
        apis,
        machines,
        core,
        chosen_name,
        node,
        instance_id,
        workload,
        app,
        pods,
        budgets,
        budget,
    }
}

/// Once the chosen Machine is gone: its WasmMachine, Node and instance
/// went, exactly that instance, and the pool made one in its place.
async fn replaced_once(held: &Held) {
    let nodes: Api<Node> = Api::all(held.workload.clone());
    assert!(
        nodes.get_opt(&held.node).await.unwrap().is_none(),
        "its Node was deleted"
    );
    let machines = &held.machines;
    assert!(machines.get_opt(&held.chosen_name).await.unwrap().is_none());
    let cloud = &held.install.cloud;
    assert_ne!(
        cloud_state(cloud, &held.instance_id),
        Some(CloudState::Running)
    );
    let (_, refilled) = settled(machines, &held.apis.infra_pools, 3).await;
    assert!(
        !refilled.iter().any(|i| i.id == held.instance_id),
        "{refilled:#?}"
    );
    assert_eq!(cloud.cloud().total_creations(), 4, "instances created");
    wait_for_pool(&held.apis.pools, "pool", "Running", 3).await;
}

/// Waits until core's Machines are one per WasmMachine of `names`, each
/// controlled by the pool of UID `pool`, Running and Ready on its Node, and
/// controlling its WasmMachine; returns them.
async fn running_machines(
    core: &Api<DynamicObject>,
    machines: &Api<WasmMachine>,
    names: &BTreeSet<String>,
    pool: Option<&String>,
) -> Vec<DynamicObject> {
    let listed = core_machines(core, POOL_LABEL, |listed| {
        ids(listed.iter().map(|m| m.metadata.name.as_ref().unwrap())) == *names
            && listed.iter().all(|m| {
                m.data["status"]["phase"] == "Running"
                    && m.data["status"]["nodeRef"]["name"].is_string()
            })
    })
    .await;
    for machine in &listed {
        assert_eq!(
            machine.data["spec"]["infrastructureRef"]["kind"],
            "WasmMachine"
        );
        assert!(
            machine
                .owner_references()
                .iter()
                .any(|o| o.kind == "MachinePool"
                    && o.controller == Some(true)
                    && Some(&o.uid) == pool),
            "{machine:?}"
        );
        let ready = machine.data["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        assert!(ready, "{machine:?}");
    }
    for name in names {
        wait_for(machines, name, "its Machine controls it", |m| {
            m.is_some_and(|m| {
                m.owner_references()
                    .iter()
                    .any(|o| o.kind == "Machine" && o.controller == Some(true))
            })
        })
        .await;
    }
    listed
}

/// The `Deleting` condition of core Machine `m`, if it has one with `reason`.
fn deleting_with(m: &DynamicObject, reason: &str, message: &str) -> bool {
    m.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            c["type"] == "Deleting"
                && c["reason"] == reason
                && c["message"].as_str().is_some_and(|t| t.contains(message))
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_capwasm_core_a_drain_that_cannot_finish_ends_at_its_timeout_and_a_second_delete_changes_nothing()
 {
    // A budget that never allows an eviction, and a drain timeout set on
    // the Machine by its user (the pool's manager does not own the field).
    let held = Box::pin(held_drain("stuck")).await;
    let Held {
        install,
        core,
        chosen_name,
        node,
        app,
        pods,
        ..
    } = &held;
    let (client, ns) = (&install.client, &install.ns);
    core.patch(
        chosen_name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"deletion": {"nodeDrainTimeoutSeconds": 15}}})),
    )
    .await
    .unwrap();

    core.delete(chosen_name, &DeleteParams::default())
        .await
        .unwrap();
    let draining = wait_for(core, chosen_name, "the drain is held up", |m| {
        m.is_some_and(|m| deleting_with(m, "DrainingNode", "disruption budget"))
    })
    .await
    .unwrap();
    // Deleted again while it drains: the same deletion, nothing new.
    let again = core
        .delete(chosen_name, &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("still there, held by its finalizer");
    assert_eq!(
        again.metadata.deletion_timestamp,
        draining.metadata.deletion_timestamp
    );

    let event = wait_for_event(client, ns, chosen_name, "NodeDrainTimedOut").await;
    assert!(event.contains(node.as_str()), "{event}");
    wait_for(
        core,
        chosen_name,
        "the Machine is gone after its timeout",
        |m| m.is_none(),
    )
    .await;
    let gone = core.delete(chosen_name, &DeleteParams::default()).await;
    assert!(
        matches!(&gone, Err(kube::Error::Api(s)) if s.code == 404),
        "a third delete finds nothing: {gone:?}"
    );
    assert!(
        pods.get_opt(app).await.unwrap().is_some(),
        "the Pod its budget protects was never evicted"
    );
    replaced_once(&held).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_capwasm_core_a_delete_machine_annotation_on_another_pools_machine_chooses_nothing_here()
 {
    let (install, apis, machines, _) = Box::pin(pool_of_three(Core::Capwasm)).await;
    let (client, ns) = (&install.client, &install.ns);
    install
        .objects
        .create_pool(client, ns, "other", "c1", 1, &install.modules)
        .await
        .unwrap();
    wait_for_pool(&apis.pools, "other", "Running", 1).await;
    let core = machines_api(client, ns);
    let other = core_machines(&core, "cluster.x-k8s.io/pool-name=other", |listed| {
        listed.len() == 1 && listed[0].data["status"]["phase"] == "Running"
    })
    .await
    .remove(0);
    let other_instance = two_names_id(&machines, &other.name_any()).await;
    core.patch(
        &other.name_any(),
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"cluster.x-k8s.io/delete-machine": ""}}}),
        ),
    )
    .await
    .unwrap();

    // This pool scales down by one of its own; the annotated Machine of the
    // other pool, which is not scaling, stays with its instance.
    let (three, _) = settled(&machines, &apis.infra_pools, 3).await;
    let before = ids(three.iter().map(|m| m.metadata.name.as_ref().unwrap()));
    scale(&apis.pools, "pool", 2).await.unwrap();
    let (two, _) = settled(&machines, &apis.infra_pools, 2).await;
    let after = ids(two.iter().map(|m| m.metadata.name.as_ref().unwrap()));
    assert_eq!(
        before.difference(&after).count(),
        1,
        "{before:?} → {after:?}"
    );
    assert!(after.is_subset(&before), "{before:?} → {after:?}");
    wait_for_pool(&apis.pools, "pool", "Running", 2).await;
    let kept = core.get(&other.name_any()).await.unwrap();
    assert_eq!(kept.metadata.uid, other.metadata.uid);
    assert!(kept.metadata.deletion_timestamp.is_none(), "{kept:?}");
    assert_eq!(
        cloud_state(&install.cloud, &other_instance),
        Some(CloudState::Running)
    );
    assert_eq!(
        install.cloud.cloud().total_creations(),
        4,
        "three and one created, none since"
    );
    wait_for_pool(&apis.pools, "other", "Running", 1).await;
}

/// What a watch of the workload cluster's Nodes saw of this cloud's Ready,
/// schedulable Nodes since it had listed them all: the fewest, the most,
/// and after how many events.
#[derive(Clone, Copy, Debug, Default)]
struct ReadyNodes {
    fewest: usize,
    most: usize,
    events: usize,
}

/// Starts that watch.
fn watch_ready_nodes(
    workload: Client,
    cloud: SimCloud,
) -> tokio::sync::watch::Receiver<Option<ReadyNodes>> {
    use futures::StreamExt as _;
    use kube::runtime::watcher::{self, Event};
    let (tx, rx) = tokio::sync::watch::channel(None);
    tokio::spawn(async move {
        let counts = |node: &Node| {
            let ready = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
            let name = node.name_any();
            let ours = cloud.instances().iter().any(|r| r.instance.id == name);
            ready && !cordoned && ours
        };
        let mut nodes = std::collections::BTreeMap::new();
        let mut listed = false;
        let mut seen: Option<ReadyNodes> = None;
        let mut events =
            watcher::watcher(Api::<Node>::all(workload), watcher::Config::default()).boxed();
        while let Some(Ok(event)) = events.next().await {
            match event {
                Event::Apply(node) | Event::InitApply(node) => {
                    nodes.insert(node.name_any(), counts(&node));
                }
                Event::Delete(node) => {
                    nodes.remove(&node.name_any());
                }
                Event::Init => nodes.clear(),
                Event::InitDone => listed = true,
            }
            if !listed {
                continue;
            }
            let ready = nodes.values().filter(|r| **r).count();
            let now = seen.map_or(
                ReadyNodes {
                    fewest: ready,
                    most: ready,
                    events: 0,
                },
                |s| ReadyNodes {
                    fewest: s.fewest.min(ready),
                    most: s.most.max(ready),
                    events: s.events + 1,
                },
            );
            seen = Some(now);
            let _ = tx.send(seen);
        }
    });
    rx
}

/// Waits until the rollout is done: three instances, none of `old`, each
/// up to date, and the pool saying so; returns them.
async fn rolled_out(pools: &Api<WasmMachinePool>, old: &BTreeSet<String>) -> Vec<InstanceStatus> {
    eventually(3 * WAIT, Duration::from_millis(500), || async {
        let pool = pools.get("pool").await.unwrap();
        let status = pool.status.clone().unwrap_or_default();
        let instances = up(&pool);
        let done = instances.len() == 3
            && instances.iter().all(|i| !old.contains(&i.id))
            && status.up_to_date_replicas == Some(3)
            && condition(&status.common.conditions, "RollingOut")
                .is_some_and(|(_, reason, _)| reason == "NotRollingOut");
        if done {
            Ok(instances)
        } else {
            Err(format!("the rollout never finished: {status:#?}"))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_capwasm_core_a_version_change_rolls_every_instance_with_never_fewer_ready_than_the_replicas()
 {
    Box::pin(version_change_rolls(Core::Capwasm)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_upstream_core_a_version_change_rolls_every_instance_with_never_fewer_ready_than_the_replicas()
 {
    Box::pin(version_change_rolls(Core::Upstream)).await;
}

/// The status of core Machine `m`'s `UpToDate` condition, if it has one.
fn up_to_date(m: &DynamicObject) -> Option<String> {
    m.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "UpToDate")
        .map(|c| c["status"].as_str().unwrap_or_default().to_owned())
}

/// Waits until `count` of core's Machines of the pool know their Nodes.
async fn with_node_refs(core: &Api<DynamicObject>, count: usize) {
    core_machines(core, POOL_LABEL, |listed| {
        listed.len() == count
            && listed
                .iter()
                .all(|m| m.data["status"]["nodeRef"]["name"].is_string())
    })
    .await;
}

/// A pool of three under `core` changes version: each instance is replaced,
/// one surge instance at a time, each old Node drained, never fewer than
/// three Ready. capwasm's core shows on each Machine whether it is up to
/// date (upstream's leaves that to the infrastructure).
async fn version_change_rolls(core_kind: Core) {
    let (install, apis, machines, _) = Box::pin(pool_of_three(core_kind)).await;
    let (client, ns) = (&install.client, &install.ns);
    let own_core = matches!(core_kind, Core::Capwasm);
    if !own_core {
        control_plane_machine(&install, "c1").await;
    }
    let (three, _) = settled(&machines, &apis.infra_pools, 3).await;
    let old = ids(three.iter().map(|m| m.metadata.name.as_ref().unwrap()));
    let old_instances = ids(three.iter().map(|m| &m.spec.instance_id));
    let pool = apis.infra_pools.get("pool").await.unwrap();
    let status = pool.status.unwrap();
    assert_eq!(status.up_to_date_replicas, Some(3));
    assert!(
        condition(&status.common.conditions, "RollingOut")
            .is_some_and(|(_, reason, _)| reason == "NotRollingOut")
    );
    let workload = install.env.workload().unwrap().client().unwrap();
    let mut ready = watch_ready_nodes(workload.clone(), install.cloud.cloud().clone());
    ready
        .wait_for(|r| r.is_some_and(|r| r.fewest == 3))
        .await
        .unwrap();
    // A Machine drains only the Node it knows (upstream's too): each old
    // one has its nodeRef before the rollout.
    let core = machines_api(client, ns);
    if own_core {
        with_node_refs(&core, 3).await;
    }

    apis.pools
        .patch(
            "pool",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"version": "v1.36.4"}}}})),
        )
        .await
        .unwrap();
    wait_for(&apis.infra_pools, "pool", "the rollout begins", |p| {
        p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
            condition(&s.common.conditions, "RollingOut")
                .is_some_and(|(_, reason, _)| reason == "RollingOut")
        })
    })
    .await;
    // capwasm core's Machines of the old instances say they are not up to
    // date.
    if own_core {
        core_machines(&core, POOL_LABEL, |listed| {
            listed
                .iter()
                .any(|m| old.contains(&m.name_any()) && up_to_date(m).as_deref() == Some("False"))
        })
        .await;
    }
    let renewed = rolled_out(&apis.infra_pools, &old_instances).await;
    let (_, settled_instances) = settled(&machines, &apis.infra_pools, 3).await;
    assert_eq!(
        ids(settled_instances.iter().map(|i| &i.id)),
        ids(renewed.iter().map(|i| &i.id))
    );
    nodes_run(&workload, &renewed, "v1.36.4").await;
    // Each old instance went, its Node drained first (upstream's core
    // drains too; v1.14 wrote no SuccessfulDrainNode Event here).
    for name in &old {
        if own_core {
            wait_for_event(client, ns, name, "SuccessfulDrainNode").await;
        }
        assert!(machines.get_opt(name).await.unwrap().is_none(), "{name}");
    }
    assert_eq!(
        install.cloud.cloud().total_creations(),
        6,
        "three instances, then three new ones"
    );
    let seen = ready.borrow().unwrap();
    println!("Ready, schedulable Nodes during the rollout: {seen:?}");
    assert!(seen.events >= 6, "the watch saw the rollout: {seen:?}");
    assert_eq!(seen.most, 4, "one surge instance at a time: {seen:?}");
    assert_eq!(
        seen.fewest, 3,
        "never fewer ready than the replicas: {seen:?}"
    );
    let pool = wait_for_pool(&apis.pools, "pool", "Running", 3).await;
    if own_core {
        assert_eq!(pool.status.unwrap().up_to_date_replicas, Some(3));
    }
    for machine in machines
        .list(&ListParams::default().labels(POOL_LABEL))
        .await
        .unwrap()
    {
        let status = machine.status.unwrap_or_default();
        assert!(
            condition(&status.common.conditions, "UpToDate").is_some_and(|(s, _, _)| s == "True"),
            "{status:?}"
        );
    }
    if own_core {
        every_machine_up_to_date(&machines, &core).await;
    }
}

/// Waits until the Nodes of `instances` report kubelet `version`, each
/// schedulable.
async fn nodes_run(workload: &Client, instances: &[InstanceStatus], version: &str) {
    let nodes: Api<Node> = Api::all(workload.clone());
    for instance in instances {
        let node = wait_for(
            &nodes,
            &instance.id,
            "the new Node reports its version",
            |n| {
                n.and_then(|n| n.status.as_ref()?.node_info.as_ref())
                    .is_some_and(|i| i.kubelet_version == version)
            },
        )
        .await
        .unwrap();
        assert!(node.spec.and_then(|s| s.unschedulable) != Some(true));
    }
}

/// Waits until core's Machines are those of the pool's WasmMachines, each
/// `UpToDate`.
async fn every_machine_up_to_date(machines: &Api<WasmMachine>, core: &Api<DynamicObject>) {
    let renewed_names: BTreeSet<String> = machines
        .list(&ListParams::default().labels(POOL_LABEL))
        .await
        .unwrap()
        .iter()
        .map(kube::ResourceExt::name_any)
        .collect();
    core_machines(core, POOL_LABEL, |listed| {
        ids(listed.iter().map(|m| m.metadata.name.as_ref().unwrap())) == renewed_names
            && listed
                .iter()
                .all(|m| up_to_date(m).as_deref() == Some("True"))
    })
    .await;
}
