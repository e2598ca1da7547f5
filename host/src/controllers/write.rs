//! Writes, the same way everywhere: server-side apply of only the fields a
//! controller owns, never a read-modify-write of a whole object (metadata
//! lists are JSON-patched with a `test` of what they replace, in
//! [`super::finalizer`]). Callers skip a write when nothing changed.
//!
//! An apply removes the fields its manager applied before and omits now, so
//! each set of fields a controller applies on its own (status, metadata,
//! spec) has its own manager: `<manager>` for status, `<manager>-<set>` for
//! the others. Applying one set never drops another.

use std::fmt::Debug;

use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt as _};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

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

/// Applies `status` as `object`'s status.
pub async fn status<K, S>(
    ctx: &Context,
    author: Author,
    object: &K,
    status: &S,
) -> Result<(), Error>
where
    K: Writable,
    S: Serialize,
{
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    let name = object.name_any();
    let written = K::api(ctx.client.clone(), object)
        .patch_status(
            &name,
            &PatchParams::apply(author.manager).force(),
            &Patch::Apply(&patch),
        )
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
    crate::api::WasmBootstrapConfig,
    crate::api::WasmMachinePool,
    crate::api::WasmCluster
);

impl Scoped for crate::api::ProviderModule {
    fn api(client: Client, _: &Self) -> Api<Self> {
        Api::all(client)
    }
}
