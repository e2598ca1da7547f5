//! The cluster's objects as the phases read and remove them: from the
//! label-selected watches of [`LabelledWatches`](super::children::LabelledWatches), those
//! the host created for the cluster.

use kube::ResourceExt as _;

use super::children::{Child, Unreadable};
use super::record::created_for;
use crate::api::{ConditionType, PlatformCluster};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::Scope;

/// Reads the cluster's objects, of the kinds its module may render.
pub(super) async fn observe(
    scope: &mut Scope<PlatformCluster>,
    ctx: &Context,
) -> Result<Outcome, Error> {
    if scope.found.provider.is_none() {
        return Ok(Outcome::Continue);
    }
    let kinds = scope.found.kinds.clone();
    let (namespace, name) = (scope.namespace(), scope.object.name_any());
    let mut observed = ctx
        .labelled
        .of(&kinds, &namespace, &name)
        .await
        .map_err(|e| scope.failed(ConditionType::Composed, Unreadable(e).into()))?;
    // Labelled by anyone, created for the cluster by the host alone: only
    // those are the provider's to read.
    observed.retain(|child| created_for(&child.object.metadata, &name));
    scope.found.documents.observed = observed.iter().map(Child::document).collect();
    scope.found.observed = Some(observed);
    Ok(Outcome::Continue)
}

/// Asks for `child`'s deletion, counted as the controller's write.
pub(super) async fn remove(ctx: &Context, child: &Child) -> Result<(), Error> {
    match child.delete(&ctx.client).await {
        Ok(asked) => {
            if asked {
                ctx.metrics.write(super::CONTROLLER, "deleted");
            }
            Ok(())
        }
        Err(source) => Err(Error::Write {
            what: "a platform cluster's object",
            name: format!("{}/{}", child.resource.kind, child.object.name_any()),
            source,
        }),
    }
}
