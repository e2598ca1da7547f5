//! The entry point: an engine, the linkers of the provider worlds, the
//! registry, and calls by provider name.

use std::sync::Arc;

use tokio::sync::Semaphore;
use wasmtime::component::Instance as ComponentInstance;
use wasmtime::{Engine, Store};

use super::bindings::types;
use super::cache::PrecompiledCache;
use super::call::{GuestResult, Host};
use super::credentials::withhold;
use super::engine::{self, EpochTicker};
use super::fairness::{Fairness, Throttled};
use super::host::auth::Keys;
use super::limits::GuestMemory;
use super::linkers::Linkers;
use super::load::{self, ProviderSpec};
use super::metrics::Metrics;
use super::provider::{InfrastructureExports, LoadedProvider, WorldExports};
use super::registry::Registry;
use super::state::CallState;
use super::types::{BootstrapData, DeleteOutcome, Instance};
use super::{CallError, Error, bootstrap, call, checks, clusters, machine_pools};

/// Host-wide settings, fixed for the process's life.
#[derive(Clone, Debug)]
pub struct RuntimeSettings {
    /// The most memory any provider's limits may allow (sizes the instance pool slots).
    pub max_memory_bytes: usize,
    /// Instances that can exist at once; further calls wait for a slot.
    pub max_instances: u32,
    /// Where precompiled components are kept across restarts.
    pub cache: Option<PrecompiledCache>,
    /// Outgoing HTTP connections all guests together may hold open, so
    /// that the operator's own clients always have descriptors left.
    pub max_guest_connections: u32,
    /// Linear memory all guests together may hold, in bytes; `None`: only
    /// each instance's own cap bounds it.
    pub guest_memory_budget_bytes: Option<usize>,
    /// Calls of one provider that may run at once; more wait their turn.
    pub max_calls_per_provider: u32,
    /// The share of a core one provider's calls may compute beyond a burst.
    pub provider_cpu_share: f64,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self {
            max_memory_bytes: 256 << 20,
            max_instances: 64,
            cache: None,
            max_guest_connections: 256,
            guest_memory_budget_bytes: None,
            max_calls_per_provider: 16,
            provider_cpu_share: 0.5,
        }
    }
}

/// The provider runtime. Cheap to clone; clones share everything.
///
/// Every call is a future that runs the guest where it is polled: the guest
/// yields at each epoch tick and every wait in the host is async, so a call
/// holds no thread while it waits and ends at its deadline, however it is
/// spent.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    linkers: Linkers,
    registry: Registry,
    settings: RuntimeSettings,
    metrics: Option<Metrics>,
    slots: Semaphore,
    fairness: Fairness,
    connections: Arc<Semaphore>,
    memory: GuestMemory,
    /// Set once the runtime stops: calls in flight are abandoned.
    stopping: tokio::sync::watch::Sender<bool>,
    _ticker: EpochTicker,
}

impl Runtime {
    /// Creates the engine (and starts its epoch ticker) and the linker.
    pub fn new(settings: RuntimeSettings, metrics: Option<Metrics>) -> Result<Self, Error> {
        let (engine, ticker) = engine::new(settings.max_memory_bytes, settings.max_instances)?;
        let linkers = Linkers::new(&engine).map_err(Error::Engine)?;
        Ok(Self {
            inner: Arc::new(Inner {
                engine,
                linkers,
                registry: Registry::default(),
                slots: Semaphore::new(settings.max_instances as usize),
                fairness: Fairness::new(
                    settings.max_calls_per_provider,
                    settings.provider_cpu_share,
                    metrics.clone(),
                ),
                connections: Arc::new(Semaphore::new(settings.max_guest_connections as usize)),
                memory: GuestMemory::new(settings.guest_memory_budget_bytes),
                stopping: tokio::sync::watch::Sender::new(false),
                settings,
                metrics,
                _ticker: ticker,
            }),
        })
    }

    /// The providers in service.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// Provider `name`'s throttle, if its calls are refused now.
    pub fn throttled(&self, name: &str) -> Option<Throttled> {
        self.inner.fairness.throttled(name)
    }

    /// The names of providers throttled from now on.
    pub fn throttles(&self) -> tokio::sync::broadcast::Receiver<Arc<str>> {
        self.inner.fairness.changes()
    }

    fn host(&self) -> Host<'_> {
        Host {
            engine: &self.inner.engine,
            slots: &self.inner.slots,
            fairness: &self.inner.fairness,
            connections: &self.inner.connections,
            memory: &self.inner.memory,
            stopping: &self.inner.stopping,
            metrics: self.inner.metrics.as_ref(),
        }
    }

    /// Abandons every call in flight, and every call made from now on, with
    /// [`CallError::Abandoned`]: the process is stopping, and calls are
    /// idempotent by contract, so none needs to finish.
    pub fn stop(&self) {
        self.inner.stopping.send_replace(true);
    }

    /// Whether the precompiled cache holds the component with this sha256
    /// (`sha256:<hex>` or hex), so loading it needs no bytes.
    pub fn is_precompiled(&self, digest: &str) -> bool {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.inner
            .settings
            .cache
            .as_ref()
            .is_some_and(|c| c.contains(&self.inner.engine, hex))
    }

    /// The precompiled cache's directory, if there is one.
    pub fn cache_dir(&self) -> Option<&std::path::Path> {
        self.inner
            .settings
            .cache
            .as_ref()
            .map(PrecompiledCache::dir)
    }

    /// Fetches, verifies, compiles (or loads from the cache) and checks a
    /// provider. Does not put it in service.
    pub async fn load(&self, spec: ProviderSpec) -> Result<LoadedProvider, Error> {
        let max = self.inner.settings.max_memory_bytes;
        if spec.limits.memory_bytes > max {
            return Err(Error::MemoryLimitTooHigh {
                asked: spec.limits.memory_bytes,
                max,
            });
        }
        load::load(
            &self.host(),
            &self.inner.linkers,
            self.inner.settings.cache.as_ref(),
            spec,
        )
        .await
    }

    /// Loads a provider and, only if every stage passed, puts it in service
    /// atomically. Returns the new version and the one it replaced; on
    /// error the registry is unchanged.
    pub async fn swap(
        &self,
        spec: ProviderSpec,
    ) -> Result<(Arc<LoadedProvider>, Option<Arc<LoadedProvider>>), Error> {
        let loaded = Arc::new(self.load(spec).await?);
        let previous = self.inner.registry.install(loaded.clone());
        Ok((loaded, previous))
    }

    /// Runs `call` on the version of `name` that serves the object `uid`
    /// (a canary's share goes to the canary), and counts a canary's call.
    async fn serve<T>(
        &self,
        name: &str,
        uid: &str,
        call: impl AsyncFnOnce(Arc<LoadedProvider>) -> Result<T, CallError>,
    ) -> Result<T, CallError> {
        let (provider, canary) = self
            .inner
            .registry
            .pick(name, uid)
            .ok_or_else(|| CallError::NotLoaded(name.to_owned()))?;
        let result = call(provider).await;
        if let Some(canary) = canary {
            let broke = result.as_ref().err().is_some_and(CallError::broke);
            self.inner.registry.record(&canary, broke);
        }
        result
    }

    fn provider(&self, name: &str) -> Result<Arc<LoadedProvider>, CallError> {
        self.inner
            .registry
            .get(name)
            .ok_or_else(|| CallError::NotLoaded(name.to_owned()))
    }

    /// The call figures, if the runtime records them.
    pub fn metrics(&self) -> Option<&Metrics> {
        self.inner.metrics.as_ref()
    }

    /// What `provider` says of itself (every world exports it).
    pub async fn info(&self, provider: &str) -> Result<types::ProviderInfo, CallError> {
        let provider = self.provider(provider)?;
        call::info(&self.host(), &provider.callee()).await
    }

    /// `bootstrap.generate` of `provider`: bootstrap data of the format it
    /// claims ([`checks::bootstrap_data`]).
    pub async fn generate(
        &self,
        provider: &str,
        request: &bootstrap::GenerateRequest,
    ) -> Result<BootstrapData, CallError> {
        self.serve(provider, &request.config_object.uid, async |provider| {
            let (request, keys) = withhold(provider.capabilities(), request);
            let request = &*request;
            let mut callee = provider.callee();
            callee.keys = keys;
            let data = call::run(
                &self.host(),
                &callee,
                "bootstrap.generate",
                async |store, instance, pre| match &pre.world {
                    WorldExports::Bootstrap(bootstrap) => {
                        Some(match bootstrap.load(&mut *store, instance) {
                            Ok(exports) => exports.call_generate(store, request).await,
                            Err(error) => Err(error),
                        })
                    }
                    WorldExports::Infrastructure(_) => None,
                },
            )
            .await?;
            self.checked(
                &provider,
                "bootstrap.generate",
                checks::bootstrap_data(&data),
            )?;
            Ok(data)
        })
        .await
    }

    /// `machine-pools.reconcile` of `provider`: instances within the
    /// contract's bounds for the replicas asked for ([`checks::pool_state`]).
    pub async fn reconcile_pool(
        &self,
        provider: &str,
        request: &machine_pools::ReconcileRequest,
    ) -> Result<machine_pools::PoolState, CallError> {
        self.serve(provider, &request.pool.uid, async |provider| {
            let (request, keys) = withhold(provider.capabilities(), request);
            let request = &*request;
            let state = self
                .infrastructure(
                    &provider,
                    keys,
                    "machine-pools.reconcile",
                    async |store, i, x| {
                        x.machine_pools
                            .load(&mut *store, i)?
                            .call_reconcile(store, request)
                            .await
                    },
                )
                .await?;
            let rules = checks::pool_state(&state, request.replicas);
            self.checked(&provider, "machine-pools.reconcile", rules)?;
            Ok(state)
        })
        .await
    }

    /// `machine-pools.delete` of `provider`.
    pub async fn delete_pool(
        &self,
        provider: &str,
        request: &machine_pools::DeleteRequest,
    ) -> Result<DeleteOutcome, CallError> {
        self.serve(provider, &request.pool.uid, async |provider| {
            let (request, keys) = withhold(provider.capabilities(), request);
            let request = &*request;
            self.infrastructure(
                &provider,
                keys,
                "machine-pools.delete",
                async |store, i, x| {
                    x.machine_pools
                        .load(&mut *store, i)?
                        .call_delete(store, request)
                        .await
                },
            )
            .await
        })
        .await
    }

    /// `clusters.reconcile` of `provider`: an endpoint and failure domains
    /// within the contract's bounds ([`checks::cluster_state`]).
    pub async fn reconcile_cluster(
        &self,
        provider: &str,
        request: &clusters::ClusterRequest,
    ) -> Result<clusters::ClusterState, CallError> {
        self.serve(provider, &request.cluster_object.uid, async |provider| {
            let (request, keys) = withhold(provider.capabilities(), request);
            let request = &*request;
            let state = self
                .infrastructure(
                    &provider,
                    keys,
                    "clusters.reconcile",
                    async |store, i, x| {
                        x.clusters
                            .load(&mut *store, i)?
                            .call_reconcile(store, request)
                            .await
                    },
                )
                .await?;
            self.checked(
                &provider,
                "clusters.reconcile",
                checks::cluster_state(&state),
            )?;
            Ok(state)
        })
        .await
    }

    /// `clusters.delete` of `provider`.
    pub async fn delete_cluster(
        &self,
        provider: &str,
        request: &clusters::ClusterRequest,
    ) -> Result<DeleteOutcome, CallError> {
        self.serve(provider, &request.cluster_object.uid, async |provider| {
            let (request, keys) = withhold(provider.capabilities(), request);
            let request = &*request;
            self.infrastructure(&provider, keys, "clusters.delete", async |store, i, x| {
                x.clusters
                    .load(&mut *store, i)?
                    .call_delete(store, request)
                    .await
            })
            .await
        })
        .await
    }

    /// `provider-ids.provider-id` of `provider`.
    pub async fn provider_id(
        &self,
        provider: &str,
        config: &str,
        instance: &Instance,
    ) -> Result<String, CallError> {
        let provider = self.provider(provider)?;
        self.infrastructure(
            &provider,
            None,
            "provider-ids.provider-id",
            async |store, i, x| {
                x.provider_ids
                    .load(&mut *store, i)?
                    .call_provider_id(store, config, instance)
                    .await
            },
        )
        .await
    }

    /// `provider-ids.owns` of `provider`.
    pub async fn owns(&self, provider: &str, provider_id: &str) -> Result<bool, CallError> {
        let provider = self.provider(provider)?;
        self.infrastructure(&provider, None, "provider-ids.owns", async |store, i, x| {
            x.provider_ids
                .load(&mut *store, i)?
                .call_owns(store, provider_id)
                .await
                .map(Ok)
        })
        .await
    }

    /// A result that broke a rule, as the call's error, counted as such.
    fn checked(
        &self,
        provider: &LoadedProvider,
        export: &'static str,
        rules: Result<(), checks::Violation>,
    ) -> Result<(), CallError> {
        rules.map_err(|violation| self.refused(provider, export, violation))
    }

    /// The error, and the count, of a result of `provider`'s `export` that
    /// broke a rule only its caller can check (a providerID another pool of
    /// the Cluster lists, say).
    pub fn refused(
        &self,
        provider: &LoadedProvider,
        export: &'static str,
        violation: checks::Violation,
    ) -> CallError {
        if let Some(metrics) = self.metrics() {
            metrics.invalid_result(&provider.name, export);
        }
        CallError::InvalidResult {
            provider: provider.name().to_owned(),
            digest: provider.digest.clone(),
            export,
            violation,
        }
    }

    /// An export only the infrastructure world has.
    async fn infrastructure<R>(
        &self,
        provider: &LoadedProvider,
        keys: Option<Arc<Keys>>,
        export: &'static str,
        body: impl AsyncFnOnce(
            &mut Store<CallState>,
            &ComponentInstance,
            &InfrastructureExports,
        ) -> GuestResult<R>,
    ) -> Result<R, CallError> {
        let mut callee = provider.callee();
        callee.keys = keys;
        call::run(
            &self.host(),
            &callee,
            export,
            async |store, instance, pre| match &pre.world {
                WorldExports::Infrastructure(exports) => Some(body(store, instance, exports).await),
                WorldExports::Bootstrap(_) => None,
            },
        )
        .await
    }
}
