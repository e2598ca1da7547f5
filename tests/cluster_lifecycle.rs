//! A Cluster's life beyond provisioning: deletion in upstream's order
//! (MachinePools, then infrastructure, then the finalizer) leaving nothing
//! behind, and pausing that stops every controller until it is lifted.

use capwasm::api::{Cluster, Machine, MachinePool};
use capwasm::simcloud::InstanceState;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use testenv::flows::{Apis, Scenario, condition, scale, wait_for, wait_for_pool};
use testenv::{Stack, TestEnv};

/// Waits until `count` Machines are listed; their names.
async fn wait_for_machines(machines: &Api<Machine>, count: usize) -> Vec<String> {
    testenv::flows::eventually(
        testenv::flows::WAIT,
        std::time::Duration::from_millis(250),
        || async {
            let listed = machines
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let names: Vec<String> = listed
                .items
                .iter()
                .filter_map(|m| m.metadata.name.clone())
                .collect();
            (names.len() == count)
                .then(|| names.clone())
                .ok_or(format!("{count} Machines expected: {names:?}"))
        },
    )
    .await
}

#[tokio::test]
async fn deleting_the_cluster_removes_pools_infrastructure_nodes_and_instances() {
    let scenario = Scenario::with_cluster("delete", "c1").await;
    scenario.pool("pool", "c1", 2).await;
    let Scenario {
        env,
        stack,
        client,
        ns,
        apis,
        ..
    } = scenario;
    let workload = env.workload().unwrap();
    let running = wait_for_pool(&apis.pools, "pool", "Running", 2).await;
    let node_names: Vec<String> = running
        .status
        .unwrap()
        .node_refs
        .into_iter()
        .filter_map(|r| r.name)
        .collect();

    let deleting = |c: &Cluster, status: &str, reason: &str| {
        c.status
            .as_ref()
            .and_then(|s| condition(&s.conditions, "Deleting"))
            .is_some_and(|(s, r, m)| {
                s == status
                    && r == reason
                    && (status == "False" || m.contains("* MachinePools: pool"))
            })
    };
    // A Machine per instance, which the Cluster waits for as upstream's does.
    let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
    let made = wait_for_machines(&machines, 2).await;
    let before = apis.clusters.get("c1").await.unwrap();
    assert!(
        deleting(&before, "False", "NotDeleting"),
        "{:?}",
        before.status
    );
    apis.clusters
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    // As upstream: Deleting is True while the deletion waits, saying for what.
    wait_for(
        &apis.clusters,
        "c1",
        "Deleting True/WaitingForWorkersDeletion naming the pool",
        |c: Option<&Cluster>| c.is_some_and(|c| deleting(c, "True", "WaitingForWorkersDeletion")),
    )
    .await;
    wait_for(
        &apis.clusters,
        "c1",
        "the Cluster is gone",
        |c: Option<&Cluster>| c.is_none(),
    )
    .await;

    // Everything the Cluster owned went before it.
    assert!(apis.pools.get_opt("pool").await.unwrap().is_none());
    assert!(apis.configs.get_opt("pool").await.unwrap().is_none());
    assert!(apis.infra_pools.get_opt("pool").await.unwrap().is_none());
    assert!(apis.infra_clusters.get_opt("c1").await.unwrap().is_none());
    // No garbage collector runs here to delete a gone pool's Machines: the
    // Cluster did, and waited until each was drained and gone.
    let left = machines.list(&ListParams::default()).await.unwrap().items;
    let names: Vec<_> = left
        .iter()
        .filter_map(|m| m.metadata.name.as_deref())
        .collect();
    assert!(names.is_empty(), "Machines of {made:?} left: {names:?}");
    let live: Vec<_> = stack
        .cloud
        .instances_of(&format!("{ns}/pool"))
        .into_iter()
        .filter(|i| i.instance.state != InstanceState::Terminating)
        .collect();
    assert!(live.is_empty(), "instances left in the cloud: {live:?}");
    let nodes: Api<Node> = Api::all(workload.client().unwrap());
    for name in node_names {
        wait_for(
            &nodes,
            &name,
            "the pool's Node is deleted",
            |n: Option<&Node>| n.is_none(),
        )
        .await;
    }
    // The bootstrap data Secret goes with its config by garbage collection,
    // which the test control plane does not run (no kube-controller-manager):
    // check the controller reference it relies on.
    let secret = Api::<Secret>::namespaced(client.clone(), &ns)
        .get("pool")
        .await
        .unwrap();
    let owner = &secret.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("WasmBootstrapConfig", "pool", Some(true))
    );
}

#[tokio::test]
async fn pausing_the_cluster_stops_scaling_until_unpaused() {
    let scenario = Scenario::with_cluster("pause", "c1").await;
    scenario.pool("pool", "c1", 1).await;
    let Scenario {
        stack, ns, apis, ..
    } = scenario;
    wait_for_pool(&apis.pools, "pool", "Running", 1).await;

    let paused = |value: bool| Patch::Merge(json!({ "spec": { "paused": value } }));
    apis.clusters
        .patch("c1", &PatchParams::default(), &paused(true))
        .await
        .unwrap();
    wait_for(
        &apis.pools,
        "pool",
        "the pool reports the pause",
        |p: Option<&MachinePool>| {
            p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "Paused"
                        && c.status == "True"
                        && c.message == "Cluster spec.paused is set to true"
                })
            })
        },
    )
    .await;
    wait_for(
        &apis.infra_pools,
        "pool",
        "the infrastructure pool reports the pause",
        |p| {
            p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                s.common
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "Paused" && c.status == "True")
            })
        },
    )
    .await;

    scale(&apis.pools, "pool", 2).await.unwrap();
    // The controller has seen the new replica count (its Paused condition is
    // at the new generation) and left the pool alone: still Running, and the
    // cloud got no new instance. Unpausing is what lets the scale happen.
    let generation = apis.pools.get("pool").await.unwrap().metadata.generation;
    let seen = wait_for(
        &apis.pools,
        "pool",
        "the paused pool has seen the scale",
        |p: Option<&MachinePool>| {
            p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "Paused" && c.status == "True" && c.observed_generation == generation
                })
            })
        },
    )
    .await
    .unwrap();
    assert_eq!(seen.status.unwrap().phase.as_deref(), Some("Running"));
    assert_eq!(stack.cloud.instances_of(&format!("{ns}/pool")).len(), 1);
    apis.clusters
        .patch("c1", &PatchParams::default(), &paused(false))
        .await
        .unwrap();
    let scaled = wait_for_pool(&apis.pools, "pool", "Running", 2).await;
    let conditions = scaled.status.unwrap().conditions;
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Paused" && c.status == "False" && c.reason == "NotPaused")
    );
}

#[tokio::test]
async fn pool_with_the_paused_annotation_is_left_alone_with_a_message_naming_it() {
    let env = TestEnv::shared().await.unwrap();
    let stack = Stack::shared().await.unwrap();
    let client = env.management().client().unwrap();
    let workload = env.workload().unwrap();
    let ns = env
        .management()
        .create_namespace("annotated")
        .await
        .unwrap();
    let apis = Apis::new(&client, &ns);
    let modules = stack.objects.modules(&client, &ns).await.unwrap();
    stack
        .objects
        .create_cluster(&client, workload, &ns, "c1", &modules)
        .await
        .unwrap();
    let pool = capwasm::testing::objects::MachinePoolBuilder::new(&ns, "pool", "c1")
        .annotation("cluster.x-k8s.io/paused", "false")
        .build();
    testenv::flows::create(&client, &pool).await.unwrap();
    let paused = wait_for(
        &apis.pools,
        "pool",
        "the pool is Paused",
        |p: Option<&MachinePool>| {
            p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Paused" && c.status == "True")
            })
        },
    )
    .await
    .unwrap();
    let (_, _, message) = condition(&paused.status.as_ref().unwrap().conditions, "Paused").unwrap();
    assert_eq!(
        message,
        "MachinePool has the cluster.x-k8s.io/paused annotation"
    );
    // Only the finalizer: no phase, and the (missing) referenced objects were
    // never looked up, so no condition about them.
    assert!(paused.metadata.finalizers.is_some());
    let status = paused.status.unwrap();
    assert_eq!(status.phase, None);
    for type_ in ["BootstrapConfigReady", "InfrastructureReady"] {
        assert!(
            condition(&status.conditions, type_).is_none(),
            "{type_}: {:?}",
            status.conditions
        );
    }
}
