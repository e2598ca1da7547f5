//! The demo's platform leg: a PlatformCluster with two node groups,
//! composed by sim-platform from a ClusterTemplate, rolled up to Ready,
//! then deleted (its CAPI Cluster first).

use std::time::Duration;

use capwasm::api::platform::{ClusterTemplateSpec, NodeGroup, PlatformClusterSpec};
use capwasm::api::providermodule::World;
use capwasm::api::tenancy::AllowedNamespaces;
use capwasm::api::{Cluster, ClusterTemplate, PlatformCluster, ProviderModule};
use capwasm::testing::objects::ProviderModuleBuilder;
use capwasm::testing::{KUBEADM_JOIN_CONFIG, SIM_PLATFORM_KINDS, guest_path};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use super::{NAMESPACE, Steps, until, until_gone};

const NAME: &str = "platform";

/// The leg's steps, each checked.
pub async fn leg(
    steps: &mut Steps,
    client: &Client,
    workload: &testenv::ApiServer,
    endpoint: &str,
) -> anyhow::Result<()> {
    steps
        .run(
            "load sim-platform; a PlatformCluster with node groups md (2) and gpu (1)",
            Box::pin(create(client, workload, endpoint)),
        )
        .await?;
    steps
        .run(
            "the PlatformCluster's phase rolls up to Ready",
            watch(client),
        )
        .await?;
    steps
        .run(
            "delete the PlatformCluster: its Cluster first, then the rest",
            delete(client),
        )
        .await
}

/// Loads sim-platform (allowed the kinds it renders) and creates template
/// `demo-v1-31` for the modules `kubeadm` and `sim`, and PlatformCluster
/// `platform` with node groups `md` (2) and `gpu` (1).
async fn create(
    client: &Client,
    workload: &testenv::ApiServer,
    endpoint: &str,
) -> anyhow::Result<()> {
    let modules: Api<ProviderModule> = Api::all(client.clone());
    let module = ProviderModuleBuilder::file(
        "sim-platform",
        World::Platform,
        &guest_path("sim_platform.wasm").to_string_lossy(),
    )
    .allowed_kinds(SIM_PLATFORM_KINDS)
    .build();
    modules.create(&PostParams::default(), &module).await?;
    testenv::flows::wait_for_module(&modules, "sim-platform", "Ready").await;
    let sim = json!({ "endpoint": endpoint, "region": "local-1", "pollSeconds": 1 });
    let mut cluster_config = sim.clone();
    cluster_config["controlPlaneHost"] = json!("127.0.0.1");
    let template = ClusterTemplate::new(
        "demo-v1-31",
        ClusterTemplateSpec {
            provider: "sim-platform".into(),
            description: Some("Kubernetes 1.31 on the simulated cloud".into()),
            values: Some(json!({
                "kubernetesVersion": "v1.31.2",
                "bootstrap": { "provider": "kubeadm", "config": serde_json::from_str::<serde_json::Value>(KUBEADM_JOIN_CONFIG)? },
                "infrastructure": { "provider": "sim", "config": sim, "clusterConfig": cluster_config },
                "encryptionKey": true,
            })),
            allowed_namespaces: Some(AllowedNamespaces::named(&[NAMESPACE])),
            ..ClusterTemplateSpec::default()
        },
    );
    Api::<ClusterTemplate>::all(client.clone())
        .create(&PostParams::default(), &template)
        .await?;
    testenv::flows::create(client, &workload.kubeconfig_secret(NAMESPACE, NAME)?).await?;
    let group = |name: &str, count| NodeGroup {
        name: name.into(),
        count: Some(count),
        ..NodeGroup::default()
    };
    let mut cluster = PlatformCluster::new(
        NAME,
        PlatformClusterSpec {
            template_name: "demo-v1-31".into(),
            node_groups: vec![group("md", 2), group("gpu", 1)],
            ..PlatformClusterSpec::default()
        },
    );
    cluster.metadata.namespace = Some(NAMESPACE.into());
    testenv::flows::create(client, &cluster).await?;
    Ok(())
}

/// Prints the phase and the node groups on every change until Ready.
async fn watch(client: &Client) -> anyhow::Result<()> {
    let clusters: Api<PlatformCluster> = Api::namespaced(client.clone(), NAMESPACE);
    let mut last = String::new();
    until(&clusters, NAME, |cluster: &PlatformCluster| {
        let status = cluster.status.clone().unwrap_or_default();
        let phase = status.phase.clone().unwrap_or_else(|| "-".into());
        let groups: Vec<String> = status
            .node_groups
            .iter()
            .map(|g| format!("{} {}/{}", g.name, g.ready, g.desired))
            .collect();
        let line = format!(
            "    {phase:<12} {:<22} {}",
            groups.join(", "),
            status.message.clone().unwrap_or_default()
        );
        if line != last {
            println!("{line}");
            last.clone_from(&line);
        }
        if phase == "Failed" {
            return Err(line);
        }
        Ok(phase == "Ready")
    })
    .await
    .map(drop)
}

/// Deletes the PlatformCluster, saying when its CAPI Cluster goes and when it does.
async fn delete(client: &Client) -> anyhow::Result<()> {
    let clusters: Api<PlatformCluster> = Api::namespaced(client.clone(), NAMESPACE);
    clusters.delete(NAME, &DeleteParams::default()).await?;
    let capi: Api<Cluster> = Api::namespaced(client.clone(), NAMESPACE);
    tokio::time::timeout(Duration::from_secs(120), until_gone(&capi, NAME)).await??;
    println!("    its Cluster is gone");
    tokio::time::timeout(Duration::from_secs(60), until_gone(&clusters, NAME)).await??;
    println!("    and then the PlatformCluster");
    Ok(())
}
