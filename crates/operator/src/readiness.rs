//! What `/readyz` answers: ready once every check this replica registered
//! holds — the caches it reconciles from have their first lists (the
//! leader), and its webhook server serves with the CRD cache its
//! conversions read (every replica). A replica that becomes leader is not
//! ready again until its caches are. The text is controller-runtime's
//! (`[+]name ok`, `[-]name not ready`), which probes and people read alike.
//! `/metrics` has the same as `capwasm_ready{check}`, for alerts.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric as _};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// The checks of one process.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    checks: Arc<Mutex<BTreeMap<&'static str, bool>>>,
}

/// One check, not ready until [`Check::ready`].
#[derive(Debug)]
pub struct Check {
    name: &'static str,
    checks: Arc<Mutex<BTreeMap<&'static str, bool>>>,
}

impl Readiness {
    /// Registers check `name`, not ready yet.
    pub fn check(&self, name: &'static str) -> Check {
        self.set(name, false);
        Check {
            name,
            checks: self.checks.clone(),
        }
    }

    /// Whether every check holds, and a line per check.
    pub fn report(&self) -> (bool, String) {
        let checks = self.checks.lock().unwrap_or_else(PoisonError::into_inner);
        let mut text = String::new();
        for (name, ready) in checks.iter() {
            let _ = if *ready {
                writeln!(text, "[+]{name} ok")
            } else {
                writeln!(text, "[-]{name} not ready")
            };
        }
        let ready = checks.values().all(|ready| *ready);
        text.push_str(if ready {
            "readyz check passed\n"
        } else {
            "readyz check failed\n"
        });
        (ready, text)
    }

    fn set(&self, name: &'static str, ready: bool) {
        self.checks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name, ready);
    }
}

impl Check {
    /// The check holds.
    pub fn ready(&self) {
        self.checks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(self.name, true);
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckLabels {
    check: &'static str,
}

/// `capwasm_ready{check}`: 1 once the check holds, 0 until then.
impl Collector for Readiness {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let family = Family::<CheckLabels, Gauge>::default();
        for (check, ready) in self
            .checks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            family
                .get_or_create(&CheckLabels { check })
                .set(i64::from(*ready));
        }
        family.encode(encoder.encode_descriptor(
            "capwasm_ready",
            "The /readyz checks of this replica (webhook, caches): 1 once the check holds",
            None,
            family.metric_type(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_once_every_registered_check_holds() {
        let readiness = Readiness::default();
        assert!(readiness.report().0, "nothing to wait for");
        let caches = readiness.check("caches");
        let webhook = readiness.check("webhook");
        let (ready, text) = readiness.report();
        assert!(!ready);
        assert_eq!(
            text,
            "[-]caches not ready\n[-]webhook not ready\nreadyz check failed\n"
        );
        caches.ready();
        assert!(!readiness.report().0, "the webhook is not");
        webhook.ready();
        let (ready, text) = readiness.report();
        assert!(ready);
        assert_eq!(text, "[+]caches ok\n[+]webhook ok\nreadyz check passed\n");
    }

    #[test]
    fn each_check_is_a_series_at_one_once_it_holds() {
        let readiness = Readiness::default();
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(readiness.clone()));
        let text = || {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
            text
        };
        let webhook = readiness.check("webhook");
        assert!(text().contains("capwasm_ready{check=\"webhook\"} 0\n"));
        webhook.ready();
        assert!(text().contains("capwasm_ready{check=\"webhook\"} 1\n"));
    }
}
