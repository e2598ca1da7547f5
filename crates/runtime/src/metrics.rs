//! Per-provider call figures for Prometheus. Labels are bounded: providers
//! are configuration (ProviderModules), exports and outcomes are closed sets.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric as _};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::sync::Semaphore;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    // Shared with the loaded provider: building the labels on every call
    // is a reference-count increment, not an allocation.
    provider: Arc<str>,
    export: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ExportLabels {
    provider: Arc<str>,
    export: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderLabels {
    provider: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    provider: Arc<str>,
    /// A closed set: which bound the guest crossed.
    limit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    provider: Arc<str>,
    /// A closed set: `2xx` … `5xx`, or `error` for no answer.
    status: &'static str,
}

/// Guest call counters and durations.
#[derive(Clone)]
pub struct Metrics {
    calls: Family<CallLabels, Counter>,
    http_requests: Family<HttpLabels, Counter>,
    duration: Family<ExportLabels, Histogram>,
    http_refusals: Family<LimitLabels, Counter>,
    invalid_results: Family<ExportLabels, Counter>,
    waiting: Family<ProviderLabels, Gauge>,
    slots: Slots,
}

/// The instance slots, read at each scrape rather than counted around
/// every call: nothing on a call's path.
#[derive(Clone, Debug, Default)]
struct Slots(Arc<OnceLock<(Arc<Semaphore>, u32)>>);

impl Slots {
    /// Instances alive now, and the slots there are.
    fn now(&self) -> Option<(i64, i64)> {
        let (semaphore, slots) = self.0.get()?;
        let slots = i64::from(*slots);
        let free = i64::try_from(semaphore.available_permits()).unwrap_or(slots);
        Some((slots - free, slots))
    }
}

impl Collector for Slots {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Some((alive, slots)) = self.now() else {
            return Ok(());
        };
        for (name, help, value) in [
            (
                "capwasm_guest_instances",
                "Provider instances alive now, of all providers together: never more than capwasm_guest_instance_slots",
                alive,
            ),
            (
                "capwasm_guest_instance_slots",
                "Provider instances that may be alive at once (--max-provider-instances); a call beyond them waits",
                slots,
            ),
        ] {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

impl Metrics {
    /// Creates the families and registers them under `capwasm_guest_*`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "capwasm_guest_calls",
            "Calls into provider components, by provider, export and outcome (ok, retry_after, terminal, invalid_config, trap, timeout, memory_limit, output_too_large, invalid_result, instantiate, abandoned, credentials_rejected, throttled, busy, not_loaded)",
            metrics.calls.clone(),
        );
        registry.register(
            "capwasm_guest_call_duration_seconds",
            "Duration of calls into provider components, including instantiation",
            metrics.duration.clone(),
        );
        registry.register(
            "capwasm_guest_invalid_results",
            "Results of provider calls refused for breaking the contract, by provider and export",
            metrics.invalid_results.clone(),
        );
        registry.register(
            "capwasm_guest_http_requests",
            "Outgoing HTTP requests of provider components sent, by provider and status class (2xx, 3xx, 4xx, 5xx, error for none)",
            metrics.http_requests.clone(),
        );
        registry.register(
            "capwasm_guest_http_refusals",
            "Outgoing HTTP requests of provider components refused, by provider and the limit crossed (host, requests_per_call, in_flight_per_call, in_flight_per_provider, connections)",
            metrics.http_refusals.clone(),
        );
        registry.register(
            "capwasm_guest_calls_waiting",
            "Calls of each provider queued for its turn (its share of concurrent calls) or an instance slot: queued, not dropped",
            metrics.waiting.clone(),
        );
        registry.register_collector(Box::new(metrics.slots.clone()));
        metrics
    }

    /// Reports the instances alive as the permits of `semaphore`, of
    /// `slots`, that are taken (the first runtime's, if several share these
    /// metrics).
    pub(crate) fn slots(&self, semaphore: Arc<Semaphore>, slots: u32) {
        let _ = self.slots.0.set((semaphore, slots));
    }

    /// Calls of `provider` queued now.
    pub fn waiting(&self, provider: &str) -> i64 {
        self.waiting
            .get(&ProviderLabels {
                provider: provider.into(),
            })
            .map_or(0, |g| g.get())
    }

    /// Instances alive now.
    pub fn instances(&self) -> i64 {
        self.slots.now().map_or(0, |(alive, _)| alive)
    }

    /// The gauge of `provider`'s queued calls.
    pub(crate) fn waiting_gauge(&self, provider: &Arc<str>) -> Gauge {
        self.waiting
            .get_or_create(&ProviderLabels {
                provider: provider.clone(),
            })
            .clone()
    }

    pub(crate) fn record_call(
        &self,
        provider: &Arc<str>,
        export: &'static str,
        outcome: &'static str,
        elapsed: Duration,
    ) {
        self.calls
            .get_or_create(&CallLabels {
                provider: provider.clone(),
                export,
                outcome,
            })
            .inc();
        self.duration
            .get_or_create(&ExportLabels {
                provider: provider.clone(),
                export,
            })
            .observe(elapsed.as_secs_f64());
    }

    pub(crate) fn http_sent(&self, provider: &Arc<str>, status: Option<u16>) {
        let status = match status {
            Some(200..=299) => "2xx",
            Some(300..=399) => "3xx",
            Some(400..=499) => "4xx",
            Some(_) => "5xx",
            None => "error",
        };
        self.http_requests
            .get_or_create(&HttpLabels {
                provider: provider.clone(),
                status,
            })
            .inc();
    }

    /// Outgoing requests `provider` sent, whatever their answer.
    pub fn http_requests(&self, provider: &str) -> u64 {
        ["2xx", "3xx", "4xx", "5xx", "error"]
            .into_iter()
            .filter_map(|status| {
                self.http_requests.get(&HttpLabels {
                    provider: provider.into(),
                    status,
                })
            })
            .map(|c| c.get())
            .sum()
    }

    pub(crate) fn http_refused(&self, provider: &Arc<str>, limit: &'static str) {
        self.http_refusals
            .get_or_create(&LimitLabels {
                provider: provider.clone(),
                limit,
            })
            .inc();
    }

    pub(crate) fn invalid_result(&self, provider: &Arc<str>, export: &'static str) {
        self.invalid_results
            .get_or_create(&ExportLabels {
                provider: provider.clone(),
                export,
            })
            .inc();
    }

    /// Results of `provider`'s `export` refused for breaking the contract.
    pub fn invalid_results(&self, provider: &str, export: &'static str) -> u64 {
        self.invalid_results
            .get(&ExportLabels {
                provider: provider.into(),
                export,
            })
            .map_or(0, |c| c.get())
    }

    /// Outgoing requests of `provider` refused at `limit`.
    pub fn http_refusals(&self, provider: &str, limit: &'static str) -> u64 {
        self.http_refusals
            .get(&LimitLabels {
                provider: provider.into(),
                limit,
            })
            .map_or(0, |c| c.get())
    }

    /// How many calls of `provider`'s `export` ended with `outcome`.
    pub fn calls(&self, provider: &str, export: &'static str, outcome: &'static str) -> u64 {
        self.calls
            .get(&CallLabels {
                provider: provider.into(),
                export,
                outcome,
            })
            .map_or(0, |c| c.get())
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            calls: Family::default(),
            http_requests: Family::default(),
            // 5 µs to ~10 s.
            duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(5e-6, 4.0, 12))
            }),
            http_refusals: Family::default(),
            invalid_results: Family::default(),
            waiting: Family::default(),
            slots: Slots::default(),
        }
    }
}

/// Counts one on a gauge while it lives: a call waiting its turn.
pub(crate) struct Held<'a>(&'a Gauge);

impl<'a> Held<'a> {
    pub(crate) fn new(gauge: &'a Gauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}
