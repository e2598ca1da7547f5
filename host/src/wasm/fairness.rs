//! Each provider's share of the machine. The sandbox bounds each call; this
//! bounds a provider, so that one whose calls compute without end cannot
//! starve the others:
//!
//! - **concurrency**: at most `per_provider` of its calls run at once; the
//!   rest wait their turn (within the runtime's patience, and not at all
//!   when every turn has been held longer than that), so one provider's
//!   backlog never holds every instance slot;
//! - **CPU**: at each epoch tick (10 ms) a call reaches, what it computed
//!   since the last one (its time less what it spent in host calls, such as
//!   waiting for an HTTP response) is taken from its provider's bucket,
//!   which refills at `cpu_share` of a core with a burst of [`CPU_BURST`];
//!   an empty bucket makes the call wait there until it refills. A call
//!   that ends within its first tick never touches it;
//! - **throttle**: a provider whose calls run into their deadline
//!   [`THROTTLE_AFTER`] times in a row is refused at once for a period that
//!   starts at [`FIRST_THROTTLE`] and doubles (up to [`MAX_THROTTLE`]) while
//!   it goes on; an answer ends it. Its objects back off for that period,
//!   and its ProviderModule says so. A new version starts unthrottled.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{Semaphore, SemaphorePermit, broadcast};

use super::CallError;
use super::metrics::Metrics;

/// Deadlines in a row that throttle a provider.
pub const THROTTLE_AFTER: u32 = 3;
/// How long the first throttle lasts.
pub const FIRST_THROTTLE: Duration = Duration::from_secs(30);
/// The longest a throttle lasts.
pub const MAX_THROTTLE: Duration = Duration::from_secs(300);
/// CPU a provider may compute in a burst beyond its share.
pub const CPU_BURST: Duration = Duration::from_secs(2);
/// Throttle changes kept for a slow listener.
const CHANGES_KEPT: usize = 256;

/// A provider's throttle, as its ProviderModule shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Throttled {
    /// The code throttled.
    pub digest: String,
    /// Its calls in a row that ran into their deadline.
    pub deadlines: u32,
    /// How long its calls are still refused.
    pub remaining: Duration,
}

/// How a call ended, for the throttle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The guest answered (a value or its own typed error).
    Answered,
    /// It ran into its deadline.
    Deadline,
    /// Anything else (a trap, a limit): neither.
    Other,
}

/// Every provider's share.
pub(crate) struct Fairness {
    per_provider: usize,
    /// Seconds of computing a provider's bucket gains per second.
    cpu_share: f64,
    shares: Mutex<HashMap<Arc<str>, Arc<Share>>>,
    changes: broadcast::Sender<Arc<str>>,
    metrics: Option<Metrics>,
}

/// One provider's share.
pub(crate) struct Share {
    permits: Semaphore,
    /// Its share of a core: seconds of computing its bucket gains per second.
    cores: f64,
    bucket: Mutex<Bucket>,
    throttle: Mutex<Throttle>,
    /// Its calls waiting for a turn or an instance slot.
    pub(crate) waiting: Gauge,
    /// When the share began, and the last turn taken since then (µs): with
    /// every turn held, how long the youngest of their calls has run.
    began: Instant,
    last_turn: AtomicU64,
}

/// Seconds of computing a provider may still spend, as of `at`.
struct Bucket {
    seconds: f64,
    at: Instant,
}

#[derive(Default)]
struct Throttle {
    digest: String,
    deadlines: u32,
    until: Option<Instant>,
    period: Duration,
}

impl Fairness {
    /// Shares of `per_provider` calls at once and `cpu_share` of a core each.
    pub(crate) fn new(per_provider: u32, cpu_share: f64, metrics: Option<Metrics>) -> Self {
        Self {
            per_provider: per_provider.max(1) as usize,
            cpu_share: cpu_share.max(0.01),
            shares: Mutex::default(),
            changes: broadcast::Sender::new(CHANGES_KEPT),
            metrics,
        }
    }

    /// `name`'s share.
    pub(crate) fn share(&self, name: &Arc<str>) -> Arc<Share> {
        lock(&self.shares)
            .entry(name.clone())
            .or_insert_with(|| {
                Arc::new(Share {
                    permits: Semaphore::new(self.per_provider),
                    cores: self.cpu_share,
                    bucket: Mutex::new(Bucket {
                        seconds: CPU_BURST.as_secs_f64(),
                        at: Instant::now(),
                    }),
                    throttle: Mutex::default(),
                    waiting: self
                        .metrics
                        .as_ref()
                        .map(|m| m.waiting_gauge(name))
                        .unwrap_or_default(),
                    began: Instant::now(),
                    last_turn: AtomicU64::new(0),
                })
            })
            .clone()
    }

    /// `name`'s throttle, if it is throttled now.
    pub(crate) fn throttled(&self, name: &str) -> Option<Throttled> {
        let share = lock(&self.shares).get(name)?.clone();
        let throttle = lock(&share.throttle);
        throttle.current(Instant::now())
    }

    /// The names of providers whose throttle began from now on.
    pub(crate) fn changes(&self) -> broadcast::Receiver<Arc<str>> {
        self.changes.subscribe()
    }

    /// Says that `name`'s throttle began.
    pub(crate) fn tell(&self, name: &Arc<str>) {
        // No listener is fine.
        let _ = self.changes.send(name.clone());
    }
}

impl Share {
    /// Refuses a call of `digest` while that code is throttled.
    pub(crate) fn admit(&self, provider: &str, digest: &str) -> Result<(), CallError> {
        let mut throttle = lock(&self.throttle);
        throttle.follow(digest);
        match throttle.current(Instant::now()) {
            Some(throttled) => Err(CallError::Throttled {
                provider: provider.to_owned(),
                deadlines: throttled.deadlines,
                remaining: throttled.remaining,
            }),
            None => Ok(()),
        }
    }

    /// One of the provider's turns, if one is free now.
    pub(crate) fn try_turn(&self) -> Option<SemaphorePermit<'_>> {
        let turn = self.permits.try_acquire().ok()?;
        self.stamp();
        Some(turn)
    }

    /// Waits for one of the provider's turns.
    pub(crate) async fn turn(&self) -> Option<SemaphorePermit<'_>> {
        let turn = self.permits.acquire().await.ok()?;
        self.stamp();
        Some(turn)
    }

    /// Whether, every turn being held, each has been held longer than
    /// `patience`: calls that long are unlikely to end within it (a turn
    /// that ended was taken again, and that stamped it).
    pub(crate) fn held_past(&self, patience: Duration) -> bool {
        let last = Duration::from_micros(self.last_turn.load(Ordering::Relaxed));
        self.began.elapsed().saturating_sub(last) > patience
    }

    fn stamp(&self) {
        let now = u64::try_from(self.began.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.last_turn.fetch_max(now, Ordering::Relaxed);
    }

    /// Records how a call of `digest` ended; whether a throttle began.
    pub(crate) fn record(&self, digest: &str, ended: Ended) -> bool {
        let now = Instant::now();
        lock(&self.throttle).record(digest, ended, now)
    }

    /// Spends `computed` of the bucket: how long the call must wait for
    /// the bucket to be full enough again (zero if it holds enough).
    pub(crate) fn spend(&self, computed: Duration) -> Duration {
        let now = Instant::now();
        let mut bucket = lock(&self.bucket);
        let refilled = now.saturating_duration_since(bucket.at).as_secs_f64() * self.cores;
        bucket.seconds = (bucket.seconds + refilled).min(CPU_BURST.as_secs_f64());
        bucket.at = now;
        bucket.seconds -= computed.as_secs_f64();
        if bucket.seconds >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-bucket.seconds / self.cores)
        }
    }
}

impl Throttle {
    /// The throttle as of `now`, if it holds.
    fn current(&self, now: Instant) -> Option<Throttled> {
        let until = self.until.filter(|until| *until > now)?;
        Some(Throttled {
            digest: self.digest.clone(),
            deadlines: self.deadlines,
            remaining: until - now,
        })
    }

    /// A new version starts afresh.
    fn follow(&mut self, digest: &str) {
        if self.digest != digest {
            *self = Self {
                digest: digest.to_owned(),
                ..Self::default()
            };
        }
    }

    fn record(&mut self, digest: &str, ended: Ended, now: Instant) -> bool {
        self.follow(digest);
        match ended {
            Ended::Answered => {
                self.deadlines = 0;
                self.period = Duration::ZERO;
                self.until = None;
                false
            }
            Ended::Other => false,
            Ended::Deadline => {
                self.deadlines = self.deadlines.saturating_add(1);
                let throttled = self.until.is_some_and(|until| until > now);
                if self.deadlines < THROTTLE_AFTER || throttled {
                    return false;
                }
                self.period = if self.period.is_zero() {
                    FIRST_THROTTLE
                } else {
                    (self.period * 2).min(MAX_THROTTLE)
                };
                self.until = Some(now + self.period);
                true
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every change under these locks is a few assignments.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How a call's result ends it, for the throttle.
pub(crate) fn ended<R>(result: &Result<R, CallError>) -> Ended {
    match result {
        Ok(_) | Err(CallError::Provider { .. } | CallError::CredentialsRejected { .. }) => {
            Ended::Answered
        }
        Err(CallError::DeadlineExceeded { .. }) => Ended::Deadline,
        Err(_) => Ended::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_in_a_row_throttle_with_a_doubling_period_and_an_answer_ends_it() {
        let mut throttle = Throttle::default();
        let start = Instant::now();
        for _ in 1..THROTTLE_AFTER {
            assert!(!throttle.record("v1", Ended::Deadline, start));
        }
        // Another failure in between neither counts nor resets.
        assert!(!throttle.record("v1", Ended::Other, start));
        assert!(throttle.record("v1", Ended::Deadline, start));
        assert_eq!(throttle.until, Some(start + FIRST_THROTTLE));
        // Calls in flight that time out meanwhile do not extend it.
        assert!(!throttle.record("v1", Ended::Deadline, start + Duration::from_secs(1)));
        assert_eq!(throttle.until, Some(start + FIRST_THROTTLE));
        // Past it, the next deadline throttles again, twice as long.
        let later = start + FIRST_THROTTLE + Duration::from_secs(1);
        assert!(throttle.record("v1", Ended::Deadline, later));
        assert_eq!(throttle.until, Some(later + FIRST_THROTTLE * 2));
        assert!(!throttle.record("v1", Ended::Answered, later));
        assert_eq!((throttle.deadlines, throttle.until), (0, None));
    }

    #[tokio::test]
    async fn turns_are_held_past_the_patience_only_once_the_last_taken_is_that_old() {
        let patience = Duration::from_millis(20);
        let share = Fairness::new(2, 0.5, None).share(&Arc::from("p"));
        let first = share.try_turn();
        tokio::time::sleep(patience * 2).await;
        assert!(share.held_past(patience), "one turn, taken long ago");
        let second = share.try_turn();
        assert!(first.is_some() && second.is_some());
        assert!(!share.held_past(patience), "the second was just taken");
        assert!(share.try_turn().is_none());
        tokio::time::sleep(patience * 2).await;
        assert!(share.held_past(patience));
    }

    #[test]
    fn a_new_version_starts_unthrottled() {
        let fairness = Fairness::new(4, 0.5, None);
        let share = fairness.share(&Arc::from("p"));
        for _ in 0..THROTTLE_AFTER {
            share.record("v1", Ended::Deadline);
        }
        let refused = share.admit("p", "v1").unwrap_err();
        assert!(
            matches!(
                refused,
                CallError::Throttled {
                    deadlines: THROTTLE_AFTER,
                    ..
                }
            ),
            "{refused:?}"
        );
        assert!(fairness.throttled("p").is_some());
        share.admit("p", "v2").expect("the new version is called");
        assert!(fairness.throttled("p").is_none());
    }

    #[test]
    fn computing_past_the_burst_waits_for_the_share() {
        let fairness = Fairness::new(4, 0.5, None);
        let share = fairness.share(&Arc::from("p"));
        let tick = Duration::from_millis(10);
        let burst = CPU_BURST.as_millis() / tick.as_millis();
        for _ in 0..burst {
            assert_eq!(share.spend(tick), Duration::ZERO);
        }
        // Half a core: a tick (10 ms) of computing every 20 ms.
        let wait = share.spend(tick);
        assert!(
            wait > Duration::from_millis(15) && wait <= Duration::from_millis(20),
            "{wait:?}"
        );
    }
}
