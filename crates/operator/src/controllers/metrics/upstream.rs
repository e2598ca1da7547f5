//! The series controller-runtime exports, under its names, types, labels
//! and label values, so that the dashboards and alerts written for Go
//! operators read capwasm too: `controller_runtime_*` from its controller
//! (`pkg/internal/controller/metrics`), `workqueue_*` as it registers
//! client-go's work queue metrics (`pkg/internal/metrics/workqueue.go`) and
//! `leader_election_master_status` (`pkg/metrics/leaderelection.go`).
//!
//! kube-runtime's scheduler keeps its queue to itself: what waits in it,
//! and for how long, cannot be seen, so `workqueue_depth` and
//! `workqueue_queue_duration_seconds` are not exported, and
//! `workqueue_adds_total` counts the keys taken from the queue
//! (`docs/operating.md` lists what is exact).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use kube::runtime::controller::Action;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric as _};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::ControllerLabels;

/// controller-runtime's `controller_runtime_reconcile_time_seconds` buckets.
const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// How a reconcile ended, as controller-runtime's `result` label says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReconcileResult {
    /// No requeue asked for (`Action::await_change`).
    Success,
    /// A requeue at once.
    Requeue,
    /// A requeue after a delay (`Action::requeue`; capwasm's hourly resync too).
    RequeueAfter,
    /// An error; `terminal` when it is not retried before something changes.
    Error {
        /// Whether only a change brings the object back.
        terminal: bool,
    },
}

impl ReconcileResult {
    /// The result of a reconcile that returned `action`.
    pub fn of(action: &Action) -> Self {
        if *action == Action::await_change() {
            Self::Success
        } else if *action == Action::requeue(std::time::Duration::ZERO) {
            Self::Requeue
        } else {
            Self::RequeueAfter
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Requeue => "requeue",
            Self::RequeueAfter => "requeue_after",
            Self::Error { .. } => "error",
        }
    }
}

/// Every `result` label value, as controller-runtime sets them to 0 at start.
const RESULTS: [ReconcileResult; 4] = [
    ReconcileResult::Error { terminal: false },
    ReconcileResult::RequeueAfter,
    ReconcileResult::Requeue,
    ReconcileResult::Success,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: &'static str,
    result: &'static str,
}

/// A work queue's labels: controller-runtime names each queue after its
/// controller, in both.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    name: &'static str,
    controller: &'static str,
}

impl QueueLabels {
    fn of(controller: &'static str) -> Self {
        Self {
            name: controller,
            controller,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    name: String,
}

/// Reconciles running now, by a token each: what the scrape-time gauges
/// `workqueue_unfinished_work_seconds` and
/// `workqueue_longest_running_processor_seconds` add up.
#[derive(Debug, Default)]
struct Running {
    next: u64,
    started: HashMap<u64, (&'static str, Instant)>,
    controllers: BTreeSet<&'static str>,
}

/// The controller-runtime series.
#[derive(Clone)]
pub(super) struct Upstream {
    reconciles: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    terminal_errors: Family<ControllerLabels, Counter>,
    time: Family<ControllerLabels, Histogram>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    active: Family<ControllerLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    retries: Family<QueueLabels, Counter>,
    work_duration: Family<QueueLabels, Histogram>,
    running: Arc<Mutex<Running>>,
    leader: Family<LeaseLabels, Gauge>,
}

impl Default for Upstream {
    fn default() -> Self {
        Self {
            reconciles: Family::default(),
            errors: Family::default(),
            terminal_errors: Family::default(),
            time: Family::new_with_constructor(|| Histogram::new(RECONCILE_TIME_BUCKETS)),
            max_concurrent: Family::default(),
            active: Family::default(),
            adds: Family::default(),
            retries: Family::default(),
            work_duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(10e-9, 10.0, 12))
            }),
            running: Arc::default(),
            leader: Family::default(),
        }
    }
}

impl Upstream {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            self.reconciles.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            self.errors.clone(),
        );
        registry.register(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            self.terminal_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            self.time.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            self.max_concurrent.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            self.active.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            self.adds.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
            self.retries.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            self.work_duration.clone(),
        );
        registry.register_collector(Box::new(Unfinished(self.running.clone())));
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            self.leader.clone(),
        );
    }

    /// A controller starting with `concurrency` workers: its series, at 0.
    pub(super) fn started(&self, controller: &'static str, concurrency: u16) {
        for result in RESULTS {
            let _ = self.reconciles.get_or_create(&ResultLabels {
                controller,
                result: result.label(),
            });
        }
        let labels = ControllerLabels { controller };
        let _ = self.errors.get_or_create(&labels);
        let _ = self.terminal_errors.get_or_create(&labels);
        self.max_concurrent
            .get_or_create(&labels)
            .set(i64::from(concurrency));
        self.active.get_or_create(&labels).set(0);
        let queue = QueueLabels::of(controller);
        let _ = self.adds.get_or_create(&queue);
        let _ = self.retries.get_or_create(&queue);
        self.running().controllers.insert(controller);
    }

    /// A reconcile of `controller` begins: its token for [`Upstream::end`].
    pub(super) fn begin(&self, controller: &'static str) -> u64 {
        self.adds.get_or_create(&QueueLabels::of(controller)).inc();
        self.active
            .get_or_create(&ControllerLabels { controller })
            .inc();
        let mut running = self.running();
        running.controllers.insert(controller);
        running.next += 1;
        let token = running.next;
        running.started.insert(token, (controller, Instant::now()));
        token
    }

    /// The reconcile of `token` ended after `seconds`, with `result` if it
    /// returned (a reconcile abandoned at shutdown has none).
    pub(super) fn end(&self, token: u64, seconds: f64, result: Option<ReconcileResult>) {
        let Some((controller, _)) = self.running().started.remove(&token) else {
            return;
        };
        let labels = ControllerLabels { controller };
        self.active.get_or_create(&labels).dec();
        self.time.get_or_create(&labels).observe(seconds);
        let queue = QueueLabels::of(controller);
        self.work_duration.get_or_create(&queue).observe(seconds);
        let Some(result) = result else { return };
        self.reconciles
            .get_or_create(&ResultLabels {
                controller,
                result: result.label(),
            })
            .inc();
        if let ReconcileResult::Error { terminal } = result {
            self.errors.get_or_create(&labels).inc();
            if terminal {
                self.terminal_errors.get_or_create(&labels).inc();
            }
        }
        // Every error comes back after a delay (kube-runtime's error
        // policy), as a rate-limited requeue does in client-go.
        if matches!(
            result,
            ReconcileResult::RequeueAfter | ReconcileResult::Error { .. }
        ) {
            self.retries.get_or_create(&queue).inc();
        }
    }

    /// This replica holds the Lease `name`, or not.
    pub(super) fn leader(&self, name: &str, leading: bool) {
        self.leader
            .get_or_create(&LeaseLabels {
                name: name.to_owned(),
            })
            .set(i64::from(leading));
    }

    fn running(&self) -> std::sync::MutexGuard<'_, Running> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `workqueue_unfinished_work_seconds` and
/// `workqueue_longest_running_processor_seconds`, as of the scrape
/// (client-go updates them every half second).
#[derive(Debug)]
struct Unfinished(Arc<Mutex<Running>>);

impl Collector for Unfinished {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let unfinished = Family::<QueueLabels, Gauge<f64, AtomicU64>>::default();
        let longest = Family::<QueueLabels, Gauge<f64, AtomicU64>>::default();
        {
            let running = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            for controller in &running.controllers {
                let queue = QueueLabels::of(controller);
                let _ = unfinished.get_or_create(&queue);
                let _ = longest.get_or_create(&queue);
            }
            for (controller, started) in running.started.values() {
                let seconds = now.duration_since(*started).as_secs_f64();
                let queue = QueueLabels::of(controller);
                unfinished.get_or_create(&queue).inc_by(seconds);
                let longest = longest.get_or_create(&queue);
                if seconds > longest.get() {
                    longest.set(seconds);
                }
            }
        }
        unfinished.encode(encoder.encode_descriptor(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
            None,
            unfinished.metric_type(),
        )?)?;
        longest.encode(encoder.encode_descriptor(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            None,
            longest.metric_type(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn text(upstream: &Upstream) -> String {
        let mut registry = Registry::default();
        upstream.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn result_follows_the_action_as_controller_runtime_labels_it() {
        assert_eq!(
            ReconcileResult::of(&Action::await_change()),
            ReconcileResult::Success
        );
        assert_eq!(
            ReconcileResult::of(&Action::requeue(Duration::ZERO)),
            ReconcileResult::Requeue
        );
        assert_eq!(
            ReconcileResult::of(&Action::requeue(Duration::from_secs(3600))),
            ReconcileResult::RequeueAfter
        );
    }

    #[test]
    fn started_controller_has_every_series_at_zero() {
        let upstream = Upstream::default();
        upstream.started("cluster", 16);
        let text = text(&upstream);
        for series in [
            r#"controller_runtime_reconcile_total{controller="cluster",result="success"} 0"#,
            r#"controller_runtime_reconcile_total{controller="cluster",result="error"} 0"#,
            r#"controller_runtime_reconcile_total{controller="cluster",result="requeue"} 0"#,
            r#"controller_runtime_reconcile_total{controller="cluster",result="requeue_after"} 0"#,
            r#"controller_runtime_reconcile_errors_total{controller="cluster"} 0"#,
            r#"controller_runtime_max_concurrent_reconciles{controller="cluster"} 16"#,
            r#"controller_runtime_active_workers{controller="cluster"} 0"#,
            r#"workqueue_adds_total{name="cluster",controller="cluster"} 0"#,
            r#"workqueue_unfinished_work_seconds{name="cluster",controller="cluster"} 0.0"#,
            r#"workqueue_longest_running_processor_seconds{name="cluster",controller="cluster"} 0.0"#,
        ] {
            assert!(text.contains(&format!("{series}\n")), "{series} in\n{text}");
        }
    }

    #[test]
    fn error_counts_once_in_each_series_and_requeues_the_key() {
        let upstream = Upstream::default();
        upstream.started("machinepool", 16);
        let token = upstream.begin("machinepool");
        assert!(
            text(&upstream)
                .contains(r#"controller_runtime_active_workers{controller="machinepool"} 1"#)
        );
        upstream.end(token, 0.2, Some(ReconcileResult::Error { terminal: true }));
        let text = text(&upstream);
        for series in [
            r#"controller_runtime_reconcile_total{controller="machinepool",result="error"} 1"#,
            r#"controller_runtime_reconcile_errors_total{controller="machinepool"} 1"#,
            r#"controller_runtime_terminal_reconcile_errors_total{controller="machinepool"} 1"#,
            r#"controller_runtime_active_workers{controller="machinepool"} 0"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="machinepool"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{le="0.25",controller="machinepool"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{le="0.2",controller="machinepool"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{le="0.15",controller="machinepool"} 0"#,
            r#"workqueue_adds_total{name="machinepool",controller="machinepool"} 1"#,
            r#"workqueue_retries_total{name="machinepool",controller="machinepool"} 1"#,
        ] {
            assert!(text.contains(&format!("{series}\n")), "{series} in\n{text}");
        }
    }

    #[test]
    fn running_reconcile_is_unfinished_work_until_it_ends() {
        let upstream = Upstream::default();
        let token = upstream.begin("bootstrap");
        // Begun two seconds ago.
        let two_seconds_ago = Instant::now().checked_sub(Duration::from_secs(2)).unwrap();
        upstream.running().started.get_mut(&token).unwrap().1 = two_seconds_ago;
        let during = text(&upstream);
        let value = |text: &str, name: &str| -> f64 {
            let prefix = format!(r#"{name}{{name="bootstrap",controller="bootstrap"}} "#);
            text.lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .and_then(|v| v.parse().ok())
                .unwrap_or(-1.0)
        };
        assert!(value(&during, "workqueue_unfinished_work_seconds") >= 2.0);
        assert!(value(&during, "workqueue_longest_running_processor_seconds") >= 2.0);
        upstream.end(token, 2.0, None);
        let after = text(&upstream);
        assert!(value(&after, "workqueue_unfinished_work_seconds").abs() < f64::EPSILON);
        // Abandoned: timed, but no result.
        assert!(after.contains(
            r#"controller_runtime_reconcile_time_seconds_count{controller="bootstrap"} 1"#
        ));
        assert!(!after.contains(r#"controller_runtime_reconcile_total{controller="bootstrap""#));
    }

    #[test]
    fn leader_gauge_is_one_while_leading() {
        let upstream = Upstream::default();
        upstream.leader("capwasm-leader", false);
        assert!(
            text(&upstream).contains("leader_election_master_status{name=\"capwasm-leader\"} 0\n")
        );
        upstream.leader("capwasm-leader", true);
        assert!(
            text(&upstream).contains("leader_election_master_status{name=\"capwasm-leader\"} 1\n")
        );
    }
}
