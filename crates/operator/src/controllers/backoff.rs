//! Per-object exponential backoff after failed reconciles, kept by UID.
//! kube-runtime never tells `error_policy` about successes, so `reconcile`
//! resets an object's count itself.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Failure counts by object UID.
#[derive(Debug)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// Delays start at `first` and double up to `max`.
    pub fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one more failure of `uid` and returns how long to wait.
    pub fn next(&self, uid: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let n = failures.entry(uid.to_owned()).or_insert(0);
        let delay = self.first.saturating_mul(1 << (*n).min(20)).min(self.max);
        *n = n.saturating_add(1);
        delay
    }

    /// How many times in a row `uid` has failed.
    pub fn failures(&self, uid: &str) -> u32 {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(uid)
            .copied()
            .unwrap_or(0)
    }

    /// Forgets `uid`'s failures (it reconciled without error, or is gone).
    pub fn reset(&self, uid: &str) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_doubles_up_to_the_cap_and_reset_starts_over() {
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
        let delays: Vec<_> = (0..5).map(|_| backoff.next("a")).collect();
        assert_eq!(delays, [100, 200, 400, 500, 500].map(Duration::from_millis));
        assert_eq!(backoff.failures("a"), 5);
        assert_eq!(backoff.next("b"), Duration::from_millis(100));
        backoff.reset("a");
        assert_eq!(backoff.next("a"), Duration::from_millis(100));
    }
}
