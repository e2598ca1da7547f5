//! Writes, the same way everywhere, never a read-modify-write of a whole
//! object: a status is JSON-merge-patched with what changed since the
//! object the reconcile read (as upstream's patch helper does: the API
//! server's apply machinery costs it several times a merge patch's CPU, and
//! a controller is its kinds' only status writer); spec and metadata fields
//! are server-side applied (metadata lists are JSON-patched with a `test`
//! of what they replace, in [`super::finalizer`]). Callers skip a write
//! when nothing changed.
//!
//! An apply removes the fields its manager applied before and omits now, so
//! each set of fields a controller applies on its own (metadata, spec) has
//! its own manager, `<manager>-<set>`: applying one set never drops another.

use std::fmt::Debug;

use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt as _};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::context::Context;
use super::error::Error;

/// Who writes: a controller (for metrics) and its field manager.
#[derive(Clone, Copy, Debug)]
pub struct Author {
    /// The controller's name.
    pub controller: &'static str,
    /// Its field manager.
    pub manager: &'static str,
}

/// Patches `object`'s status from `before` (what the object held when
/// read) to `after`.
pub async fn status<K, S>(
    ctx: &Context,
    author: Author,
    object: &K,
    before: &S,
    after: &S,
) -> Result<(), Error>
where
    K: Writable,
    S: Serialize,
{
    let name = object.name_any();
    let value = |status: &S| {
        serde_json::to_value(status).map_err(|e| Error::Write {
            what: "status",
            name: name.clone(),
            source: kube::Error::SerdeError(e),
        })
    };
    let patch = json!({ "status": merge_patch(&value(before)?, &value(after)?) });
    let params = PatchParams {
        field_manager: Some(author.manager.to_owned()),
        ..PatchParams::default()
    };
    let written = K::api(ctx.client.clone(), object)
        .patch_status(&name, &params, &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::Write {
            what: "status",
            name,
            source,
        })?;
    ctx.metrics.write(author.controller, "status");
    ctx.own_writes.wrote(object, written);
    Ok(())
}

/// The JSON merge patch (RFC 7386) that turns `before` into `after`: the
/// members that changed, `null` for those removed; lists whole.
fn merge_patch(before: &Value, after: &Value) -> Value {
    let (Value::Object(before), Value::Object(after)) = (before, after) else {
        return after.clone();
    };
    let mut patch = serde_json::Map::new();
    for (key, value) in after {
        match before.get(key) {
            Some(old) if old == value => {}
            Some(old @ Value::Object(_)) if value.is_object() => {
                patch.insert(key.clone(), merge_patch(old, value));
            }
            _ => {
                patch.insert(key.clone(), value.clone());
            }
        }
    }
    for key in before.keys().filter(|k| !after.contains_key(*k)) {
        patch.insert(key.clone(), Value::Null);
    }
    Value::Object(patch)
}

/// Applies `fields` (a JSON object holding the `what` part: `metadata` or
/// `spec`) to `object`, as manager `<manager>-<what>`; the object's
/// generation after the write.
pub async fn fields<K>(
    ctx: &Context,
    author: Author,
    object: &K,
    what: &'static str,
    mut fields: serde_json::Value,
) -> Result<Option<i64>, Error>
where
    K: Writable,
{
    let name = object.name_any();
    if let Some(map) = fields.as_object_mut() {
        map.insert("apiVersion".into(), K::api_version(&()).into());
        map.insert("kind".into(), K::kind(&()).into());
        map.entry("metadata")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(|m| m.insert("name".into(), name.clone().into()));
    }
    let manager = format!("{}-{what}", author.manager);
    let written = K::api(ctx.client.clone(), object)
        .patch(
            &name,
            &PatchParams::apply(&manager).force(),
            &Patch::Apply(&fields),
        )
        .await
        .map_err(|source| Error::Write { what, name, source })?;
    ctx.metrics.write(author.controller, what);
    let generation = written.meta().generation;
    ctx.own_writes.wrote(object, written);
    Ok(generation)
}

/// A kind the operator writes: reached through its [`Scoped`] `Api`, its
/// answers read back typed.
pub trait Writable:
    Resource<DynamicType = ()> + Scoped + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> Writable for K where
    K: Resource<DynamicType = ()>
        + Scoped
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}

/// How to reach an object of a kind: in its namespace, or cluster-wide.
pub trait Scoped: Resource + Sized {
    /// The `Api` that reaches `object`.
    fn api(client: Client, object: &Self) -> Api<Self>;
}

macro_rules! namespaced {
    ($($kind:ty),*) => {$(
        impl Scoped for $kind {
            fn api(client: Client, object: &Self) -> Api<Self> {
                Api::namespaced(client, &object.namespace().unwrap_or_default())
            }
        }
    )*};
}

namespaced!(
    crate::api::Cluster,
    crate::api::MachinePool,
    crate::api::Machine,
    crate::api::WasmBootstrapConfig,
    crate::api::WasmMachinePool,
    crate::api::WasmMachine,
    crate::api::WasmCluster,
    crate::api::WasmControlPlane,
    crate::api::PlatformCluster
);

impl Scoped for crate::api::ProviderModule {
    fn api(client: Client, _: &Self) -> Api<Self> {
        Api::all(client)
    }
}

/// Deletes `name` of `api` with `params`: whether this asked for it (an
/// object already gone is no failure). `what` names it in the error.
pub async fn delete<K>(
    api: &Api<K>,
    name: &str,
    params: &kube::api::DeleteParams,
    what: &'static str,
) -> Result<bool, Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    match api.delete(name, params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(source) => Err(Error::Write {
            what,
            name: name.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merge_patch_holds_what_changed_and_nulls_what_went() {
        let before = json!({
            "phase": "Provisioning",
            "replicas": 3,
            "infrastructure": { "ready": false, "ids": ["a"] },
            "failureMessage": "gone soon",
        });
        let after = json!({
            "phase": "Running",
            "replicas": 3,
            "infrastructure": { "ready": true, "ids": ["a", "b"] },
            "nodeRefs": [{ "name": "n" }],
        });
        let patch = merge_patch(&before, &after);
        assert_eq!(
            patch,
            json!({
                "phase": "Running",
                "infrastructure": { "ready": true, "ids": ["a", "b"] },
                "nodeRefs": [{ "name": "n" }],
                "failureMessage": null,
            })
        );
        let mut applied = before;
        json_patch::merge(&mut applied, &patch);
        assert_eq!(applied, after);
    }

    #[test]
    fn a_merge_patch_of_an_unset_status_is_all_of_it() {
        let after = json!({ "phase": "Pending" });
        assert_eq!(merge_patch(&Value::Null, &after), after);
        assert_eq!(merge_patch(&json!({}), &after), after);
    }
}
