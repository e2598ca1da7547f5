//! The operator's caches: one watch per kind it reads, shared by every
//! controller, so a reconcile reads what it needs from memory and the API
//! server sees one watch per kind, not one per controller and a GET per
//! reconcile. Indexes answer "the pools of this Cluster" and "who references
//! this object" without a scan. Objects are cached without their
//! managedFields, which nothing reads.
//!
//! A cache can be stale (a change may not have arrived yet), so a reconcile
//! acts only on what its write will verify: writes are server-side applies
//! of what the reconcile owns, or patches with a `test` of what they
//! replace; an object missing from a cache is never the sole reason to
//! create or delete something.

mod index;
pub mod labelled;
mod shared;

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt as _;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource, ResourceExt as _};
use serde::de::DeserializeOwned;

pub use index::Index;
pub use shared::{Cache, Events, Keep, Reader};

use super::metrics::Metrics;
use super::shard::{OfCluster, Shard};
use crate::api::{
    Cluster, ClusterTemplate, ContractVersionedObjectReference, Machine, MachinePool,
    PlatformCluster, ProviderModule, WasmBootstrapConfig, WasmCluster, WasmControlPlane,
    WasmMachine, WasmMachinePool, labels,
};

/// Every cache the controllers read.
pub struct Caches {
    /// Clusters.
    pub clusters: Cache<Cluster>,
    /// MachinePools.
    pub pools: Cache<MachinePool>,
    /// WasmBootstrapConfigs.
    pub configs: Cache<WasmBootstrapConfig>,
    /// WasmMachinePools.
    pub infra_pools: Cache<WasmMachinePool>,
    /// WasmClusters.
    pub infra_clusters: Cache<WasmCluster>,
    /// WasmControlPlanes.
    pub control_planes: Cache<WasmControlPlane>,
    /// WasmMachines.
    pub infra_machines: Cache<WasmMachine>,
    /// Machines (standalone mode: capwasm's core serves them).
    pub machines: Cache<Machine>,
    /// ProviderModules.
    pub modules: Cache<ProviderModule>,
    /// PlatformClusters.
    pub platforms: Cache<PlatformCluster>,
    /// ClusterTemplates.
    pub templates: Cache<ClusterTemplate>,
    /// Secrets labelled with a Cluster's name (kubeconfigs, CAs, bootstrap
    /// data), metadata only: their data is read when needed, never kept.
    pub secrets: Cache<PartialObjectMeta<Secret>>,
    /// ConfigMaps, metadata only: a change reloads the modules reading one.
    pub config_maps: Cache<PartialObjectMeta<ConfigMap>>,
    /// Namespaces, metadata only: their labels, which a ProviderModule's
    /// or ClusterTemplate's `allowedNamespaces` selector reads.
    pub namespaces: Cache<PartialObjectMeta<Namespace>>,
    /// CustomResourceDefinitions without their schemas: which version of a
    /// referenced kind implements which contract.
    pub crds: Cache<CustomResourceDefinition>,
    /// MachinePools by `<namespace>/<cluster>`.
    pub pools_by_cluster: Index<MachinePool>,
    /// MachinePools by the objects they reference ([`reference_key`]).
    pub pools_by_reference: Index<MachinePool>,
    /// Clusters by the objects they reference ([`reference_key`]).
    pub clusters_by_reference: Index<Cluster>,
    /// WasmBootstrapConfigs by `<namespace>/<cluster-name label>`.
    pub configs_by_cluster: Index<WasmBootstrapConfig>,
    /// WasmMachinePools by `<namespace>/<cluster-name label>`.
    pub infra_pools_by_cluster: Index<WasmMachinePool>,
    /// WasmMachines by `<namespace>/<name>` of the WasmMachinePool owning them.
    pub infra_machines_by_pool: Index<WasmMachine>,
    /// Machines by `<namespace>/<name>` of the MachinePool controlling them.
    pub machines_by_pool: Index<Machine>,
    /// Machines by `<namespace>/<cluster>/<providerID>`: whose Node changed.
    pub machines_by_provider_id: Index<Machine>,
    /// The shard whose objects the caches of a Cluster's objects hold.
    pub shard: Shard,
}

/// A cache of CustomResourceDefinitions without their schemas: which
/// version of a kind implements which contract.
pub fn crds(client: &Client) -> Cache<CustomResourceDefinition> {
    Cache::new(
        "customresourcedefinitions",
        watcher(Api::all(client.clone()), watcher::Config::default())
            .default_backoff()
            .modify(|crd: &mut CustomResourceDefinition| {
                crd.managed_fields_mut().clear();
                crd.annotations_mut().clear();
                for version in &mut crd.spec.versions {
                    version.schema = None;
                    version.additional_printer_columns = None;
                }
            })
            .boxed(),
        (),
    )
}

impl Caches {
    /// Caches of everything the controllers read, through `client`, of the
    /// Clusters of `shard`; they fill once [`Caches::run`] runs.
    pub fn new(client: &Client, shard: Shard) -> Self {
        let (pools_by_cluster, pools_by_reference) = (pools_by_cluster(), pools_by_reference());
        let clusters_by_reference = clusters_by_reference();
        let configs_by_cluster = Index::new(by_cluster_label::<WasmBootstrapConfig>, ());
        let infra_pools_by_cluster = Index::new(by_cluster_label::<WasmMachinePool>, ());
        let infra_machines_by_pool = Index::new(by_pool_owner, ());
        let machines_by_pool = Index::new(by_controlling_pool, ());
        let machines_by_provider_id = Index::new(by_provider_id, ());
        Self {
            clusters: sharded(typed(client), shard).indexed(&clusters_by_reference),
            pools: sharded(typed(client), shard)
                .indexed(&pools_by_cluster)
                .indexed(&pools_by_reference),
            configs: sharded(typed(client), shard).indexed(&configs_by_cluster),
            infra_pools: sharded(typed(client), shard).indexed(&infra_pools_by_cluster),
            infra_clusters: sharded(typed(client), shard),
            control_planes: sharded(typed(client), shard),
            infra_machines: sharded(typed(client), shard).indexed(&infra_machines_by_pool),
            machines: sharded(typed(client), shard)
                .indexed(&machines_by_pool)
                .indexed(&machines_by_provider_id),
            modules: typed(client),
            platforms: typed(client),
            templates: typed(client),
            secrets: sharded(
                metadata(
                    client,
                    watcher::Config::default().labels(labels::CLUSTER_NAME),
                ),
                shard,
            ),
            config_maps: metadata(client, watcher::Config::default()),
            namespaces: metadata(client, watcher::Config::default()),
            crds: crds(client),
            pools_by_cluster,
            pools_by_reference,
            clusters_by_reference,
            configs_by_cluster,
            infra_pools_by_cluster,
            infra_machines_by_pool,
            machines_by_pool,
            machines_by_provider_id,
            shard,
        }
    }

    /// Runs every watch until the returned future is dropped; `core`: also
    /// those only the Cluster and MachinePool controllers read.
    pub fn run(&self, metrics: &Metrics, core: bool) -> impl Future<Output = ()> + Send + 'static {
        let mut feeds = vec![
            futures::FutureExt::boxed(self.clusters.run(metrics.clone())),
            futures::FutureExt::boxed(self.pools.run(metrics.clone())),
            futures::FutureExt::boxed(self.configs.run(metrics.clone())),
            futures::FutureExt::boxed(self.infra_pools.run(metrics.clone())),
            futures::FutureExt::boxed(self.infra_clusters.run(metrics.clone())),
            futures::FutureExt::boxed(self.control_planes.run(metrics.clone())),
            futures::FutureExt::boxed(self.infra_machines.run(metrics.clone())),
            futures::FutureExt::boxed(self.modules.run(metrics.clone())),
            futures::FutureExt::boxed(self.platforms.run(metrics.clone())),
            futures::FutureExt::boxed(self.templates.run(metrics.clone())),
            futures::FutureExt::boxed(self.secrets.run(metrics.clone())),
            futures::FutureExt::boxed(self.config_maps.run(metrics.clone())),
            futures::FutureExt::boxed(self.namespaces.run(metrics.clone())),
        ];
        if core {
            feeds.push(futures::FutureExt::boxed(self.crds.run(metrics.clone())));
            feeds.push(futures::FutureExt::boxed(
                self.machines.run(metrics.clone()),
            ));
        }
        async move {
            futures::future::join_all(feeds).await;
        }
    }

    /// Once every cache [`Caches::run`] fills has its first list: no
    /// reconcile should take "not in the cache" for "does not exist" before.
    pub async fn ready(&self, core: bool) {
        futures::join!(
            self.clusters.ready(),
            self.pools.ready(),
            self.configs.ready(),
            self.infra_pools.ready(),
            self.infra_clusters.ready(),
            self.control_planes.ready(),
            self.infra_machines.ready(),
            self.modules.ready(),
            self.platforms.ready(),
            self.templates.ready(),
            self.secrets.ready(),
            self.config_maps.ready(),
            self.namespaces.ready(),
        );
        if core {
            futures::join!(self.crds.ready(), self.machines.ready());
        }
    }
}

impl Caches {
    /// Whether `rule` (a ProviderModule's or ClusterTemplate's
    /// `allowedNamespaces`) lets objects of `namespace` use what it guards,
    /// with the namespace's labels as cached.
    pub fn namespace_allowed(
        &self,
        rule: Option<&crate::api::tenancy::AllowedNamespaces>,
        namespace: &str,
    ) -> bool {
        let cached = self.namespaces.get(None, namespace);
        let labels = cached.as_ref().and_then(|n| n.metadata.labels.as_ref());
        crate::api::tenancy::allows(rule, namespace, labels)
    }
}

/// `cache`, holding only `shard`'s objects and those of no Cluster yet.
pub fn sharded<K>(cache: Cache<K>, shard: Shard) -> Cache<K>
where
    K: OfCluster + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    if shard == Shard::ALL {
        return cache;
    }
    cache.keeping(Arc::new(move |object: &K| shard.keeps(object)))
}

/// A cache of every object of `K`, without managedFields.
fn typed<K>(client: &Client) -> Cache<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    watched(
        client,
        K::plural(&()).into_owned(),
        watcher::Config::default(),
    )
}

/// A cache of the metadata of the `K`s matching `config`.
fn metadata<K>(client: &Client, config: watcher::Config) -> Cache<PartialObjectMeta<K>>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    watched(client, K::plural(&()).into_owned(), config)
}

/// A cache of the `K`s (`resource`) matching `config`, without managedFields.
fn watched<K>(client: &Client, resource: String, config: watcher::Config) -> Cache<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    Cache::new(
        resource,
        watcher(Api::<K>::all(client.clone()), config)
            .default_backoff()
            .modify(|object: &mut K| object.managed_fields_mut().clear())
            .boxed(),
        (),
    )
}

/// MachinePools by `<namespace>/<cluster>`.
pub fn pools_by_cluster() -> Index<MachinePool> {
    Index::new(|p| vec![cluster_key(p, &p.spec.cluster_name)], ())
}

/// MachinePools by the bootstrap config and infrastructure object they reference.
pub fn pools_by_reference() -> Index<MachinePool> {
    Index::new(
        |p| {
            let spec = &p.spec.template.spec;
            let namespace = p.namespace().unwrap_or_default();
            [
                spec.bootstrap.config_ref.as_ref(),
                Some(&spec.infrastructure_ref),
            ]
            .into_iter()
            .flatten()
            .map(|r| reference_key(&namespace, r))
            .collect()
        },
        (),
    )
}

/// Clusters by the infrastructure and control-plane objects they reference.
pub fn clusters_by_reference() -> Index<Cluster> {
    Index::new(
        |c| {
            let namespace = c.namespace().unwrap_or_default();
            [
                c.spec.infrastructure_ref.as_ref(),
                c.spec.control_plane_ref.as_ref(),
            ]
            .into_iter()
            .flatten()
            .map(|r| reference_key(&namespace, r))
            .collect()
        },
        (),
    )
}

/// `<namespace>/<cluster>`: how the indexes by Cluster key their objects.
pub fn cluster_key<K: Resource>(object: &K, cluster: &str) -> String {
    format!("{}/{cluster}", object.namespace().unwrap_or_default())
}

/// `<namespace>/<group>/<kind>/<name>`: how the indexes by reference key the
/// objects that reference another.
pub fn reference_key(namespace: &str, reference: &ContractVersionedObjectReference) -> String {
    object_key(
        namespace,
        &reference.api_group,
        &reference.kind,
        &reference.name,
    )
}

/// The same key for the object itself, as a watch sees it.
pub fn object_key(namespace: &str, group: &str, kind: &str, name: &str) -> String {
    format!("{namespace}/{group}/{kind}/{name}")
}

/// `<namespace>/<name>` of the WasmMachinePool owning a WasmMachine.
fn by_pool_owner(machine: &WasmMachine) -> Vec<String> {
    machine
        .pool_owner()
        .map(|o| cluster_key(machine, &o.name))
        .into_iter()
        .collect()
}

/// `<namespace>/<name>` of the MachinePool controlling a Machine.
fn by_controlling_pool(machine: &Machine) -> Vec<String> {
    machine
        .pool_owner()
        .map(|pool| cluster_key(machine, pool))
        .into_iter()
        .collect()
}

/// `<namespace>/<cluster>/<providerID>` of a Machine with a providerID.
fn by_provider_id(machine: &Machine) -> Vec<String> {
    machine
        .spec
        .provider_id
        .as_ref()
        .map(|id| format!("{}/{id}", cluster_key(machine, &machine.spec.cluster_name)))
        .into_iter()
        .collect()
}

fn by_cluster_label<K: Resource>(object: &K) -> Vec<String> {
    object
        .labels()
        .get(labels::CLUSTER_NAME)
        .map(|cluster| cluster_key(object, cluster))
        .into_iter()
        .collect()
}
