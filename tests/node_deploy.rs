//! capwasm as its users run it: the image `make image` builds, deployed by
//! `deploy/` (unmodified but for the image, named by digest as a release
//! names it) into a real one-node Kubernetes — kubelet, containerd, runc,
//! CNI, kube-proxy, scheduler and controller manager — where the operator
//! runs as a Pod: read-only root filesystem, non-root, its probes, its
//! ServiceAccount's rights through the `kubernetes` Service.

use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use capwasm::api::{Cluster, MachinePool};
use capwasm::simcloud::RunningSimCloud;
use capwasm::testing::objects::ClusterBuilder;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node as NodeObject, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt as _, ResourceExt};
use testenv::flows::{Objects, create, scale, v1beta1_api, wait_for, wait_for_pool};
use testenv::image::OperatorImage;
use testenv::node::{HOST_ADDRESS, Node};
use testenv::pods::{NAMESPACE, apply_all, describe_pods, rendered};

const DEPLOYMENT: &str = "capwasm-controller-manager";
/// The operator's leader-election Lease.
const LEASE: &str = "capwasm-leader";
/// From apply to an available Deployment: the image is in containerd
/// already, the Pod waits for its readiness probe (every 10 s).
const AVAILABLE: Duration = Duration::from_secs(120);

/// What a standalone install running as Pods holds once its pool runs.
struct Installed {
    node: Node,
    client: Client,
    cloud: RunningSimCloud,
    ns: &'static str,
}

/// The standalone install as Pods takes a pool to Running; then the
/// webhook called by the API server through its Service (this found
/// deploy/'s ClusterRole without `get` on the CRDs the webhook points at
/// itself: no caBundle, every conversion refused), then the leader's Pod
/// deleted while the pool scales.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standalone_install_runs_as_pods_serves_its_webhook_and_survives_its_leader()
-> Result<()> {
    let Installed {
        node,
        client,
        cloud,
        ns,
    } = standalone_with_a_running_pool().await?;
    conversion_goes_through_the_service(&client, ns).await?;
    leadership_moves_when_the_leader_pod_goes(&client, &cloud, ns).await?;
    drop(node);
    Ok(())
}

/// deploy/ with the image, its Pod Ready, and a Cluster and 2-replica pool
/// Running through it, their Nodes in the workload cluster.
async fn standalone_with_a_running_pool() -> Result<Installed> {
    let image = OperatorImage::build()?;
    let node = Node::start(&[&image.archive]).await?;
    let client = node.client()?;

    apply_all(&client, &rendered("", &image)?).await?;
    wait_available_replicas(&client, 1).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let running = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=capwasm"))
        .await?;
    let pod = running.items.first().context("the Deployment's Pod")?;
    let spec = pod.spec.as_ref().context("a Pod spec")?;
    let container = spec.containers.first().context("a container")?;
    assert_eq!(container.image.as_deref(), Some(image.reference().as_str()));
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    assert!(
        statuses.iter().all(|s| s.ready),
        "the Pod's containers are ready through /readyz: {statuses:?}"
    );

    // A Cluster and a pool, served by modules from ConfigMaps and a cloud
    // on the host end of the node's network.
    let ns = "pod-install";
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(ns.into()),
            ..kube::api::ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await?;
    let workload = node.workload_client().await?;
    let (cloud, objects) = Objects::start_cloud_on(HOST_ADDRESS, workload.clone()).await?;
    let modules = objects
        // In the operator's namespace, the only one it reads components
        // and credentials from.
        .modules_from_config_map(&client, "pod", NAMESPACE, &HOST_ADDRESS.to_string())
        .await?;
    let kubeconfig = node.workload_kubeconfig_secret(ns, "c1")?;
    objects
        .create_cluster_objects(&client, &kubeconfig, ns, "c1", &modules)
        .await?;
    create(&client, &ClusterBuilder::new(ns, "c1").build()).await?;
    objects
        .create_pool(&client, ns, "p1", "c1", 2, &modules)
        .await?;
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), ns);
    let pool = wait_for(&pools, "p1", "the pool Running through the Pod", |pool| {
        pool.and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Running")
    })
    .await;
    let provider_ids = pool.map(|p| p.spec.provider_id_list).unwrap_or_default();
    assert_eq!(provider_ids.len(), 2, "two instances: {provider_ids:?}");
    let nodes: Api<NodeObject> = Api::all(workload);
    let registered: Vec<String> = nodes
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.spec.and_then(|s| s.provider_id))
        .collect();
    for id in &provider_ids {
        assert!(
            registered.contains(id),
            "{id} is a Node of the workload cluster: {registered:?}"
        );
    }
    Ok(Installed {
        node,
        client,
        cloud,
        ns,
    })
}

/// The CRDs name the webhook Service (not a URL), and a v1beta1 read of
/// the Cluster is converted through it: the API server calls the Pod at
/// the Service's endpoint.
async fn conversion_goes_through_the_service(client: &Client, ns: &str) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get(Cluster::crd_name()).await?;
    let service = crd
        .spec
        .conversion
        .and_then(|c| c.webhook)
        .and_then(|w| w.client_config)
        .and_then(|c| c.service)
        .context("the Cluster CRD converts through a Service")?;
    assert_eq!(
        (service.namespace.as_str(), service.name.as_str()),
        (NAMESPACE, "capwasm-webhook")
    );
    let v1beta1 = v1beta1_api(client, ns, "Cluster");
    let cluster = v1beta1
        .get("c1")
        .await
        .context("a v1beta1 read, converted by the Pod")?;
    assert_eq!(
        cluster.types.as_ref().map(|t| t.api_version.as_str()),
        Some("cluster.x-k8s.io/v1beta1")
    );
    Ok(())
}

/// Two replicas, both ready (the follower's webhook serves); the leader's
/// Pod deleted while the pool scales: the other takes the Lease and the
/// pool reaches its new size with no instance lost or made twice.
async fn leadership_moves_when_the_leader_pod_goes(
    client: &Client,
    cloud: &RunningSimCloud,
    ns: &str,
) -> Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    deployments
        .patch_scale(
            DEPLOYMENT,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "spec": { "replicas": 2 } })),
        )
        .await?;
    wait_available_replicas(client, 2).await?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let holder = |lease: Option<&Lease>| {
        lease
            .and_then(|l| l.spec.as_ref())
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty())
    };
    let leader = holder(
        wait_for(&leases, LEASE, "a leader", |l| holder(l).is_some())
            .await
            .as_ref(),
    )
    .context("a leader")?;

    let pools: Api<MachinePool> = Api::namespaced(client.clone(), ns);
    scale(&pools, "p1", 4).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let deleted = tokio::time::Instant::now();
    pods.delete(&leader, &DeleteParams::default()).await?;
    let next = wait_for(&leases, LEASE, "another Pod leads", |lease| {
        holder(lease).is_some_and(|h| h != leader)
    })
    .await;
    let next = holder(next.as_ref()).context("a new leader")?;
    eprintln!(
        "leadership moved from {leader} to {next} {:.1} s after the delete",
        deleted.elapsed().as_secs_f64()
    );
    let running: Vec<String> = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=capwasm"))
        .await?
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert!(
        running.contains(&next),
        "{next} is one of the Deployment's Pods: {running:?}"
    );

    let pool = wait_for_pool(&pools, "p1", "Running", 4).await;
    assert_eq!(
        pool.spec.provider_id_list.len(),
        4,
        "{:?}",
        pool.spec.provider_id_list
    );
    let instances = cloud.cloud().instances();
    assert_eq!(
        instances.len(),
        4,
        "exactly the pool's instances, none made twice or left behind: {instances:?}"
    );
    Ok(())
}

async fn wait_available_replicas(client: &Client, replicas: i32) -> Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let started = tokio::time::Instant::now();
    loop {
        let available = deployments
            .get(DEPLOYMENT)
            .await?
            .status
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        if available >= replicas {
            return Ok(());
        }
        if started.elapsed() > AVAILABLE {
            bail!(
                "{replicas} replicas of {DEPLOYMENT} not available within {AVAILABLE:?}\n{}",
                describe_pods(client).await
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_of_the_node_runs_with_an_address_of_the_pod_network() -> Result<()> {
    let node = Node::start(&[]).await?;
    let pods: Api<Pod> = Api::namespaced(node.client()?, "default");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": "sleeper" },
        "spec": {
            "containers": [{ "name": "pause", "image": testenv::node::PAUSE_IMAGE }],
        },
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let running = wait_for(&pods, "sleeper", "the Pod Running", |pod| {
        pod.and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Running")
    })
    .await
    .context("the Pod")?;
    let address = running
        .status
        .and_then(|s| s.pod_ip)
        .context("the Pod's address")?;
    assert!(
        address.starts_with("10.232.0."),
        "{address} is in {}",
        testenv::node::POD_SUBNET
    );
    Ok(())
}
