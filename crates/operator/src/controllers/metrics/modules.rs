//! `capwasm_provider_modules{phase}`: how many ProviderModules are in each
//! phase, as their last reconcile left them, counted at each scrape. A
//! module that failed to load is `Failed` until it loads; the one in
//! service before it stays in service meanwhile.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric as _};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// The phases counted: a closed set (a module in no phase yet is not counted).
const PHASES: [&str; 2] = ["Ready", "Failed"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: &'static str,
}

/// Each module's phase, by name (names never leave this map: the labels are phases).
#[derive(Clone, Debug, Default)]
pub(super) struct Modules(Arc<Mutex<HashMap<String, &'static str>>>);

impl Modules {
    /// `module` is in `phase` now (`None`: in none, or gone).
    pub(super) fn set(&self, module: &str, phase: Option<&str>) {
        let mut phases = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match phase.and_then(|p| PHASES.into_iter().find(|known| *known == p)) {
            Some(phase) => {
                phases.insert(module.to_owned(), phase);
            }
            None => {
                phases.remove(module);
            }
        }
    }
}

impl Collector for Modules {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let family = Family::<PhaseLabels, Gauge>::default();
        for phase in PHASES {
            let _ = family.get_or_create(&PhaseLabels { phase });
        }
        for phase in self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            family.get_or_create(&PhaseLabels { phase }).inc();
        }
        family.encode(encoder.encode_descriptor(
            "capwasm_provider_modules",
            "ProviderModules by phase (Ready, Failed: the last load failed), as last reconciled",
            None,
            family.metric_type(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::registry::Registry;

    use super::*;

    #[test]
    fn modules_are_counted_by_their_latest_phase_until_gone() {
        let modules = Modules::default();
        let mut registry = Registry::default();
        registry.register_collector(Box::new(modules.clone()));
        let text = || {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
            text
        };
        assert!(text().contains("capwasm_provider_modules{phase=\"Failed\"} 0\n"));
        modules.set("a", Some("Failed"));
        modules.set("b", Some("Failed"));
        modules.set("c", Some("Ready"));
        assert!(text().contains("capwasm_provider_modules{phase=\"Failed\"} 2\n"));
        modules.set("a", Some("Ready"));
        modules.set("b", None);
        let now = text();
        assert!(
            now.contains("capwasm_provider_modules{phase=\"Failed\"} 0\n"),
            "{now}"
        );
        assert!(
            now.contains("capwasm_provider_modules{phase=\"Ready\"} 2\n"),
            "{now}"
        );
    }
}
