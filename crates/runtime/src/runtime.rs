//! The entry point: an engine, the linkers of the provider worlds, the
//! registry, and loading providers; the calls by provider name are in
//! [`super::exports`].

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use wasmtime::Engine;

use super::cache::PrecompiledCache;
use super::call::Host;
use super::engine::{self, EpochTicker};
use super::fairness::{Fairness, Throttled};
use super::linkers::Linkers;
use super::load::{self, ProviderSpec};
use super::memory::GuestMemory;
use super::metrics::Metrics;
use super::provider::{Callee, LoadedProvider};
use super::registry::Registry;
use super::{CallError, Error, bounds, checks};

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
    /// Fewer than a controller's workers, so that one provider's calls
    /// running to their deadline leave workers for the others. Calls about
    /// one namespace's objects may hold half of them (rounded up), so that
    /// the other namespaces' calls always find a turn.
    pub max_calls_per_provider: u32,
    /// How long a call waits for its provider's turn and an instance slot
    /// before it is refused as busy (loading waits as long as it takes).
    pub patience: Duration,
    /// The share of a core one provider's calls may compute beyond a burst.
    pub provider_cpu_share: f64,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self {
            max_memory_bytes: bounds::MAX_PROVIDER_MEMORY_MIB << 20,
            max_instances: bounds::MAX_PROVIDER_INSTANCES,
            cache: None,
            max_guest_connections: bounds::MAX_GUEST_CONNECTIONS,
            guest_memory_budget_bytes: None,
            max_calls_per_provider: bounds::calls_per_provider(bounds::CONCURRENCY),
            patience: bounds::PATIENCE,
            provider_cpu_share: bounds::PROVIDER_CPU_SHARE,
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
    slots: Arc<Semaphore>,
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
        let slots = Arc::new(Semaphore::new(settings.max_instances as usize));
        if let Some(metrics) = &metrics {
            metrics.slots(slots.clone(), settings.max_instances);
        }
        Ok(Self {
            inner: Arc::new(Inner {
                engine,
                linkers,
                registry: Registry::default(),
                slots,
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

    /// Provider `name`'s throttles that hold now, by namespace: the
    /// tenants whose calls of it are refused (the others' are made).
    pub fn throttled(&self, name: &str) -> Vec<Throttled> {
        self.inner.fairness.throttled(name)
    }

    /// The names of providers throttled (for one namespace or more) from
    /// now on.
    pub fn throttles(&self) -> tokio::sync::broadcast::Receiver<Arc<str>> {
        self.inner.fairness.changes()
    }

    pub(super) fn host(&self) -> Host<'_> {
        Host {
            engine: &self.inner.engine,
            slots: &self.inner.slots,
            fairness: &self.inner.fairness,
            connections: &self.inner.connections,
            memory: &self.inner.memory,
            patience: Some(self.inner.settings.patience),
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
        // A new version is checked whatever its provider's calls are
        // doing: it may be the one that fixes them.
        let host = Host {
            patience: None,
            ..self.host()
        };
        load::load(
            &host,
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
    /// in namespace `tenant` (a canary's share goes to the canary), and
    /// counts a canary's call.
    pub(super) async fn serve<T>(
        &self,
        name: &str,
        uid: &str,
        tenant: &str,
        // Higher-ranked: with the tenant's lifetime fixed, the callers'
        // futures are not general enough for the controllers' boxed phases.
        call: impl for<'t> AsyncFnOnce(Serving<'t>) -> Result<T, CallError>,
    ) -> Result<T, CallError> {
        let (provider, canary) = self
            .inner
            .registry
            .pick(name, uid)
            .ok_or_else(|| CallError::NotLoaded(name.to_owned()))?;
        let result = call(Serving { provider, tenant }).await;
        if let Some(canary) = canary {
            let broke = result.as_ref().err().is_some_and(CallError::broke);
            self.inner.registry.record(&canary, broke);
        }
        result
    }

    /// The version in service of `name`, for calls about no object.
    pub(super) fn provider(&self, name: &str) -> Result<Arc<LoadedProvider>, CallError> {
        self.inner
            .registry
            .get(name)
            .ok_or_else(|| CallError::NotLoaded(name.to_owned()))
    }

    /// The call figures, if the runtime records them.
    pub fn metrics(&self) -> Option<&Metrics> {
        self.inner.metrics.as_ref()
    }

    /// A result that broke a rule, as the call's error, counted as such.
    pub(super) fn checked(
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
}

/// The version of a provider serving a call about an object, and the
/// object's namespace, whose part of the provider's share the call runs in.
pub(super) struct Serving<'t> {
    pub(super) provider: Arc<LoadedProvider>,
    pub(super) tenant: &'t str,
}

impl Serving<'_> {
    /// What the call needs of the provider, in its tenant's part.
    pub(super) fn callee(&self) -> Callee<'_> {
        self.provider.callee(self.tenant)
    }
}
