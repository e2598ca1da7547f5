//! Loaded providers by name, replaced atomically: a call holds an `Arc` of
//! the version it started on, so a swap never disturbs calls in flight.
//! A new version may serve a share of objects first (a canary), promoted
//! after enough calls that did not break or rolled back when too many did.
//! Whoever waits for a provider to be in service can hear of each install,
//! promotion and rollback.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use sha2::{Digest as _, Sha256};
use tokio::sync::broadcast;

use super::provider::LoadedProvider;

/// Installs a slow listener may fall behind by before it hears only that
/// it missed some.
const INSTALLS_KEPT: usize = 256;

/// When a canary takes over, or is given up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CanaryPolicy {
    /// Share of objects (by UID) it serves, percent.
    pub percent: u32,
    /// Calls that did not break, after which it serves every object.
    pub promote_after: u32,
    /// Share of its calls that may break (trap, run out of time or memory,
    /// return what the contract refuses), percent, before it is rolled back.
    pub max_failure_percent: u32,
}

/// A new version serving a share of objects, and how its calls went.
#[derive(Debug)]
pub struct Canary {
    /// The new version.
    pub provider: Arc<LoadedProvider>,
    /// Its policy.
    pub policy: CanaryPolicy,
    calls: AtomicU32,
    failures: AtomicU32,
}

impl Canary {
    /// Its calls so far, and how many broke.
    pub fn tally(&self) -> (u32, u32) {
        (
            self.calls.load(Ordering::Relaxed),
            self.failures.load(Ordering::Relaxed),
        )
    }
}

/// What became of a canary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RolledBack {
    /// Its digest.
    pub digest: String,
    /// Its calls, and how many broke.
    pub calls: u32,
    /// How many broke.
    pub failures: u32,
}

#[derive(Default)]
struct Entry {
    stable: Option<Arc<LoadedProvider>>,
    canary: Option<Arc<Canary>>,
    rolled_back: Option<RolledBack>,
}

/// The providers in service, by name.
pub struct Registry {
    providers: RwLock<HashMap<String, Entry>>,
    installs: broadcast::Sender<Arc<str>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            providers: RwLock::default(),
            installs: broadcast::Sender::new(INSTALLS_KEPT),
        }
    }
}

/// Where `uid` falls, 0..100: the same everywhere and across restarts.
fn bucket(uid: &str) -> u32 {
    let hash = Sha256::digest(uid.as_bytes());
    u32::from_be_bytes([hash[0], hash[1], hash[2], hash[3]]) % 100
}

impl Registry {
    /// The version of `name` that serves every object (not a canary).
    pub fn get(&self, name: &str) -> Option<Arc<LoadedProvider>> {
        self.read(name, |e| e.stable.clone())
    }

    /// The version of `name` that serves the object `uid`, and the canary
    /// it is, if it is one.
    pub fn pick(
        &self,
        name: &str,
        uid: &str,
    ) -> Option<(Arc<LoadedProvider>, Option<Arc<Canary>>)> {
        self.read(name, |entry| {
            if let Some(canary) = &entry.canary
                && bucket(uid) < canary.policy.percent
            {
                return Some((canary.provider.clone(), Some(canary.clone())));
            }
            entry.stable.clone().map(|p| (p, None))
        })
    }

    /// The canary of `name`, if one serves.
    pub fn canary(&self, name: &str) -> Option<Arc<Canary>> {
        self.read(name, |e| e.canary.clone())
    }

    /// The canary of `name` last rolled back, if any; taken once.
    pub fn take_rolled_back(&self, name: &str) -> Option<RolledBack> {
        self.write(|providers| providers.get_mut(name)?.rolled_back.take())
    }

    /// Puts `provider` in service for every object under its name (ending
    /// any canary); returns the version it replaced.
    pub fn install(&self, provider: Arc<LoadedProvider>) -> Option<Arc<LoadedProvider>> {
        let name = provider.name().to_owned();
        let replaced = self.write(|providers| {
            let entry = providers.entry(name.clone()).or_default();
            entry.canary = None;
            entry.stable.replace(provider)
        });
        self.tell(&name);
        replaced
    }

    /// Lets `provider` serve `policy.percent` of `name`'s objects beside
    /// the version in service (installs it if there is none).
    pub fn start_canary(&self, provider: Arc<LoadedProvider>, policy: CanaryPolicy) {
        let name = provider.name().to_owned();
        let installed = self.write(|providers| {
            let entry = providers.entry(name.clone()).or_default();
            if entry.stable.is_none() {
                entry.stable = Some(provider);
                return true;
            }
            entry.canary = Some(Arc::new(Canary {
                provider,
                policy,
                calls: AtomicU32::new(0),
                failures: AtomicU32::new(0),
            }));
            false
        });
        if installed {
            self.tell(&name);
        }
    }

    /// Counts a call `canary` served: promotes it or rolls it back when its
    /// policy says so.
    pub fn record(&self, canary: &Arc<Canary>, broke: bool) {
        let calls = canary.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let failures = canary
            .failures
            .fetch_add(u32::from(broke), Ordering::Relaxed)
            + u32::from(broke);
        let policy = canary.policy;
        let roll_back =
            u64::from(failures) * 100 > u64::from(policy.max_failure_percent) * u64::from(calls);
        let promote = !roll_back && calls - failures >= policy.promote_after;
        if !roll_back && !promote {
            return;
        }
        let name = canary.provider.name().to_owned();
        let changed = self.write(|providers| {
            let entry = providers.get_mut(&name)?;
            // Only the canary this call served; a newer one is left alone.
            if !entry
                .canary
                .as_ref()
                .is_some_and(|c| Arc::ptr_eq(c, canary))
            {
                return None;
            }
            entry.canary = None;
            if roll_back {
                entry.rolled_back = Some(RolledBack {
                    digest: canary.provider.digest.clone(),
                    calls,
                    failures,
                });
            } else {
                entry.stable = Some(canary.provider.clone());
            }
            Some(())
        });
        if changed.is_some() {
            tracing::info!(
                module = name,
                digest = canary.provider.digest,
                calls,
                failures,
                outcome = if roll_back { "rolled back" } else { "promoted" },
                "canary settled"
            );
            self.tell(&name);
        }
    }

    /// The names of providers put in service from now on (installed,
    /// promoted, or rolled back to the version before).
    pub fn installs(&self) -> broadcast::Receiver<Arc<str>> {
        self.installs.subscribe()
    }

    /// Takes `name` out of service; calls in flight finish on it.
    pub fn remove(&self, name: &str) -> Option<Arc<LoadedProvider>> {
        self.write(|providers| providers.remove(name)?.stable)
    }

    fn tell(&self, name: &str) {
        // No listener is fine.
        let _ = self.installs.send(name.into());
    }

    fn read<T>(&self, name: &str, f: impl FnOnce(&Entry) -> Option<T>) -> Option<T> {
        let providers = self
            .providers
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        f(providers.get(name)?)
    }

    fn write<T>(&self, f: impl FnOnce(&mut HashMap<String, Entry>) -> T) -> T {
        f(&mut self
            .providers
            .write()
            .unwrap_or_else(PoisonError::into_inner))
    }
}

#[cfg(test)]
mod tests {
    use super::bucket;

    #[test]
    fn buckets_spread_over_a_hundred_and_stay_put() {
        let buckets: Vec<u32> = (0..1000).map(|i| bucket(&format!("uid-{i}"))).collect();
        assert!(buckets.iter().all(|b| *b < 100));
        let under_half = buckets.iter().filter(|b| **b < 50).count();
        assert!((400..600).contains(&under_half), "{under_half}");
        assert_eq!(bucket("uid-7"), buckets[7]);
    }
}
