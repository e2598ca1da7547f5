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
use crate::wasm::{Throttled, Wall};

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

    fn summarize(scope: &mut Scope<Self>, ctx: &Context, _: &[Result<Outcome, Error>]) {
        ctx.metrics
            .module_phase(&scope.object.name_any(), scope.status.phase.as_deref());
    }
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

/// Whether some of the module's calls are refused for a while, as
/// `Throttled` (only once it has been throttled): those about one
/// namespace's objects kept running into their deadline, so that
/// namespace's objects back off instead of burning the cores the others
/// need, while the other namespaces' calls are made. Names each throttled
/// namespace; looked at again when the first of their throttles ends.
async fn throttle(scope: &mut Scope<ProviderModule>, ctx: &Context) -> Result<Outcome, Error> {
    let name = scope.object.name_any();
    let throttled = ctx.runtime.throttled(&name);
    if let Some(soonest) = throttled.iter().map(|t| t.remaining).min() {
        scope.set(Desired::holds(
            ConditionType::Throttled,
            Reason::ProviderThrottled,
            throttled_message(&throttled),
        ));
        return Ok(Outcome::RequeueAfter(soonest));
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

/// Throttles named in the condition; namespaces are many, a message is not.
const THROTTLES_NAMED: usize = 8;

/// What the module's throttles say: one clause per throttled namespace (the
/// first [`THROTTLES_NAMED`]), then that the others are served. The same
/// while they hold (no countdown), so that looking again writes nothing and
/// wakes none of the objects the module serves.
fn throttled_message(throttled: &[Throttled]) -> String {
    let mut clauses: Vec<String> = throttled
        .iter()
        .take(THROTTLES_NAMED)
        .map(|t| {
            format!(
                "{} of {}: {} in a row ran into their deadline, refused (their objects wait) until {}",
                t.whose(),
                t.digest,
                t.deadlines,
                Wall(t.ends)
            )
        })
        .collect();
    if let Some(more) = throttled
        .len()
        .checked_sub(THROTTLES_NAMED)
        .filter(|n| *n > 0)
    {
        clauses.push(format!("and those of {more} more namespaces"));
    }
    format!(
        "{}; the calls about other namespaces are served",
        clauses.join("; ")
    )
}

/// Takes the module out of service; calls in flight finish on the version they hold.
async fn unload(scope: &mut Scope<ProviderModule>, ctx: &Context) -> Result<Outcome, Error> {
    let name = scope.object.name_any();
    ctx.metrics.module_phase(&name, None);
    if ctx.runtime.registry().remove(&name).is_some() {
        tracing::info!(module = name, "provider taken out of service");
    }
    Ok(Outcome::Continue)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn throttled(namespace: &str) -> Throttled {
        Throttled {
            namespace: namespace.into(),
            digest: "sha256:ab".into(),
            deadlines: 3,
            remaining: Duration::from_secs(30),
            ends: std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        }
    }

    #[test]
    fn throttled_message_names_each_namespace_and_says_the_others_are_served() {
        let message = throttled_message(&[throttled(""), throttled("tenant-a")]);
        assert_eq!(
            message,
            "calls about no object of sha256:ab: 3 in a row ran into their deadline, refused (their objects wait) until 2027-01-15T08:00:00Z; \
             calls about namespace \"tenant-a\" of sha256:ab: 3 in a row ran into their deadline, refused (their objects wait) until 2027-01-15T08:00:00Z; \
             the calls about other namespaces are served"
        );
    }

    #[test]
    fn throttled_message_counts_the_namespaces_past_those_it_names() {
        let many: Vec<Throttled> = (0..THROTTLES_NAMED + 3)
            .map(|i| throttled(&format!("ns-{i}")))
            .collect();
        let message = throttled_message(&many);
        assert!(message.contains("\"ns-7\""), "{message}");
        assert!(!message.contains("\"ns-8\""), "{message}");
        assert!(
            message.contains("and those of 3 more namespaces"),
            "{message}"
        );
    }
}
