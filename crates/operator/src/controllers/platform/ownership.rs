//! Which objects a platform cluster may touch: only those the host created
//! for it. Before anything is applied, every object a render names is
//! looked up (in the caches, else with a metadata read); one that exists
//! without a creation record naming this cluster — a team's own Cluster
//! of the same name, another platform cluster's object — is never
//! updated, adopted, pruned or deleted: the render applies nothing and the
//! cluster says whose the object is.
//!
//! The record ([`record`](super::record)) is written only when the host
//! creates the object, names the cluster (so it survives a restore from
//! backup, which changes UIDs), and is kept by every later apply. An
//! object is created by the apply that follows the lookup finding it
//! absent: one someone else creates in between (the time of a request)
//! would get the record, and is the one window left.

use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Resource as _, ResourceExt as _};

use super::children::Unreadable;
use super::record::{Foreign, created_for};
use crate::api::PlatformCluster;
use crate::api::Reason;
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::wasm::ObjectKind;

/// Whether an object a render names may be written for the cluster.
#[derive(Debug)]
pub(super) enum Claim {
    /// It does not exist: the host creates it.
    Absent,
    /// The host created it for this cluster.
    Ours,
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
        .labelled
        .cached(kind, namespace, name)
        .await
        .map_err(|e| Error::from(Unreadable(e)))?;
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
    Err(Foreign::of(kind, name, &meta).into())
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
