//! The ProviderModule as the frame reconciles it: its component loaded
//! ([`super::load`]), its credentials checked, its throttle shown; on
//! deletion, taken out of service before the finalizer goes.

use kube::ResourceExt as _;

use super::CONTROLLER;
use super::load::load;
use crate::api::conditions::Desired;
use crate::api::providermodule::FIELD_MANAGER;
use crate::api::{ConditionType, ProviderModule, Reason};
use crate::controllers::context::Context;
use crate::controllers::credentials::{self, CREDENTIALS_POLL};
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::{Phase, Reconciler, Scope};
use crate::controllers::shard::{Role, Shard};
use crate::phases;

/// Removed only after the module is taken out of service.
pub const FINALIZER: &str = "runtime.capwasm.dev/provider-module";

impl Reconciler for ProviderModule {
    type Found = ();
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    const SUMMARY: ConditionType = ConditionType::Ready;
    const PHASES: &'static [Phase<Self>] =
        phases![ProviderModule: load, check_credentials, throttle];
    const DELETE_PHASES: &'static [Phase<Self>] = phases![ProviderModule: unload];

    fn role(&self, shard: Shard) -> Role {
        shard.role_shared()
    }

    fn summarize(_: &mut Scope<Self>, _: &Context, _: &[Result<Outcome, Error>]) {}
}

/// Whether the credentials Secret holds every key `requestAuth` reads, as
/// `CredentialsReady` (only for modules with rules): a missing key is named
/// here, before any call needs it.
async fn check_credentials(
    scope: &mut Scope<ProviderModule>,
    ctx: &Context,
) -> Result<Outcome, Error> {
    let spec = &scope.object.spec;
    if spec
        .capabilities
        .as_ref()
        .is_none_or(|c| c.request_auth.is_empty())
    {
        return Ok(Outcome::Continue);
    }
    let name = scope.object.name_any();
    match credentials::read(ctx, &name, spec).await? {
        Ok(_) => {
            scope.set(Desired::holds(
                ConditionType::CredentialsReady,
                Reason::Ready,
                "the credentials Secret holds every key requestAuth reads",
            ));
            Ok(Outcome::Continue)
        }
        Err(wait) => {
            scope.set(Desired::fails(
                ConditionType::CredentialsReady,
                wait.reason,
                wait.message,
            ));
            Ok(Outcome::RequeueAfter(CREDENTIALS_POLL))
        }
    }
}

/// Whether the module's calls are refused for a while, as `Throttled`
/// (only once it has been throttled): they kept running into their
/// deadline, so its objects back off instead of burning the cores the
/// others need. Looked at again when the throttle ends.
async fn throttle(scope: &mut Scope<ProviderModule>, ctx: &Context) -> Result<Outcome, Error> {
    let name = scope.object.name_any();
    if let Some(throttled) = ctx.runtime.throttled(&name) {
        scope.set(Desired::holds(
            ConditionType::Throttled,
            Reason::ProviderThrottled,
            format!(
                "{} calls in a row of {} ran into their deadline: its calls are refused, and its objects wait, for another {}s",
                throttled.deadlines,
                throttled.digest,
                throttled.remaining.as_secs().max(1)
            ),
        ));
        return Ok(Outcome::RequeueAfter(throttled.remaining));
    }
    let was = scope
        .status
        .conditions
        .iter()
        .any(|c| c.type_ == ConditionType::Throttled.as_str());
    if was {
        scope.set(Desired::fails(
            ConditionType::Throttled,
            Reason::NotThrottled,
            "its calls are served",
        ));
    }
    Ok(Outcome::Continue)
}

/// Takes the module out of service; calls in flight finish on the version they hold.
async fn unload(scope: &mut Scope<ProviderModule>, ctx: &Context) -> Result<Outcome, Error> {
    let name = scope.object.name_any();
    if ctx.runtime.registry().remove(&name).is_some() {
        tracing::info!(module = name, "provider taken out of service");
    }
    Ok(Outcome::Continue)
}
