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
use super::call::GuestResult;
use super::engine::{self, EpochTicker};
use super::limits::{Capabilities, Limits};
use super::load::{self, LoadRequest, ProviderSource};
use super::metrics::Metrics;
use super::registry::{InfrastructureExports, LoadedProvider, ProviderPre, Registry, WorldExports};
use super::state::CallState;
use super::types::{BootstrapData, DeleteOutcome, Instance};
use super::{CallError, Error, bootstrap, call, clusters, machine_pools};

/// Host-wide settings, fixed for the process's life.
#[derive(Clone, Debug)]
pub struct RuntimeSettings {
    /// The most memory any provider's limits may allow (sizes the instance pool slots).
    pub max_memory_bytes: usize,
    /// Instances that can exist at once; further async calls wait for a slot.
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
/// The call methods (`info`, `generate`, ...) run the guest on the calling
/// thread. From async code, call them through [`Runtime::blocking`]: a
/// guest's blocking I/O (stderr, HTTP bodies) cannot wait on a thread that
/// drives async tasks (tokio refuses it with a panic).
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

    /// Fetches, verifies, compiles (or loads from the cache) and checks a
    /// provider, on this thread. Does not put it in service.
    pub fn load_blocking(
        &self,
        name: &str,
        source: ProviderSource,
        expected_sha256: Option<&str>,
        limits: Limits,
        capabilities: Capabilities,
    ) -> Result<LoadedProvider, Error> {
        let max = self.inner.settings.max_memory_bytes;
        if limits.memory_bytes > max {
            return Err(Error::MemoryLimitTooHigh {
                asked: limits.memory_bytes,
                max,
            });
        }
        load::load(
            &self.inner.engine,
            &self.inner.linker,
            self.inner.settings.cache.as_ref(),
            LoadRequest {
                name: name.into(),
                source,
                expected_sha256: expected_sha256.map(str::to_owned),
                limits,
                capabilities: Arc::new(capabilities),
            },
        )
    }

    /// Loads a provider off the async runtime and, only if every stage
    /// passed, puts it in service atomically. Returns the new version and
    /// the one it replaced; on error the registry is unchanged.
    pub async fn swap(
        &self,
        name: &str,
        source: ProviderSource,
        expected_sha256: Option<&str>,
        limits: Limits,
        capabilities: Capabilities,
    ) -> Result<(Arc<LoadedProvider>, Option<Arc<LoadedProvider>>), Error> {
        let this = self.clone();
        let (name, expected) = (name.to_owned(), expected_sha256.map(str::to_owned));
        let loaded = tokio::task::spawn_blocking(move || {
            this.load_blocking(&name, source, expected.as_deref(), limits, capabilities)
        })
        .await??;
        let loaded = Arc::new(loaded);
        let previous = self.inner.registry.install(loaded.clone());
        Ok((loaded, previous))
    }

    /// Runs `f` on a blocking thread once an instance slot is free: guest
    /// code is synchronous and must not hold up the async runtime's workers.
    pub async fn blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Runtime) -> Result<R, CallError> + Send + 'static,
    ) -> Result<R, CallError> {
        let _slot = self
            .inner
            .slots
            .acquire()
            .await
            .map_err(|_| CallError::NotLoaded("the runtime is shutting down".into()))?;
        let this = self.clone();
        tokio::task::spawn_blocking(move || f(&this)).await?
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

    /// Runs `export` of the current version of `provider`; `body` makes the
    /// call on the instance, or returns `None` if the provider's world has no
    /// such export.
    fn call<R: call::OutputSize>(
        &self,
        provider: &str,
        export: &'static str,
        body: impl FnOnce(
            &mut Store<CallState>,
            &ComponentInstance,
            &ProviderPre,
        ) -> Option<GuestResult<R>>,
    ) -> Result<R, CallError> {
        call::run(
            &self.inner.engine,
            &*self.provider(provider)?,
            export,
            self.metrics(),
            body,
        )
    }

    /// What `provider` says of itself (every world exports it).
    pub fn info(&self, provider: &str) -> Result<types::ProviderInfo, CallError> {
        call::info(
            &self.inner.engine,
            &*self.provider(provider)?,
            self.metrics(),
        )
    }

    /// `bootstrap.generate` of `provider`.
    pub fn generate(
        &self,
        provider: &str,
        request: &bootstrap::GenerateRequest,
    ) -> Result<BootstrapData, CallError> {
        self.call(
            provider,
            "bootstrap.generate",
            |store, instance, pre| match &pre.world {
                WorldExports::Bootstrap(bootstrap) => Some(
                    bootstrap
                        .load(&mut *store, instance)
                        .and_then(|b| b.call_generate(store, request)),
                ),
                WorldExports::Infrastructure(_) => None,
            },
        )
    }

    /// `machine-pools.reconcile` of `provider`.
    pub fn reconcile_pool(
        &self,
        provider: &str,
        request: &machine_pools::ReconcileRequest,
    ) -> Result<machine_pools::PoolState, CallError> {
        self.infrastructure(provider, "machine-pools.reconcile", |store, i, x| {
            x.machine_pools
                .load(&mut *store, i)?
                .call_reconcile(store, request)
        })
    }

    /// `machine-pools.delete` of `provider`.
    pub fn delete_pool(
        &self,
        provider: &str,
        request: &machine_pools::DeleteRequest,
    ) -> Result<DeleteOutcome, CallError> {
        self.infrastructure(provider, "machine-pools.delete", |store, i, x| {
            x.machine_pools
                .load(&mut *store, i)?
                .call_delete(store, request)
        })
    }

    /// `clusters.reconcile` of `provider`.
    pub fn reconcile_cluster(
        &self,
        provider: &str,
        request: &clusters::ClusterRequest,
    ) -> Result<clusters::ClusterState, CallError> {
        self.infrastructure(provider, "clusters.reconcile", |store, i, x| {
            x.clusters
                .load(&mut *store, i)?
                .call_reconcile(store, request)
        })
    }

    /// `clusters.delete` of `provider`.
    pub fn delete_cluster(
        &self,
        provider: &str,
        request: &clusters::ClusterRequest,
    ) -> Result<DeleteOutcome, CallError> {
        self.infrastructure(provider, "clusters.delete", |store, i, x| {
            x.clusters.load(&mut *store, i)?.call_delete(store, request)
        })
    }

    /// `provider-ids.provider-id` of `provider`.
    pub fn provider_id(
        &self,
        provider: &str,
        config: &str,
        instance: &Instance,
    ) -> Result<String, CallError> {
        self.infrastructure(provider, "provider-ids.provider-id", |store, i, x| {
            x.provider_ids
                .load(&mut *store, i)?
                .call_provider_id(store, config, instance)
        })
    }

    /// `provider-ids.owns` of `provider`.
    pub fn owns(&self, provider: &str, provider_id: &str) -> Result<bool, CallError> {
        self.infrastructure(provider, "provider-ids.owns", |store, i, x| {
            x.provider_ids
                .load(&mut *store, i)?
                .call_owns(store, provider_id)
                .map(Ok)
        })
    }

    /// An export only the infrastructure world has.
    fn infrastructure<R: call::OutputSize>(
        &self,
        provider: &str,
        export: &'static str,
        body: impl FnOnce(
            &mut Store<CallState>,
            &ComponentInstance,
            &InfrastructureExports,
        ) -> GuestResult<R>,
    ) -> Result<R, CallError> {
        self.call(provider, export, |store, instance, pre| match &pre.world {
            WorldExports::Infrastructure(exports) => Some(body(store, instance, exports)),
            WorldExports::Bootstrap(_) => None,
        })
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
    // io, clocks, random, stdin/stdout/stderr.
    wasmtime_wasi::p2::add_to_linker_proxy_interfaces_sync(l)?;
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
    wasmtime_wasi_http::p2::add_only_http_to_linker_sync(l)?;
    Ok(linker)
}
