//! Conformance: the scenarios a provider must pass, whatever language it is
//! written in. They are the tests the Rust providers are held to, run by
//! `capwasm provider conformance` for any component and by the test suite
//! for each of capwasm's own implementations.

pub mod infrastructure;
pub mod requests;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use crate::report::error_chain;
use crate::wasm::bootstrap::GenerateRequest;
use crate::wasm::clusters::{ClusterRequest, ClusterState};
use crate::wasm::machine_pools::{DeleteRequest, PoolState, ReconcileRequest};
use crate::wasm::node_shapes::{DescribeRequest, NodeShape};
use crate::wasm::pool_machines::RemoveRequest;
use crate::wasm::types::{BootstrapData, DeleteOutcome, Instance, ProviderError, ProviderInfo};
use crate::wasm::{
    self, CallError, Capabilities, Limits, LoadedProvider, PrecompiledCache, ProviderSource,
    ProviderSpec, Runtime, RuntimeSettings,
};

/// Why a scenario failed.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The provider answered, but not as the contract says.
    #[error("{0}")]
    Expected(String),
    /// A call the scenario needed failed.
    #[error("{}", failed_call(.0))]
    Call(#[from] CallError),
    /// The component could not be loaded.
    #[error("cannot load the component: {}", error_chain(.0))]
    Load(#[from] wasm::Error),
    /// What the scenario runs against could not be set up.
    #[error("cannot set the scenario up: {0}")]
    Setup(String),
}

/// Fails the scenario with a message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($message:tt)+) => {
        if !$cond {
            return Err($crate::conformance::Failure::Expected(format!($($message)+)));
        }
    };
}

/// Fails the scenario unless `actual == expected`, saying what `what` is.
macro_rules! ensure_eq {
    ($actual:expr, $expected:expr, $($what:tt)+) => {{
        let (actual, expected) = (&$actual, &$expected);
        if actual != expected {
            return Err($crate::conformance::Failure::Expected(format!(
                "{}: expected {:?}, got {:?}",
                format!($($what)+),
                expected,
                actual
            )));
        }
    }};
}
pub(crate) use {ensure, ensure_eq};

/// One scenario: a name that says what it checks, and the check.
pub struct Scenario {
    /// The scenario's function name, which reads as a sentence.
    pub name: &'static str,
    /// Runs it against the component.
    pub run: for<'a> fn(&'a Subject) -> BoxFuture<'a, Result<(), Failure>>,
}

impl Scenario {
    /// The name as words.
    pub fn title(&self) -> String {
        self.name.replace('_', " ")
    }
}

/// What one scenario came to, and how long it took.
pub struct Outcome {
    /// The scenario.
    pub scenario: &'static Scenario,
    /// Passed, or why not.
    pub result: Result<(), Failure>,
    /// Wall-clock time, setup included.
    pub took: Duration,
}

/// Runs `scenarios` one after the other, calling `report` after each.
pub async fn run_all(
    subject: &Subject,
    scenarios: &'static [Scenario],
    mut report: impl FnMut(&Outcome),
) -> Vec<Outcome> {
    let mut outcomes = Vec::with_capacity(scenarios.len());
    for scenario in scenarios {
        let started = Instant::now();
        let result = (scenario.run)(subject).await;
        let outcome = Outcome {
            scenario,
            result,
            took: started.elapsed(),
        };
        report(&outcome);
        outcomes.push(outcome);
    }
    outcomes
}

/// One compilation at a time: the first of a component fills the cache,
/// the others load from it (a Python component takes seconds to compile).
static COMPILING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The component under test, loaded under the capabilities each scenario
/// gives it.
pub struct Subject {
    runtime: Runtime,
    bytes: Vec<u8>,
    limits: Limits,
    loaded: AtomicU32,
}

impl Subject {
    /// The component `bytes`, called within `limits`; compiled once into
    /// `cache` when there is one, else once per load.
    pub fn new(
        bytes: Vec<u8>,
        limits: Limits,
        cache: Option<PrecompiledCache>,
    ) -> Result<Self, Failure> {
        let runtime = Runtime::new(
            RuntimeSettings {
                max_memory_bytes: limits.memory_bytes,
                // Calls are one at a time; loads check with one more.
                max_instances: 4,
                cache,
                ..RuntimeSettings::default()
            },
            None,
        )?;
        Ok(Self {
            runtime,
            bytes,
            limits,
            loaded: AtomicU32::new(0),
        })
    }

    /// The component in service under `capabilities`, beside any loaded before.
    pub async fn load(&self, capabilities: Capabilities) -> Result<Provider<'_>, Failure> {
        let name = format!("subject-{}", self.loaded.fetch_add(1, Ordering::Relaxed));
        let compiling = COMPILING.lock().await;
        let (loaded, _) = self
            .runtime
            .swap(ProviderSpec {
                name: name.clone(),
                source: ProviderSource::Bytes(self.bytes.clone()),
                sha256: None,
                limits: self.limits.clone(),
                capabilities,
            })
            .await?;
        drop(compiling);
        Ok(Provider {
            runtime: &self.runtime,
            loaded,
            name,
        })
    }
}

/// The component as loaded by [`Subject::load`]: its calls.
pub struct Provider<'a> {
    runtime: &'a Runtime,
    loaded: Arc<LoadedProvider>,
    name: String,
}

impl Provider<'_> {
    /// The runtime it is in service in.
    pub fn runtime(&self) -> &Runtime {
        self.runtime
    }

    /// The component as loaded: world, info, config schema, digest.
    pub fn loaded(&self) -> &LoadedProvider {
        &self.loaded
    }

    /// `info`.
    pub async fn info(&self) -> Result<ProviderInfo, CallError> {
        self.runtime.info(&self.name).await
    }

    /// `bootstrap.generate`.
    pub async fn generate(&self, request: &GenerateRequest) -> Result<BootstrapData, CallError> {
        self.runtime.generate(&self.name, request).await
    }

    /// `machine-pools.reconcile`.
    pub async fn reconcile(&self, request: &ReconcileRequest) -> Result<PoolState, CallError> {
        self.runtime.reconcile_pool(&self.name, request).await
    }

    /// `machine-pools.delete`.
    pub async fn delete(&self, request: &DeleteRequest) -> Result<DeleteOutcome, CallError> {
        self.runtime.delete_pool(&self.name, request).await
    }

    /// `pool-machines.remove`.
    pub async fn remove(&self, request: &RemoveRequest) -> Result<PoolState, CallError> {
        self.runtime.remove_instances(&self.name, request).await
    }

    /// `node-shapes.describe`.
    pub async fn describe_nodes(&self, request: &DescribeRequest) -> Result<NodeShape, CallError> {
        self.runtime.describe_nodes(&self.name, request).await
    }

    /// `clusters.reconcile`.
    pub async fn reconcile_cluster(
        &self,
        request: &ClusterRequest,
    ) -> Result<ClusterState, CallError> {
        self.runtime.reconcile_cluster(&self.name, request).await
    }

    /// `provider-ids.provider-id`.
    pub async fn provider_id(
        &self,
        config: &str,
        instance: &Instance,
    ) -> Result<String, CallError> {
        self.runtime.provider_id(&self.name, config, instance).await
    }

    /// `provider-ids.owns`.
    pub async fn owns(&self, provider_id: &str) -> Result<bool, CallError> {
        self.runtime.owns(&self.name, provider_id).await
    }
}

/// The provider's typed error in one line, as `capwasm provider test` prints it.
pub fn said(error: &ProviderError) -> String {
    match error {
        ProviderError::RetryAfter(e) => format!("retry after {}s: {}", e.seconds, e.message),
        ProviderError::Terminal(e) => format!("terminal ({}): {}", e.reason, e.message),
        ProviderError::InvalidConfig(e) => format!("invalid config at {}: {}", e.path, e.message),
    }
}

/// A call's error without the provider's name and digest, which are the
/// component's under test for every call.
fn failed_call(error: &CallError) -> String {
    match error {
        CallError::Provider { export, error, .. } => format!("{export} returned {}", said(error)),
        other => error_chain(other),
    }
}

/// The provider's own typed error, or why the result is not one.
fn provider_error<T: std::fmt::Debug>(
    result: Result<T, CallError>,
    expected: &str,
) -> Result<ProviderError, Failure> {
    match result {
        Err(CallError::Provider { error, .. }) => Ok(error),
        Ok(value) => Err(Failure::Expected(format!(
            "expected {expected}, got the result {value:?}"
        ))),
        Err(other) => Err(Failure::Expected(format!(
            "expected {expected}, got: {}",
            failed_call(&other)
        ))),
    }
}

/// Passes if `result` is the provider's retry-after error with a delay.
pub fn expect_retry_after<T: std::fmt::Debug>(result: Result<T, CallError>) -> Result<(), Failure> {
    match provider_error(result, "retry-after")? {
        ProviderError::RetryAfter(r) if r.seconds > 0 => Ok(()),
        other => Err(Failure::Expected(format!(
            "expected retry-after with a delay, got {}",
            said(&other)
        ))),
    }
}

/// Passes if `result` is the provider's terminal error for `reason`.
pub fn expect_terminal<T: std::fmt::Debug>(
    result: Result<T, CallError>,
    reason: &str,
) -> Result<(), Failure> {
    match provider_error(result, &format!("terminal ({reason})"))? {
        ProviderError::Terminal(t) if t.reason == reason => Ok(()),
        other => Err(Failure::Expected(format!(
            "expected terminal ({reason}), got {}",
            said(&other)
        ))),
    }
}
