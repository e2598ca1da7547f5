//! Watches on kinds known only at run time (the kinds a bootstrap or
//! infrastructure reference names), started the first time a reference
//! appears, with each change mapped through owner references to the owning
//! object and fed to its controller (upstream's `externalTracker`).

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Mutex, PoisonError};

use futures::{Stream, StreamExt as _};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource, ResourceExt as _};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// One watch per referenced kind; changes come out as the owners' refs.
pub struct DynamicWatches<K: Resource<DynamicType = ()>> {
    client: Client,
    /// Watched kinds by (group, kind), with the version watched.
    watched: Mutex<HashMap<(String, String), (String, AbortHandle)>>,
    owners: mpsc::UnboundedSender<ObjectRef<K>>,
    _owner: PhantomData<fn() -> K>,
}

impl<K: Resource<DynamicType = ()> + 'static> DynamicWatches<K> {
    /// Watches to be started with `client`; the returned stream yields the
    /// `K` owners of changed objects, for `Controller::reconcile_on`.
    pub fn new(client: Client) -> (Self, impl Stream<Item = ObjectRef<K>> + Send + 'static) {
        let (owners, changed) = mpsc::unbounded_channel();
        let stream = futures::stream::unfold(changed, |mut changed| async move {
            changed.recv().await.map(|owner| (owner, changed))
        });
        (
            Self {
                client,
                watched: Mutex::new(HashMap::new()),
                owners,
                _owner: PhantomData,
            },
            stream,
        )
    }

    /// Starts watching `resource`'s kind unless it is watched already at
    /// that version (a new version replaces the old watch).
    pub fn ensure(&self, resource: &ApiResource) {
        let key = (resource.group.clone(), resource.kind.clone());
        let mut watched = self.watched.lock().unwrap_or_else(PoisonError::into_inner);
        if watched
            .get(&key)
            .is_some_and(|(version, _)| *version == resource.version)
        {
            return;
        }
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), resource);
        let owners = self.owners.clone();
        let (group, kind) = (K::group(&()).into_owned(), K::kind(&()).into_owned());
        let task = tokio::spawn(async move {
            let mut changes = watcher(api, watcher::Config::default())
                .default_backoff()
                .touched_objects()
                .boxed();
            while let Some(change) = changes.next().await {
                let object = match change {
                    Ok(object) => object,
                    Err(error) => {
                        tracing::debug!(
                            error = &error as &dyn std::error::Error,
                            "watch of a referenced kind failed; retrying"
                        );
                        continue;
                    }
                };
                for owner in owners_of(&object, &group, &kind) {
                    if owners.send(owner).is_err() {
                        return;
                    }
                }
            }
        });
        tracing::debug!(
            group = key.0,
            kind = key.1,
            version = resource.version,
            "watching referenced kind"
        );
        if let Some((_, old)) = watched.insert(key, (resource.version.clone(), task.abort_handle()))
        {
            old.abort();
        }
    }
}

impl<K: Resource<DynamicType = ()>> Drop for DynamicWatches<K> {
    fn drop(&mut self) {
        for (_, task) in self
            .watched
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            task.abort();
        }
    }
}

/// The owners of `object` of kind `kind` in `group` (any version).
fn owners_of<K: Resource<DynamicType = ()>>(
    object: &DynamicObject,
    group: &str,
    kind: &str,
) -> Vec<ObjectRef<K>> {
    let namespace = object.namespace().unwrap_or_default();
    object
        .owner_references()
        .iter()
        .filter(|r| r.kind == kind && r.api_version.split('/').next() == Some(group))
        .map(|r| ObjectRef::new(&r.name).within(&namespace))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MachinePool;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    #[test]
    fn owners_of_maps_only_owners_of_the_kind_and_group() {
        let resource = ApiResource::erase::<crate::api::WasmMachinePool>(&());
        let mut object = DynamicObject::new("p", &resource).within("ns");
        let owner = |api_version: &str, kind: &str, name: &str| OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: name.into(),
            ..OwnerReference::default()
        };
        object.metadata.owner_references = Some(vec![
            owner("cluster.x-k8s.io/v1beta2", "MachinePool", "a"),
            owner("cluster.x-k8s.io/v1beta1", "MachinePool", "b"),
            owner("example.com/v1", "MachinePool", "c"),
            owner("cluster.x-k8s.io/v1beta2", "Cluster", "d"),
        ]);
        let owners = owners_of::<MachinePool>(&object, "cluster.x-k8s.io", "MachinePool");
        let names: Vec<_> = owners.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(owners.iter().all(|o| o.namespace.as_deref() == Some("ns")));
    }
}
