//! A secondary index on a cache: the objects under a key (the pools of a
//! Cluster, the objects referencing a name), kept by the cache's watch in
//! step with its store, so a lookup costs the answer, not a scan.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, PoisonError, RwLock};

use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

/// Objects of `K` by the keys `keys` gives each.
pub struct Index<K: Resource>
where
    K::DynamicType: Clone + Eq + Hash,
{
    keys: fn(&K) -> Vec<String>,
    dyntype: K::DynamicType,
    state: Arc<RwLock<State<K>>>,
}

impl<K: Resource> Clone for Index<K>
where
    K::DynamicType: Clone + Eq + Hash,
{
    fn clone(&self) -> Self {
        Self {
            keys: self.keys,
            dyntype: self.dyntype.clone(),
            state: self.state.clone(),
        }
    }
}

struct State<K: Resource>
where
    K::DynamicType: Clone + Eq + Hash,
{
    live: Entries<K>,
    /// Being rebuilt from a relist, until it is complete.
    relist: Option<Entries<K>>,
}

struct Entries<K: Resource>
where
    K::DynamicType: Clone + Eq + Hash,
{
    members: HashMap<String, HashSet<ObjectRef<K>>>,
    keys_of: HashMap<ObjectRef<K>, Vec<String>>,
}

impl<K: Resource> Default for Entries<K>
where
    K::DynamicType: Clone + Eq + Hash,
{
    fn default() -> Self {
        Self {
            members: HashMap::new(),
            keys_of: HashMap::new(),
        }
    }
}

impl<K: Resource> Entries<K>
where
    K::DynamicType: Clone + Eq + Hash,
{
    fn insert(&mut self, object: ObjectRef<K>, keys: Vec<String>) {
        self.remove(&object);
        for key in &keys {
            self.members
                .entry(key.clone())
                .or_default()
                .insert(object.clone());
        }
        if !keys.is_empty() {
            self.keys_of.insert(object, keys);
        }
    }

    fn remove(&mut self, object: &ObjectRef<K>) {
        for key in self.keys_of.remove(object).into_iter().flatten() {
            if let Some(members) = self.members.get_mut(&key) {
                members.remove(object);
                if members.is_empty() {
                    self.members.remove(&key);
                }
            }
        }
    }
}

impl<K: Resource> Index<K>
where
    K::DynamicType: Clone + Eq + Hash,
{
    /// An empty index; a cache it is given to fills it.
    pub fn new(keys: fn(&K) -> Vec<String>, dyntype: K::DynamicType) -> Self {
        Self {
            keys,
            dyntype,
            state: Arc::new(RwLock::new(State {
                live: Entries::default(),
                relist: None,
            })),
        }
    }

    /// The cached objects under `key`, in no particular order.
    pub fn get(&self, store: &Store<K>, key: &str) -> Vec<Arc<K>>
    where
        K: Clone,
    {
        let refs: Vec<ObjectRef<K>> = self
            .state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .live
            .members
            .get(key)
            .map(|members| members.iter().cloned().collect())
            .unwrap_or_default();
        refs.iter().filter_map(|r| store.get(r)).collect()
    }

    /// Follows one event of the cache's watch, as its store does.
    pub(crate) fn apply(&self, event: &watcher::Event<K>) {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        let entry = |object: &K| {
            (
                ObjectRef::from_obj_with(object, self.dyntype.clone()),
                (self.keys)(object),
            )
        };
        match event {
            watcher::Event::Apply(object) => {
                let (object, keys) = entry(object);
                state.live.insert(object, keys);
            }
            watcher::Event::Delete(object) => {
                state
                    .live
                    .remove(&ObjectRef::from_obj_with(object, self.dyntype.clone()));
            }
            watcher::Event::Init => state.relist = Some(Entries::default()),
            watcher::Event::InitApply(object) => {
                let (object, keys) = entry(object);
                state.relist.get_or_insert_default().insert(object, keys);
            }
            watcher::Event::InitDone => {
                if let Some(relisted) = state.relist.take() {
                    state.live = relisted;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MachinePool;
    use capwasm_api::testing::MachinePoolBuilder;
    use kube::runtime::reflector;

    fn by_cluster() -> Index<MachinePool> {
        Index::new(|p| vec![p.spec.cluster_name.clone()], ())
    }

    fn names(index: &Index<MachinePool>, store: &Store<MachinePool>, key: &str) -> Vec<String> {
        let mut names: Vec<String> = index
            .get(store, key)
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn index_follows_applies_deletes_and_relists_as_the_store_does() {
        let (store, mut writer) = reflector::store::<MachinePool>();
        let index = by_cluster();
        let apply = |writer: &mut reflector::store::Writer<MachinePool>, event| {
            index.apply(&event);
            writer.apply_watcher_event(&event);
        };
        let pool = |name: &str, cluster: &str| MachinePoolBuilder::new("ns", name, cluster).build();
        apply(&mut writer, watcher::Event::Apply(pool("a", "c1")));
        apply(&mut writer, watcher::Event::Apply(pool("b", "c1")));
        apply(&mut writer, watcher::Event::Apply(pool("c", "c2")));
        assert_eq!(names(&index, &store, "c1"), ["a", "b"]);
        assert_eq!(names(&index, &store, "c2"), ["c"]);

        apply(&mut writer, watcher::Event::Delete(pool("a", "c1")));
        assert_eq!(names(&index, &store, "c1"), ["b"]);

        // A relist replaces everything at once, when it is complete.
        apply(&mut writer, watcher::Event::Init);
        apply(&mut writer, watcher::Event::InitApply(pool("d", "c1")));
        assert_eq!(names(&index, &store, "c1"), ["b"]);
        apply(&mut writer, watcher::Event::InitDone);
        assert_eq!(names(&index, &store, "c1"), ["d"]);
        assert!(names(&index, &store, "c2").is_empty());
    }
}
