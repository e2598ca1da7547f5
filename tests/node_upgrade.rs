//! An upgrade as a user makes one: the newest release (image/releases — its
//! image built from its commit, its deploy/ and crds/ as that commit has
//! them) installed into the one-node Kubernetes with a Cluster and pools
//! Running through its Pod, then this tree's deploy/ applied over it with
//! this tree's image, one pool at rest and one scaling; then the release
//! applied again over this tree (a downgrade).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use capwasm::api::{
    Cluster, MachinePool, ProviderModule, WasmBootstrapConfig, WasmCluster, WasmMachinePool,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams};
use kube::{Client, Resource, ResourceExt as _};
use serde::de::DeserializeOwned;
use testenv::flows::{scale, wait_for_pool};
use testenv::image::OperatorImage;
use testenv::node::Node;
use testenv::pods::{self, NAMESPACE, ServedCluster};
use testenv::release::Release;

/// The release installed, this tree applied over it with a pool at rest
/// (watched throughout: Running with all its Nodes ready, every look) and
/// one scaling 1 → 3 (and 3 → 4 once this tree serves the release's
/// modules); then the release applied back over this tree while
/// the first pool scales 2 → 3. Nothing is made again: the same objects
/// (by UID), the same instances, and the cloud made exactly one instance
/// per replica ever asked for. The providers throughout are the release's
/// own, built from its commit: upgrading the operator keeps the modules a
/// user runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_release_upgrades_to_this_tree_and_back_with_every_pool_running() -> Result<()> {
    let release = Release::newest()?;
    let current = OperatorImage::build()?;
    assert_ne!(
        release.image.digest, current.digest,
        "the release ({}) and this tree ({}) are different images",
        release.image.revision, current.revision
    );
    let node = Node::start(&[&release.image.archive, &current.archive]).await?;
    let client = node.client()?;

    install(&client, &release.deploy_dir(""), &release.image).await?;
    let served =
        ServedCluster::create_with_guests(&node, &client, "upgrade", "c1", &release.guests).await?;
    served.pool(&client, "at-rest", 2).await?;
    served.pool(&client, "in-flight", 1).await?;
    let pools = served.pools(&client);
    let at_rest = wait_for_pool(&pools, "at-rest", "Running", 2).await;
    wait_for_pool(&pools, "in-flight", "Running", 1).await;
    let made = objects(&client, &served.namespace).await?;

    // The upgrade, while one pool scales.
    let watch = Watch::start(pools.clone(), "at-rest", 2);
    scale(&pools, "in-flight", 3).await?;
    install(&client, &pods::deploy_dir(""), &current).await?;
    let in_flight = wait_for_pool(&pools, "in-flight", "Running", 3).await;
    let looks = watch.stop().await?;
    eprintln!("the pool at rest was looked at {looks} times during the upgrade");
    stored_versions_are_the_storage_versions(&client, &pods::deploy_dir("")).await?;
    let upgraded = wait_for_pool(&pools, "at-rest", "Running", 2).await;
    assert_eq!(
        upgraded.spec.provider_id_list, at_rest.spec.provider_id_list,
        "the pool at rest keeps its instances"
    );
    assert_eq!(objects(&client, &served.namespace).await?, made);
    assert_eq!(in_flight.spec.provider_id_list.len(), 3);
    instances_are_exactly(&served, 5)?;
    // The release's modules are this tree's to serve now: a pool that
    // scales after the rollout scales through them (a module this tree
    // refused to load would leave the pool short, its status at rest as
    // the release left it).
    scale(&pools, "in-flight", 4).await?;
    let in_flight = wait_for_pool(&pools, "in-flight", "Running", 4).await;
    instances_are_exactly(&served, 6)?;

    // The downgrade: the release over this tree, the other pool scaling.
    let watch = Watch::start(pools.clone(), "in-flight", 4);
    scale(&pools, "at-rest", 3).await?;
    install(&client, &release.deploy_dir(""), &release.image).await?;
    let scaled = wait_for_pool(&pools, "at-rest", "Running", 3).await;
    let looks = watch.stop().await?;
    eprintln!("the pool at rest was looked at {looks} times during the downgrade");
    let kept = wait_for_pool(&pools, "in-flight", "Running", 4).await;
    assert_eq!(kept.spec.provider_id_list, in_flight.spec.provider_id_list);
    for id in &at_rest.spec.provider_id_list {
        assert!(
            scaled.spec.provider_id_list.contains(id),
            "{id} kept through the downgrade: {:?}",
            scaled.spec.provider_id_list
        );
    }
    assert_eq!(objects(&client, &served.namespace).await?, made);
    instances_are_exactly(&served, 7)?;
    drop(node);
    Ok(())
}

/// Applies the kustomization `dir` with `image` and waits until its one
/// Pod runs that image, ready.
async fn install(client: &Client, dir: &Path, image: &OperatorImage) -> Result<()> {
    pods::apply_all(
        client,
        &pods::rendered(dir, &image.reference())?,
        pods::MANAGER,
    )
    .await?;
    pods::wait_rolled_out(client, 1).await?;
    let operator_pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let running: Vec<(String, Option<String>)> = operator_pods
        .list(&ListParams::default().labels(pods::SELECTOR))
        .await?
        .items
        .iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .map(|pod| {
            let image = pod
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone());
            (pod.name_any(), image)
        })
        .collect();
    let wanted = Some(image.reference());
    if running.len() != 1 || running[0].1 != wanted {
        bail!(
            "after the rollout one Pod runs {}: {running:?}\n{}",
            image.reference(),
            pods::describe(client, NAMESPACE).await
        );
    }
    eprintln!("{} runs {}", running[0].0, image.revision);
    Ok(())
}

/// Every object of the namespace a pool stands on, and the modules, by
/// kind and name, with its UID: a UID that changes is an object made again.
async fn objects(client: &Client, namespace: &str) -> Result<BTreeMap<String, String>> {
    async fn add<K>(api: Api<K>, into: &mut BTreeMap<String, String>) -> Result<(), kube::Error>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    {
        for object in api.list(&ListParams::default()).await? {
            into.insert(
                format!("{}/{}", K::kind(&()), object.name_any()),
                object.uid().unwrap_or_default(),
            );
        }
        Ok(())
    }
    let mut uids = BTreeMap::new();
    add::<Cluster>(Api::namespaced(client.clone(), namespace), &mut uids).await?;
    add::<WasmCluster>(Api::namespaced(client.clone(), namespace), &mut uids).await?;
    add::<MachinePool>(Api::namespaced(client.clone(), namespace), &mut uids).await?;
    add::<WasmMachinePool>(Api::namespaced(client.clone(), namespace), &mut uids).await?;
    add::<WasmBootstrapConfig>(Api::namespaced(client.clone(), namespace), &mut uids).await?;
    add::<ProviderModule>(Api::all(client.clone()), &mut uids).await?;
    // A Cluster and its infrastructure, two pools with their two provider
    // objects each, two modules: a failed read never passes for "the same".
    assert_eq!(uids.len(), 10, "{uids:?}");
    Ok(uids)
}

/// The cloud holds `count` instances and has made no more than that ever.
fn instances_are_exactly(served: &ServedCluster, count: usize) -> Result<()> {
    let cloud = served.cloud.cloud();
    let instances = cloud.instances();
    let made = cloud.total_creations();
    if instances.len() != count || made != u64::try_from(count)? {
        bail!(
            "{count} instances expected, each made once: {} listed, {made} made: {instances:?}",
            instances.len()
        );
    }
    Ok(())
}

/// After the CRDs of `dir` are applied, each one's objects are stored at
/// its storage version only: nothing is left at a version the CRD might
/// later stop serving.
async fn stored_versions_are_the_storage_versions(client: &Client, dir: &Path) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut checked = 0;
    for object in testenv::kustomize::objects(dir)? {
        if object.types.as_ref().map(|t| t.kind.as_str()) != Some("CustomResourceDefinition") {
            continue;
        }
        let crd = crds.get(&object.name_any()).await?;
        let storage: Vec<&str> = crd
            .spec
            .versions
            .iter()
            .filter(|v| v.storage)
            .map(|v| v.name.as_str())
            .collect();
        let stored = crd
            .status
            .as_ref()
            .and_then(|s| s.stored_versions.clone())
            .unwrap_or_default();
        assert_eq!(stored, storage, "{}", crd.name_any());
        checked += 1;
    }
    if checked == 0 {
        bail!("{} holds no CRD", dir.display());
    }
    Ok(())
}

/// Looks at one pool every quarter second until stopped: each look must
/// find it Running with `ready` ready Nodes.
struct Watch {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Result<u32>>,
}

impl Watch {
    fn start(pools: Api<MachinePool>, name: &'static str, ready: i32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let mut looks = 0;
            while !stopped.load(Ordering::Relaxed) {
                let pool = pools.get(name).await.context("a look at the pool")?;
                let status = pool.status.unwrap_or_default();
                if status.phase.as_deref() != Some("Running")
                    || status.ready_replicas != Some(ready)
                {
                    bail!(
                        "pool {name} left Running with {ready} ready: {:?}, {:?} ready",
                        status.phase,
                        status.ready_replicas
                    );
                }
                looks += 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Ok(looks)
        });
        Self { stop, task }
    }

    /// How many looks there were; an error if one found the pool otherwise
    /// or there was none.
    async fn stop(self) -> Result<u32> {
        self.stop.store(true, Ordering::Relaxed);
        let looks = self.task.await??;
        if looks == 0 {
            bail!("the pool was never looked at");
        }
        Ok(looks)
    }
}
