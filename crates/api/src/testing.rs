//! Builders for the API objects: valid by default, each method changes one thing.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;

use crate::cluster::ClusterSpec;
use crate::machinepool::{Bootstrap, MachinePoolSpec, MachineSpec, MachineTemplateSpec};
pub use crate::provider::{BOOTSTRAP_GROUP, INFRASTRUCTURE_GROUP};
use crate::provider::{
    CONTROL_PLANE_GROUP, VERSION, WasmBootstrapConfigSpec, WasmClusterSpec, WasmControlPlaneSpec,
    WasmMachinePoolSpec,
};
use crate::providermodule::{
    AllowedKind, ConfigMapSource, FileSource, ModuleCapabilities, ModuleLimits, ModuleSource,
    OciSource, ProviderModuleSpec, Signer, Verification, World,
};
use crate::tenancy::AllowedNamespaces;
use crate::{
    ApiEndpoint, Cluster, ContractVersionedObjectReference, MachinePool, ProviderModule,
    WasmBootstrapConfig, WasmCluster, WasmControlPlane, WasmMachinePool,
};

/// The providerIDs of the simulated cloud's instances (`sim://<region>/<id>`).
pub const SIM_PROVIDER_IDS: &str = "sim://";

fn meta(namespace: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        ..ObjectMeta::default()
    }
}

/// A `Cluster` whose infrastructure is WasmCluster `<name>`.
#[derive(Clone, Debug)]
#[must_use]
pub struct ClusterBuilder(Cluster);

impl ClusterBuilder {
    /// Cluster `name` in `namespace`, infrastructureRef → WasmCluster `name`.
    pub fn new(namespace: &str, name: &str) -> Self {
        let mut cluster = Cluster::new(
            name,
            ClusterSpec {
                infrastructure_ref: Some(ContractVersionedObjectReference::new(
                    INFRASTRUCTURE_GROUP,
                    "WasmCluster",
                    name,
                )),
                ..ClusterSpec::default()
            },
        );
        cluster.metadata = meta(namespace, name);
        Self(cluster)
    }

    /// Without an infrastructure reference.
    pub fn no_infrastructure(mut self) -> Self {
        self.0.spec.infrastructure_ref = None;
        self
    }

    /// With `spec.infrastructureRef` set to `reference`.
    pub fn infrastructure_ref(mut self, reference: ContractVersionedObjectReference) -> Self {
        self.0.spec.infrastructure_ref = Some(reference);
        self
    }

    /// With `spec.controlPlaneRef` → WasmControlPlane `name`.
    pub fn control_plane(mut self, name: &str) -> Self {
        self.0.spec.control_plane_ref = Some(ContractVersionedObjectReference::new(
            CONTROL_PLANE_GROUP,
            "WasmControlPlane",
            name,
        ));
        self
    }

    /// With `spec.controlPlaneEndpoint` set.
    pub fn endpoint(mut self, host: &str, port: i32) -> Self {
        self.0.spec.control_plane_endpoint = Some(ApiEndpoint {
            host: host.into(),
            port,
        });
        self
    }

    /// With `spec.paused: true`.
    pub fn paused(mut self) -> Self {
        self.0.spec.paused = Some(true);
        self
    }

    /// The object.
    pub fn build(self) -> Cluster {
        self.0
    }
}

/// A `MachinePool` with a WasmBootstrapConfig and a WasmMachinePool of its own name.
#[derive(Clone, Debug)]
#[must_use]
pub struct MachinePoolBuilder(MachinePool);

impl MachinePoolBuilder {
    /// Pool `name` of Cluster `cluster`, 1 replica, version v1.36.3,
    /// configRef → WasmBootstrapConfig `name`, infrastructureRef → WasmMachinePool `name`.
    pub fn new(namespace: &str, name: &str, cluster: &str) -> Self {
        let mut pool = MachinePool::new(
            name,
            MachinePoolSpec {
                cluster_name: cluster.into(),
                replicas: Some(1),
                template: MachineTemplateSpec {
                    metadata: None,
                    spec: MachineSpec {
                        cluster_name: cluster.into(),
                        bootstrap: Bootstrap {
                            config_ref: Some(ContractVersionedObjectReference::new(
                                BOOTSTRAP_GROUP,
                                "WasmBootstrapConfig",
                                name,
                            )),
                            data_secret_name: None,
                        },
                        infrastructure_ref: ContractVersionedObjectReference::new(
                            INFRASTRUCTURE_GROUP,
                            "WasmMachinePool",
                            name,
                        ),
                        version: Some("v1.36.3".into()),
                        min_ready_seconds: None,
                        deletion: None,
                    },
                },
                ..MachinePoolSpec::default()
            },
        );
        pool.metadata = meta(namespace, name);
        Self(pool)
    }

    /// With `spec.replicas`.
    pub fn replicas(mut self, replicas: i32) -> Self {
        self.0.spec.replicas = Some(replicas);
        self
    }

    /// Without `spec.replicas` (the API server defaults it).
    pub fn no_replicas(mut self) -> Self {
        self.0.spec.replicas = None;
        self
    }

    /// With `spec.template.spec.clusterName` set to `cluster` (the pool's stays).
    pub fn template_cluster(mut self, cluster: &str) -> Self {
        self.0.spec.template.spec.cluster_name = cluster.into();
        self
    }

    /// With bootstrap data from Secret `name` instead of a config.
    pub fn data_secret(mut self, name: &str) -> Self {
        self.0.spec.template.spec.bootstrap = Bootstrap {
            config_ref: None,
            data_secret_name: Some(name.into()),
        };
        self
    }

    /// With neither a bootstrap config nor a data Secret.
    pub fn no_bootstrap(mut self) -> Self {
        self.0.spec.template.spec.bootstrap = Bootstrap::default();
        self
    }

    /// With `spec.template.spec.bootstrap.configRef` set to `reference`.
    pub fn config_ref(mut self, reference: ContractVersionedObjectReference) -> Self {
        self.0.spec.template.spec.bootstrap.config_ref = Some(reference);
        self
    }

    /// With `spec.template.spec.infrastructureRef` set to `reference`.
    pub fn infrastructure_ref(mut self, reference: ContractVersionedObjectReference) -> Self {
        self.0.spec.template.spec.infrastructure_ref = reference;
        self
    }

    /// With `spec.template.spec.minReadySeconds`.
    pub fn min_ready_seconds(mut self, seconds: i32) -> Self {
        self.0.spec.template.spec.min_ready_seconds = Some(seconds);
        self
    }

    /// With an annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }

    /// The object.
    pub fn build(self) -> MachinePool {
        self.0
    }
}

/// A `WasmBootstrapConfig` served by ProviderModule `provider`.
pub fn bootstrap_config(
    namespace: &str,
    name: &str,
    provider: &str,
    config: serde_json::Value,
) -> WasmBootstrapConfig {
    let mut object = WasmBootstrapConfig::new(
        name,
        WasmBootstrapConfigSpec {
            provider: provider.into(),
            config: Some(config),
        },
    );
    object.metadata = meta(namespace, name);
    object
}

/// A `WasmMachinePool` served by ProviderModule `provider`.
pub fn wasm_machine_pool(
    namespace: &str,
    name: &str,
    provider: &str,
    config: serde_json::Value,
) -> WasmMachinePool {
    let mut object = WasmMachinePool::new(
        name,
        WasmMachinePoolSpec {
            provider: provider.into(),
            config: Some(config),
            provider_id_list: Vec::new(),
            strategy: None,
        },
    );
    object.metadata = meta(namespace, name);
    object
}

/// A `WasmCluster` served by ProviderModule `provider`.
pub fn wasm_cluster(
    namespace: &str,
    name: &str,
    provider: &str,
    config: serde_json::Value,
) -> WasmCluster {
    let mut object = WasmCluster::new(
        name,
        WasmClusterSpec {
            provider: provider.into(),
            config: Some(config),
            control_plane_endpoint: None,
        },
    );
    object.metadata = meta(namespace, name);
    object
}

/// WasmControlPlane `name` served by `provider` with `config`, at `version`
/// with `replicas`.
pub fn wasm_control_plane(
    namespace: &str,
    name: &str,
    provider: &str,
    (version, replicas): (&str, i32),
    config: serde_json::Value,
) -> WasmControlPlane {
    let mut object = WasmControlPlane::new(
        name,
        WasmControlPlaneSpec {
            provider: provider.into(),
            config: Some(config),
            replicas: Some(replicas),
            version: version.into(),
            control_plane_endpoint: None,
        },
    );
    object.metadata = meta(namespace, name);
    object
}

/// A `ProviderModule` loading a component file.
#[derive(Clone, Debug)]
#[must_use]
pub struct ProviderModuleBuilder(ProviderModule);

impl ProviderModuleBuilder {
    /// Module `name` of `world`, from file `path`, default limits, open to
    /// every namespace, no capabilities but, for an infrastructure
    /// provider, the simulated cloud's providerIDs (`sim://`).
    pub fn file(name: &str, world: World, path: &str) -> Self {
        let capabilities = (world == World::Infrastructure).then(|| ModuleCapabilities {
            provider_id_prefix: Some(SIM_PROVIDER_IDS.into()),
            ..ModuleCapabilities::default()
        });
        let mut module = ProviderModule::new(
            name,
            ProviderModuleSpec {
                world,
                source: ModuleSource {
                    file: Some(FileSource { path: path.into() }),
                    ..ModuleSource::default()
                },
                capabilities,
                allowed_namespaces: Some(AllowedNamespaces::all()),
                ..ProviderModuleSpec::default()
            },
        );
        module.metadata.name = Some(name.into());
        Self(module)
    }

    /// From key `key` of ConfigMap `namespace/name` instead.
    pub fn config_map(mut self, namespace: &str, name: &str, key: &str) -> Self {
        self.0.spec.source = ModuleSource {
            config_map: Some(ConfigMapSource {
                namespace: namespace.into(),
                name: name.into(),
                key: Some(key.into()),
            }),
            ..ModuleSource::default()
        };
        self
    }

    /// From OCI image `image` instead, over plain HTTP (a loopback
    /// registry), its tag resolved every five seconds.
    pub fn oci(mut self, image: &str) -> Self {
        self.0.spec.source = ModuleSource {
            oci: Some(OciSource {
                image: image.into(),
                plain_http: true,
                interval_seconds: Some(5),
                ..OciSource::default()
            }),
            ..ModuleSource::default()
        };
        self
    }

    /// Admitting only images signed by one of the PEM `keys`.
    pub fn verified_by(mut self, keys: &[&str]) -> Self {
        self.0.spec.verification = Some(Verification {
            public_keys: keys
                .iter()
                .map(|pem| Signer {
                    pem: Some((*pem).to_owned()),
                    ..Signer::default()
                })
                .collect(),
            ..Verification::default()
        });
        self
    }

    /// Pinned to `sha256`.
    pub fn sha256(mut self, sha256: &str) -> Self {
        self.0.spec.sha256 = Some(sha256.into());
        self
    }

    /// Usable from the namespaces `rule` allows (`None`: from none).
    pub fn allowed_namespaces(mut self, rule: Option<AllowedNamespaces>) -> Self {
        self.0.spec.allowed_namespaces = rule;
        self
    }

    /// Its instances' providerIDs start `prefix`.
    pub fn provider_id_prefix(mut self, prefix: &str) -> Self {
        self.0
            .spec
            .capabilities
            .get_or_insert_with(ModuleCapabilities::default)
            .provider_id_prefix = Some(prefix.into());
        self
    }

    /// Allowed to reach `hosts` over HTTP.
    pub fn allowed_hosts(mut self, hosts: &[&str]) -> Self {
        self.0
            .spec
            .capabilities
            .get_or_insert_with(ModuleCapabilities::default)
            .allowed_hosts = hosts.iter().map(|h| (*h).to_owned()).collect();
        self
    }

    /// Allowed to render `kinds` (`(group, kind)`; platform modules).
    pub fn allowed_kinds(mut self, kinds: &[(&str, &str)]) -> Self {
        self.0
            .spec
            .capabilities
            .get_or_insert_with(ModuleCapabilities::default)
            .allowed_kinds = kinds
            .iter()
            .map(|(group, kind)| AllowedKind {
                group: (*group).to_owned(),
                kind: (*kind).to_owned(),
            })
            .collect();
        self
    }

    /// With a call timeout.
    pub fn timeout_millis(mut self, millis: u32) -> Self {
        self.0
            .spec
            .limits
            .get_or_insert_with(ModuleLimits::default)
            .timeout_millis = Some(millis);
        self
    }

    /// The object.
    pub fn build(self) -> ProviderModule {
        self.0
    }
}

/// The apiVersion of the Wasm provider kinds in `group`.
pub fn provider_api_version(group: &str) -> String {
    format!("{group}/{VERSION}")
}
