//! A loaded provider: compiled, linked, checked and pre-instantiated, with
//! the bounds its calls run under. Immutable; built once, by loading.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, Instance, InstancePre};

use super::bindings::bootstrap_tokens::BootstrapToken;
use super::bindings::interfaces;
use super::fairness::Share;
use super::host::auth::Keys;
use super::host::http::Egress;
use super::limits::{Capabilities, Limits};
use super::schema::ConfigSchema;
use super::state::CallState;
use super::types::ProviderInfo;
use super::world::{World, unversioned};

/// The host interface handing a call its bootstrap token, unversioned.
const BOOTSTRAP_TOKENS_INTERFACE: &str = "capwasm:provider/bootstrap-tokens";

/// The export removing chosen instances, unversioned.
const POOL_MACHINES_INTERFACE: &str = "capwasm:provider/pool-machines";

/// The export describing a pool's nodes, unversioned.
const NODE_SHAPES_INTERFACE: &str = "capwasm:provider/node-shapes";

/// Whether `instance`'s component exports `interface` (any version).
fn exports_interface(instance: &InstancePre<CallState>, interface: &str) -> bool {
    let component = instance.component();
    component
        .component_type()
        .exports(component.engine())
        .any(|(name, _)| unversioned(name) == interface)
}

/// A provider ready to be called. Immutable.
pub struct LoadedProvider {
    pub(crate) name: Arc<str>,
    /// `sha256:<hex>` of the component's bytes.
    pub digest: String,
    /// The world it implements.
    pub world: World,
    /// What the provider says of itself.
    pub info: ProviderInfo,
    /// The JSON Schema of its `spec.config`, compiled.
    pub config_schema: ConfigSchema,
    /// Bounds on each call.
    pub limits: Limits,
    pub(crate) egress: Arc<Egress>,
    /// Its provider's share of calls and CPU (every version's).
    pub(crate) share: Arc<Share>,
    pub(crate) pre: ProviderPre,
    /// How long loading took, from bytes to checked.
    pub load_time: Duration,
    /// Of which compiling (or deserialising from the cache).
    pub compile_time: Duration,
    /// Whether compilation was skipped thanks to the precompiled cache.
    pub from_cache: bool,
}

/// What a call needs of a provider: its code and its bounds. Loading calls
/// through one before the [`LoadedProvider`] exists.
pub(crate) struct Callee<'a> {
    pub(crate) name: &'a Arc<str>,
    pub(crate) digest: &'a str,
    pub(crate) world: World,
    pub(crate) limits: &'a Limits,
    pub(crate) egress: &'a Arc<Egress>,
    pub(crate) share: &'a Arc<Share>,
    /// The tenant the call is about: the namespace of its object, empty for
    /// a call about no object. Its part of the share bounds the call.
    pub(crate) tenant: &'a str,
    pub(crate) pre: &'a ProviderPre,
    /// The credentials the host authenticates this call's requests with.
    pub(crate) keys: Option<Arc<Keys>>,
    /// The bootstrap token `bootstrap-tokens.join-token` answers with.
    pub(crate) join_token: Option<BootstrapToken>,
}

/// The pre-instantiated component and where its exports are. Loading
/// type-checked every export against the world, so a call checks only the
/// one it makes (the generated bindings would check them all, every time).
pub(crate) struct ProviderPre {
    pub(crate) instance: InstancePre<CallState>,
    pub(crate) info: ComponentExportIndex,
    pub(crate) config_schema: ComponentExportIndex,
    pub(crate) world: WorldExports,
}

pub(crate) enum WorldExports {
    Bootstrap(interfaces::Bootstrap),
    Infrastructure(InfrastructureExports),
    Platform(interfaces::Composition),
    ControlPlane(interfaces::ControlPlanes),
}

impl WorldExports {
    /// The infrastructure world's exports, if it is that world.
    pub(crate) fn infrastructure(&self) -> Option<&InfrastructureExports> {
        match self {
            Self::Infrastructure(exports) => Some(exports),
            _ => None,
        }
    }

    /// The platform world's export, if it is that world.
    pub(crate) fn platform(&self) -> Option<&interfaces::Composition> {
        match self {
            Self::Platform(exports) => Some(exports),
            _ => None,
        }
    }

    /// The control-plane world's export, if it is that world.
    pub(crate) fn control_plane(&self) -> Option<&interfaces::ControlPlanes> {
        match self {
            Self::ControlPlane(exports) => Some(exports),
            _ => None,
        }
    }
}

pub(crate) struct InfrastructureExports {
    pub(crate) machine_pools: interfaces::MachinePools,
    pub(crate) clusters: interfaces::Clusters,
    pub(crate) provider_ids: interfaces::ProviderIds,
    /// None for a component built before 0.1.2.
    pub(crate) pool_machines: Option<interfaces::PoolMachines>,
    /// None for a component built before 0.1.2 (or early in it).
    pub(crate) node_shapes: Option<interfaces::NodeShapes>,
}

impl InfrastructureExports {
    /// Loads every interface the component exports, which checks their
    /// functions' types: the required ones and those of the optional ones
    /// it has (`info` and `config-schema` are checked by calling them).
    pub(crate) fn type_check(
        &self,
        store: &mut Store<CallState>,
        instance: &Instance,
    ) -> wasmtime::Result<()> {
        self.machine_pools.load(&mut *store, instance)?;
        self.clusters.load(&mut *store, instance)?;
        self.provider_ids.load(&mut *store, instance)?;
        if let Some(pool_machines) = &self.pool_machines {
            pool_machines.load(&mut *store, instance)?;
        }
        if let Some(node_shapes) = &self.node_shapes {
            node_shapes.load(&mut *store, instance)?;
        }
        Ok(())
    }
}

impl ProviderPre {
    /// Finds the exports of `world`; fails if one is missing.
    pub(crate) fn new(instance: InstancePre<CallState>, world: World) -> wasmtime::Result<Self> {
        let func = |name: &str| {
            instance
                .component()
                .get_export_index(None, name)
                .ok_or_else(|| wasmtime::format_err!("no export named `{name}`"))
        };
        let (info, config_schema) = (func("info")?, func("config-schema")?);
        let world = match world {
            World::Bootstrap => WorldExports::Bootstrap(interfaces::Bootstrap::new(&instance)?),
            World::Infrastructure => WorldExports::Infrastructure(InfrastructureExports {
                machine_pools: interfaces::MachinePools::new(&instance)?,
                clusters: interfaces::Clusters::new(&instance)?,
                provider_ids: interfaces::ProviderIds::new(&instance)?,
                // Optional, but an export of that name must have its type.
                pool_machines: exports_interface(&instance, POOL_MACHINES_INTERFACE)
                    .then(|| interfaces::PoolMachines::new(&instance))
                    .transpose()?,
                node_shapes: exports_interface(&instance, NODE_SHAPES_INTERFACE)
                    .then(|| interfaces::NodeShapes::new(&instance))
                    .transpose()?,
            }),
            World::Platform => WorldExports::Platform(interfaces::Composition::new(&instance)?),
            World::ControlPlane => {
                WorldExports::ControlPlane(interfaces::ControlPlanes::new(&instance)?)
            }
        };
        Ok(Self {
            instance,
            info,
            config_schema,
            world,
        })
    }
}

impl LoadedProvider {
    /// The registry name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its capabilities.
    pub fn capabilities(&self) -> &Capabilities {
        &self.egress.capabilities
    }

    /// What a call about an object in namespace `tenant` needs of it
    /// (empty: about no object).
    pub(crate) fn callee<'a>(&'a self, tenant: &'a str) -> Callee<'a> {
        Callee {
            name: &self.name,
            digest: &self.digest,
            world: self.world,
            limits: &self.limits,
            egress: &self.egress,
            share: &self.share,
            tenant,
            pre: &self.pre,
            keys: None,
            join_token: None,
        }
    }

    /// What the component exports, by name (`info`, `capwasm:provider/bootstrap@0.1.2`, ...).
    pub fn exports(&self) -> Vec<String> {
        let component = self.pre.instance.component();
        component
            .component_type()
            .exports(component.engine())
            .map(|(name, _)| name.to_owned())
            .collect()
    }

    /// Whether the component imports `bootstrap-tokens` (0.1.1 on): only
    /// then is a host-made bootstrap token worth making for its calls.
    pub fn takes_bootstrap_tokens(&self) -> bool {
        self.imports()
            .iter()
            .any(|name| unversioned(name) == BOOTSTRAP_TOKENS_INTERFACE)
    }

    /// Whether the component exports `pool-machines` (0.1.2 on): only then
    /// are its pools' instances shown as Machines, which it removes one by
    /// one.
    pub fn removes_instances(&self) -> bool {
        matches!(
            &self.pre.world,
            WorldExports::Infrastructure(exports) if exports.pool_machines.is_some()
        )
    }

    /// Whether the component exports `node-shapes`: only then can the host
    /// report what a pool's nodes offer before any exists.
    pub fn describes_nodes(&self) -> bool {
        matches!(
            &self.pre.world,
            WorldExports::Infrastructure(exports) if exports.node_shapes.is_some()
        )
    }

    /// What the component imports, by name (`capwasm:provider/log@0.1.2`, `wasi:http/...`).
    pub fn imports(&self) -> Vec<String> {
        let component = self.pre.instance.component();
        component
            .component_type()
            .imports(component.engine())
            .map(|(name, _)| name.to_owned())
            .collect()
    }
}

impl std::fmt::Debug for LoadedProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedProvider")
            .field("name", &self.name)
            .field("digest", &self.digest)
            .field("world", &self.world)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}
