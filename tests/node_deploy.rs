//! capwasm as its users run it: the image `make image` builds, deployed by
//! `deploy/` (unmodified but for the image, named by digest as a release
//! names it) into a real one-node Kubernetes — kubelet, containerd, runc,
//! CNI, kube-proxy, scheduler and controller manager — where the operator
//! runs as a Pod: read-only root filesystem, non-root, its probes, its
//! ServiceAccount's rights through the `kubernetes` Service.

use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use capwasm::api::platform::{NodeGroup, PlatformClusterSpec};
use capwasm::api::{Cluster, MachinePool, PlatformCluster};
use capwasm::simcloud::RunningSimCloud;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, LogParams, Patch, PatchParams, PostParams,
};
use kube::{Client, CustomResourceExt as _, ResourceExt};
use testenv::flows::{scale, v1beta1_api, wait_for, wait_for_pool};
use testenv::image::OperatorImage;
use testenv::node::Node;
use testenv::pods::{self, DEPLOYMENT, NAMESPACE, ServedCluster};

/// The operator's leader-election Lease.
const LEASE: &str = "capwasm-leader";

/// What a standalone install running as Pods holds once its pool runs.
struct Installed {
    node: Node,
    client: Client,
    served: ServedCluster,
}

/// The standalone install as Pods takes a pool to Running; then the
/// webhooks — conversion and PlatformCluster admission — called by the API
/// server through their Service (this found
/// deploy/'s ClusterRole without `get` on the CRDs the webhook points at
/// itself: no caBundle, every conversion refused), then the leader's Pod
/// deleted while the pool scales.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standalone_install_runs_as_pods_serves_its_webhook_and_survives_its_leader()
-> Result<()> {
    let Installed {
        node,
        client,
        served,
    } = standalone_with_a_running_pool().await?;
    conversion_goes_through_the_service(&client, &served.namespace).await?;
    admission_goes_through_the_service(&client, &served.namespace).await?;
    leadership_moves_when_the_leader_pod_goes(&client, &served.cloud, &served.namespace).await?;
    drop(node);
    Ok(())
}

/// deploy/ with the image, its Pod Ready, and a Cluster and 2-replica pool
/// Running through it, their Nodes in the workload cluster.
async fn standalone_with_a_running_pool() -> Result<Installed> {
    let image = OperatorImage::build()?;
    let node = Node::start(&[&image.archive]).await?;
    let client = node.client()?;

    pods::install(&client, &pods::deploy_dir(""), &image.reference()).await?;
    let operator_pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let running = operator_pods
        .list(&ListParams::default().labels(pods::SELECTOR))
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

    // A Cluster and a pool, served by modules from a ConfigMap and a cloud
    // on the host end of the node's network.
    let served = ServedCluster::create(&node, &client, "pod-install", "c1").await?;
    served.pool(&client, "p1", 2).await?;
    served.running_on_nodes(&client, &node, "p1", 2).await?;
    Ok(Installed {
        node,
        client,
        served,
    })
}

/// The CRDs name the webhook Service (not a URL), and a v1beta1 read of
/// the Cluster is converted through it: the API server calls the Pod at
/// the Service's endpoint.
async fn conversion_goes_through_the_service(client: &Client, ns: &str) -> Result<()> {
    assert_eq!(
        pods::conversion_service(client, Cluster::crd_name()).await?,
        (NAMESPACE.to_owned(), "capwasm-webhook".to_owned())
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

/// The PlatformCluster admission webhook names the Service too, and a
/// PlatformCluster breaking the node groups' rules is refused on create by
/// the Pod behind it: nothing stored.
async fn admission_goes_through_the_service(client: &Client, ns: &str) -> Result<()> {
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let configuration = configurations.get("capwasm-platform").await?;
    let services: Vec<(String, String)> = configuration
        .webhooks
        .iter()
        .flatten()
        .filter_map(|w| w.client_config.service.as_ref())
        .map(|s| (s.namespace.clone(), s.name.clone()))
        .collect();
    assert_eq!(
        services,
        [(NAMESPACE.to_owned(), "capwasm-webhook".to_owned())],
        "every webhook calls the Service"
    );
    let clusters: Api<PlatformCluster> = Api::namespaced(client.clone(), ns);
    let mut bad = PlatformCluster::new(
        "both-counts",
        PlatformClusterSpec {
            template_name: "any".into(),
            node_groups: vec![NodeGroup {
                name: "md".into(),
                count: Some(1),
                min_count: Some(1),
                max_count: Some(2),
                values: None,
            }],
            ..PlatformClusterSpec::default()
        },
    );
    bad.metadata.namespace = Some(ns.to_owned());
    match clusters.create(&PostParams::default(), &bad).await {
        Err(kube::Error::Api(status)) => assert!(
            status.message.contains("denied the request")
                && status
                    .message
                    .contains("set count, or minCount and maxCount, not both"),
            "{status:?}"
        ),
        other => bail!("the PlatformCluster was not refused on admission: {other:?}"),
    }
    assert!(clusters.get_opt("both-counts").await?.is_none());
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
    pods::wait_rolled_out(client, 2).await?;
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
        .list(&ListParams::default().labels(pods::SELECTOR))
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

/// deploy/ when the operator cannot start, as its users meet it: without
/// the CRDs, with a flag it does not know (a rollout that never finishes)
/// and with its ClusterRoleBinding gone. Each time the new Pod's container
/// exits saying why — in its logs, the kubelet's back-off event and the
/// Deployment's status — while the replica already running keeps
/// reconciling and serving its webhook.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_that_cannot_start_says_why_and_the_running_one_keeps_serving() -> Result<()> {
    let image = OperatorImage::build()?;
    let node = Node::start(&[&image.archive]).await?;
    let client = node.client()?;
    let objects = pods::rendered(&pods::deploy_dir(""), &image.reference())?;
    let is_crd = |o: &DynamicObject| {
        o.types.as_ref().map(|t| t.kind.as_str()) == Some("CustomResourceDefinition")
    };
    let (crds, rest): (Vec<_>, Vec<_>) = objects.iter().cloned().partition(is_crd);

    // No CRDs: the first Pod never starts; applying them and replacing it
    // is the whole remedy.
    pods::apply_all(&client, &rest, pods::MANAGER).await?;
    let first = crashes_saying(&client, &[], "the capwasm CRDs are not installed").await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let status = deployments.get_status(DEPLOYMENT).await?.status;
    assert_eq!(
        status.as_ref().and_then(|s| s.unavailable_replicas),
        Some(1),
        "{status:?}"
    );
    pods::apply_all(&client, &crds, pods::MANAGER).await?;
    let operator_pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    operator_pods
        .delete(&first, &DeleteParams::default())
        .await?;
    pods::wait_rolled_out(&client, 1).await?;
    let served = ServedCluster::create(&node, &client, "cannot-start", "c1").await?;
    served.pool(&client, "p1", 1).await?;
    let pools = served.pools(&client);
    wait_for_pool(&pools, "p1", "Running", 1).await;

    // A flag this version does not know, rolled out: the new Pod exits,
    // the rollout stalls with the old replica available, still leading.
    let running = pod_names(&client).await?;
    deployments
        .patch(
            DEPLOYMENT,
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(serde_json::json!([{
                "op": "add",
                "path": "/spec/template/spec/containers/0/args/-",
                "value": "--no-such-flag",
            }]))?),
        )
        .await?;
    crashes_saying(&client, &running, "unexpected argument '--no-such-flag'").await?;
    let status = deployments.get_status(DEPLOYMENT).await?.status;
    let counts = status.as_ref().map(|s| {
        (
            s.updated_replicas,
            s.available_replicas,
            s.unavailable_replicas,
        )
    });
    assert_eq!(
        counts,
        Some((Some(1), Some(1), Some(1))),
        "one updated and unavailable, the old one available: {status:?}"
    );
    scale(&pools, "p1", 2).await?;
    wait_for_pool(&pools, "p1", "Running", 2).await;
    conversion_goes_through_the_service(&client, &served.namespace).await?;
    // The rollout undone: deploy/ applied again.
    pods::apply_all(&client, &rest, pods::MANAGER).await?;
    pods::wait_rolled_out(&client, 1).await?;

    // The ClusterRoleBinding removed, then a new Pod: it cannot list what
    // it reconciles and says so; the running one still converts.
    let running = pod_names(&client).await?;
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    bindings
        .delete("capwasm-manager", &DeleteParams::default())
        .await?;
    deployments
        .patch(
            DEPLOYMENT,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "spec": { "template": { "metadata": {
                "annotations": { "capwasm.io/restarted": "rbac-removed" } } } } })),
        )
        .await?;
    crashes_saying(&client, &running, "forbidden").await?;
    conversion_goes_through_the_service(&client, &served.namespace).await?;
    drop(node);
    Ok(())
}

/// The operator Pods' names.
async fn pod_names(client: &Client) -> Result<Vec<String>> {
    let operator_pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    Ok(operator_pods
        .list(&ListParams::default().labels(pods::SELECTOR))
        .await?
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect())
}

/// Waits for an operator Pod not in `running` whose container has exited
/// with `text` in its logs, and the kubelet's back-off event about it;
/// returns its name.
async fn crashes_saying(client: &Client, running: &[String], text: &str) -> Result<String> {
    let operator_pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let events: Api<Event> = Api::namespaced(client.clone(), NAMESPACE);
    let started = tokio::time::Instant::now();
    loop {
        for pod in operator_pods
            .list(&ListParams::default().labels(pods::SELECTOR))
            .await?
        {
            let name = pod.name_any();
            if running.contains(&name) {
                continue;
            }
            let exited = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|s| s.first())
                .is_some_and(|s| {
                    s.last_state
                        .as_ref()
                        .and_then(|l| l.terminated.as_ref())
                        .is_some()
                });
            if !exited {
                continue;
            }
            let logs = operator_pods
                .logs(
                    &name,
                    &LogParams {
                        previous: true,
                        ..LogParams::default()
                    },
                )
                .await
                .unwrap_or_default();
            let about = ListParams::default().fields(&format!("involvedObject.name={name}"));
            let backing_off = events
                .list(&about)
                .await?
                .items
                .iter()
                .any(|e| e.reason.as_deref() == Some("BackOff"));
            if logs.contains(text) && backing_off {
                eprintln!("{name} exited saying: {}", logs.trim());
                return Ok(name);
            }
        }
        if started.elapsed() > pods::AVAILABLE {
            bail!(
                "no new operator Pod exited saying {text:?} within {:?}\n{}",
                pods::AVAILABLE,
                pods::describe(client, NAMESPACE).await
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
