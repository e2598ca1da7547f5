//! deploy/ as a user applies it to a cluster whose kubelet runs it: rendered
//! by kustomize with the image named by digest, applied server-side, waited
//! on until its Pods are available, and described — Pods, container states,
//! logs — when they are not.

use std::fmt::Debug;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use capwasm::api::MachinePool;
use capwasm::simcloud::RunningSimCloud;
use capwasm::testing::guest_path;
use capwasm::testing::objects::ClusterBuilder;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Namespace, Node as NodeObject, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, LogParams, ObjectMeta, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt as _};
use serde::de::DeserializeOwned;

use crate::flows::{Modules, Objects, create, wait_for_pool};
use crate::image::REPOSITORY;
use crate::node::{HOST_ADDRESS, Node};
use crate::{Error, Result};

/// The operator's namespace in deploy/.
pub const NAMESPACE: &str = "capwasm-system";
/// The operator's Deployment in deploy/.
pub const DEPLOYMENT: &str = "capwasm-controller-manager";
/// The label every operator Pod carries.
pub const SELECTOR: &str = "app.kubernetes.io/name=capwasm";
/// The operator's container.
pub const CONTAINER: &str = "manager";
/// The field manager of what the tests apply of deploy/.
pub const MANAGER: &str = "capwasm-tests";
/// From apply to an available Deployment: the image is in containerd
/// already, the Pod waits for its readiness probe (every 10 s).
pub const AVAILABLE: Duration = Duration::from_secs(120);

/// Applies the kustomization `dir` with `image` (a reference, by digest)
/// as [`apply_all`] does, and waits until its Deployment runs one ready Pod.
///
/// # Errors
///
/// If an object is refused or the rollout does not end in time.
pub async fn install(client: &Client, dir: &Path, image: &str) -> Result<Deployment> {
    apply_all(client, &rendered(dir, image)?, MANAGER).await?;
    wait_rolled_out(client, 1).await
}

/// deploy/ of this working tree, or one of its variants (`provider-mode`,
/// `sharded`).
pub fn deploy_dir(variant: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(variant)
}

/// The kustomization `dir` as kustomize renders it, every container of
/// capwasm's image given `image` (a reference by digest) instead.
///
/// # Errors
///
/// If kustomize fails, or nothing names capwasm's image.
pub fn rendered(dir: &Path, image: &str) -> Result<Vec<DynamicObject>> {
    let mut objects = crate::kustomize::objects(dir)?;
    let mut named = 0;
    for object in &mut objects {
        let Some(containers) = object
            .data
            .pointer_mut("/spec/template/spec/containers")
            .and_then(|c| c.as_array_mut())
        else {
            continue;
        };
        for container in containers {
            let Some(field) = container.get_mut("image") else {
                continue;
            };
            if field
                .as_str()
                .is_some_and(|i| i.starts_with(&format!("{REPOSITORY}:")))
            {
                *field = serde_json::Value::String(image.to_owned());
                named += 1;
            }
        }
    }
    if named == 0 {
        return Err(Error::Manifest(format!(
            "{} names no {REPOSITORY} image",
            dir.display()
        )));
    }
    Ok(objects)
}

/// Applies every object in order, server-side as `manager`, taking over
/// any field another manager set (as `kubectl apply --server-side
/// --force-conflicts`).
///
/// # Errors
///
/// The first object the API server refuses.
pub async fn apply_all(client: &Client, objects: &[DynamicObject], manager: &str) -> Result<()> {
    let params = PatchParams::apply(manager).force();
    for object in objects {
        crate::kustomize::apply(client, object, &params)
            .await
            .map_err(|e| {
                let kind = object.types.as_ref().map_or("", |t| t.kind.as_str());
                Error::Manifest(format!(
                    "applying {kind} {}: {}",
                    object.name_any(),
                    capwasm::report::error_chain(&e)
                ))
            })?;
    }
    Ok(())
}

/// What a user would look at when a Deployment does not become available
/// (`kubectl describe pods`, `kubectl logs`): each Pod of `namespace` with
/// its status, the events about it, and its container's last lines — of
/// the previous run too, for a container that restarted.
pub async fn describe(client: &Client, namespace: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let mut text = String::new();
    let list = match pods.list(&ListParams::default()).await {
        Ok(list) => list,
        Err(e) => return format!("the Pods of {namespace} could not be listed: {e}"),
    };
    if list.items.is_empty() {
        return format!("{namespace} has no Pods");
    }
    for pod in list {
        let name = pod.name_any();
        let status = serde_json::to_string_pretty(&pod.status).unwrap_or_default();
        let _ = writeln!(text, "Pod {namespace}/{name}\n{status}");
        let about = ListParams::default().fields(&format!("involvedObject.name={name}"));
        if let Ok(events) = events.list(&about).await {
            for event in events {
                let _ = writeln!(
                    text,
                    "  event {} {}: {}",
                    event.type_.unwrap_or_default(),
                    event.reason.unwrap_or_default(),
                    event.message.unwrap_or_default()
                );
            }
        }
        for previous in [false, true] {
            let logs = pods
                .logs(
                    &name,
                    &LogParams {
                        tail_lines: Some(40),
                        previous,
                        ..LogParams::default()
                    },
                )
                .await;
            match logs {
                Ok(logs) => {
                    let run = if previous { "previous run" } else { "logs" };
                    let _ = writeln!(text, "{run}:\n{logs}");
                }
                Err(e) if !previous => {
                    let _ = writeln!(text, "(no logs: {e})");
                }
                Err(_) => {}
            }
        }
    }
    text
}

/// Waits until `replicas` of the operator's Deployment are available and
/// every one of its Pods runs its current template (a finished rollout).
///
/// # Errors
///
/// When that does not happen within [`AVAILABLE`], with [`describe`].
pub async fn wait_rolled_out(client: &Client, replicas: i32) -> Result<Deployment> {
    wait_deployment_rolled_out(client, NAMESPACE, DEPLOYMENT, replicas, AVAILABLE).await
}

/// [`wait_rolled_out`] for Deployment `namespace/name`, `within` a time.
///
/// # Errors
///
/// As [`wait_rolled_out`].
pub async fn wait_deployment_rolled_out(
    client: &Client,
    namespace: &str,
    name: &str,
    replicas: i32,
    within: Duration,
) -> Result<Deployment> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let started = tokio::time::Instant::now();
    loop {
        let deployment = deployments.get(name).await?;
        let generation = deployment.metadata.generation;
        let status = deployment.status.clone().unwrap_or_default();
        let done = status.observed_generation == generation
            && status.updated_replicas == Some(replicas)
            && status.available_replicas == Some(replicas)
            && status.replicas == Some(replicas);
        if done {
            return Ok(deployment);
        }
        if started.elapsed() > within {
            return Err(Error::Node(format!(
                "{replicas} replicas of {namespace}/{name} not rolled out within {within:?}: {status:?}\n{}",
                describe(client, namespace).await
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until `done` holds for object `name` of `api` (`None`: it does not
/// exist), at most `timeout`, and returns it.
///
/// # Errors
///
/// After `timeout`: what was awaited, the object as it is, and the Pods
/// ([`describe`]).
pub async fn wait_until<K>(
    client: &Client,
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    done: impl Fn(Option<&K>) -> bool,
) -> Result<Option<K>>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    match crate::flows::watch_until(api, name, what, timeout, done).await {
        Ok(object) => Ok(object),
        Err(now) => Err(Error::Pods(format!(
            "{name}: not {what} within {timeout:?}; it is now {now:#?}\n{}",
            describe(client, NAMESPACE).await
        ))),
    }
}

/// Waits until `count` of the operator's Pods are Ready, none of them
/// going away; returns them.
///
/// # Errors
///
/// After `timeout`, with [`describe`].
pub async fn wait_ready_pods(client: &Client, count: usize, timeout: Duration) -> Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let started = tokio::time::Instant::now();
    loop {
        let list = pods.list(&ListParams::default().labels(SELECTOR)).await?;
        let ready: Vec<Pod> = list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && is_ready(p))
            .collect();
        if ready.len() == count {
            return Ok(ready);
        }
        if started.elapsed() > timeout {
            return Err(Error::Pods(format!(
                "{count} Ready Pods of {SELECTOR} not there within {timeout:?} ({} are)\n{}",
                ready.len(),
                describe(client, NAMESPACE).await
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether `pod`'s Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The Service CRD `name` converts through, as (namespace, name).
///
/// # Errors
///
/// If the CRD cannot be read or converts through no Service.
pub async fn conversion_service(client: &Client, name: &str) -> Result<(String, String)> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.get(name)
        .await?
        .spec
        .conversion
        .and_then(|c| c.webhook)
        .and_then(|w| w.client_config)
        .and_then(|c| c.service)
        .map(|s| (s.namespace, s.name))
        .ok_or_else(|| Error::Manifest(format!("{name} converts through no Service")))
}

/// The whole log of each Pod (of its one container) in `namespace` labelled
/// `selector`, each line prefixed with its Pod's name.
///
/// # Errors
///
/// If the Pods cannot be listed or a log read; a namespace with no such
/// Pod is an error too, so that no check passes on logs never read.
pub async fn logs(client: &Client, namespace: &str, selector: &str) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = pods.list(&ListParams::default().labels(selector)).await?;
    if list.items.is_empty() {
        return Err(Error::Node(format!(
            "no Pod in {namespace} is labelled {selector}"
        )));
    }
    let mut text = String::new();
    for pod in list {
        let name = pod.name_any();
        let log = pods.logs(&name, &LogParams::default()).await?;
        for line in log.lines() {
            let _ = writeln!(text, "{name}: {line}");
        }
    }
    Ok(text)
}

/// A Cluster the operator's Pods serve: its namespace, the simulated cloud
/// on the host end of the node's network (instances join the node's
/// workload API server), and the provider modules, read from a ConfigMap in
/// the operator's namespace (the only one it reads components from).
pub struct ServedCluster {
    /// The cloud; dropped with it.
    pub cloud: RunningSimCloud,
    /// What makes the Cluster's and pools' objects.
    pub objects: Objects,
    /// The modules serving them.
    pub modules: Modules,
    /// The Cluster's namespace.
    pub namespace: String,
    /// The Cluster's name.
    pub name: String,
}

impl ServedCluster {
    /// Namespace `namespace` with Cluster `name`, its infrastructure and
    /// kubeconfig, served by modules `<namespace>-kubeadm` and
    /// `<namespace>-sim`.
    ///
    /// # Errors
    ///
    /// If an object is refused or the modules do not load.
    pub async fn create(node: &Node, client: &Client, namespace: &str, name: &str) -> Result<Self> {
        Self::create_with_guests(node, client, namespace, name, &guest_path("")).await
    }

    /// [`Self::create`] with the components in `guests` (a release's, say).
    ///
    /// # Errors
    ///
    /// If an object is refused or the modules do not load.
    pub async fn create_with_guests(
        node: &Node,
        client: &Client,
        namespace: &str,
        name: &str,
        guests: &Path,
    ) -> Result<Self> {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let object = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        namespaces.create(&PostParams::default(), &object).await?;
        let (cloud, objects) =
            Objects::start_cloud_on(HOST_ADDRESS, node.workload_client().await?).await?;
        let modules = objects
            .modules_from_config_map_in(
                client,
                namespace,
                NAMESPACE,
                &HOST_ADDRESS.to_string(),
                guests,
            )
            .await?;
        let kubeconfig = node.workload_kubeconfig_secret(namespace, name)?;
        objects
            .create_cluster_objects(client, &kubeconfig, namespace, name, &modules)
            .await?;
        create(client, &ClusterBuilder::new(namespace, name).build()).await?;
        Ok(Self {
            cloud,
            objects,
            modules,
            namespace: namespace.into(),
            name: name.into(),
        })
    }

    /// Pool `name` of the Cluster with `replicas`, and its provider objects.
    ///
    /// # Errors
    ///
    /// If an object is refused.
    pub async fn pool(&self, client: &Client, name: &str, replicas: i32) -> Result<()> {
        self.objects
            .create_pool(
                client,
                &self.namespace,
                name,
                &self.name,
                replicas,
                &self.modules,
            )
            .await
    }

    /// The Cluster's pools.
    pub fn pools(&self, client: &Client) -> Api<MachinePool> {
        Api::namespaced(client.clone(), &self.namespace)
    }

    /// Waits until pool `name` is Running with `replicas` ready, and checks
    /// each of its instances is a Node of the workload cluster: its
    /// providerIDs.
    ///
    /// # Errors
    ///
    /// If the Nodes cannot be listed or one is missing.
    ///
    /// # Panics
    ///
    /// As [`wait_for_pool`].
    pub async fn running_on_nodes(
        &self,
        client: &Client,
        node: &Node,
        name: &str,
        replicas: i32,
    ) -> Result<Vec<String>> {
        let pool = wait_for_pool(&self.pools(client), name, "Running", replicas).await;
        let provider_ids = pool.spec.provider_id_list;
        let nodes: Api<NodeObject> = Api::all(node.workload_client().await?);
        let registered: Vec<String> = nodes
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|n| n.spec.and_then(|s| s.provider_id))
            .collect();
        let missing: Vec<&String> = provider_ids
            .iter()
            .filter(|id| !registered.contains(id))
            .collect();
        if provider_ids.len() != usize::try_from(replicas).unwrap_or(0) || !missing.is_empty() {
            return Err(Error::Node(format!(
                "pool {name}'s instances {provider_ids:?} are not {replicas} Nodes of the workload cluster ({registered:?})"
            )));
        }
        Ok(provider_ids)
    }
}
