//! Reading our own writes. The shared caches learn of a write only when its
//! watch event arrives, which under load is later than the next reconcile
//! of the same object: that reconcile would compute from the object as it
//! was before the write, send the write again (a write that changes
//! nothing still costs the API server one) and announce its Events twice.
//! Each write's answer — the object as the API server holds it after it —
//! is kept until the cache shows it, and a reconcile starts from it while
//! the cache still shows a version this process wrote over.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use kube::{Resource, ResourceExt as _};

/// How long an answer is kept at most: a cache that has not shown a write
/// by then never will (the object is gone, and a gone object is not
/// reconciled, so nothing else would remove its entry).
const KEPT: Duration = Duration::from_secs(300);

/// The latest object each write answered with, by UID.
#[derive(Default)]
pub struct OwnWrites {
    objects: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    by_uid: HashMap<String, Written>,
    /// When entries older than [`KEPT`] were last dropped.
    swept: Option<Instant>,
}

struct Written {
    /// Versions the cache may still show that this process wrote over:
    /// the one a reconcile read, and each of its writes but the last.
    superseded: Vec<String>,
    /// The last write's answer.
    object: Arc<dyn Any + Send + Sync>,
    /// Its version.
    version: String,
    /// When it was written.
    at: Instant,
}

impl OwnWrites {
    /// `cached`, or the answer to a later write of this process while the
    /// cache has not seen that write yet.
    pub fn latest<K>(&self, cached: Arc<K>) -> Arc<K>
    where
        K: Resource + Send + Sync + 'static,
    {
        let (Some(uid), Some(version)) = (cached.uid(), cached.resource_version()) else {
            return cached;
        };
        let mut objects = self.objects();
        let Some(written) = objects.by_uid.get(&uid) else {
            return cached;
        };
        if written.superseded.contains(&version)
            && let Ok(object) = written.object.clone().downcast::<K>()
        {
            return object;
        }
        // The cache caught up, or shows a change of somebody else's after
        // ours: it is the newest there is.
        objects.by_uid.remove(&uid);
        cached
    }

    /// Keeps `written`, the answer to a write of `read` (the object the
    /// reconcile worked from).
    pub fn wrote<K>(&self, read: &K, written: K)
    where
        K: Resource + Send + Sync + 'static,
    {
        self.wrote_at(read, written, Instant::now());
    }

    fn wrote_at<K>(&self, read: &K, written: K, now: Instant)
    where
        K: Resource + Send + Sync + 'static,
    {
        let (Some(uid), Some(read_version), Some(version)) = (
            written.uid(),
            read.resource_version(),
            written.resource_version(),
        ) else {
            return;
        };
        let mut objects = self.objects();
        objects.sweep(now);
        let superseded = match objects.by_uid.remove(&uid) {
            // A later write of the same reconcile, or of one that started
            // from the last answer: the versions between stay superseded.
            Some(mut earlier)
                if earlier.superseded.contains(&read_version)
                    || earlier.version == read_version =>
            {
                earlier.superseded.push(earlier.version);
                earlier.superseded
            }
            _ => vec![read_version],
        };
        objects.by_uid.insert(
            uid,
            Written {
                superseded,
                object: Arc::new(written),
                version,
                at: now,
            },
        );
    }

    /// How many answers are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.objects().by_uid.len()
    }

    fn objects(&self) -> MutexGuard<'_, Entries> {
        self.objects.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Entries {
    /// Drops the answers older than [`KEPT`], at most once per [`KEPT`].
    fn sweep(&mut self, now: Instant) {
        if self
            .swept
            .is_some_and(|swept| now.saturating_duration_since(swept) < KEPT)
        {
            return;
        }
        self.swept = Some(now);
        self.by_uid
            .retain(|_, written| now.saturating_duration_since(written.at) < KEPT);
    }
}

#[cfg(test)]
mod tests {
    use kube::api::ObjectMeta;

    use super::*;
    use crate::api::MachinePool;
    use capwasm_api::testing::MachinePoolBuilder;

    fn version(pool: &MachinePool, version: &str, replicas: i32) -> MachinePool {
        MachinePool {
            metadata: ObjectMeta {
                uid: Some("u1".into()),
                resource_version: Some(version.into()),
                ..pool.metadata.clone()
            },
            spec: crate::api::machinepool::MachinePoolSpec {
                replicas: Some(replicas),
                ..pool.spec.clone()
            },
            status: None,
        }
    }

    #[test]
    fn a_reconcile_starts_from_its_last_write_until_the_cache_shows_it() {
        let base = MachinePoolBuilder::new("ns", "p", "c").build();
        let writes = OwnWrites::default();
        let read = Arc::new(version(&base, "10", 1));
        // Two writes in one reconcile: spec, then status.
        writes.wrote(&*read, version(&base, "11", 2));
        writes.wrote(&*read, version(&base, "12", 3));
        // The cache shows the version read, then the first write: the
        // second write's answer is the newest.
        for stale in ["10", "11"] {
            let latest = writes.latest(Arc::new(version(&base, stale, 1)));
            assert_eq!(latest.resource_version().as_deref(), Some("12"));
            assert_eq!(latest.spec.replicas, Some(3));
        }
        // A reconcile from the answer writes again: still ahead of the cache.
        writes.wrote(&version(&base, "12", 3), version(&base, "13", 4));
        let latest = writes.latest(Arc::new(version(&base, "11", 1)));
        assert_eq!(latest.resource_version().as_deref(), Some("13"));
        // The cache caught up: it is used, and the answer forgotten.
        let caught_up = writes.latest(Arc::new(version(&base, "13", 4)));
        assert_eq!(caught_up.resource_version().as_deref(), Some("13"));
        let stale_again = writes.latest(Arc::new(version(&base, "10", 1)));
        assert_eq!(stale_again.resource_version().as_deref(), Some("10"));
    }

    #[test]
    fn a_change_of_somebody_else_after_ours_wins() {
        let base = MachinePoolBuilder::new("ns", "p", "c").build();
        let writes = OwnWrites::default();
        writes.wrote(&version(&base, "10", 1), version(&base, "11", 2));
        let theirs = writes.latest(Arc::new(version(&base, "14", 7)));
        assert_eq!(theirs.spec.replicas, Some(7));
    }

    #[test]
    fn the_answer_to_a_write_of_an_object_since_gone_is_dropped_in_time() {
        let base = MachinePoolBuilder::new("ns", "p", "c").build();
        let writes = OwnWrites::default();
        let start = Instant::now();
        // The finalizer's removal: the cache may still show the version
        // with it, and the reconcile it brings must see it removed.
        writes.wrote_at(&version(&base, "10", 1), version(&base, "11", 1), start);
        let stale = writes.latest(Arc::new(version(&base, "10", 1)));
        assert_eq!(stale.resource_version().as_deref(), Some("11"));
        // The object is gone: never reconciled again, its entry goes with
        // the next write after KEPT.
        let mut other = version(&base, "20", 1);
        other.metadata.uid = Some("u2".into());
        let mut other_written = version(&base, "21", 1);
        other_written.metadata.uid = Some("u2".into());
        writes.wrote_at(&other, other_written.clone(), start + KEPT / 2);
        assert_eq!(writes.len(), 2);
        writes.wrote_at(&other_written, other_written.clone(), start + KEPT * 2);
        assert_eq!(writes.len(), 1);
    }
}
