//! Per-provider call figures for Prometheus. Labels are bounded: providers
//! are configuration (ProviderModules), exports and outcomes are closed sets.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

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

/// Guest call counters and durations.
#[derive(Clone)]
pub struct Metrics {
    calls: Family<CallLabels, Counter>,
    duration: Family<ExportLabels, Histogram>,
}

impl Metrics {
    /// Creates the families and registers them under `capwasm_guest_*`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "capwasm_guest_calls",
            "Calls into provider components, by provider, export and outcome (ok, retry_after, terminal, invalid_config, trap, timeout, memory_limit, output_too_large, instantiate, not_loaded)",
            metrics.calls.clone(),
        );
        registry.register(
            "capwasm_guest_call_duration_seconds",
            "Duration of calls into provider components, including instantiation",
            metrics.duration.clone(),
        );
        metrics
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
            // 5 µs to ~10 s.
            duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(5e-6, 4.0, 12))
            }),
        }
    }
}
