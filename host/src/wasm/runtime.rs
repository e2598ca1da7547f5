//! The entry point: an engine, a linker granting exactly the provider
//! worlds' imports, the registry, and calls by provider name.

use std::sync::Arc;

use tokio::sync::Semaphore;
use wasmtime::component::{HasSelf, Instance as ComponentInstance, Linker};
use wasmtime::{Engine, Store};
use wasmtime_wasi::cli::{WasiCli, WasiCliView as _};
use wasmtime_wasi::p2::bindings::{cli, random};
use wasmtime_wasi::random::{WasiRandom, WasiRandomView as _};

use super::bindings::{log, types};
use super::cache::PrecompiledCache;
use super::call::{GuestResult, Host};
use super::engine::{self, EpochTicker};
use super::load::{self, ProviderSpec};
use super::metrics::Metrics;
use super::provider::{InfrastructureExports, LoadedProvider, WorldExports};
use super::registry::Registry;
use super::state::CallState;
use super::types::{BootstrapData, DeleteOutcome, Instance};
use super::{CallError, Error, bootstrap, call, clusters, machine_pools};

/// Host-wide settings, fixed for the process's life.
#[derive(Clone, Debug)]
pub struct RuntimeSettings {
    /// The most memory any provider's limits may allow (sizes the instance pool slots).
    pub max_memory_bytes: usize,
    /// Instances that can exist at once; further calls wait for a slot.
    pub max_instances: u32,
    /// Where precompiled components are kept across restarts.
    pub cache: Option<PrecompiledCache>,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self {
            max_memory_bytes: 256 << 20,
            max_instances: 64,
            cache: None,
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
    linker: Linker<CallState>,
    registry: Registry,
    settings: RuntimeSettings,
    metrics: Option<Metrics>,
    slots: Semaphore,
    _ticker: EpochTicker,
}

impl Runtime {
    /// Creates the engine (and starts its epoch ticker) and the linker.
    pub fn new(settings: RuntimeSettings, metrics: Option<Metrics>) -> Result<Self, Error> {
        let (engine, ticker) = engine::new(settings.max_memory_bytes, settings.max_instances)?;
        let linker = linker(&engine).map_err(Error::Engine)?;
        Ok(Self {
            inner: Arc::new(Inner {
                engine,
                linker,
                registry: Registry::default(),
                slots: Semaphore::new(settings.max_instances as usize),
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

    fn host(&self) -> Host<'_> {
        Host {
            engine: &self.inner.engine,
            slots: &self.inner.slots,
            metrics: self.inner.metrics.as_ref(),
        }
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
            &self.inner.linker,
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

    /// `bootstrap.generate` of `provider`.
    pub async fn generate(
        &self,
        provider: &str,
        request: &bootstrap::GenerateRequest,
    ) -> Result<BootstrapData, CallError> {
        let provider = self.provider(provider)?;
        call::run(
            &self.host(),
            &provider.callee(),
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
        .await
    }

    /// `machine-pools.reconcile` of `provider`.
    pub async fn reconcile_pool(
        &self,
        provider: &str,
        request: &machine_pools::ReconcileRequest,
    ) -> Result<machine_pools::PoolState, CallError> {
        let provider = self.provider(provider)?;
        self.infrastructure(&provider, "machine-pools.reconcile", async |store, i, x| {
            x.machine_pools
                .load(&mut *store, i)?
                .call_reconcile(store, request)
                .await
        })
        .await
    }

    /// `machine-pools.delete` of `provider`.
    pub async fn delete_pool(
        &self,
        provider: &str,
        request: &machine_pools::DeleteRequest,
    ) -> Result<DeleteOutcome, CallError> {
        let provider = self.provider(provider)?;
        self.infrastructure(&provider, "machine-pools.delete", async |store, i, x| {
            x.machine_pools
                .load(&mut *store, i)?
                .call_delete(store, request)
                .await
        })
        .await
    }

    /// `clusters.reconcile` of `provider`.
    pub async fn reconcile_cluster(
        &self,
        provider: &str,
        request: &clusters::ClusterRequest,
    ) -> Result<clusters::ClusterState, CallError> {
        let provider = self.provider(provider)?;
        self.infrastructure(&provider, "clusters.reconcile", async |store, i, x| {
            x.clusters
                .load(&mut *store, i)?
                .call_reconcile(store, request)
                .await
        })
        .await
    }

    /// `clusters.delete` of `provider`.
    pub async fn delete_cluster(
        &self,
        provider: &str,
        request: &clusters::ClusterRequest,
    ) -> Result<DeleteOutcome, CallError> {
        let provider = self.provider(provider)?;
        self.infrastructure(&provider, "clusters.delete", async |store, i, x| {
            x.clusters
                .load(&mut *store, i)?
                .call_delete(store, request)
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
        self.infrastructure(&provider, "provider-ids.owns", async |store, i, x| {
            x.provider_ids
                .load(&mut *store, i)?
                .call_owns(store, provider_id)
                .await
                .map(Ok)
        })
        .await
    }

    /// An export only the infrastructure world has.
    async fn infrastructure<R: call::OutputSize>(
        &self,
        provider: &LoadedProvider,
        export: &'static str,
        body: impl AsyncFnOnce(
            &mut Store<CallState>,
            &ComponentInstance,
            &InfrastructureExports,
        ) -> GuestResult<R>,
    ) -> Result<R, CallError> {
        call::run(
            &self.host(),
            &provider.callee(),
            export,
            async |store, instance, pre| match &pre.world {
                WorldExports::Infrastructure(exports) => Some(body(store, instance, exports).await),
                WorldExports::Bootstrap(_) => None,
            },
        )
        .await
    }
}

/// Exactly what the provider worlds import — `log`, clocks, random and
/// outgoing HTTP — plus the `wasi:cli`, `wasi:io` and insecure-random
/// pieces Rust's standard library imports, all backed by an empty context. No filesystem and no
/// sockets: a component importing them fails to load, saying which import.
fn linker(engine: &Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    let l = &mut linker;
    log::add_to_linker::<_, HasSelf<_>>(l, |s| s)?;
    types::add_to_linker::<_, HasSelf<_>>(l, |s| s)?;
    // io, clocks, random, stdin/stdout/stderr: their waits are async.
    wasmtime_wasi::p2::add_to_linker_proxy_interfaces_async(l)?;
    cli::exit::add_to_linker::<_, WasiCli>(l, CallState::cli)?;
    cli::environment::add_to_linker::<_, WasiCli>(l, CallState::cli)?;
    cli::terminal_input::add_to_linker::<_, WasiCli>(l, CallState::cli)?;
    cli::terminal_output::add_to_linker::<_, WasiCli>(l, CallState::cli)?;
    cli::terminal_stdin::add_to_linker::<_, WasiCli>(l, CallState::cli)?;
    cli::terminal_stdout::add_to_linker::<_, WasiCli>(l, CallState::cli)?;
    cli::terminal_stderr::add_to_linker::<_, WasiCli>(l, CallState::cli)?;
    // The standard library seeds its hash maps from these.
    random::insecure::add_to_linker::<_, WasiRandom>(l, CallState::random)?;
    random::insecure_seed::add_to_linker::<_, WasiRandom>(l, CallState::random)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(l)?;
    Ok(linker)
}
