//! The EC2 provider through the operator, against moto (signatures
//! checked; the host signs, the provider holds no key), under capwasm's
//! core and under upstream Cluster API's: a Cluster and a 3-replica
//! MachinePool reach Running with a Node per instance (the harness's EC2
//! kubelets play the machines), scale 3 → 5 → 1, and the Cluster's
//! deletion leaves no instance, subnet, security group or VPC tagged for
//! it; the operator killed while `RunInstances` is under way makes no
//! second instance once restarted; a bad image or zone is a condition
//! naming the field.

use std::time::Duration;

use capwasm::api::{Cluster, MachinePool, WasmCluster, WasmMachinePool};
use kube::api::DeleteParams;
use kube::{Api, Client};
use serde_json::json;
use testenv::ApiServer;
use testenv::ec2::Ec2;
use testenv::flows::{
    Apis, Modules, Scenario, condition, scale, wait_for, wait_for_module, wait_for_pool,
};
use testenv::hold::HoldingProxy;
use testenv::install::{Core, Install};

/// moto, its kubelets and the aws-ec2 module reaching it, Ready.
async fn ec2_in_service(client: &Client, workload: &ApiServer, ns: &str) -> Ec2 {
    let mut ec2 = Ec2::start(client, workload.client().unwrap(), ns)
        .await
        .expect("moto (tests/moto/install.sh)");
    let authority = ec2.moto.authority.clone();
    ec2.load(client, &authority).await.unwrap();
    wait_for_module(&Api::all(client.clone()), &ec2.module, "Ready").await;
    ec2
}

/// A Cluster `c1` on EC2 with a 3-replica pool `p1` to Running, scaled
/// 3 → 5 → 1, then deleted: nothing tagged for it is left.
async fn runs_scales_and_leaves_nothing(
    client: &Client,
    workload: &ApiServer,
    ns: &str,
    modules: &Modules,
) {
    let ec2 = ec2_in_service(client, workload, ns).await;
    let cluster = format!("{ns}/c1");
    ec2.cluster(client, workload, (ns, "c1"), ec2.config())
        .await
        .unwrap();
    ec2.pool(
        client,
        (ns, "p1", "c1"),
        3,
        &modules.bootstrap,
        ec2.config(),
    )
    .await
    .unwrap();

    let apis = Apis::new(client, ns);
    let running = wait_for_pool(&apis.pools, "p1", "Running", 3).await;
    assert!(
        running
            .spec
            .provider_id_list
            .iter()
            .all(|id| id.starts_with("aws:///us-east-1")),
        "{:?}",
        running.spec.provider_id_list
    );
    assert_eq!(ec2.tagged(&cluster).unwrap(), [3, 1, 2, 1]);

    for replicas in [5, 1] {
        scale(&apis.pools, "p1", replicas).await.unwrap();
        wait_for_pool(&apis.pools, "p1", "Running", replicas).await;
        ec2.wait_for_instances(&cluster, usize::try_from(replicas).unwrap())
            .await
            .unwrap();
    }

    apis.clusters
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&apis.clusters, "c1", "the Cluster is gone", |c| c.is_none()).await;
    let pools: &Api<MachinePool> = &apis.pools;
    assert!(pools.get_opt("p1").await.unwrap().is_none());
    assert_eq!(
        ec2.tagged(&cluster).unwrap(),
        [0, 0, 0, 0],
        "nothing tagged for the Cluster is left"
    );
}

#[tokio::test]
async fn a_pool_on_ec2_runs_scales_and_its_cluster_leaves_nothing_behind() {
    let scenario = Scenario::new("ec2").await;
    let workload = scenario.env.workload().expect("a workload server");
    runs_scales_and_leaves_nothing(&scenario.client, workload, &scenario.ns, &scenario.modules)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_core_runs_a_pool_on_ec2_and_its_cluster_leaves_nothing_behind() {
    let install = Install::start("ec2up").await;
    let workload = install.env.workload().expect("a workload server");
    runs_scales_and_leaves_nothing(&install.client, workload, &install.ns, &install.modules).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_killed_during_run_instances_launches_nothing_twice() {
    let mut install = Install::with_core("ec2kill", Core::Capwasm).await;
    let (client, ns) = (install.client.clone(), install.ns.clone());
    let workload = install.env.workload().expect("a workload server");
    let mut ec2 = Ec2::start(&client, workload.client().unwrap(), &ns)
        .await
        .expect("moto (tests/moto/install.sh)");
    // moto makes the first instance; the operator never hears it did.
    let mut proxy = HoldingProxy::start(&ec2.moto.authority, "Action=RunInstances")
        .await
        .unwrap();
    ec2.load(&client, &proxy.authority).await.unwrap();
    wait_for_module(&Api::all(client.clone()), &ec2.module, "Ready").await;
    let cluster = format!("{ns}/c1");
    ec2.cluster(&client, workload, (&ns, "c1"), ec2.config())
        .await
        .unwrap();
    ec2.pool(
        &client,
        (&ns, "p1", "c1"),
        3,
        &install.modules.bootstrap,
        ec2.config(),
    )
    .await
    .unwrap();
    assert!(
        proxy.held(testenv::flows::WAIT).await,
        "no RunInstances was sent"
    );
    // moto answered (the answer is held): the instance exists. Counted
    // before the restart, which may launch the rest at once.
    let made = ec2.tagged(&cluster).unwrap()[0];
    assert_eq!(made, 1, "the held RunInstances made one instance");
    install.kill_and_restart_operator().await;

    let apis = Apis::new(&client, &ns);
    wait_for_pool(&apis.pools, "p1", "Running", 3).await;
    // Found by its tags, not launched again.
    assert_eq!(ec2.tagged(&cluster).unwrap(), [3, 1, 2, 1]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        ec2.tagged(&cluster).unwrap()[0],
        3,
        "no instance launched later"
    );
}

#[tokio::test]
async fn a_bad_image_or_zone_is_a_condition_naming_the_field() {
    let Scenario {
        env,
        client,
        ns,
        apis,
        modules,
        ..
    } = Scenario::new("ec2bad").await;
    let workload = env.workload().expect("a workload server");
    let ec2 = ec2_in_service(&client, workload, &ns).await;

    // A zone the region does not have: the WasmCluster says which.
    let mut config = ec2.config();
    config["zones"] = json!(["us-east-1a", "us-east-1q"]);
    ec2.cluster(&client, workload, (&ns, "c1"), config)
        .await
        .unwrap();
    let reason_of = |c: Option<&WasmCluster>| {
        c.and_then(|c| c.status.as_ref())
            .and_then(|s| condition(&s.common.conditions, "Ready"))
    };
    let infra_clusters: &Api<WasmCluster> = &apis.infra_clusters;
    let found = wait_for(infra_clusters, "c1", "Ready names the zone", |c| {
        reason_of(c).is_some_and(|(_, reason, _)| reason == "InvalidConfig")
    })
    .await;
    let (status, _, message) = reason_of(found.as_ref()).unwrap();
    assert_eq!(status, "False");
    assert!(
        message.contains("zones[1]") && message.contains("us-east-1q"),
        "{message}"
    );
    let clusters: &Api<Cluster> = &apis.clusters;
    assert!(clusters.get("c1").await.is_ok());

    // An image that does not exist: the WasmMachinePool says so, and
    // nothing is launched.
    let mut fixed = ec2.config();
    fixed["zones"] = json!(["us-east-1a"]);
    ec2.cluster(&client, workload, (&ns, "c2"), fixed.clone())
        .await
        .unwrap();
    let mut config = fixed;
    config["ami"] = json!("ami-00000000");
    ec2.pool(&client, (&ns, "p2", "c2"), 2, &modules.bootstrap, config)
        .await
        .unwrap();
    let reason_of = |p: Option<&WasmMachinePool>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| condition(&s.common.conditions, "Ready"))
    };
    let found = wait_for(&apis.infra_pools, "p2", "Ready names the image", |p| {
        reason_of(p).is_some_and(|(_, reason, _)| reason == "InvalidConfig")
    })
    .await;
    let (status, _, message) = reason_of(found.as_ref()).unwrap();
    assert_eq!(status, "False");
    assert!(
        message.contains("ami") && message.contains("ami-00000000"),
        "{message}"
    );
    assert_eq!(
        ec2.tagged(&format!("{ns}/c2")).unwrap()[0],
        0,
        "nothing launched"
    );
}
