//! Each provider's share of the machine, and each tenant's share of its
//! provider. The sandbox bounds each call; this bounds a provider, so that
//! one whose calls compute without end cannot starve the others, and within
//! a provider (one ProviderModule, used by objects in many namespaces) it
//! bounds a tenant, the namespace of the object a call is about, so that
//! one tenant's failing or slow objects cannot take the provider from the
//! others:
//!
//! - **concurrency**: at most `per_provider` of its calls run at once, and
//!   at most [`turns_per_tenant`] of them about one tenant's objects, so
//!   that another tenant's call always finds a turn left; the rest wait
//!   their turn (within the runtime's patience, and not at all when every
//!   turn of their tenant has been held longer than that), so one backlog
//!   never holds every instance slot;
//! - **CPU**: at each epoch tick (10 ms) a call reaches, what it computed
//!   since the last one (its time less what it spent in host calls, such as
//!   waiting for an HTTP response) is taken from its provider's bucket,
//!   which refills at `cpu_share` of a core with a burst of [`CPU_BURST`];
//!   an empty bucket makes the call wait there until it refills. A call
//!   that ends within its first tick never touches it;
//! - **throttle**: a tenant whose calls of a provider run into their
//!   deadline [`THROTTLE_AFTER`](crate::bounds::THROTTLE_AFTER) times in a
//!   row has those calls refused at once for a period that starts at
//!   [`FIRST_THROTTLE`](crate::bounds::FIRST_THROTTLE) and doubles (up to
//!   [`MAX_THROTTLE`](crate::bounds::MAX_THROTTLE)) while it goes on; an
//!   answer ends it. Its objects back off for that period, the other
//!   tenants' calls are made, and the ProviderModule says which namespaces
//!   are throttled. A new version starts unthrottled.
//!
//! Calls about no object (`info`, `config-schema`, loading checks,
//! `provider-ids.*`) are the tenant of the empty name.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{Semaphore, SemaphorePermit, broadcast};
// The runtime's clock, so that tests can pause it.
use tokio::time::Instant;

use crate::CallError;
use crate::bounds::{CPU_BURST, turns_per_tenant};
use crate::error::Whose;
use crate::metrics::Metrics;

mod throttle;

use throttle::Throttle;
pub(crate) use throttle::{Ended, ended};

/// Throttle changes kept for a slow listener.
const CHANGES_KEPT: usize = 256;
/// Tenants a provider keeps before it drops those it no longer needs
/// (neither calling nor throttled); then twice as many as it kept.
const TENANTS_BEFORE_PRUNING: usize = 64;

/// A tenant's throttle of a provider, as its ProviderModule shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Throttled {
    /// The namespace whose objects' calls are refused; empty: calls about
    /// no object.
    pub namespace: String,
    /// The code throttled.
    pub digest: String,
    /// Its calls in a row that ran into their deadline.
    pub deadlines: u32,
    /// How long its calls are still refused.
    pub remaining: Duration,
    /// When it ends, by the wall clock: what people are told, the same
    /// however often they look (a countdown would rewrite every status
    /// that shows it, and wake whatever watches those).
    pub ends: SystemTime,
}

impl Throttled {
    /// The calls it refuses, for people.
    pub fn whose(&self) -> Whose<'_> {
        Whose(&self.namespace)
    }
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
    /// Of which one tenant may hold at once.
    per_tenant: usize,
    /// Its share of a core: seconds of computing its bucket gains per second.
    cores: f64,
    bucket: Mutex<Bucket>,
    tenants: Mutex<Tenants>,
    /// Its calls waiting for a turn or an instance slot (of any tenant:
    /// namespaces are the tenants' to choose, so no label of theirs).
    pub(crate) waiting: Gauge,
}

/// A provider's tenants, by namespace.
struct Tenants {
    by_name: HashMap<Arc<str>, Arc<Tenant>>,
    /// How many there may be before those no longer needed are dropped.
    prune_at: usize,
}

/// One tenant's part of a provider's share: its turns and its throttle.
pub(crate) struct Tenant {
    name: Arc<str>,
    permits: Semaphore,
    throttle: Mutex<Throttle>,
    /// When the tenant's part began, and the last of its turns taken since
    /// then (µs): with every turn held, how long the youngest of their
    /// calls has run.
    began: Instant,
    last_turn: AtomicU64,
}

/// A call's turn: one of its tenant's and one of its provider's.
pub(crate) struct Turn<'a> {
    _tenant: SemaphorePermit<'a>,
    _provider: SemaphorePermit<'a>,
}

/// Seconds of computing a provider may still spend, as of `at`.
struct Bucket {
    seconds: f64,
    at: Instant,
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
                    per_tenant: turns_per_tenant(self.per_provider),
                    cores: self.cpu_share,
                    bucket: Mutex::new(Bucket {
                        seconds: CPU_BURST.as_secs_f64(),
                        at: Instant::now(),
                    }),
                    tenants: Mutex::new(Tenants {
                        by_name: HashMap::new(),
                        prune_at: TENANTS_BEFORE_PRUNING,
                    }),
                    waiting: self
                        .metrics
                        .as_ref()
                        .map(|m| m.waiting_gauge(name))
                        .unwrap_or_default(),
                })
            })
            .clone()
    }

    /// `name`'s throttles that hold now, one per tenant, by namespace.
    pub(crate) fn throttled(&self, name: &str) -> Vec<Throttled> {
        let Some(share) = lock(&self.shares).get(name).cloned() else {
            return Vec::new();
        };
        share.throttled(Instant::now())
    }

    /// The names of providers one of whose throttles began from now on.
    pub(crate) fn changes(&self) -> broadcast::Receiver<Arc<str>> {
        self.changes.subscribe()
    }

    /// Says that a throttle of `name` began.
    pub(crate) fn tell(&self, name: &Arc<str>) {
        // No listener is fine.
        let _ = self.changes.send(name.clone());
    }
}

impl Share {
    /// The part of tenant `name` (a namespace; empty for calls about no
    /// object). A known tenant costs a lookup under a lock and a
    /// reference count, no allocation; a new one is made once.
    pub(crate) fn tenant(&self, name: &str) -> Arc<Tenant> {
        let mut tenants = lock(&self.tenants);
        if let Some(tenant) = tenants.by_name.get(name) {
            return tenant.clone();
        }
        tenants.make_room();
        let tenant = Arc::new(Tenant {
            name: Arc::from(name),
            permits: Semaphore::new(self.per_tenant),
            throttle: Mutex::default(),
            began: Instant::now(),
            last_turn: AtomicU64::new(0),
        });
        tenants.by_name.insert(tenant.name.clone(), tenant.clone());
        tenant
    }

    /// A new version, `digest`, starts unthrottled for every tenant.
    pub(crate) fn follow(&self, digest: &str) {
        for tenant in lock(&self.tenants).by_name.values() {
            lock(&tenant.throttle).follow(digest);
        }
    }

    /// The throttles that hold at `now`, by namespace.
    fn throttled(&self, now: Instant) -> Vec<Throttled> {
        let mut throttled: Vec<Throttled> = lock(&self.tenants)
            .by_name
            .values()
            .filter_map(|tenant| {
                let throttle = lock(&tenant.throttle);
                let (remaining, ends) = throttle.remaining(now)?;
                Some(Throttled {
                    namespace: tenant.name.to_string(),
                    digest: throttle.digest.clone(),
                    deadlines: throttle.deadlines,
                    remaining,
                    ends,
                })
            })
            .collect();
        throttled.sort_unstable_by(|a, b| a.namespace.cmp(&b.namespace));
        throttled
    }

    /// One of `tenant`'s turns and one of the provider's, if both are free now.
    pub(crate) fn try_turn<'a>(&'a self, tenant: &'a Tenant) -> Option<Turn<'a>> {
        let own = tenant.try_take()?;
        let provider = self.permits.try_acquire().ok()?;
        Some(Turn {
            _tenant: own,
            _provider: provider,
        })
    }

    /// Waits for one of `tenant`'s turns, then one of the provider's: a
    /// tenant waits for the provider's only with a turn of its own, so its
    /// waiting calls never queue ahead of another tenant's.
    pub(crate) async fn turn<'a>(&'a self, tenant: &'a Tenant) -> Option<Turn<'a>> {
        let own = tenant.take().await?;
        let provider = self.permits.acquire().await.ok()?;
        Some(Turn {
            _tenant: own,
            _provider: provider,
        })
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

impl Tenants {
    /// Drops the tenants no call holds and no throttle needs, once there
    /// are [`prune_at`](Self::prune_at) of them: namespaces come and go.
    fn make_room(&mut self) {
        if self.by_name.len() < self.prune_at {
            return;
        }
        // A tenant is cloned only under this lock, so no call can be
        // taking one dropped here.
        self.by_name
            .retain(|_, tenant| Arc::strong_count(tenant) > 1 || !lock(&tenant.throttle).idle());
        self.prune_at = (self.by_name.len() * 2).max(TENANTS_BEFORE_PRUNING);
    }
}

impl Tenant {
    /// Its namespace; empty for calls about no object.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Refuses a call of `digest` of `provider` while this tenant's calls
    /// of that code are throttled.
    pub(crate) fn admit(&self, provider: &str, digest: &str) -> Result<(), CallError> {
        let mut throttle = lock(&self.throttle);
        throttle.follow(digest);
        match throttle.remaining(Instant::now()) {
            Some((remaining, ends)) => Err(CallError::Throttled {
                provider: provider.to_owned(),
                namespace: self.name.to_string(),
                deadlines: throttle.deadlines,
                remaining,
                ends,
            }),
            None => Ok(()),
        }
    }

    /// Records how a call of `digest` ended; whether a throttle began.
    pub(crate) fn record(&self, digest: &str, ended: Ended) -> bool {
        let now = Instant::now();
        lock(&self.throttle).record(digest, ended, now)
    }

    /// Whether every one of its turns is held, each for longer than
    /// `patience`: calls that long are unlikely to end within it (a turn
    /// that ended was taken again, and that stamped it). Only this
    /// tenant's calls decide it.
    pub(crate) fn held_past(&self, patience: Duration) -> bool {
        let last = Duration::from_micros(self.last_turn.load(Ordering::Relaxed));
        self.permits.available_permits() == 0
            && self.began.elapsed().saturating_sub(last) > patience
    }

    fn try_take(&self) -> Option<SemaphorePermit<'_>> {
        let turn = self.permits.try_acquire().ok()?;
        self.stamp();
        Some(turn)
    }

    async fn take(&self) -> Option<SemaphorePermit<'_>> {
        let turn = self.permits.acquire().await.ok()?;
        self.stamp();
        Some(turn)
    }

    fn stamp(&self) {
        let now = u64::try_from(self.began.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.last_turn.fetch_max(now, Ordering::Relaxed);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every change under these locks is a few assignments.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::{FIRST_THROTTLE, THROTTLE_AFTER};

    fn share(turns: u32) -> Arc<Share> {
        Fairness::new(turns, 0.5, None).share(&Arc::from("p"))
    }

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

    #[test]
    fn a_tenant_cannot_take_the_last_turns_another_tenant_finds_them() {
        let share = share(4);
        let (a, b) = (share.tenant("a"), share.tenant("b"));
        let a_turns: Vec<_> = std::iter::from_fn(|| share.try_turn(&a)).take(4).collect();
        assert_eq!(a_turns.len(), 2, "half of four");
        let b_turns: Vec<_> = std::iter::from_fn(|| share.try_turn(&b)).take(4).collect();
        assert_eq!(b_turns.len(), 2, "the other half is left");
        // The provider's cap holds too: a third tenant finds none.
        assert!(share.try_turn(&share.tenant("c")).is_none());
        drop(a_turns);
        assert!(share.try_turn(&share.tenant("c")).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_tenant_waiting_for_a_turn_gets_one_only_within_its_part() {
        let share = share(2);
        let (a, b) = (share.tenant("a"), share.tenant("b"));
        let held = share.try_turn(&a);
        assert!(held.is_some());
        let wait = Duration::from_millis(20);
        let a_waits = tokio::time::timeout(wait, share.turn(&a)).await;
        assert!(a_waits.is_err(), "its one turn is held");
        let b_waits = tokio::time::timeout(wait, share.turn(&b)).await;
        assert!(
            b_waits.is_ok_and(|turn| turn.is_some()),
            "the other's is free"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn turns_are_held_past_the_patience_only_once_the_last_taken_is_that_old() {
        let patience = Duration::from_millis(20);
        let share = share(4);
        let tenant = share.tenant("a");
        let first = share.try_turn(&tenant);
        tokio::time::sleep(patience * 2).await;
        assert!(!tenant.held_past(patience), "one of its two turns is free");
        let second = share.try_turn(&tenant);
        assert!(first.is_some() && second.is_some());
        assert!(!tenant.held_past(patience), "the second was just taken");
        assert!(share.try_turn(&tenant).is_none());
        tokio::time::sleep(patience * 2).await;
        assert!(tenant.held_past(patience));
    }

    #[tokio::test(start_paused = true)]
    async fn turns_held_past_the_patience_refuse_only_their_own_tenant() {
        let patience = Duration::from_millis(20);
        let share = share(4);
        let (a, b) = (share.tenant("a"), share.tenant("b"));
        let held: Vec<_> = std::iter::from_fn(|| share.try_turn(&a)).take(2).collect();
        assert_eq!(held.len(), 2);
        tokio::time::sleep(patience * 2).await;
        assert!(a.held_past(patience), "a's turns are all held, long since");
        // b's stamp is as old, but b has turns free: its calls are not
        // refused for a's.
        assert!(!b.held_past(patience));
        let b_turn = share.try_turn(&b);
        assert!(b_turn.is_some());
        tokio::time::sleep(patience * 2).await;
        assert!(!b.held_past(patience), "b's other turn is free");
    }

    #[test]
    fn a_tenant_s_deadlines_throttle_only_its_calls() {
        let fairness = Fairness::new(4, 0.5, None);
        let share = fairness.share(&Arc::from("p"));
        let (a, b) = (share.tenant("a"), share.tenant("b"));
        for _ in 1..THROTTLE_AFTER {
            assert!(!a.record("v1", Ended::Deadline));
        }
        assert!(!b.record("v1", Ended::Deadline), "b's count is its own");
        assert!(a.record("v1", Ended::Deadline));
        let refused = a.admit("p", "v1").unwrap_err();
        assert!(
            matches!(
                &refused,
                CallError::Throttled { namespace, deadlines: THROTTLE_AFTER, .. } if namespace == "a"
            ),
            "{refused:?}"
        );
        assert!(refused.to_string().contains("namespace \"a\""), "{refused}");
        b.admit("p", "v1").expect("b's calls are made");
        let throttled = fairness.throttled("p");
        let namespaces: Vec<&str> = throttled.iter().map(|t| t.namespace.as_str()).collect();
        assert_eq!(namespaces, ["a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttle_s_refusals_read_the_same_while_it_holds() {
        let share = share(4);
        let tenant = share.tenant("a");
        for _ in 0..THROTTLE_AFTER {
            tenant.record("v1", Ended::Deadline);
        }
        let first = tenant.admit("p", "v1").unwrap_err().to_string();
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let later = tenant.admit("p", "v1").unwrap_err().to_string();
        // A status that shows it is not rewritten for a countdown.
        assert_eq!(first, later);
        assert!(first.contains(" until 20"), "{first}");
    }

    #[test]
    fn a_new_version_starts_unthrottled_for_every_tenant() {
        let fairness = Fairness::new(4, 0.5, None);
        let share = fairness.share(&Arc::from("p"));
        let (a, b) = (share.tenant("a"), share.tenant("b"));
        for _ in 0..THROTTLE_AFTER {
            a.record("v1", Ended::Deadline);
            b.record("v1", Ended::Deadline);
        }
        assert!(a.admit("p", "v1").is_err());
        assert_eq!(fairness.throttled("p").len(), 2);
        // Loading v2 follows it before any call of a or b.
        share.follow("v2");
        assert!(fairness.throttled("p").is_empty());
        a.admit("p", "v2").expect("the new version is called");
        // A tenant calling it afresh starts afresh too.
        for _ in 0..THROTTLE_AFTER {
            b.record("v2", Ended::Deadline);
        }
        b.admit("p", "v3").expect("v3 is called");
    }

    #[test]
    fn tenants_no_call_holds_and_no_throttle_needs_are_dropped_past_the_bound() {
        let share = share(4);
        let throttled = share.tenant("throttled");
        for _ in 0..THROTTLE_AFTER {
            throttled.record("v1", Ended::Deadline);
        }
        drop(throttled);
        let calling = share.tenant("calling");
        for i in 0..TENANTS_BEFORE_PRUNING {
            drop(share.tenant(&format!("passing-{i}")));
        }
        let tenants = lock(&share.tenants);
        assert!(tenants.by_name.contains_key("throttled"));
        assert!(tenants.by_name.contains_key("calling"));
        assert!(
            tenants.by_name.len() < TENANTS_BEFORE_PRUNING,
            "{} kept",
            tenants.by_name.len()
        );
        drop(tenants);
        drop(calling);
    }

    // Paused: no time passes between spends, so nothing refills.
    #[tokio::test(start_paused = true)]
    async fn computing_past_the_burst_waits_for_the_share() {
        let share = share(4);
        let tick = Duration::from_millis(10);
        let about = |wait: Duration, expected: Duration| {
            assert!(
                wait.abs_diff(expected) < Duration::from_micros(1),
                "{wait:?}"
            );
        };
        assert_eq!(share.spend(CPU_BURST), Duration::ZERO, "the burst is free");
        // Half a core: a tick (10 ms) of computing every 20 ms.
        about(share.spend(tick), tick * 2);
        // Waited out, the bucket is even again: the next tick waits as long.
        tokio::time::advance(tick * 2).await;
        about(share.spend(tick), tick * 2);
    }
}
