//! Steps 6 of the reconcile: the status written once, if it changed, with
//! an Event per changed condition and phase.

use super::scope::{Reconciler, Scope, author};
use crate::api::conditions;
use crate::api::{ObjectStatus, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::write;

/// Step 6: the status, with `observedGeneration` advanced only when no
/// phase failed, to the generation a phase's own spec write made if one did.
pub(super) async fn write_summary<K: Reconciler>(
    scope: &mut Scope<K>,
    ctx: &Context,
    results: &[Result<Outcome, Error>],
) -> Result<(), Error> {
    if let Some(written) = scope.written_generation {
        let computed_for = scope.object.meta().generation;
        conditions::advance(scope.status.conditions_mut(), computed_for, written);
    }
    if results.iter().all(Result::is_ok) {
        let generation = scope.written_generation.or(scope.object.meta().generation);
        scope.status.set_observed_generation(generation);
    }
    write_status(scope, ctx).await
}

/// Writes the scope's status if it differs from the object's, announcing
/// each changed condition, and the phase if it changed.
pub(super) async fn write_status<K: Reconciler>(
    scope: &Scope<K>,
    ctx: &Context,
) -> Result<(), Error> {
    let before = scope.object.status().cloned().unwrap_or_default();
    if scope.status == before {
        return Ok(());
    }
    match write::status(ctx, author::<K>(), &*scope.object, &before, &scope.status).await {
        // Deleted since it was read (its last finalizer went while this
        // reconcile worked from a copy that still showed it): nothing to say.
        Err(error) if error.is_gone() && scope.deleting() => return Ok(()),
        written => written?,
    }
    let reference = scope.reference();
    ctx.announce(&reference, before.conditions(), scope.status.conditions())
        .await;
    if K::PHASE_EVENTS
        && scope.status.phase() != before.phase()
        && let Some(phase) = scope.status.phase()
    {
        ctx.publish(
            &reference,
            Reason::PhaseChanged,
            format!("{} is {phase}", K::kind(&())),
        )
        .await;
    }
    Ok(())
}
