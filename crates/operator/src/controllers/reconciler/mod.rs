//! The one reconcile every controller runs, CAPI's skeleton in one place:
//!
//! 1. an object its owner has not claimed yet waits, untouched; then its
//!    Cluster, from the cache (a kind that needs one and has none stops
//!    here, backing off, with its summary condition saying so from the
//!    second try);
//! 2. the finalizer, and the metadata the kind requires, added first and
//!    alone ([`finalizer`]);
//! 3. paused: the `Paused` condition, and nothing else;
//! 4. the kind's phases, every one of them even after one failed, each
//!    reading what earlier ones left on the [`Scope`];
//! 5. when deleting and every delete phase is done, the finalizer goes;
//! 6. otherwise one status write, only if it changed, with
//!    `observedGeneration` advanced only when no phase failed (to the
//!    generation a phase's own spec write made, if one did), and an Event
//!    per changed condition and phase;
//! 7. the action: the soonest requeue a phase asked for, or the error.
//!
//! A kind is its phase lists, its [`Scope::found`] and a summary: see
//! [`Reconciler`].

use std::sync::Arc;

use kube::ResourceExt as _;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::instrument;

mod scope;
mod status;

pub use scope::{Phase, Reconciler, Scope};
use status::{write_status, write_summary};

use super::context::Context;
use super::error::{Error, Retry};
use super::finalizer;
use super::metrics::ReconcileResult;
use super::outcome::{self, Outcome};
use super::shard::Role;
use crate::api::conditions::Desired;
use crate::api::{Cluster, ConditionType, Reason};

/// A list of phases from `async fn`s of one kind's scope.
#[macro_export]
macro_rules! phases {
    ($kind:ty: $($phase:path),* $(,)?) => {
        &[$({
            fn phase<'a>(
                scope: &'a mut $crate::controllers::reconciler::Scope<$kind>,
                ctx: &'a $crate::controllers::Context,
            ) -> ::futures::future::BoxFuture<
                'a,
                Result<$crate::controllers::outcome::Outcome, $crate::controllers::Error>,
            > {
                Box::pin($phase(scope, ctx))
            }
            phase as $crate::controllers::reconciler::Phase<$kind>
        }),*]
    };
}

/// Cluster `name` of `namespace`, from the cache: what a kind naming its
/// Cluster in `spec.clusterName` returns from [`Reconciler::cluster`].
pub fn cluster_named(
    ctx: &Context,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<Arc<Cluster>>, Error> {
    ctx.caches
        .clusters
        .get(namespace, name)
        .map(Some)
        .ok_or_else(|| Error::ClusterNotFound(name.to_owned()))
}

/// Reconciles `object` of kind `K` (the controller's reconcile function).
#[instrument(name = "reconcile", skip_all, fields(controller = K::CONTROLLER, object.ref = %ObjectRef::from_obj(&*object)))]
pub async fn reconcile<K: Reconciler>(object: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error> {
    let timer = ctx.metrics.reconcile(K::CONTROLLER);
    let uid = object.uid().unwrap_or_default();
    let result = run(object, &ctx).await;
    timer.finish(match &result {
        Ok(action) => ReconcileResult::of(action),
        Err(error) => ReconcileResult::Error {
            terminal: error.retry() == Retry::OnChange,
        },
    });
    let action = result?;
    ctx.succeeded(&uid);
    Ok(action)
}

/// The controller's error policy: counts the failure, then backs off as the error asks.
#[allow(clippy::needless_pass_by_value)] // kube-runtime's error_policy signature
pub fn error_policy<K: Reconciler>(object: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.error_action(K::CONTROLLER, &object.uid().unwrap_or_default(), error)
}

async fn run<K: Reconciler>(object: Arc<K>, ctx: &Context) -> Result<Action, Error> {
    match object.role(ctx.settings.shard) {
        Role::Owner => {}
        Role::Reader => return read_only(object, ctx).await,
        // Its caches hold it only until the adoption that makes it another shard's.
        Role::Other => return Ok(Action::await_change()),
    }
    tracing::debug!(
        controller = K::CONTROLLER,
        object = %ObjectRef::from_obj(&*object),
        shard = ctx.settings.shard.index(),
        "reconciling"
    );
    let object = ctx.own_writes.latest(object);
    if !object.claimed() && object.meta().deletion_timestamp.is_none() {
        return Ok(Action::await_change());
    }
    let mut scope = with_cluster(object, ctx).await?;
    if !finalizer_in_place(&scope, ctx).await? || paused(&mut scope, ctx).await? {
        return Ok(Action::await_change());
    }
    let phases = if scope.deleting() {
        K::DELETE_PHASES
    } else {
        K::PHASES
    };
    let mut results = Vec::with_capacity(phases.len());
    for phase in phases {
        results.push(phase(&mut scope, ctx).await);
    }
    if scope.deleting() && results.iter().all(|r| matches!(r, Ok(Outcome::Continue))) {
        if let Some(name) = K::FINALIZER {
            finalizer::remove(ctx, K::CONTROLLER, &*scope.object, name).await?;
        }
        return Ok(Action::await_change());
    }
    // A busy provider says nothing about the object: what it showed stays
    // until a call is made, in a moment.
    if let Some(busy) = results
        .iter()
        .position(|r| r.as_ref().is_err_and(Error::is_busy))
        && let Err(error) = results.swap_remove(busy)
    {
        return Err(error);
    }
    K::summarize(&mut scope, ctx, &results);
    if !scope.defer_status {
        write_summary(&mut scope, ctx, &results).await?;
    }
    let outcomes = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    if scope.defer_status {
        return Ok(Action::await_change());
    }
    Ok(outcome::action(&outcomes))
}

/// Step 1: the object's scope with its Cluster from the cache. A kind that
/// needs one and has none stops here; from the second try its summary
/// condition says so (the first time, not: a Cluster created with its
/// pools may reach its cache a moment after them).
async fn with_cluster<K: Reconciler>(object: Arc<K>, ctx: &Context) -> Result<Scope<K>, Error> {
    match object.cluster(ctx) {
        Ok(cluster) => Ok(Scope::new(object, cluster)),
        Err(error) if ctx.failures(&object.uid().unwrap_or_default()) == 0 => Err(error),
        Err(error) => {
            let mut scope = Scope::new(object, None);
            let error = scope.failed(K::SUMMARY, error);
            write_status(&scope, ctx).await?;
            Err(error)
        }
    }
}

/// Step 2: whether the phases may run. Deleting, only while the finalizer
/// is still ours to remove; living, once the finalizer and required
/// metadata are in place, added first and alone (the write brings the
/// object back).
async fn finalizer_in_place<K: Reconciler>(scope: &Scope<K>, ctx: &Context) -> Result<bool, Error> {
    if scope.deleting() {
        return Ok(K::FINALIZER.is_none_or(|f| scope.object.finalizers().iter().any(|o| o == f)));
    }
    let added = finalizer::ensure(
        ctx,
        K::CONTROLLER,
        &*scope.object,
        K::FINALIZER,
        &K::required(scope),
    )
    .await?;
    Ok(!added)
}

/// Step 3: the `Paused` condition; whether the object is paused, in which
/// case it is the only thing written.
async fn paused<K: Reconciler>(scope: &mut Scope<K>, ctx: &Context) -> Result<bool, Error> {
    let spec_paused = scope.object.spec_paused();
    if let Some(why) = super::paused::why(&*scope.object, scope.cluster.as_deref(), spec_paused) {
        scope.set(Desired::holds(ConditionType::Paused, Reason::Paused, why));
        write_status(scope, ctx).await?;
        return Ok(true);
    }
    scope.set(Desired::fails(ConditionType::Paused, Reason::NotPaused, ""));
    Ok(false)
}

/// The phases of an object another shard writes, for their effect on this
/// process alone: no finalizer, status or Event.
async fn read_only<K: Reconciler>(object: Arc<K>, ctx: &Context) -> Result<Action, Error> {
    let mut scope = Scope::new(object, None);
    scope.read_only = true;
    let phases = if scope.deleting() {
        K::DELETE_PHASES
    } else {
        K::PHASES
    };
    let mut outcomes = Vec::with_capacity(phases.len());
    for phase in phases {
        outcomes.push(phase(&mut scope, ctx).await?);
    }
    Ok(outcome::action(&outcomes))
}
