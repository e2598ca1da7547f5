//! Bad minutes, on request: a share of API requests answered 503 before
//! they are handled, answered only after any client has given up, or cut
//! off mid-answer. The last two are handled first, so the client does not
//! know whether its instance exists: what request tokens are for.
//!
//! Which requests are hit is a fixed spread over the request count, not a
//! random draw, so a run can be repeated.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long a hung answer is held: past any provider call's HTTP timeout.
pub const HANG: Duration = Duration::from_secs(30);

/// The share of requests hit by each fault, in percent (together at most 100).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Answered `503 ServiceUnavailable` without being handled.
    pub unavailable_percent: u8,
    /// Handled, then answered only after [`HANG`].
    pub hang_percent: u8,
    /// Handled, then cut off after the status line.
    pub drop_percent: u8,
}

/// How many requests each fault hit so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Injected {
    /// Answered 503.
    pub unavailable: u64,
    /// Answered after [`HANG`].
    pub hung: u64,
    /// Cut off.
    pub dropped: u64,
}

#[derive(Debug, Default)]
pub(super) struct Injector {
    faults: Mutex<Faults>,
    requests: AtomicU64,
    unavailable: AtomicU64,
    hung: AtomicU64,
    dropped: AtomicU64,
}

/// What is done to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fault {
    /// Answered 503 without being handled.
    Unavailable,
    /// Handled, answered after [`HANG`].
    Hang,
    /// Handled, cut off.
    Drop,
}

impl Injector {
    pub(super) fn set(&self, faults: Faults) {
        *self
            .faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = faults;
    }

    pub(super) fn injected(&self) -> Injected {
        Injected {
            unavailable: self.unavailable.load(Ordering::Relaxed),
            hung: self.hung.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }

    /// The fault for the next request, if any.
    pub(super) fn next(&self) -> Option<Fault> {
        let faults = *self
            .faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if faults == Faults::default() {
            return None;
        }
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        // A fixed spread of the request count over 0..100 (Fibonacci hashing).
        let roll = (n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % 100;
        let unavailable = u64::from(faults.unavailable_percent);
        let hang = unavailable + u64::from(faults.hang_percent);
        let drop = hang + u64::from(faults.drop_percent);
        let (fault, count) = match roll {
            r if r < unavailable => (Fault::Unavailable, &self.unavailable),
            r if r < hang => (Fault::Hang, &self.hung),
            r if r < drop => (Fault::Drop, &self.dropped),
            _ => return None,
        };
        count.fetch_add(1, Ordering::Relaxed);
        Some(fault)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fault_hits_about_its_share_of_requests() {
        let injector = Injector::default();
        assert_eq!(injector.next(), None, "no faults unless set");
        injector.set(Faults {
            unavailable_percent: 10,
            hang_percent: 5,
            drop_percent: 5,
        });
        for _ in 0..10_000 {
            injector.next();
        }
        let injected = injector.injected();
        for (count, share) in [
            (injected.unavailable, 1000),
            (injected.hung, 500),
            (injected.dropped, 500),
        ] {
            assert!(count.abs_diff(share) < share / 5, "{injected:?}");
        }
    }
}
