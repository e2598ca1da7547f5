//! One watch of a kind, shared: a reflector store every controller reads
//! from, indexes on it, and each change fanned out to the controllers that
//! subscribed.
//!
//! kube-runtime's own shared streams (`Writer::subscribe`) drop deletions
//! and hold the watch back while any subscriber is slow; here every change
//! (deletions, and after a relist the objects that vanished meanwhile)
//! reaches every subscriber through an unbounded channel, whose backlog is
//! bounded by the number of objects since the controllers coalesce repeats.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt as _, TryStreamExt as _};
use kube::Resource;
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::watcher;
use tokio::sync::{mpsc, watch};

use super::index::Index;
use crate::controllers::metrics::Metrics;

/// What a watch yields.
pub type Events<K> = BoxStream<'static, watcher::Result<watcher::Event<K>>>;

type Subscribers<K> = Arc<Mutex<Vec<mpsc::UnboundedSender<Arc<K>>>>>;

/// The store's writer, the watch and the indexes it keeps, until the cache runs.
type Feed<K> = (Writer<K>, Events<K>, Vec<Index<K>>);

/// Which objects a cache keeps (a shard's).
pub type Keep<K> = Arc<dyn Fn(&K) -> bool + Send + Sync>;

/// The cache of one kind.
pub struct Cache<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    resource: String,
    reader: Reader<K>,
    /// The watch and the store's writer, until [`Cache::run`] takes them.
    feed: Mutex<Option<Feed<K>>>,
    /// Which objects it keeps; all unless set.
    keep: Option<Keep<K>>,
}

/// What reads a [`Cache`]: its objects, its changes, whether it has listed;
/// cloned cheaply, for those that read the cache without owning it.
pub struct Reader<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    dyntype: K::DynamicType,
    store: Store<K>,
    subscribers: Subscribers<K>,
    /// Whether the first list is in. The store's own readiness wakes only
    /// one of its waiters (kube-runtime's `DelayedInit` keeps one waker),
    /// and the others wait until something else polls them: a fleet of
    /// pools naming a kind first seen together waited 10 s here.
    ready: Arc<watch::Sender<bool>>,
}

impl<K> Clone for Reader<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    fn clone(&self) -> Self {
        Self {
            dyntype: self.dyntype.clone(),
            store: self.store.clone(),
            subscribers: self.subscribers.clone(),
            ready: self.ready.clone(),
        }
    }
}

impl<K> Reader<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync,
{
    /// The object `name` in `namespace` (cluster-scoped kinds: `None`), as cached.
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let mut key = ObjectRef::new_with(name, self.dyntype.clone());
        if let Some(namespace) = namespace {
            key = key.within(namespace);
        }
        self.store.get(&key)
    }

    /// Every object added, changed or deleted from now on; subscribe before
    /// [`Cache::run`] to get every object once the first list is in.
    pub fn subscribe(&self) -> impl Stream<Item = Arc<K>> + Send + 'static {
        let (sender, receiver) = mpsc::unbounded_channel();
        lock(&self.subscribers).push(sender);
        futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|object| (object, receiver))
        })
    }

    /// Once the first list is in the store.
    pub async fn ready(&self) {
        // The sender lives as long as the cache.
        let _ = self.ready.subscribe().wait_for(|ready| *ready).await;
    }
}

impl<K> Cache<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync,
{
    /// A cache of `resource` (its plural, for logs and metrics) filled from
    /// `events` once it runs.
    pub fn new(resource: impl Into<String>, events: Events<K>, dyntype: K::DynamicType) -> Self {
        let writer = Writer::new(dyntype.clone());
        Self {
            resource: resource.into(),
            reader: Reader {
                dyntype,
                store: writer.as_reader(),
                subscribers: Arc::default(),
                ready: Arc::new(watch::Sender::new(false)),
            },
            feed: Mutex::new(Some((writer, events, Vec::new()))),
            keep: None,
        }
    }

    /// Keeps only the objects `keep` picks (before it runs): one that
    /// changes so that it is no longer picked leaves the cache as if
    /// deleted.
    #[must_use]
    pub fn keeping(mut self, keep: Keep<K>) -> Self {
        self.keep = Some(keep);
        self
    }

    /// Keeps `index` up to date with this cache (before it runs).
    #[must_use]
    pub fn indexed(self, index: &Index<K>) -> Self {
        if let Some((_, _, indexes)) = lock(&self.feed).as_mut() {
            indexes.push(index.clone());
        }
        self
    }

    /// The store: possibly stale, as every cache (see [`Store::get`]).
    pub fn store(&self) -> &Store<K> {
        &self.reader.store
    }

    /// A reader of this cache.
    pub fn reader(&self) -> Reader<K> {
        self.reader.clone()
    }

    /// See [`Reader::get`].
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.reader.get(namespace, name)
    }

    /// See [`Reader::subscribe`].
    pub fn subscribe(&self) -> impl Stream<Item = Arc<K>> + Send + 'static {
        self.reader.subscribe()
    }

    /// See [`Reader::ready`].
    pub async fn ready(&self) {
        self.reader.ready().await;
    }

    /// Watches (and retries with backoff after failures, counting them)
    /// until the returned future is dropped. Only the first call watches.
    pub fn run(&self, metrics: Metrics) -> impl Future<Output = ()> + Send + 'static {
        let feed = lock(&self.feed).take();
        let Reader {
            dyntype,
            store,
            subscribers,
            ready,
        } = self.reader.clone();
        let resource = self.resource.clone();
        let keep = self.keep.clone();
        async move {
            let Some((writer, events, indexes)) = feed else {
                return;
            };
            let events = match keep {
                Some(keep) => kept(events, keep, store.clone(), dyntype.clone()),
                None => events,
            };
            let with_indexes = events.inspect_ok(move |event| {
                for index in &indexes {
                    index.apply(event);
                }
            });
            let mut events = std::pin::pin!(reflector::reflector(writer, with_indexes));
            // The store's objects when a relist began: those missing after it were deleted meanwhile.
            let mut before: Option<Vec<Arc<K>>> = None;
            while let Some(event) = events.next().await {
                let touched = match event {
                    Ok(watcher::Event::Apply(object) | watcher::Event::Delete(object)) => {
                        vec![Arc::new(object)]
                    }
                    Ok(watcher::Event::Init) => {
                        before = Some(store.state());
                        continue;
                    }
                    Ok(watcher::Event::InitApply(_)) => continue,
                    Ok(watcher::Event::InitDone) => {
                        ready.send_replace(true);
                        let mut touched = store.state();
                        touched.extend(before.take().into_iter().flatten().filter(|object| {
                            store
                                .get(&ObjectRef::from_obj_with(&**object, dyntype.clone()))
                                .is_none()
                        }));
                        touched
                    }
                    Err(error) => {
                        metrics.watch_error(&resource);
                        tracing::warn!(
                            resource,
                            error = &error as &dyn std::error::Error,
                            "a watch failed; retrying"
                        );
                        continue;
                    }
                };
                let mut subscribers = lock(&subscribers);
                subscribers.retain(|subscriber| {
                    touched
                        .iter()
                        .all(|object| subscriber.send(object.clone()).is_ok())
                });
            }
        }
    }
}

/// `events` of the objects `keep` picks: another's first list entry is
/// skipped, a change that makes a cached object another's deletes it.
fn kept<K>(events: Events<K>, keep: Keep<K>, store: Store<K>, dyntype: K::DynamicType) -> Events<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync,
{
    let cached = move |object: &K| {
        store
            .get(&ObjectRef::from_obj_with(object, dyntype.clone()))
            .is_some()
    };
    events
        .try_filter_map(move |event| {
            let event = match event {
                watcher::Event::InitApply(object) if !keep(&object) => None,
                watcher::Event::Apply(object) | watcher::Event::Delete(object)
                    if !keep(&object) =>
                {
                    cached(&object).then_some(watcher::Event::Delete(object))
                }
                event => Some(event),
            };
            futures::future::ready(Ok(event))
        })
        .boxed()
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every change under these locks is one push, take or retain.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::api::MachinePool;
    use capwasm_api::testing::MachinePoolBuilder;

    /// Every reader waiting for the first list goes on once it is in, not
    /// only the last one to wait.
    #[tokio::test]
    async fn every_waiter_sees_the_first_list() {
        let (sender, receiver) = mpsc::unbounded_channel::<watcher::Event<MachinePool>>();
        let events = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|event| (Ok(event), receiver))
        })
        .boxed();
        let cache = Arc::new(Cache::new("machinepools", events, ()));
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let cache = cache.clone();
                tokio::spawn(async move { cache.ready().await })
            })
            .collect();
        tokio::spawn(cache.run(Metrics::default()));
        // Let every waiter register before the list comes in.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let pool = MachinePoolBuilder::new("ns", "p", "c").build();
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(pool),
            watcher::Event::InitDone,
        ] {
            sender.send(event).unwrap();
        }
        for waiter in waiters {
            tokio::time::timeout(Duration::from_secs(1), waiter)
                .await
                .expect("woken at once")
                .unwrap();
        }
        assert_eq!(cache.store().state().len(), 1);
    }
}
