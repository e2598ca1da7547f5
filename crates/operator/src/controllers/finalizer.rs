//! Finalizers, by kube-runtime's protocol (`kube_runtime::finalizer`): the
//! finalizer is added before anything else is done, and that pass ends
//! there (the write brings the object back); cleanup runs only while the
//! object is being deleted; the finalizer is removed with a JSON patch whose
//! `test` op names it, so another controller's entry is never touched.
//!
//! Ours rather than kube-runtime's helper because its cleanup must end in
//! success or an error, and a deletion that waits for other objects to go
//! is neither: here cleanup ends when every delete phase is done, and a
//! wait is a condition, not an error. And because the object's other
//! required metadata (a MachinePool's cluster-name label and Cluster owner
//! reference) goes in the same first write, guarded the same way: every
//! list the patch replaces is `test`ed against what was read.

use std::collections::BTreeMap;
use std::fmt::Debug;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, TestOperation};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Patch, PatchParams};
use kube::{Resource, ResourceExt as _};
use serde_json::{Value, json};

use super::context::Context;
use super::error::Error;
use super::write::Writable;

/// Metadata an object must carry before anything is done for it, besides
/// the controller's finalizer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Required {
    /// Labels, each set to its value.
    pub labels: BTreeMap<String, String>,
    /// An owner reference, replacing any to an object of the same group,
    /// kind and name (an earlier one, with another UID).
    pub owner: Option<OwnerReference>,
}

/// Adds `finalizer` and `required` where they are missing, in one JSON
/// patch. Whether it wrote: the reconcile then ends, and the write brings
/// the object back.
pub async fn ensure<K>(
    ctx: &Context,
    controller: &'static str,
    object: &K,
    finalizer: Option<&str>,
    required: &Required,
) -> Result<bool, Error>
where
    K: Writable,
{
    let ops = ensure_ops(object, finalizer, required);
    if ops.is_empty() {
        return Ok(false);
    }
    patch(ctx, controller, object, ops).await.map(|()| true)
}

/// Removes `finalizer` from `object`, and nothing else.
pub async fn remove<K>(
    ctx: &Context,
    controller: &'static str,
    object: &K,
    finalizer: &str,
) -> Result<(), Error>
where
    K: Writable,
{
    let Some(ops) = remove_ops(object, finalizer) else {
        return Ok(());
    };
    match patch(ctx, controller, object, ops).await {
        // Gone already: an earlier removal was the last finalizer.
        Err(error) if error.is_gone() => Ok(()),
        // The answer is kept (`patch`): a reconcile from a cached copy that
        // still shows the finalizer sees it removed, and sends nothing.
        other => other,
    }
}

async fn patch<K>(
    ctx: &Context,
    controller: &'static str,
    object: &K,
    ops: Vec<PatchOperation>,
) -> Result<(), Error>
where
    K: Writable,
{
    let name = object.name_any();
    let patch = Patch::Json::<()>(json_patch::Patch(ops));
    let written = K::api(ctx.client.clone(), object)
        .patch(&name, &PatchParams::default(), &patch)
        .await
        .map_err(|source| Error::Write {
            what: "metadata",
            name: name.clone(),
            source,
        })?;
    ctx.metrics.write(controller, "metadata");
    ctx.own_writes.wrote(object, written);
    Ok(())
}

/// The ops adding what is missing: each list replaced is first `test`ed
/// against its value as read, so a concurrent change fails the patch (and
/// the reconcile retries on the new object) instead of being overwritten.
fn ensure_ops<K: Resource>(
    object: &K,
    finalizer: Option<&str>,
    required: &Required,
) -> Vec<PatchOperation> {
    let mut ops = Vec::new();
    let meta = object.meta();
    if let Some(finalizer) = finalizer
        && !object.finalizers().iter().any(|f| f == finalizer)
    {
        match &meta.finalizers {
            Some(current) if !current.is_empty() => {
                ops.push(test(&["metadata", "finalizers"], json!(current)));
                ops.push(add(&["metadata", "finalizers", "-"], json!(finalizer)));
            }
            _ => {
                ops.push(test(
                    &["metadata", "finalizers"],
                    meta.finalizers.clone().into(),
                ));
                ops.push(add(&["metadata", "finalizers"], json!([finalizer])));
            }
        }
    }
    let labels = object.labels();
    let missing: BTreeMap<&String, &String> = required
        .labels
        .iter()
        .filter(|(k, v)| labels.get(*k) != Some(*v))
        .collect();
    if !missing.is_empty() {
        if meta.labels.is_none() {
            ops.push(test(&["metadata", "labels"], Value::Null));
            ops.push(add(&["metadata", "labels"], json!(missing)));
        } else {
            for (key, value) in missing {
                ops.push(add(&["metadata", "labels", key], json!(value)));
            }
        }
    }
    if let Some(owner) = &required.owner {
        let same_object = |r: &OwnerReference| {
            r.kind == owner.kind
                && r.name == owner.name
                && r.api_version.split('/').next() == owner.api_version.split('/').next()
        };
        let current = object.owner_references();
        let mut owners: Vec<OwnerReference> = current
            .iter()
            .filter(|r| !same_object(r) || r.uid == owner.uid)
            .cloned()
            .collect();
        if !owners.iter().any(|r| r.uid == owner.uid) {
            owners.push(owner.clone());
        }
        if owners != current {
            ops.push(test(
                &["metadata", "ownerReferences"],
                meta.owner_references
                    .clone()
                    .map_or(Value::Null, |o| json!(o)),
            ));
            ops.push(add(&["metadata", "ownerReferences"], json!(owners)));
        }
    }
    ops
}

/// The ops removing `finalizer`, if the object has it.
fn remove_ops<K: Resource>(object: &K, finalizer: &str) -> Option<Vec<PatchOperation>> {
    let index = object
        .finalizers()
        .iter()
        .position(|f| f == finalizer)?
        .to_string();
    let path = ["metadata", "finalizers", index.as_str()];
    Some(vec![
        test(&path, json!(finalizer)),
        PatchOperation::Remove(RemoveOperation {
            path: pointer(&path),
        }),
    ])
}

/// The JSON Pointer of `tokens`, each escaped (RFC 6901: `~` and `/`).
fn pointer(tokens: &[&str]) -> PointerBuf {
    PointerBuf::from_tokens(tokens.iter().copied())
}

fn test(path: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Test(TestOperation {
        path: pointer(path),
        value,
    })
}

fn add(path: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: pointer(path),
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MachinePool;
    use capwasm_api::testing::MachinePoolBuilder;

    const OURS: &str = "machinepool.cluster.x-k8s.io";

    fn owner(name: &str, uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: "cluster.x-k8s.io/v1beta2".into(),
            kind: "Cluster".into(),
            name: name.into(),
            uid: uid.into(),
            ..OwnerReference::default()
        }
    }

    fn pool(finalizers: Option<Vec<&str>>) -> MachinePool {
        let mut pool = MachinePoolBuilder::new("ns", "p", "c1").build();
        pool.metadata.finalizers = finalizers.map(|f| f.into_iter().map(Into::into).collect());
        pool
    }

    #[test]
    fn the_finalizer_is_added_after_a_test_of_the_list_as_read() {
        let none = ensure_ops(&pool(None), Some(OURS), &Required::default());
        assert_eq!(
            none,
            [
                test(&["metadata", "finalizers"], Value::Null),
                add(&["metadata", "finalizers"], json!([OURS]))
            ]
        );
        let other = ensure_ops(&pool(Some(vec!["other"])), Some(OURS), &Required::default());
        assert_eq!(
            other,
            [
                test(&["metadata", "finalizers"], json!(["other"])),
                add(&["metadata", "finalizers", "-"], json!(OURS))
            ]
        );
        let present = ensure_ops(&pool(Some(vec![OURS])), Some(OURS), &Required::default());
        assert!(present.is_empty());
    }

    #[test]
    fn removal_names_our_entry_and_leaves_the_others() {
        let ops = remove_ops(&pool(Some(vec!["a", OURS, "b"])), OURS).unwrap();
        assert_eq!(
            serde_json::to_value(json_patch::Patch(ops)).unwrap(),
            json!([
                { "op": "test", "path": "/metadata/finalizers/1", "value": OURS },
                { "op": "remove", "path": "/metadata/finalizers/1" }
            ])
        );
        assert!(remove_ops(&pool(Some(vec!["a"])), OURS).is_none());
    }

    #[test]
    fn required_metadata_replaces_a_stale_owner_and_sets_missing_labels() {
        let mut object = pool(Some(vec![OURS]));
        object.metadata.owner_references = Some(vec![owner("c1", "old"), owner("x", "x")]);
        object.metadata.labels = Some(BTreeMap::from([("a/b".into(), "1".into())]));
        let required = Required {
            labels: BTreeMap::from([("a/b".into(), "1".into()), ("c".into(), "2".into())]),
            owner: Some(owner("c1", "new")),
        };
        let ops = ensure_ops(&object, Some(OURS), &required);
        assert_eq!(
            ops,
            [
                add(&["metadata", "labels", "c"], json!("2")),
                test(
                    &["metadata", "ownerReferences"],
                    json!([owner("c1", "old"), owner("x", "x")])
                ),
                add(
                    &["metadata", "ownerReferences"],
                    json!([owner("x", "x"), owner("c1", "new")])
                ),
            ]
        );
        object.metadata.owner_references = Some(vec![owner("c1", "new")]);
        object.metadata.labels = Some(BTreeMap::from([
            ("a/b".into(), "1".into()),
            ("c".into(), "2".into()),
        ]));
        assert!(ensure_ops(&object, Some(OURS), &required).is_empty());
    }

    #[test]
    fn label_keys_are_escaped_as_json_pointer_tokens() {
        assert_eq!(
            pointer(&["metadata", "labels", "cluster.x-k8s.io/cluster-name"]).as_str(),
            "/metadata/labels/cluster.x-k8s.io~1cluster-name"
        );
        assert_eq!(pointer(&["a~b"]).as_str(), "/a~0b");
    }
}
