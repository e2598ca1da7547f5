//! A module's rollout: a new version at once, or as a canary serving a
//! share of objects first; what became of a canary (promoted by the
//! runtime after enough calls, rolled back when too many broke), said in
//! the module's status and Events. A rolled-back digest is not tried again
//! until the module changes.

use std::time::Duration;

use crate::api::providermodule::{CanaryStatus, ProviderModuleSpec, RolloutStrategy};
use crate::api::{ProviderModule, Reason};
use crate::controllers::context::Context;
use crate::controllers::reconciler::Scope;
use crate::wasm::{CanaryPolicy, LoadedProvider};

/// How soon a module with a canary looks again, to show its calls.
pub(super) const CANARY_REFRESH: Duration = Duration::from_secs(5);

/// The canary policy of `spec`, if its rollout is `Canary`.
pub(super) fn policy(spec: &ProviderModuleSpec) -> Option<CanaryPolicy> {
    let rollout = spec.rollout.as_ref()?;
    (rollout.strategy == RolloutStrategy::Canary).then(|| CanaryPolicy {
        percent: rollout.canary_percent.unwrap_or(25),
        promote_after: rollout.promote_after_calls.unwrap_or(20),
        max_failure_percent: rollout.max_failure_percent.unwrap_or(20),
    })
}

/// Takes in a rollback the runtime made since the last reconcile.
pub(super) fn settle(scope: &mut Scope<ProviderModule>, ctx: &Context, name: &str) {
    if let Some(rolled) = ctx.runtime.registry().take_rolled_back(name) {
        let percent = scope.status.canary.take().map_or(0, |c| c.percent);
        scope.status.rolled_back = Some(CanaryStatus {
            digest: rolled.digest,
            percent,
            calls: rolled.calls,
            failures: rolled.failures,
            generation: scope.object.metadata.generation,
        });
    }
}

/// Why `digest` is not loaded again, if it was rolled back under this
/// generation of the module.
pub(super) fn refused(scope: &Scope<ProviderModule>, digest: &str) -> Option<String> {
    let rolled = scope.status.rolled_back.as_ref()?;
    (rolled.digest == digest && rolled.generation == scope.object.metadata.generation).then(|| {
        format!(
            "{digest} was rolled back: {} of its {} calls as a canary broke; change the ProviderModule to try it again",
            rolled.failures, rolled.calls
        )
    })
}

/// Whether the canary in service is `digest`; shows its calls.
pub(super) fn serving(
    scope: &mut Scope<ProviderModule>,
    ctx: &Context,
    name: &str,
    digest: &str,
) -> bool {
    // Without one, `promoted` reads what the status says ran.
    let Some(canary) = ctx.runtime.registry().canary(name) else {
        return false;
    };
    if canary.provider.digest != digest {
        return false;
    }
    let (calls, failures) = canary.tally();
    scope.status.canary = Some(CanaryStatus {
        digest: canary.provider.digest.clone(),
        percent: canary.policy.percent,
        calls,
        failures,
        generation: scope.object.metadata.generation,
    });
    true
}

/// If the version in service was this module's canary, says it was
/// promoted and returns the digest it replaced.
pub(super) async fn promoted(
    scope: &mut Scope<ProviderModule>,
    ctx: &Context,
    current: &LoadedProvider,
) -> Option<String> {
    let canary = scope.status.canary.take()?;
    if canary.digest != current.digest {
        return None;
    }
    let previous = scope.status.active_digest.clone();
    scope
        .publish(
            ctx,
            Reason::Promoted,
            format!(
                "{} {} ({}) serves every object after {} calls as a canary ({} broke)",
                current.info.name,
                current.info.version,
                current.digest,
                canary.calls,
                canary.failures
            ),
        )
        .await;
    previous
}

/// Starts `loaded` as a canary beside `stable`, and says so.
pub(super) async fn start(
    scope: &mut Scope<ProviderModule>,
    ctx: &Context,
    loaded: std::sync::Arc<LoadedProvider>,
    stable: &LoadedProvider,
    policy: CanaryPolicy,
) {
    let message = format!(
        "{} {} ({}) serves {}% of objects beside {}; promoted after {} calls that do not break, rolled back past {}% broken",
        loaded.info.name,
        loaded.info.version,
        loaded.digest,
        policy.percent,
        stable.digest,
        policy.promote_after,
        policy.max_failure_percent
    );
    scope.status.canary = Some(CanaryStatus {
        digest: loaded.digest.clone(),
        percent: policy.percent,
        calls: 0,
        failures: 0,
        generation: scope.object.metadata.generation,
    });
    ctx.runtime.registry().start_canary(loaded, policy);
    scope.publish(ctx, Reason::CanaryStarted, message).await;
}
