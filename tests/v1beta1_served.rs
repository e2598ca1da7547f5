//! `cluster.x-k8s.io/v1beta1` served by capwasm standalone: its Cluster and
//! MachinePool CRDs serve v1beta1 beside the stored v1beta2 through the
//! conversion webhook `capwasm run` serves, its certificate in a Secret and
//! the CRDs pointed at it by the operator itself.

use std::time::Duration;

use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::flows::{
    Apis, WAIT, create_v1beta1, v1beta1_api, v1beta1_cluster, wait_for_cluster, wait_for_pool,
};
use testenv::install::Install;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1beta1_manifests_run_scale_and_read_back_in_both_versions() {
    let install = Install::standalone("v1beta1").await;
    let (client, ns) = (&install.client, &install.ns);
    install.v1beta1_cluster_and_pool("c1", "pool").await;

    // Stored in v1beta2, with apiGroup references, and Running.
    let apis = Apis::new(client, ns);
    wait_for_cluster(&apis.clusters, "c1", "Provisioned").await;
    let pool = wait_for_pool(&apis.pools, "pool", "Running", 2).await;
    let reference = &pool.spec.template.spec.infrastructure_ref;
    assert_eq!(reference.api_group, "infrastructure.cluster.x-k8s.io");

    // Read in v1beta1: references with the contract version, the v1beta1
    // readiness flags and counters.
    let pools = v1beta1_api(client, ns, "MachinePool");
    let old = pools.get("pool").await.unwrap();
    let field = |path: &str| old.data.pointer(path).cloned().unwrap_or_default();
    assert_eq!(
        field("/spec/template/spec/infrastructureRef/apiVersion"),
        json!(format!(
            "infrastructure.cluster.x-k8s.io/{}",
            capwasm::api::provider::VERSION
        ))
    );
    assert_eq!(field("/status/bootstrapReady"), json!(true));
    assert_eq!(field("/status/infrastructureReady"), json!(true));
    assert_eq!(field("/status/readyReplicas"), json!(2));
    assert_eq!(field("/status/nodeRefs").as_array().map(Vec::len), Some(2));
    assert_eq!(field("/status/phase"), json!("Running"));
    // v1beta1 conditions, as v1beta1 tools wait on them.
    let ready = field("/status/conditions")
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready").cloned());
    assert_eq!(ready.map(|c| c["status"].clone()), Some(json!("True")));

    // Written back in v1beta1 unchanged, the stored object is unchanged.
    let before = apis.pools.get("pool").await.unwrap();
    pools
        .replace("pool", &PostParams::default(), &old)
        .await
        .unwrap();
    let after = apis.pools.get("pool").await.unwrap();
    assert_eq!(after.spec, before.spec);
    assert_eq!(after.metadata.labels, before.metadata.labels);
    assert_eq!(after.metadata.annotations, before.metadata.annotations);

    // Scaled through v1beta1's scale subresource, as `kubectl scale` does.
    pools
        .patch_scale(
            "pool",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "replicas": 3 } })),
        )
        .await
        .unwrap();
    wait_for_pool(&apis.pools, "pool", "Running", 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1beta1_object_that_cannot_be_converted_is_refused_naming_the_field() {
    let install = Install::standalone("refused").await;
    let (client, ns) = (&install.client, &install.ns);
    let mut cluster = v1beta1_cluster(ns, "c1");
    cluster["spec"]["infrastructureRef"]["apiVersion"] = json!("v1");
    let error = create_v1beta1(client, ns, &cluster).await.unwrap_err();
    let message = capwasm::report::error_chain(&error);
    assert!(
        message.contains("spec.infrastructureRef.apiVersion") && message.contains("no API group"),
        "{message}"
    );
    let mut cluster = v1beta1_cluster(ns, "c2");
    cluster["spec"]["infrastructureRef"]["namespace"] = json!("elsewhere");
    let error = create_v1beta1(client, ns, &cluster).await.unwrap_err();
    let message = capwasm::report::error_chain(&error);
    assert!(
        message.contains("spec.infrastructureRef.namespace"),
        "{message}"
    );
    // Nothing was written.
    let apis = Apis::new(client, ns);
    for name in ["c1", "c2"] {
        assert!(apis.clusters.get_opt(name).await.unwrap().is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_webhook_down_the_api_server_names_it_and_the_operator_says_why() {
    let mut install = Install::standalone("down").await;
    let (client, ns) = (install.client.clone(), install.ns.clone());
    install.cluster("c1").await;
    let clusters = v1beta1_api(&client, &ns, "Cluster");
    assert!(clusters.get("c1").await.is_ok(), "v1beta1 is served");

    install.operator.terminate(Duration::from_secs(30)).await;
    let error = clusters.get("c1").await.unwrap_err();
    let message = capwasm::report::error_chain(&error);
    assert!(message.contains("conversion webhook"), "{message}");
    // v1beta2 needs no conversion.
    assert!(Apis::new(&client, &ns).clusters.get("c1").await.is_ok());

    // A replica that cannot listen where it is told logs why it does not
    // serve the webhook, and runs on.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap();
    let replacement = testenv::operator::OperatorProcess::start(
        install.env.management(),
        &ns,
        "replacement",
        &[&format!("--webhook-bind-address={address}")],
    )
    .await;
    let said = tokio::time::timeout(WAIT, async {
        loop {
            let lines = replacement.log_lines(|line| line.contains("webhook is not served"));
            if let Some(line) = lines.into_iter().next() {
                return line;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("the replica logs that it does not serve the webhook");
    assert!(
        said.contains(&format!("cannot listen on {address}")),
        "{said}"
    );
}
