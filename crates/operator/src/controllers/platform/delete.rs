//! Deleting a platform cluster, in order: its CAPI Cluster first (whose own
//! deletion takes its pools and machines), then, once that is gone, every
//! other object of the cluster; the finalizer goes when nothing is left.
//! No provider call is needed: a cluster whose template or module is gone
//! can still be deleted.

use kube::{Resource as _, ResourceExt as _};

use super::children::{Child, Unreadable};
use super::record::created_for;
use crate::api::conditions::Desired;
use crate::api::platform::phase;
use crate::api::{CLUSTER_API_GROUP, ConditionType, PlatformCluster, Reason};
use crate::controllers::cache::labelled::KindWatchError;
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::Scope;
use crate::wasm::ObjectKind;

pub(super) async fn delete(
    scope: &mut Scope<PlatformCluster>,
    ctx: &Context,
) -> Result<Outcome, Error> {
    let observed = observed(scope, ctx).await?;
    let name = scope.object.name_any();
    let ours: Vec<&Child> = observed
        .iter()
        .filter(|c| created_for(&c.object.metadata, &name))
        .collect();
    let clusters: Vec<&Child> = ours
        .iter()
        .copied()
        .filter(|c| c.is(CLUSTER_API_GROUP, "Cluster"))
        .collect();
    let (waiting_for, reason) = if clusters.is_empty() {
        (ours, Reason::WaitingForObjectsDeletion)
    } else {
        (clusters, Reason::WaitingForClusterDeletion)
    };
    if waiting_for.is_empty() {
        return Ok(Outcome::Continue);
    }
    for child in &waiting_for {
        if child.object.meta().deletion_timestamp.is_none() {
            super::observe::remove(ctx, child).await?;
        }
    }
    let names: Vec<String> = waiting_for
        .iter()
        .take(5)
        .map(|c| format!("{} {}", c.resource.kind, c.object.name_any()))
        .collect();
    let message = format!(
        "waiting for {} object(s) to be deleted: {}{}",
        waiting_for.len(),
        names.join(", "),
        if waiting_for.len() > 5 { ", ..." } else { "" }
    );
    scope.status.phase = Some(phase::DELETING.to_owned());
    scope.status.message = Some(message.clone());
    Ok(scope.waits(Desired::holds(ConditionType::Deleting, reason, message)))
}

/// The cluster's objects of every kind its module may render and every
/// kind watched so far; a kind no longer served has none.
async fn observed(scope: &Scope<PlatformCluster>, ctx: &Context) -> Result<Vec<Child>, Error> {
    let mut kinds: Vec<ObjectKind> = ctx.labelled.watched().await;
    let module = ctx
        .caches
        .templates
        .get(None, &scope.object.spec.template_name)
        .and_then(|t| ctx.runtime.registry().get(&t.spec.provider));
    if let Some(module) = module {
        for kind in &module.capabilities().allowed_kinds {
            if !kinds.contains(kind) {
                kinds.push(kind.clone());
            }
        }
    }
    let (namespace, name) = (scope.namespace(), scope.object.name_any());
    let mut found = Vec::new();
    for kind in kinds {
        match ctx
            .labelled
            .of(std::slice::from_ref(&kind), &namespace, &name)
            .await
        {
            Ok(children) => found.extend(children),
            Err(KindWatchError::NotServed(_) | KindWatchError::ClusterScoped(_)) => {}
            Err(error) => return Err(Unreadable(error).into()),
        }
    }
    Ok(found)
}
