//! Which objects a platform cluster may touch: only those the host created
//! for it. Before anything is applied, every object a render names is
//! looked up (in the caches, else with a metadata read); one that exists
//! without a creation record naming this cluster — a team's own Cluster
//! of the same name, another platform cluster's object — is never
//! updated, adopted, pruned or deleted: the render applies nothing and the
//! cluster says whose the object is.
//!
//! The record ([`CREATED_FOR_ANNOTATION`]) is written only when the host
//! creates the object, names the cluster (so it survives a restore from
//! backup, which changes UIDs), and is kept by every later apply. An
//! object is created by the apply that follows the lookup finding it
//! absent: one someone else creates in between (the time of a request)
//! would get the record, and is the one window left.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Resource as _, ResourceExt as _};

use crate::api::PlatformCluster;
use crate::api::Reason;
use crate::api::platform::{CLUSTER_LABEL, CREATED_FOR_ANNOTATION};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::wasm::ObjectKind;

/// An object a render names that exists and was not created for the
/// rendering cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Foreign {
    /// Its kind (`MachinePool.cluster.x-k8s.io`).
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Whose it is, for people.
    pub owner: String,
    /// The platform cluster it was created for, if another one.
    pub platform_cluster: Option<String>,
}

impl fmt::Display for Foreign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:?} exists and was not created for this platform cluster ({}): nothing was applied; rename it in the render, or delete or rename the object",
            self.kind, self.name, self.owner
        )
    }
}

impl std::error::Error for Foreign {}

/// Whether an object a render names may be written for the cluster.
#[derive(Debug)]
pub(super) enum Claim {
    /// It does not exist: the host creates it.
    Absent,
    /// The host created it for this cluster.
    Ours,
}

/// Whether the object's creation record names platform cluster `cluster`.
pub fn created_for(meta: &ObjectMeta, cluster: &str) -> bool {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(CREATED_FOR_ANNOTATION))
        .map(String::as_str)
        == Some(cluster)
}

/// Whose the object is, as far as its metadata says.
fn owner_of(meta: &ObjectMeta) -> (String, Option<String>) {
    let annotations = meta.annotations.as_ref();
    if let Some(other) = annotations.and_then(|a| a.get(CREATED_FOR_ANNOTATION)) {
        return (
            format!("it was created for platform cluster {other:?}"),
            Some(other.clone()),
        );
    }
    let owners = meta.owner_references.as_deref().unwrap_or_default();
    if let Some(owner) = owners
        .iter()
        .find(|o| o.controller == Some(true))
        .or(owners.first())
    {
        return (
            format!("it is owned by {} {:?}", owner.kind, owner.name),
            None,
        );
    }
    if let Some(label) = meta.labels.as_ref().and_then(|l| l.get(CLUSTER_LABEL)) {
        return (
            format!("it is labelled for platform cluster {label:?} but capwasm did not create it"),
            None,
        );
    }
    ("capwasm did not create it".to_owned(), None)
}

/// Whether the object of `kind` (resource `resource`) named `name` in
/// `namespace` may be written for platform cluster `cluster`: absent, or
/// created for it. An object the caches do not hold (none labelled for a
/// platform cluster) is looked up by its metadata alone.
pub(super) async fn claim(
    ctx: &Context,
    (kind, resource): (&ObjectKind, &ApiResource),
    namespace: &str,
    name: &str,
    cluster: &str,
) -> Result<Claim, Error> {
    let cached = ctx
        .platform
        .cached(kind, namespace, name)
        .await
        .map_err(Error::Children)?;
    let meta = if let Some(object) = cached {
        object.metadata.clone()
    } else {
        let api = Api::<DynamicObject>::namespaced_with(ctx.client.clone(), namespace, resource);
        let found = api
            .get_metadata_opt(name)
            .await
            .map_err(|source| Error::Get {
                kind: "a rendered object",
                name: format!("{kind}/{name}"),
                source,
            })?;
        let Some(found) = found else {
            return Ok(Claim::Absent);
        };
        found.metadata
    };
    if created_for(&meta, cluster) {
        return Ok(Claim::Ours);
    }
    let (owner, platform_cluster) = owner_of(&meta);
    Err(Error::NotOwned(Foreign {
        kind: kind.to_string(),
        name: name.to_owned(),
        owner,
        platform_cluster,
    }))
}

/// Tells the platform cluster `foreign` was created for, if it is another
/// one of the namespace, that `cluster` renders it too: the collision
/// shows on both, and the object stays with the cluster it was made for.
pub(super) async fn contested(ctx: &Context, cluster: &PlatformCluster, foreign: &Foreign) {
    let Some(other) = foreign.platform_cluster.as_deref() else {
        return;
    };
    let namespace = cluster.namespace();
    let Some(other) = ctx.caches.platforms.get(namespace.as_deref(), other) else {
        return;
    };
    let note = format!(
        "platform cluster {:?} renders {} {:?} too: it stays this cluster's, and the other applies nothing until one of them is renamed",
        cluster.name_any(),
        foreign.kind,
        foreign.name
    );
    ctx.publish(&other.object_ref(&()), Reason::ObjectContested, note)
        .await;
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;

    fn meta(annotations: &[(&str, &str)], labels: &[(&str, &str)]) -> ObjectMeta {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        ObjectMeta {
            annotations: Some(map(annotations)),
            labels: Some(map(labels)),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn only_the_creation_record_makes_an_object_a_cluster_s() {
        assert!(created_for(
            &meta(&[(CREATED_FOR_ANNOTATION, "a")], &[]),
            "a"
        ));
        assert!(!created_for(
            &meta(&[(CREATED_FOR_ANNOTATION, "a-b")], &[]),
            "a"
        ));
        // The label anyone can set is not enough, nor is an owner reference.
        let mut labelled = meta(&[], &[(CLUSTER_LABEL, "a")]);
        labelled.owner_references = Some(vec![OwnerReference {
            kind: "PlatformCluster".into(),
            name: "a".into(),
            ..OwnerReference::default()
        }]);
        assert!(!created_for(&labelled, "a"));
    }

    #[test]
    fn the_owner_named_is_the_record_then_the_controller_then_the_label() {
        let (owner, other) = owner_of(&meta(&[(CREATED_FOR_ANNOTATION, "a")], &[]));
        assert_eq!(owner, "it was created for platform cluster \"a\"");
        assert_eq!(other.as_deref(), Some("a"));
        let mut controlled = meta(&[], &[(CLUSTER_LABEL, "a")]);
        controlled.owner_references = Some(vec![
            OwnerReference {
                kind: "Other".into(),
                name: "o".into(),
                ..OwnerReference::default()
            },
            OwnerReference {
                kind: "Cluster".into(),
                name: "team".into(),
                controller: Some(true),
                ..OwnerReference::default()
            },
        ]);
        assert_eq!(owner_of(&controlled).0, "it is owned by Cluster \"team\"");
        assert_eq!(
            owner_of(&meta(&[], &[(CLUSTER_LABEL, "a")])).0,
            "it is labelled for platform cluster \"a\" but capwasm did not create it"
        );
        assert_eq!(
            owner_of(&ObjectMeta::default()).0,
            "capwasm did not create it"
        );
    }
}
