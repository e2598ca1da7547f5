//! examples/ as a user applies it: capwasm running as Pods (deploy/ with
//! the test image) in the one-node Kubernetes, the steps of examples/README
//! done as it says (the providers' ConfigMap, the simulated cloud with its
//! token Secret, the team's namespace and kubeconfig Secret), then every
//! sample applied unchanged but for where the simulated cloud listens, and
//! every pool Running with its instances Nodes of the workload cluster,
//! the platform cluster's too, and it Ready.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, Result, ensure};
use capwasm::api::PlatformCluster;
use capwasm::simcloud::RunningSimCloud;
use k8s_openapi::api::core::v1::{Node as NodeObject, Secret};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt as _};
use testenv::flows::{Objects, create, wait_for, wait_for_pool};
use testenv::image::OperatorImage;
use testenv::node::{HOST_ADDRESS, Node};
use testenv::pods::{self, NAMESPACE};
use testenv::samples;

/// The samples, in the order examples/README applies them.
const SAMPLES: [&str; 4] = [
    "providers.yaml",
    "cluster.yaml",
    "pool-autoscaled.yaml",
    "platform.yaml",
];
/// The samples another test applies: aws-ec2.yaml, on moto
/// (`tests/ec2_sample.rs`; the one-node Kubernetes has no EC2 to reach).
const APPLIED_ELSEWHERE: [&str; 1] = ["aws-ec2.yaml"];
/// The platform cluster of platform.yaml.
const PLATFORM_CLUSTER: &str = "platform-demo";
/// Where the samples say the simulated cloud listens.
const SIM_CLOUD: &str = "sim-cloud.example:8081";
const TEAM: &str = "team-a";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sample_applied_as_its_readme_says_reaches_running() -> Result<()> {
    // Every sample is applied here or by the test named beside it: one
    // added to examples/ and to neither fails it.
    let mut applied: Vec<String> = SAMPLES
        .iter()
        .chain(&APPLIED_ELSEWHERE)
        .map(|s| (*s).to_owned())
        .collect();
    applied.sort();
    assert_eq!(
        sample_files()?,
        applied,
        "every sample in examples/ is applied"
    );

    let image = OperatorImage::build()?;
    let node = Node::start(&[&image.archive]).await?;
    let client = node.client()?;
    pods::install(&client, &pods::deploy_dir(""), &image.reference()).await?;

    let (cloud, authority) = steps_before_the_samples(&node, &client).await?;
    for sample in SAMPLES {
        let text = samples::read(sample)?;
        ensure!(
            !matches!(sample, "cluster.yaml" | "platform.yaml") || text.contains(SIM_CLOUD),
            "{sample} names the simulated cloud as {SIM_CLOUD}"
        );
        samples::apply(&client, &text.replace(SIM_CLOUD, &authority)).await?;
    }

    let pools = Api::namespaced(client.clone(), TEAM);
    let workers = wait_for_pool(&pools, "workers", "Running", 3).await;
    let autoscaled = wait_for_pool(&pools, "autoscaled", "Running", 1).await;
    let platform: Api<PlatformCluster> = Api::namespaced(client.clone(), TEAM);
    let ready = wait_for(&platform, PLATFORM_CLUSTER, "phase Ready", |c| {
        c.and_then(|c| c.status.as_ref())
            .is_some_and(|s| s.phase.as_deref() == Some("Ready"))
    })
    .await
    .context("the platform cluster")?;
    let status = ready.status.unwrap_or_default();
    assert_eq!(status.kubernetes_version.as_deref(), Some("v1.36.3"));
    assert_eq!(status.node_count, Some(3), "{status:?}");
    // Its provider rendered a pool per node group.
    let fixed = wait_for_pool(&pools, &format!("{PLATFORM_CLUSTER}-md"), "Running", 2).await;
    let bounded = wait_for_pool(&pools, &format!("{PLATFORM_CLUSTER}-auto"), "Running", 1).await;
    let nodes: Api<NodeObject> = Api::all(node.workload_client().await?);
    let registered: BTreeMap<String, BTreeMap<String, String>> = nodes
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| Some((n.spec.clone()?.provider_id?, n.labels().clone())))
        .collect();
    for id in workers
        .spec
        .provider_id_list
        .iter()
        .chain(&fixed.spec.provider_id_list)
        .chain(&bounded.spec.provider_id_list)
    {
        assert!(
            registered.contains_key(id),
            "{id} is a Node: {registered:?}"
        );
    }
    for id in &autoscaled.spec.provider_id_list {
        let labels = registered.get(id).context("the autoscaled pool's Node")?;
        assert_eq!(
            labels
                .get("pool.team-a.example/autoscaled")
                .map(String::as_str),
            Some("true"),
            "the pool's Node carries the sample's label: {labels:?}"
        );
    }
    assert_eq!(
        cloud.cloud().total_creations(),
        4 + 3,
        "one instance made per replica the samples ask for"
    );

    // The samples give no join token: the host made one in the workload
    // cluster for the bootstrap provider.
    let tokens: Api<Secret> = Api::namespaced(node.workload_client().await?, "kube-system");
    let made = tokens
        .list(&ListParams::default().fields("type=bootstrap.kubernetes.io/token"))
        .await?;
    assert!(
        !made.items.is_empty(),
        "a bootstrap token Secret in the workload cluster"
    );
    drop(node);
    Ok(())
}

/// The YAML files of examples/, sorted.
fn sample_files() -> Result<Vec<String>> {
    let mut present: Vec<String> = std::fs::read_dir(samples::examples())?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| {
            Path::new(name)
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("yaml"))
        })
        .collect();
    present.sort();
    Ok(present)
}

/// examples/README's steps before the samples: the providers' ConfigMap,
/// the simulated cloud (on the host end of the node's network, asking for
/// a token) and its token Secret, the team's namespace and kubeconfig
/// Secret. The cloud, and where it listens (`host:port`).
async fn steps_before_the_samples(
    node: &Node,
    client: &Client,
) -> Result<(RunningSimCloud, String)> {
    let token = "0123456789abcdef0123456789abcdef";
    let (cloud, objects) = Objects::start_cloud_with(
        HOST_ADDRESS,
        node.workload_client().await?,
        Some(token.into()),
    )
    .await?;
    let authority = objects
        .cloud_endpoint
        .strip_prefix("http://")
        .context("the cloud's endpoint")?
        .to_owned();
    samples::components_config_map(
        client,
        (NAMESPACE, "providers"),
        &[
            "kubeadm_bootstrap.wasm",
            "sim_infrastructure.wasm",
            "sim_platform.wasm",
        ],
    )
    .await?;
    create(
        client,
        &samples::secret(NAMESPACE, "sim-cloud", &[("token", token)]),
    )
    .await?;
    testenv::flows::namespace(client, TEAM).await?;
    for cluster in ["demo", PLATFORM_CLUSTER] {
        create(client, &node.workload_kubeconfig_secret(TEAM, cluster)?).await?;
    }
    Ok((cloud, authority))
}
