//! The PlatformCluster controller: a cluster composed from a ClusterTemplate
//! by the template's platform-provider component. The provider renders
//! objects, rolls their state up and judges spec changes, as pure
//! functions; the host does the rest, as for the other worlds:
//!
//! 1. the spec's rules and the template ([`spec`]): it exists, is not
//!    deprecated for a new cluster, its provider serves the platform world,
//!    and the values (the template's, overlaid with the cluster's) satisfy
//!    the provider's schema;
//! 2. a change of template goes through the provider's `validate`
//!    ([`change::change`]); refused, nothing is applied and the running
//!    objects stay as they are;
//! 3. the cluster's objects, from label-selected watches of the kinds its
//!    module may render ([`children`]);
//! 4. `render`, then server-side apply of what differs, the generated
//!    Secrets, and pruning of what is no longer rendered ([`compose`]);
//! 5. `status`, written with everything else in one status write, a
//!    transitional phase past its template's timeout shown as Unhealthy
//!    ([`rollup`]).
//!
//! Deletion deletes the CAPI Cluster first, waits until it is gone, then
//! the rest, and only then lets the PlatformCluster go ([`delete`]).

pub mod change;
pub mod children;
mod compose;
mod delete;
mod observe;
pub mod ownership;
pub mod record;
mod rollup;
mod spec;

use std::future::Future;
use std::sync::Arc;

use futures::{Stream, StreamExt as _};
use kube::ResourceExt as _;
use kube::runtime::Controller;
use kube::runtime::reflector::{ObjectRef, Store};

use super::context::Context;
use super::error::Error;
use super::outcome::Outcome;
use super::reconciler::{Phase, Reconciler, Scope, error_policy, reconcile};
use super::shard::{Role, Shard};
use super::watches;
use crate::api::conditions::Desired;
use crate::api::platform::{FIELD_MANAGER, FINALIZER, phase};
use crate::api::{ClusterTemplate, ConditionType, PlatformCluster, Reason};
use crate::phases;
use crate::wasm::{LoadedProvider, ObjectKind};

/// The PlatformCluster controller's name in metrics and logs.
pub const CONTROLLER: &str = "platformcluster";

/// What the phases find.
#[derive(Default)]
pub struct Found {
    /// The template the spec names.
    pub template: Option<Arc<ClusterTemplate>>,
    /// Its provider, in service and of the platform world.
    pub provider: Option<Arc<LoadedProvider>>,
    /// The kinds its module may render.
    pub kinds: Vec<ObjectKind>,
    /// The values, valid against the provider's schema, as JSON text.
    pub values: Option<String>,
    /// The cluster's objects, once read.
    pub observed: Option<Vec<children::Child>>,
    /// The cluster, its template and its objects as the provider reads them.
    pub documents: crate::platform::documents::Documents,
    /// Nothing may be applied: the spec breaks a rule or its change was refused.
    pub hold: bool,
}

impl Reconciler for PlatformCluster {
    type Found = Found;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    const SUMMARY: ConditionType = ConditionType::Ready;
    const PHASES: &'static [Phase<Self>] = phases![PlatformCluster:
        spec::template,
        change::change,
        observe::observe,
        compose::compose,
        rollup::roll_up,
    ];
    const DELETE_PHASES: &'static [Phase<Self>] = phases![PlatformCluster: delete::delete];
    const PHASE_EVENTS: bool = true;

    fn role(&self, shard: Shard) -> Role {
        // Written by one shard; the others leave it alone (its phases write).
        match shard.role_shared() {
            Role::Owner => Role::Owner,
            Role::Reader | Role::Other => Role::Other,
        }
    }

    fn spec_paused(&self) -> bool {
        self.spec.paused
    }

    fn summarize(scope: &mut Scope<Self>, _: &Context, results: &[Result<Outcome, Error>]) {
        if scope.deleting() {
            scope.status.phase = Some(phase::DELETING.to_owned());
            return;
        }
        let failed = results.iter().find_map(|r| r.as_ref().err());
        let waiting = results.iter().find_map(|r| match r {
            Ok(Outcome::Wait(wait)) => Some(wait),
            _ => None,
        });
        let desired = if let Some(error) = failed {
            Desired::fails(
                ConditionType::Ready,
                error.reason(),
                crate::report::error_chain(error),
            )
        } else if let Some(wait) = waiting {
            Desired::fails(ConditionType::Ready, wait.reason, wait.message.clone())
        } else if scope.status.phase.as_deref() == Some(phase::READY) {
            Desired::holds(ConditionType::Ready, Reason::Ready, "")
        } else {
            let reason = if rollup::timed_out(&scope.status) {
                Reason::PhaseTimedOut
            } else {
                Reason::NotReady
            };
            let message = scope.status.message.clone().unwrap_or_default();
            Desired::fails(ConditionType::Ready, reason, message)
        };
        // Nothing composed yet: Pending while it waits for what comes by
        // itself (its provider loading, the API server), Failed while it
        // waits for someone to change the spec, template or provider.
        if scope.status.applied_template.is_none() && (failed.is_some() || waiting.is_some()) {
            let transient = matches!(
                desired.reason,
                Reason::ProviderNotReady
                    | Reason::ProviderRetrying
                    | Reason::ProviderThrottled
                    | Reason::GuestUnavailable
                    | Reason::ApiError
                    | Reason::KindUnavailable
            );
            let phase = if transient {
                phase::PENDING
            } else {
                phase::FAILED
            };
            scope.status.phase = Some(phase.to_owned());
            scope.status.message = Some(desired.message.clone());
        }
        scope.set(desired);
    }
}

/// Runs the PlatformCluster controller until `shutdown` completes; `changed`
/// brings the clusters whose objects changed.
pub fn run(
    ctx: Arc<Context>,
    changed: impl Stream<Item = ObjectRef<PlatformCluster>> + Send + Unpin + 'static,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let caches = &ctx.caches;
    let store = caches.platforms.store().clone();
    let by_template = store.clone();
    let by_module = (store.clone(), caches.templates.store().clone());
    Controller::for_shared_stream(caches.platforms.subscribe(), store.clone())
        .with_config(ctx.settings.controller(ctx.settings.debounce))
        .watches_shared_stream(caches.templates.subscribe(), move |template| {
            of_template(&by_template, &template.name_any())
        })
        .watches_shared_stream(caches.modules.subscribe(), move |module| {
            of_module(&by_module.0, &by_module.1, &module.name_any())
        })
        .reconcile_on(changed)
        .reconcile_on(installed(&ctx, store))
        .graceful_shutdown_on(shutdown)
        .run(
            reconcile::<PlatformCluster>,
            error_policy::<PlatformCluster>,
            ctx,
        )
        .for_each(|_| futures::future::ready(()))
}

/// The clusters naming template `name`, now or last applied.
fn of_template(store: &Store<PlatformCluster>, name: &str) -> Vec<ObjectRef<PlatformCluster>> {
    store
        .state()
        .iter()
        .filter(|c| {
            c.spec.template_name == name
                || c.status
                    .as_ref()
                    .and_then(|s| s.applied_template.as_deref())
                    == Some(name)
        })
        .map(|c| ObjectRef::from_obj(&**c))
        .collect()
}

/// The clusters of the templates module `name` composes.
fn of_module(
    clusters: &Store<PlatformCluster>,
    templates: &Store<ClusterTemplate>,
    name: &str,
) -> Vec<ObjectRef<PlatformCluster>> {
    templates
        .state()
        .iter()
        .filter(|t| t.spec.provider == name)
        .flat_map(|t| of_template(clusters, &t.name_any()))
        .collect()
}

/// The clusters whose provider each module put in service from now on serves.
fn installed(
    ctx: &Context,
    store: Store<PlatformCluster>,
) -> impl Stream<Item = ObjectRef<PlatformCluster>> + Send + 'static {
    let templates = ctx.caches.templates.store().clone();
    let installs = ctx.runtime.registry().installs();
    watches::installed_by(installs, store, move |clusters, module| {
        of_module(clusters, &templates, module)
    })
}
