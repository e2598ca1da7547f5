//! The creation record of a platform cluster's objects
//! ([`CREATED_FOR_ANNOTATION`]), and whose an object is when it is not the
//! cluster's: what [`ownership`](super::ownership) decides by, kept apart
//! from any client so that the caches and the errors can name it.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::Reason;
use crate::api::platform::{CLUSTER_LABEL, CREATED_FOR_ANNOTATION};
use crate::controllers::error::KindError;
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

impl KindError for Foreign {
    fn reason(&self) -> Reason {
        Reason::ObjectNotOwned
    }

    fn metric_label(&self) -> &'static str {
        "not_owned"
    }
}

impl Foreign {
    /// The object of `kind` named `name`, whose metadata is `meta`.
    pub fn of(kind: &ObjectKind, name: &str, meta: &ObjectMeta) -> Self {
        let (owner, platform_cluster) = owner_of(meta);
        Self {
            kind: kind.to_string(),
            name: name.to_owned(),
            owner,
            platform_cluster,
        }
    }
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
