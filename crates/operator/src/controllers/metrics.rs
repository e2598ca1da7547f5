//! Reconcile figures for Prometheus: runs, durations, failures and API
//! writes, by controller, every request to the API server, and what the
//! webhook refused. Labels come from closed sets. Beside capwasm's own
//! series, the ones controller-runtime operators export ([`upstream`],
//! [`process`]), under their names, for the dashboards and alerts
//! written for those.

mod modules;
mod process;
mod upstream;

use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::requests::ApiRequests;

pub use upstream::ReconcileResult;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    /// A resource's plural: bounded by the kinds the operator watches.
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    controller: &'static str,
    error: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriteLabels {
    controller: &'static str,
    what: &'static str,
}

/// The controllers' counters and histograms.
#[derive(Clone)]
pub struct Metrics {
    reconciles: Family<ControllerLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    writes: Family<WriteLabels, Counter>,
    duration: Family<ControllerLabels, Histogram>,
    watch_errors: Family<ResourceLabels, Counter>,
    webhook_refusals: Family<RefusalLabels, Counter>,
    webhook_certificate_writes: Family<OutcomeLabels, Counter>,
    webhook_certificate_expiry: Gauge,
    /// Every request to the management API server.
    pub requests: ApiRequests,
    upstream: upstream::Upstream,
    modules: modules::Modules,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            reconciles: Family::default(),
            failures: Family::default(),
            writes: Family::default(),
            watch_errors: Family::default(),
            webhook_refusals: Family::default(),
            webhook_certificate_writes: Family::default(),
            webhook_certificate_expiry: Gauge::default(),
            requests: ApiRequests::default(),
            upstream: upstream::Upstream::default(),
            modules: modules::Modules::default(),
            // 1 ms to ~30 s.
            duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(1e-3, 3.0, 10))
            }),
        }
    }
}

impl Metrics {
    /// Creates the families and registers them under `capwasm_reconcile_*`,
    /// `capwasm_watch_errors`, `capwasm_api_requests`, `capwasm_api_writes`
    /// `capwasm_webhook_refused` and `capwasm_webhook_certificate_*`; and
    /// controller-runtime's
    /// `controller_runtime_*`, `workqueue_*`, `rest_client_requests_total`,
    /// `leader_election_master_status` and `process_*`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "capwasm_reconcile",
            "Reconciles run, by controller",
            metrics.reconciles.clone(),
        );
        registry.register(
            "capwasm_reconcile_failures",
            "Reconciles that ended in an error, by controller and error kind",
            metrics.failures.clone(),
        );
        registry.register(
            "capwasm_reconcile_duration_seconds",
            "Duration of reconciles, by controller",
            metrics.duration.clone(),
        );
        registry.register(
            "capwasm_watch_errors",
            "Failed lists and watches of a cached kind (a missing permission, say), by resource",
            metrics.watch_errors.clone(),
        );
        metrics.requests.register(registry);
        registry.register(
            "capwasm_api_writes",
            "Writes to the management API server, by controller and what was written",
            metrics.writes.clone(),
        );
        registry.register(
            "capwasm_webhook_refused",
            "Connections and requests the webhook server refused or closed, by reason",
            metrics.webhook_refusals.clone(),
        );
        registry.register(
            "capwasm_webhook_certificate_writes",
            "Writes of the webhook's certificate Secret by this replica, by outcome (conflict: another replica wrote first)",
            metrics.webhook_certificate_writes.clone(),
        );
        registry.register(
            "capwasm_webhook_certificate_expiry_timestamp_seconds",
            "When the serving certificate this replica serves expires, in seconds since the epoch",
            metrics.webhook_certificate_expiry.clone(),
        );
        metrics.upstream.register(registry);
        registry.register_collector(Box::new(process::Process));
        registry.register_collector(Box::new(metrics.modules.clone()));
        metrics
    }

    /// ProviderModule `module` is in `phase` (`None`: gone), for
    /// `capwasm_provider_modules{phase}`.
    pub fn module_phase(&self, module: &str, phase: Option<&str>) {
        self.modules.set(module, phase);
    }

    /// `controller` runs, with `concurrency` workers: its
    /// controller-runtime series exist from now on, at 0 (as upstream's do).
    pub fn controller_started(&self, controller: &'static str, concurrency: u16) {
        self.upstream.started(controller, concurrency);
    }

    /// Whether this replica holds the leader Lease `lease`
    /// (`leader_election_master_status`).
    pub fn leader(&self, lease: &str, leading: bool) {
        self.upstream.leader(lease, leading);
    }

    /// Counts a reconcile of `controller` and times it until the guard
    /// drops; [`ReconcileTimer::finish`] says how it ended.
    pub fn reconcile(&self, controller: &'static str) -> ReconcileTimer {
        self.reconciles
            .get_or_create(&ControllerLabels { controller })
            .inc();
        ReconcileTimer {
            started: Instant::now(),
            histogram: self
                .duration
                .get_or_create(&ControllerLabels { controller })
                .clone(),
            token: self.upstream.begin(controller),
            upstream: self.upstream.clone(),
            result: None,
        }
    }

    /// Counts a failed reconcile.
    pub fn failure(&self, controller: &'static str, error: &'static str) {
        self.failures
            .get_or_create(&FailureLabels { controller, error })
            .inc();
    }

    /// Counts a failed list or watch of `resource`.
    pub fn watch_error(&self, resource: &str) {
        self.watch_errors
            .get_or_create(&ResourceLabels {
                resource: resource.to_owned(),
            })
            .inc();
    }

    /// Failed lists and watches of `resource` so far.
    pub fn watch_errors(&self, resource: &str) -> u64 {
        self.watch_errors
            .get(&ResourceLabels {
                resource: resource.to_owned(),
            })
            .map_or(0, |c| c.get())
    }

    /// Counts a connection or request the webhook refused for `reason`.
    pub fn webhook_refused(&self, reason: &'static str) {
        self.webhook_refusals
            .get_or_create(&RefusalLabels { reason })
            .inc();
    }

    /// Connections and requests the webhook refused for `reason` so far.
    pub fn webhook_refusals(&self, reason: &'static str) -> u64 {
        self.webhook_refusals
            .get(&RefusalLabels { reason })
            .map_or(0, |c| c.get())
    }

    /// Counts a write of the webhook's certificate Secret that ended as `outcome`.
    pub fn webhook_certificate_written(&self, outcome: &'static str) {
        self.webhook_certificate_writes
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// Writes of the webhook's certificate Secret that ended as `outcome` so far.
    pub fn webhook_certificate_writes(&self, outcome: &'static str) -> u64 {
        self.webhook_certificate_writes
            .get(&OutcomeLabels { outcome })
            .map_or(0, |c| c.get())
    }

    /// The serving certificate served now expires at `not_after` (seconds
    /// since the epoch).
    pub fn webhook_certificate_served(&self, not_after: i64) {
        self.webhook_certificate_expiry.set(not_after);
    }

    /// Counts a write.
    pub fn write(&self, controller: &'static str, what: &'static str) {
        self.writes
            .get_or_create(&WriteLabels { controller, what })
            .inc();
    }

    /// Writes of `what` by `controller` so far.
    pub fn writes(&self, controller: &'static str, what: &'static str) -> u64 {
        self.writes
            .get(&WriteLabels { controller, what })
            .map_or(0, |c| c.get())
    }

    /// Failed reconciles of `controller` with `error` so far.
    pub fn failures(&self, controller: &'static str, error: &'static str) -> u64 {
        self.failures
            .get(&FailureLabels { controller, error })
            .map_or(0, |c| c.get())
    }
}

/// Observes a reconcile's duration, and its result if it has one, when dropped.
pub struct ReconcileTimer {
    started: Instant,
    histogram: Histogram,
    token: u64,
    upstream: upstream::Upstream,
    result: Option<ReconcileResult>,
}

impl ReconcileTimer {
    /// The reconcile ended with `result` (one abandoned at shutdown never does).
    pub fn finish(mut self, result: ReconcileResult) {
        self.result = Some(result);
    }
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        let seconds = self.started.elapsed().as_secs_f64();
        self.histogram.observe(seconds);
        self.upstream.end(self.token, seconds, self.result);
    }
}
