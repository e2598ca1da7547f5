//! Provider mode as its users run it: upstream Cluster API v1.14.2's core
//! manager (built from its Go module, packed as an image by the packer of
//! capwasm's) installed as a Pod the way `clusterctl init` leaves it, and
//! `deploy/provider-mode/` (unmodified but for the image, named by digest)
//! beside it, in a real one-node Kubernetes. Upstream's Pod runs the
//! Cluster and MachinePool, capwasm's Pod the provider objects; the API
//! server calls upstream's conversion and admission webhooks through their
//! Service.

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;

use anyhow::{Context as _, Result, bail, ensure};
use capwasm::api::{Cluster, MachinePool, WasmBootstrapConfig, WasmCluster, WasmMachinePool};
use capwasm::simcloud::{InstanceState, RunningSimCloud};
use futures::FutureExt as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ServiceReference, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Node as NodeObject, Pod, Service};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, CustomResourceExt as _, Resource as _, ResourceExt};
use testenv::clusterctl::{Clusterctl, ClusterctlBuild};
use testenv::flows::{Apis, condition, v1beta1_api, wait_for};
use testenv::image::{OperatorImage, UpstreamImage};
use testenv::node::Node;
use testenv::pods::{self, NAMESPACE, ServedCluster, apply_all, describe, logs, rendered};
use testenv::upstream::{UpstreamBuild, in_cluster};

/// The field manager of upstream's controllers: client-go's default, the
/// name of the binary.
const UPSTREAM_FIELD_MANAGER: &str = "manager";
/// The objects' namespace.
const NS: &str = "provider-mode";

/// Upstream's core and deploy/provider-mode/ as Pods take a Cluster and a
/// 2-replica pool to Running, each Pod reconciling its own kinds; a
/// v1beta1 read converted by upstream's Pod through its Service; the
/// Cluster deleted, upstream's core deleting capwasm's objects with it
/// through the role deploy/provider-mode/ aggregates into upstream's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_mode_runs_as_pods_beside_upstreams_manager() -> Result<()> {
    let image = OperatorImage::build()?;
    let upstream_image = UpstreamImage::build()?;
    let build = UpstreamBuild::locate()?;
    let node = Node::start(&[&image.archive, &upstream_image.archive]).await?;
    let client = node.client()?;

    in_cluster::install(&client, &build, &upstream_image.reference()).await?;
    let provider_mode = rendered(&pods::deploy_dir("provider-mode"), &image.reference())?;
    apply_all(&client, &provider_mode, pods::MANAGER).await?;
    pods::wait_rolled_out(&client, 1).await?;
    // The controller manager gathers deploy/provider-mode/'s rules into
    // upstream's role on its own time; no object of capwasm's kinds is
    // made before, so that a refusal in the logs is a missing rule.
    let roles: Api<ClusterRole> = Api::all(client.clone());
    wait_for(
        &roles,
        in_cluster::AGGREGATED_ROLE,
        "upstream's role holds deploy/provider-mode/'s rules",
        |role| {
            role.and_then(|r| r.rules.as_ref()).is_some_and(|rules| {
                rules.iter().any(|r| {
                    r.resources
                        .as_ref()
                        .is_some_and(|r| r.iter().any(|r| r == "wasmmachinepools"))
                })
            })
        },
    )
    .await;

    showing_pods(
        &client,
        Box::pin(async {
            runs_ready(
                &client,
                in_cluster::NAMESPACE,
                in_cluster::SELECTOR,
                &upstream_image.reference(),
            )
            .await?;
            runs_ready(&client, NAMESPACE, pods::SELECTOR, &image.reference()).await?;
            let served = pool_running(&node, &client).await?;
            described_by_clusterctl(&node)?;
            each_pod_reconciles_its_own(&client).await?;
            conversion_through_upstreams_service(&client).await?;
            validation_through_upstreams_service(&client).await?;
            provider_mode_registers_no_webhook(&client).await?;
            deleted_with_the_cluster(&node, &client, &served.cloud).await?;
            no_request_forbidden(&client).await
        }),
    )
    .await?;
    drop(node);
    Ok(())
}

/// `stage`, or its failure (an error, or a wait's panic) with what a user
/// would look at: both installs' Pods, their states and last log lines.
async fn showing_pods<T>(client: &Client, stage: impl Future<Output = Result<T>>) -> Result<T> {
    let failure = match AssertUnwindSafe(stage).catch_unwind().await {
        Ok(Ok(value)) => return Ok(value),
        Ok(Err(e)) => format!("{e:#}"),
        Err(panic) => panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a panic without a message".into()),
    };
    bail!(
        "{failure}\n--- the Pods ---\n{}\n{}",
        describe(client, in_cluster::NAMESPACE).await,
        describe(client, NAMESPACE).await
    )
}

/// The Pods of `selector` in `namespace` run `image` (named by digest) and
/// are ready.
async fn runs_ready(client: &Client, namespace: &str, selector: &str, image: &str) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let running = pods.list(&ListParams::default().labels(selector)).await?;
    ensure!(
        !running.items.is_empty(),
        "{namespace} runs Pods labelled {selector}"
    );
    for pod in running {
        let name = pod.name_any();
        let spec = pod.spec.context("a Pod spec")?;
        let images: Vec<Option<String>> = spec.containers.into_iter().map(|c| c.image).collect();
        ensure!(
            images == [Some(image.to_owned())],
            "{name} runs {image}: {images:?}"
        );
        let statuses = pod
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default();
        ensure!(
            !statuses.is_empty() && statuses.iter().all(|s| s.ready),
            "{name}'s containers are ready: {statuses:?}"
        );
    }
    Ok(())
}

/// A Cluster and a 2-replica pool, served by modules from a ConfigMap and
/// a cloud on the host end of the node's network: the pool Running, its
/// instances Nodes of the workload cluster.
async fn pool_running(node: &Node, client: &Client) -> Result<ServedCluster> {
    let served = ServedCluster::create(node, client, NS, "c1").await?;
    served.pool(client, "p1", 2).await?;
    served.running_on_nodes(client, node, "p1", 2).await?;
    Ok(served)
}

/// `clusterctl describe cluster` (upstream's, the same release) shows the
/// Cluster with its infrastructure Ready and, under its workers, the pool
/// with its bootstrap config and infrastructure each True with capwasm's
/// reason and message.
fn described_by_clusterctl(node: &Node) -> Result<()> {
    let clusterctl = Clusterctl::new(&ClusterctlBuild::locate()?, &[])?;
    let kubeconfig = clusterctl.file("management.kubeconfig");
    std::fs::write(&kubeconfig, node.kubeconfig_yaml()?)?;
    let kubeconfig = kubeconfig.to_string_lossy();
    let tree = clusterctl.ok(
        &[
            "describe",
            "cluster",
            "c1",
            "-n",
            NS,
            "--kubeconfig",
            &kubeconfig,
            "--echo",
        ],
        &[],
    )?;
    eprintln!("clusterctl describe cluster:\n{tree}");
    let row = |object: &str, shows: &[&str]| {
        let line = tree
            .lines()
            .find(|line| line.contains(&format!("{object} {NS}/")))
            .with_context(|| format!("{object} in clusterctl describe:\n{tree}"))?;
        for text in shows {
            ensure!(line.contains(text), "{object}'s row shows {text:?}: {line}");
        }
        Ok::<_, anyhow::Error>(())
    };
    row("Cluster", &["c1"])?;
    row("WasmCluster", &["True", "Ready"])?;
    row("MachinePool", &["p1"])?;
    row("WasmBootstrapConfig", &["True", "DataSecretAvailable"])?;
    row("WasmMachinePool", &["True", "Ready", "2 instances running"])?;
    let workers = tree.find("Workers").context("the workers in the tree")?;
    ensure!(
        tree[workers..].contains("MachinePool"),
        "the pool is under the workers:\n{tree}"
    );
    Ok(())
}

/// Upstream's Pod wrote the Cluster's and the pool's status and adopted the
/// provider objects; capwasm's Pod wrote the provider objects' status and
/// nothing of the Cluster's or the pool's.
async fn each_pod_reconciles_its_own(client: &Client) -> Result<()> {
    let apis = Apis::new(client, NS);
    let pool = apis.pools.get("p1").await?;
    let status_managers = managers(pool.meta().managed_fields.as_deref(), Some("status"));
    ensure!(
        status_managers.contains(UPSTREAM_FIELD_MANAGER),
        "upstream's manager wrote the pool's status: {status_managers:?}"
    );
    let all_managers = managers(pool.meta().managed_fields.as_deref(), None);
    ensure!(
        !all_managers
            .iter()
            .any(|m| m.starts_with("capwasm-machinepool")),
        "capwasm's MachinePool controller does not run: {all_managers:?}"
    );
    // Only upstream's Cluster controller probes the workload cluster's API
    // server as a condition of its own.
    let cluster = apis.clusters.get("c1").await?;
    let conditions = cluster.status.unwrap_or_default().conditions;
    ensure!(
        condition(&conditions, "RemoteConnectionProbe").is_some(),
        "upstream's Cluster controller probed the workload cluster: {conditions:?}"
    );

    let infra = apis.infra_pools.get("p1").await?;
    let owner = infra
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .context("the WasmMachinePool has a controller")?;
    ensure!(
        (owner.kind.as_str(), owner.name.as_str()) == ("MachinePool", "p1"),
        "upstream's MachinePool controller adopted the WasmMachinePool: {owner:?}"
    );
    let adopted = managers(infra.meta().managed_fields.as_deref(), None);
    ensure!(
        adopted.contains(UPSTREAM_FIELD_MANAGER),
        "upstream's manager set the WasmMachinePool's owner: {adopted:?}"
    );
    let infra_status = managers(infra.meta().managed_fields.as_deref(), Some("status"));
    ensure!(
        infra_status.contains(capwasm::api::provider::INFRASTRUCTURE_FIELD_MANAGER),
        "capwasm's Pod wrote the WasmMachinePool's status: {infra_status:?}"
    );
    let config = apis.configs.get("p1").await?;
    let config_status = managers(config.meta().managed_fields.as_deref(), Some("status"));
    ensure!(
        config_status.contains(capwasm::api::provider::BOOTSTRAP_FIELD_MANAGER),
        "capwasm's Pod wrote the WasmBootstrapConfig's status: {config_status:?}"
    );
    Ok(())
}

/// The field managers of `entries`, those of `subresource` when given
/// (`None`: every one).
fn managers(entries: Option<&[ManagedFieldsEntry]>, subresource: Option<&str>) -> BTreeSet<String> {
    entries
        .unwrap_or_default()
        .iter()
        .filter(|e| subresource.is_none() || e.subresource.as_deref() == subresource)
        .filter_map(|e| e.manager.clone())
        .collect()
}

/// The Cluster and MachinePool CRDs (upstream's) convert through upstream's
/// webhook Service, and v1beta1 reads of both are converted by its Pod.
async fn conversion_through_upstreams_service(client: &Client) -> Result<()> {
    for name in [Cluster::crd_name(), MachinePool::crd_name()] {
        let service = pods::conversion_service(client, name).await?;
        ensure!(
            service
                == (
                    in_cluster::NAMESPACE.to_owned(),
                    in_cluster::WEBHOOK_SERVICE.to_owned()
                ),
            "{name} converts through upstream's Service: {service:?}"
        );
    }
    let cluster = v1beta1_api(client, NS, "Cluster")
        .get("c1")
        .await
        .context("a v1beta1 read of the Cluster, converted by upstream's Pod")?;
    ensure!(
        cluster.types.as_ref().map(|t| t.api_version.as_str()) == Some("cluster.x-k8s.io/v1beta1"),
        "{:?}",
        cluster.types
    );
    // v1beta1 names references by apiVersion; v1beta2 by apiGroup.
    let pool = v1beta1_api(client, NS, "MachinePool")
        .get("p1")
        .await
        .context("a v1beta1 read of the pool, converted by upstream's Pod")?;
    let reference = pool
        .data
        .pointer("/spec/template/spec/infrastructureRef")
        .context("the v1beta1 pool's infrastructureRef")?;
    ensure!(
        reference["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("infrastructure.cluster.x-k8s.io/"))
            && reference["kind"] == "WasmMachinePool",
        "the reference in v1beta1's form: {reference}"
    );
    Ok(())
}

/// A change upstream's validation refuses (a pool moved to another
/// Cluster), refused by its Pod through the Service: the refusal names the
/// webhook, which only the API server's call to it gives.
async fn validation_through_upstreams_service(client: &Client) -> Result<()> {
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let moved = serde_json::json!({ "spec": {
        "clusterName": "c2",
        "template": { "spec": { "clusterName": "c2" } },
    }});
    let dry_run = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let refused = pools.patch("p1", &dry_run, &Patch::Merge(&moved)).await;
    let message = match refused {
        Err(kube::Error::Api(status)) => status.message,
        other => bail!("moving the pool to another Cluster is refused: {other:?}"),
    };
    ensure!(
        message.contains("admission webhook \"validation.machinepool.cluster.x-k8s.io\" denied")
            && message.contains("immutable"),
        "upstream's validation refused it: {message}"
    );
    Ok(())
}

/// deploy/provider-mode/ has no webhook of its own: upstream converts and
/// admits Cluster and MachinePool, and capwasm serves its webhooks only
/// beside its own core. Nothing in the cluster calls capwasm's namespace.
async fn provider_mode_registers_no_webhook(client: &Client) -> Result<()> {
    let services: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    let names: Vec<String> = services
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    ensure!(
        !names.iter().any(|n| n == "capwasm-webhook"),
        "no webhook Service in {NAMESPACE}: {names:?}"
    );
    // Every admission webhook is upstream's, called through its Service.
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let mut services: Vec<(String, ServiceReference)> = Vec::new();
    for configuration in validating.list(&ListParams::default()).await?.items {
        for webhook in configuration.webhooks.unwrap_or_default() {
            services.extend(webhook.client_config.service.map(|s| (webhook.name, s)));
        }
    }
    for configuration in mutating.list(&ListParams::default()).await?.items {
        for webhook in configuration.webhooks.unwrap_or_default() {
            services.extend(webhook.client_config.service.map(|s| (webhook.name, s)));
        }
    }
    ensure!(
        services
            .iter()
            .any(|(_, s)| s.namespace == in_cluster::NAMESPACE
                && s.name == in_cluster::WEBHOOK_SERVICE),
        "upstream's admission webhooks are registered: {services:?}"
    );
    let capwasm: Vec<&String> = services
        .iter()
        .filter(|(_, s)| s.namespace == NAMESPACE)
        .map(|(name, _)| name)
        .collect();
    ensure!(
        capwasm.is_empty(),
        "admission webhooks calling {NAMESPACE}: {capwasm:?}"
    );
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds.list(&ListParams::default()).await?.items {
        let name = crd.name_any();
        let service = crd
            .spec
            .conversion
            .and_then(|c| c.webhook)
            .and_then(|w| w.client_config)
            .and_then(|c| c.service);
        ensure!(
            service.as_ref().is_none_or(|s| s.namespace != NAMESPACE),
            "{name} converts through capwasm: {service:?}"
        );
    }
    Ok(())
}

/// Deleting the Cluster: upstream's core deletes the pool and capwasm's
/// provider objects (the delete its aggregated role grants), capwasm's Pod
/// releases them (the instances terminated), and nothing is left.
async fn deleted_with_the_cluster(
    node: &Node,
    client: &Client,
    cloud: &RunningSimCloud,
) -> Result<()> {
    let apis = Apis::new(client, NS);
    let nodes: Api<NodeObject> = Api::all(node.workload_client().await?);
    let node_names: Vec<String> = nodes
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    ensure!(!node_names.is_empty(), "the pool's Nodes are registered");
    apis.clusters.delete("c1", &DeleteParams::default()).await?;
    wait_for(&apis.clusters, "c1", "the Cluster is gone", |c| c.is_none()).await;
    ensure!(
        apis.pools.get_opt("p1").await?.is_none(),
        "the pool is gone"
    );
    let configs: Api<WasmBootstrapConfig> = Api::namespaced(client.clone(), NS);
    ensure!(configs.get_opt("p1").await?.is_none(), "the config is gone");
    let infra_pools: Api<WasmMachinePool> = Api::namespaced(client.clone(), NS);
    ensure!(
        infra_pools.get_opt("p1").await?.is_none(),
        "the WasmMachinePool is gone"
    );
    let infra_clusters: Api<WasmCluster> = Api::namespaced(client.clone(), NS);
    ensure!(
        infra_clusters.get_opt("c1").await?.is_none(),
        "the WasmCluster is gone"
    );
    let live: Vec<_> = cloud
        .cloud()
        .instances()
        .into_iter()
        .filter(|i| i.instance.state != InstanceState::Terminating)
        .collect();
    ensure!(live.is_empty(), "instances left in the cloud: {live:?}");
    for name in node_names {
        wait_for(&nodes, &name, "the Node is deleted", |n| n.is_none()).await;
    }
    Ok(())
}

/// Neither Pod was refused a request: each install's roles grant what its
/// controllers do (upstream's core reaches capwasm's kinds only through
/// the role deploy/provider-mode/ aggregates into its own).
async fn no_request_forbidden(client: &Client) -> Result<()> {
    for (namespace, selector) in [
        (in_cluster::NAMESPACE, in_cluster::SELECTOR),
        (NAMESPACE, pods::SELECTOR),
    ] {
        let log = logs(client, namespace, selector).await?;
        let forbidden: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("forbidden"))
            .take(10)
            .collect();
        ensure!(
            forbidden.is_empty(),
            "requests of {namespace}'s Pods refused:\n{}",
            forbidden.join("\n")
        );
    }
    Ok(())
}
