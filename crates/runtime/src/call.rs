//! One bounded call: a fresh `Store` and instance from the provider's
//! pre-instance, a memory cap, a wall-clock deadline, a cap on the result,
//! and the outcome sorted into the guest's own answer or the host's verdict.
//!
//! A call is a future. The guest yields to the executor at every epoch tick
//! (10 ms), so computing never holds a thread for longer; waiting in the
//! host (a timer, an HTTP response) is an async wait. Either way the call
//! ends at its deadline: the future is dropped there, and the instance with
//! it (calls are idempotent by contract, so an abandoned one is safe).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, SemaphorePermit};
use tracing::Instrument as _;
use wasmtime::component::{ComponentExportIndex, Instance as ComponentInstance};
use wasmtime::{CallHook, Engine, Store, Trap, UpdateDeadline};

use super::bindings::{
    BootstrapProviderIndices, ControlPlaneProviderIndices, PlatformProviderIndices,
};
use super::fairness::{self, Fairness, Share, Tenant, Turn};
use super::memory::{GuestMemory, MemoryBound};
use super::metrics::{Held, Metrics};
use super::provider::{Callee, ProviderPre, WorldExports};
use super::state::CallState;
use super::types::{ProviderError, ProviderInfo};
use super::{CallError, bounds, text};

/// What one export call returns before the host's checks: the outer error
/// means the guest died, the inner one is its own typed answer.
pub(crate) type GuestResult<R> = wasmtime::Result<Result<R, ProviderError>>;

/// Where a call runs and what it may use besides the provider's bounds.
pub(crate) struct Host<'a> {
    pub(crate) engine: &'a Engine,
    /// Instance slots: a call waits for one before it instantiates.
    pub(crate) slots: &'a Semaphore,
    /// Each provider's share of calls and CPU.
    pub(crate) fairness: &'a Fairness,
    /// Outgoing connections of all guests together.
    pub(crate) connections: &'a std::sync::Arc<Semaphore>,
    /// Linear memory of all guests together.
    pub(crate) memory: &'a GuestMemory,
    /// How long a call may wait for its provider's turn and an instance
    /// slot; `None`: as long as it takes (loading). A call that waits longer
    /// is refused as [`CallError::Busy`], so that whoever made it (a
    /// controller's worker) is free for other providers' objects.
    pub(crate) patience: Option<Duration>,
    /// Becomes true when the runtime stops.
    pub(crate) stopping: &'a tokio::sync::watch::Sender<bool>,
    pub(crate) metrics: Option<&'a Metrics>,
}

/// [`run`] of an export of the world `pick` finds in the provider's
/// exports; a provider of another world has none (a typed error).
pub(crate) async fn run_in<X, R>(
    host: &Host<'_>,
    callee: &Callee<'_>,
    export: &'static str,
    pick: fn(&super::provider::WorldExports) -> Option<&X>,
    body: impl AsyncFnOnce(&mut Store<CallState>, &ComponentInstance, &X) -> GuestResult<R>,
) -> Result<R, CallError> {
    run(
        host,
        callee,
        export,
        async |store, instance, pre| match pick(&pre.world) {
            Some(exports) => Some(body(store, instance, exports).await),
            None => None,
        },
    )
    .await
}

/// Runs `export` of `callee` in a fresh instance. `body` gets the store,
/// the instance and where the provider's exports are, and makes the actual
/// call, or returns `None` if the provider's world has no such export.
pub(crate) async fn run<R>(
    host: &Host<'_>,
    callee: &Callee<'_>,
    export: &'static str,
    body: impl AsyncFnOnce(
        &mut Store<CallState>,
        &ComponentInstance,
        &ProviderPre,
    ) -> Option<GuestResult<R>>,
) -> Result<R, CallError> {
    let span = tracing::info_span!(
        "guest_call",
        provider = &**callee.name,
        digest = callee.digest,
        export,
        outcome = tracing::field::Empty
    );
    let started = Instant::now();
    let share = callee.share;
    // Held for the whole call: its turns and its throttle.
    let tenant = share.tenant(callee.tenant);
    let result = match tenant.admit(callee.name, callee.digest) {
        Ok(()) => {
            bounded(host, callee, share, &tenant, export, body)
                .instrument(span.clone())
                .await
        }
        Err(refused) => Err(refused),
    };
    if tenant.record(callee.digest, fairness::ended(&result)) {
        tracing::warn!(
            provider = &**callee.name,
            digest = callee.digest,
            namespace = tenant.name(),
            "provider throttled for one namespace: its calls about that namespace's objects keep running into their deadline"
        );
        host.fairness.tell(callee.name);
    }
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) => e.outcome(),
    };
    span.record("outcome", outcome);
    if let Some(metrics) = host.metrics {
        metrics.record_call(callee.name, export, outcome, started.elapsed());
    }
    result
}

/// A store for one call under the provider's limits, yielding to the
/// executor at every epoch tick, and waiting there while its provider has
/// computed past its share.
fn store(host: &Host<'_>, callee: &Callee<'_>, share: &Arc<Share>) -> Store<CallState> {
    let mut state = CallState::new(
        callee.name.clone(),
        callee.limits,
        callee.egress,
        callee.keys.clone(),
        host.memory,
    );
    state.join_token.clone_from(&callee.join_token);
    let shares_a_budget = state.limiter.shares_a_budget();
    let mut store = Store::new(host.engine, state);
    if shares_a_budget {
        store.limiter_async(|state| &mut state.limiter);
    } else {
        store.limiter(|state| &mut state.limiter);
    }
    // What the guest computes (not what it waits for in host calls) is
    // charged to its provider's CPU share at each epoch tick it reaches.
    store.call_hook(|mut store, hook| {
        match hook {
            CallHook::CallingHost => store.data_mut().compute.enter_host(),
            CallHook::ReturningFromHost => store.data_mut().compute.leave_host(),
            CallHook::CallingWasm | CallHook::ReturningFromWasm => {}
        }
        Ok(())
    });
    let share = share.clone();
    store.epoch_deadline_callback(move |mut store| {
        let wait = share.spend(store.data_mut().compute.charge());
        Ok(if wait.is_zero() {
            UpdateDeadline::Yield(1)
        } else {
            UpdateDeadline::YieldCustom(1, Box::pin(tokio::time::sleep(wait)))
        })
    });
    // A call that ends within its first tick never reaches the callback.
    store.set_epoch_deadline(1);
    // What the guest hands the host, in one result or one host call, is
    // lifted against this: every element at its size in the host, every
    // byte of a string or list.
    store.set_hostcall_fuel(callee.limits.max_output_bytes);
    store
}

/// The call within its deadline, once an instance slot is free.
async fn bounded<R>(
    host: &Host<'_>,
    callee: &Callee<'_>,
    share: &Arc<Share>,
    tenant: &Tenant,
    export: &'static str,
    body: impl AsyncFnOnce(
        &mut Store<CallState>,
        &ComponentInstance,
        &ProviderPre,
    ) -> Option<GuestResult<R>>,
) -> Result<R, CallError> {
    let (_turn, _slot) = start(host, callee, share, tenant, export).await?;
    // A throttle that began while this call waited refuses it now, or every
    // call queued behind its tenant's turns would still run to its deadline.
    tenant.admit(callee.name, callee.digest)?;
    let deadline = callee.limits.deadline;
    let mut store = store(host, callee, share);
    // The outer error: no instance could be made.
    let call = async {
        let instance = callee.pre.instance.instantiate_async(&mut store).await?;
        wasmtime::Result::Ok(body(&mut store, &instance, callee.pre).await)
    };
    let mut stopping = host.stopping.subscribe();
    let outcome = tokio::select! {
        // Stopping first: a runtime that has stopped makes no call at all.
        biased;
        _ = stopping.wait_for(|stop| *stop) => {
            return Err(CallError::Abandoned {
                provider: callee.name.to_string(),
                export,
            });
        }
        outcome = tokio::time::timeout(deadline, call) => outcome,
    };
    let outcome = match outcome {
        Err(_) => {
            return Err(CallError::DeadlineExceeded {
                provider: callee.name.to_string(),
                digest: callee.digest.to_owned(),
                export,
                deadline,
            });
        }
        Ok(Err(_)) if let Some(bound) = store.data().limiter.hit => {
            return Err(memory_limit(callee, export, bound));
        }
        Ok(Err(source)) => {
            return Err(CallError::Instantiate {
                provider: callee.name.to_string(),
                digest: callee.digest.to_owned(),
                source,
            });
        }
        Ok(Ok(None)) => {
            return Err(CallError::WrongWorld {
                provider: callee.name.to_string(),
                world: callee.world.as_str(),
                export,
            });
        }
        Ok(Ok(Some(outcome))) => outcome,
    };
    match outcome {
        Ok(Ok(value)) => Ok(value),
        // The guest may have failed because a host turned down the
        // credentials; that is what the person fixing it must read.
        Ok(Err(error)) => Err(match store.data().rejected() {
            Some((host, status)) => CallError::CredentialsRejected {
                provider: callee.name.to_string(),
                export,
                host,
                status,
                error: cleaned(error),
            },
            None => CallError::Provider {
                provider: callee.name.to_string(),
                digest: callee.digest.to_owned(),
                export,
                error: cleaned(error),
            },
        }),
        Err(trap) => Err(classify(callee, export, &store, &trap)),
    }
}

/// A turn (its tenant's and its provider's) and an instance slot: at once
/// if all are free (no timer for most calls), else within the host's
/// patience; refused at once when every turn of its tenant is held by a
/// call already running past the patience (whatever other tenants do).
async fn start<'s, 'h>(
    host: &Host<'h>,
    callee: &Callee<'_>,
    share: &'s Share,
    tenant: &'s Tenant,
    export: &'static str,
) -> Result<(Turn<'s>, SemaphorePermit<'h>), CallError> {
    if let Some(turn) = share.try_turn(tenant)
        && let Ok(slot) = host.slots.try_acquire()
    {
        return Ok((turn, slot));
    }
    let busy = |waited| CallError::Busy {
        provider: callee.name.to_string(),
        export,
        waited,
    };
    if let Some(patience) = host.patience
        && tenant.held_past(patience)
    {
        return Err(busy(Duration::ZERO));
    }
    let _waiting = Held::new(&share.waiting);
    let wait = async {
        let turn = share.turn(tenant).await?;
        let slot = host.slots.acquire().await.ok()?;
        Some((turn, slot))
    };
    let started = match host.patience {
        None => wait.await,
        Some(patience) => tokio::time::timeout(patience, wait)
            .await
            .map_err(|_| busy(patience))?,
    };
    started.ok_or_else(shutting_down)
}

fn shutting_down() -> CallError {
    CallError::NotLoaded("the runtime is shutting down".into())
}

/// Type-checks every export against the provider's world, as the generated
/// bindings do on each instantiation; loading does it once, so that calls
/// check only the export they make.
pub(crate) async fn check_export_types(
    host: &Host<'_>,
    callee: &Callee<'_>,
) -> Result<(), CallError> {
    run(
        host,
        callee,
        "(export types)",
        async |store, instance, pre| {
            let checked = match &pre.world {
                WorldExports::Bootstrap(_) => BootstrapProviderIndices::new(&pre.instance)
                    .and_then(|i| i.load(&mut *store, instance))
                    .map(drop),
                // Interface by interface: the exports added since 0.1.0 are
                // optional, and the world's own check would ask for them.
                WorldExports::Infrastructure(x) => x.type_check(&mut *store, instance),
                WorldExports::Platform(_) => PlatformProviderIndices::new(&pre.instance)
                    .and_then(|i| i.load(&mut *store, instance))
                    .map(drop),
                WorldExports::ControlPlane(_) => ControlPlaneProviderIndices::new(&pre.instance)
                    .and_then(|i| i.load(&mut *store, instance))
                    .map(drop),
            };
            Some(checked.map(Ok))
        },
    )
    .await
}

/// Sorts a dead guest into memory or plain trap. A memory-capped guest
/// usually aborts (an `unreachable` trap) after its allocation fails, so the
/// limiter's record decides, not the trap code.
fn classify(
    callee: &Callee<'_>,
    export: &'static str,
    store: &Store<CallState>,
    error: &wasmtime::Error,
) -> CallError {
    if let Some(bound) = store.data().limiter.hit {
        return memory_limit(callee, export, bound);
    }
    // wasmtime's message for hostcall fuel running out: the guest handed
    // over more than its output limit.
    if error.chain().any(|e| {
        e.to_string()
            .contains("fuel allocated for hostcalls has been exhausted")
    }) {
        return CallError::OutputTooLarge {
            provider: callee.name.to_string(),
            digest: callee.digest.to_owned(),
            export,
            limit_bytes: callee.limits.max_output_bytes,
        };
    }
    let trap = error
        .downcast_ref::<Trap>()
        .map_or_else(|| format!("{error:#}"), ToString::to_string);
    CallError::Trapped {
        provider: callee.name.to_string(),
        digest: callee.digest.to_owned(),
        export,
        trap,
        last_words: {
            let (said, before) = store.data().last_words();
            text::clean_tail(&said, before, bounds::MAX_LAST_WORDS_BYTES)
        },
    }
}

/// The guest's own error with its text bounded and made safe ([`text`]).
fn cleaned(error: ProviderError) -> ProviderError {
    match error {
        ProviderError::RetryAfter(mut e) => {
            e.message = text::clean(&e.message, bounds::MAX_MESSAGE_BYTES);
            ProviderError::RetryAfter(e)
        }
        ProviderError::Terminal(mut e) => {
            e.reason = text::clean(&e.reason, bounds::MAX_REASON_BYTES);
            e.message = text::clean(&e.message, bounds::MAX_MESSAGE_BYTES);
            ProviderError::Terminal(e)
        }
        ProviderError::InvalidConfig(mut e) => {
            e.path = text::clean(&e.path, bounds::MAX_PATH_BYTES);
            e.message = text::clean(&e.message, bounds::MAX_MESSAGE_BYTES);
            ProviderError::InvalidConfig(e)
        }
    }
}

fn memory_limit(callee: &Callee<'_>, export: &'static str, bound: MemoryBound) -> CallError {
    CallError::MemoryLimit {
        provider: callee.name.to_string(),
        digest: callee.digest.to_owned(),
        export,
        bound,
    }
}

// === The exports every world has (used by loading too) ===

/// `info`, its name and version bounded and cleaned as all guest text is.
pub(crate) async fn info(host: &Host<'_>, callee: &Callee<'_>) -> Result<ProviderInfo, CallError> {
    let mut info: ProviderInfo = nullary(host, callee, "info", |pre| &pre.info).await?;
    info.name = text::clean(&info.name, bounds::MAX_INFO_BYTES);
    info.version = text::clean(&info.version, bounds::MAX_INFO_BYTES);
    Ok(info)
}

pub(crate) async fn config_schema(
    host: &Host<'_>,
    callee: &Callee<'_>,
) -> Result<String, CallError> {
    nullary(host, callee, "config-schema", |pre| &pre.config_schema).await
}

/// Calls the export at `index` of no arguments and one result.
async fn nullary<R>(
    host: &Host<'_>,
    callee: &Callee<'_>,
    export: &'static str,
    index: fn(&ProviderPre) -> &ComponentExportIndex,
) -> Result<R, CallError>
where
    R: wasmtime::component::ComponentType + wasmtime::component::Lift + Send + Sync + 'static,
{
    run(host, callee, export, async |store, instance, pre| {
        let func = match instance.get_typed_func::<(), (R,)>(&mut *store, index(pre)) {
            Ok(func) => func,
            Err(error) => return Some(Err(error)),
        };
        let returned = func.call_async(&mut *store, ()).await;
        Some(returned.map(|(value,)| Ok(value)))
    })
    .await
}
