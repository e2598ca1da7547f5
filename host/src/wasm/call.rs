//! One bounded call: a fresh `Store` and instance from the provider's
//! pre-instance, a memory cap, an epoch deadline, a cap on the result, and
//! the outcome sorted into the guest's own answer or the host's verdict.

use std::time::Instant;

use wasmtime::component::Instance as ComponentInstance;
use wasmtime::{Engine, Store, Trap};

use super::bindings::{BootstrapProviderIndices, InfrastructureProviderIndices};
use super::engine::deadline_ticks;
use super::metrics::Metrics;
use super::registry::{LoadedProvider, ProviderPre, WorldExports};
use super::state::CallState;
use super::types::{BootstrapData, DeleteOutcome, Instance, ProviderError, ProviderInfo};
use super::{CallError, clusters::ClusterState, machine_pools::PoolState};

/// What one export call returns before the host's checks: the outer error
/// means the guest died, the inner one is its own typed answer.
pub(crate) type GuestResult<R> = wasmtime::Result<Result<R, ProviderError>>;

/// Runs `export` of `provider` in a fresh instance. `body` gets the store,
/// the instance and where the provider's exports are, and makes the actual
/// call, or returns `None` if the provider's world has no such export.
pub(crate) fn run<R: OutputSize>(
    engine: &Engine,
    provider: &LoadedProvider,
    export: &'static str,
    metrics: Option<&Metrics>,
    body: impl FnOnce(&mut Store<CallState>, &ComponentInstance, &ProviderPre) -> Option<GuestResult<R>>,
) -> Result<R, CallError> {
    let span = tracing::debug_span!("guest_call", provider = provider.name(), digest = %provider.digest, export, outcome = tracing::field::Empty);
    let _entered = span.enter();
    let started = Instant::now();
    let result = run_unmetered(engine, provider, export, body);
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) => e.outcome(),
    };
    span.record("outcome", outcome);
    if let Some(metrics) = metrics {
        metrics.record_call(&provider.name, export, outcome, started.elapsed());
    }
    result
}

/// A store for one call under the provider's limits.
fn store(engine: &Engine, provider: &LoadedProvider) -> Store<CallState> {
    let limits = &provider.limits;
    let mut store = Store::new(
        engine,
        CallState::new(provider.name.clone(), limits, &provider.capabilities),
    );
    store.limiter(|state| &mut state.limiter);
    store.set_epoch_deadline(deadline_ticks(limits.deadline));
    store
}

fn run_unmetered<R: OutputSize>(
    engine: &Engine,
    provider: &LoadedProvider,
    export: &'static str,
    body: impl FnOnce(&mut Store<CallState>, &ComponentInstance, &ProviderPre) -> Option<GuestResult<R>>,
) -> Result<R, CallError> {
    let limits = &provider.limits;
    let mut store = store(engine, provider);
    let instance = match provider.pre.instance.instantiate(&mut store) {
        Ok(instance) => instance,
        Err(source) if store.data().limiter.hit => {
            drop(source);
            return Err(memory_limit(provider, export));
        }
        Err(source) => {
            return Err(CallError::Instantiate {
                provider: provider.name().to_owned(),
                digest: provider.digest.clone(),
                source,
            });
        }
    };
    let Some(outcome) = body(&mut store, &instance, &provider.pre) else {
        return Err(CallError::WrongWorld {
            provider: provider.name().to_owned(),
            world: provider.world.as_str(),
            export,
        });
    };
    match outcome {
        Ok(Ok(value)) => {
            let size = value.output_size();
            if size > limits.max_output_bytes {
                return Err(CallError::OutputTooLarge {
                    provider: provider.name().to_owned(),
                    digest: provider.digest.clone(),
                    export,
                    size,
                    limit_bytes: limits.max_output_bytes,
                });
            }
            Ok(value)
        }
        Ok(Err(error)) => Err(CallError::Provider {
            provider: provider.name().to_owned(),
            digest: provider.digest.clone(),
            export,
            error,
        }),
        Err(trap) => Err(classify(provider, export, &store, &trap)),
    }
}

/// Type-checks every export against the provider's world, as the generated
/// bindings do on each instantiation; loading does it once, so that calls
/// check only the export they make.
pub(crate) fn check_export_types(
    engine: &Engine,
    provider: &LoadedProvider,
) -> wasmtime::Result<()> {
    let mut store = store(engine, provider);
    let pre = &provider.pre.instance;
    let instance = pre.instantiate(&mut store)?;
    match provider.pre.world {
        WorldExports::Bootstrap(_) => {
            BootstrapProviderIndices::new(pre)?.load(&mut store, &instance)?;
        }
        WorldExports::Infrastructure(_) => {
            InfrastructureProviderIndices::new(pre)?.load(&mut store, &instance)?;
        }
    }
    Ok(())
}

/// Sorts a dead guest into deadline, memory or plain trap. A memory-capped
/// guest usually aborts (an `unreachable` trap) after its allocation fails,
/// so the limiter's record decides, not the trap code.
fn classify(
    provider: &LoadedProvider,
    export: &'static str,
    store: &Store<CallState>,
    error: &wasmtime::Error,
) -> CallError {
    if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return CallError::DeadlineExceeded {
            provider: provider.name().to_owned(),
            digest: provider.digest.clone(),
            export,
            deadline: provider.limits.deadline,
        };
    }
    if store.data().limiter.hit {
        return memory_limit(provider, export);
    }
    let trap = error
        .downcast_ref::<Trap>()
        .map_or_else(|| format!("{error:#}"), ToString::to_string);
    CallError::Trapped {
        provider: provider.name().to_owned(),
        digest: provider.digest.clone(),
        export,
        trap,
        last_words: store.data().last_words(),
    }
}

fn memory_limit(provider: &LoadedProvider, export: &'static str) -> CallError {
    CallError::MemoryLimit {
        provider: provider.name().to_owned(),
        digest: provider.digest.clone(),
        export,
        limit_bytes: provider.limits.memory_bytes,
    }
}

// === The exports every world has (used by loading too) ===

pub(crate) fn info(
    engine: &Engine,
    provider: &LoadedProvider,
    metrics: Option<&Metrics>,
) -> Result<ProviderInfo, CallError> {
    run(engine, provider, "info", metrics, |store, instance, pre| {
        Some(
            instance
                .get_typed_func::<(), (ProviderInfo,)>(&mut *store, &pre.info)
                .and_then(|f| f.call(store, ()))
                .map(|(info,)| Ok(info)),
        )
    })
}

pub(crate) fn config_schema(
    engine: &Engine,
    provider: &LoadedProvider,
    metrics: Option<&Metrics>,
) -> Result<String, CallError> {
    run(
        engine,
        provider,
        "config-schema",
        metrics,
        |store, instance, pre| {
            Some(
                instance
                    .get_typed_func::<(), (String,)>(&mut *store, &pre.config_schema)
                    .and_then(|f| f.call(store, ()))
                    .map(|(schema,)| Ok(schema)),
            )
        },
    )
}

// === Result sizes, for the output cap ===

/// Bytes a result carries across the boundary (strings and byte lists).
pub(crate) trait OutputSize {
    fn output_size(&self) -> usize;
}

impl OutputSize for String {
    fn output_size(&self) -> usize {
        self.len()
    }
}

impl OutputSize for bool {
    fn output_size(&self) -> usize {
        0
    }
}

impl OutputSize for DeleteOutcome {
    fn output_size(&self) -> usize {
        0
    }
}

impl OutputSize for ProviderInfo {
    fn output_size(&self) -> usize {
        self.name.len() + self.version.len()
    }
}

impl OutputSize for BootstrapData {
    fn output_size(&self) -> usize {
        self.value.len()
    }
}

impl OutputSize for Instance {
    fn output_size(&self) -> usize {
        self.id.len()
            + self.provider_id.len()
            + self.failure_domain.as_ref().map_or(0, String::len)
            + self.request_token.as_ref().map_or(0, String::len)
            + self
                .addresses
                .iter()
                .map(|a| a.address.len())
                .sum::<usize>()
    }
}

impl OutputSize for PoolState {
    fn output_size(&self) -> usize {
        self.instances.iter().map(OutputSize::output_size).sum()
    }
}

impl OutputSize for ClusterState {
    fn output_size(&self) -> usize {
        self.control_plane_endpoint
            .as_ref()
            .map_or(0, |e| e.host.len())
            + self
                .failure_domains
                .iter()
                .map(|d| {
                    d.name.len()
                        + d.attributes
                            .iter()
                            .map(|(k, v)| k.len() + v.len())
                            .sum::<usize>()
                })
                .sum::<usize>()
    }
}
