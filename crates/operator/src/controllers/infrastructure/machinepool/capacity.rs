//! What a node of the pool offers before any exists: the provider's
//! `node-shapes` answer as `status.capacity` and `status.nodeInfo`, which
//! the cluster-autoscaler reads to scale a pool up from zero.
//!
//! The provider is asked again only when the pool's `config` or the
//! provider code serving it changes (`status.capacityRevision`), or after
//! a failure a retry may mend: a steady or scaling pool costs no call. A
//! failure never holds up provisioning; it shows in `CapacityKnown`, with
//! a Warning Event when it first does.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::api::conditions::Desired;
use crate::api::provider::NodeInfo;
use crate::api::{ConditionType, Reason, WasmMachinePool};
use crate::controllers::context::Context;
use crate::controllers::error::{Error, guest_reason};
use crate::controllers::outcome::Outcome;
use crate::controllers::provider::{self, Prepared};
use crate::controllers::reconciler::Scope;
use crate::wasm::node_shapes::DescribeRequest;
use crate::wasm::types::ProviderError;
use crate::wasm::{CallError, LoadedProvider};

/// What follows from a pool without capacity, for people.
const NO_SCALING_FROM_ZERO: &str = "the cluster-autoscaler cannot scale this pool up from zero";

/// The reasons of an answer that stands until the config or code changes.
const SETTLED: [Reason; 3] = [
    Reason::CapacityKnown,
    Reason::CapacityUnknown,
    Reason::CapacityUnsupported,
];

/// Reports what the pool's nodes offer, when that may have changed.
pub(super) async fn capacity(
    scope: &mut Scope<WasmMachinePool>,
    ctx: &Context,
) -> Result<Outcome, Error> {
    let Some(prepared) = scope.found.prepared.as_ref() else {
        return Ok(Outcome::Continue);
    };
    let revision = revision(prepared);
    if settled(scope, &revision) {
        return Ok(Outcome::Continue);
    }
    let pool = scope.object.clone();
    let desired = if prepared.provider.describes_nodes() {
        let request = DescribeRequest {
            pool: provider::object_ref(&*pool),
            config: prepared.config.clone(),
            credentials: prepared.credentials.clone(),
        };
        let answer = ctx.runtime.describe_nodes(&pool.spec.provider, &request);
        match answer.await {
            Ok(shape) => {
                let status = &mut scope.status;
                status.capacity = shape
                    .capacity
                    .into_iter()
                    .map(|(name, quantity)| (name, Quantity(quantity)))
                    .collect();
                status.node_info = Some(NodeInfo {
                    architecture: shape.architecture,
                    operating_system: shape.operating_system,
                });
                Desired::holds(ConditionType::CapacityKnown, Reason::CapacityKnown, "")
            }
            Err(error) => {
                let reason = if for_good(&error) {
                    Reason::CapacityUnknown
                } else {
                    guest_reason(&error)
                };
                // A transient failure keeps what was known; an answer for
                // good means the config's nodes are not the ones described.
                if reason == Reason::CapacityUnknown {
                    forget(scope);
                }
                let chain = crate::report::error_chain(&Error::Guest(error));
                let message = format!("{chain}: {NO_SCALING_FROM_ZERO}");
                Desired::fails(ConditionType::CapacityKnown, reason, message)
            }
        }
    } else {
        let message = unsupported(&pool, &prepared.provider);
        forget(scope);
        Desired::fails(
            ConditionType::CapacityKnown,
            Reason::CapacityUnsupported,
            message,
        )
    };
    let first = !scope
        .status
        .common
        .conditions
        .iter()
        .any(|c| c.type_ == desired.type_.as_str() && c.reason == desired.reason.as_str());
    if first && desired.reason == Reason::CapacityUnknown {
        scope
            .publish(ctx, desired.reason, desired.message.clone())
            .await;
    }
    // A transient failure leaves the revision of what is still known.
    if SETTLED.contains(&desired.reason) {
        scope.status.capacity_revision = Some(revision);
    }
    scope.set(desired);
    Ok(Outcome::Continue)
}

/// What `CapacityKnown` is settled for: the pool's config and the code
/// serving it.
fn revision(prepared: &Prepared) -> String {
    super::super::rollout::digest(&serde_json::json!({
        "config": prepared.config,
        "provider": prepared.provider.digest,
    }))
}

/// Whether what `CapacityKnown` says still holds: settled for this config
/// and code, and not a failure a retry may mend.
fn settled(scope: &Scope<WasmMachinePool>, revision: &str) -> bool {
    let status = &scope.status;
    let final_answer = status.common.conditions.iter().any(|c| {
        c.type_ == ConditionType::CapacityKnown.as_str()
            && SETTLED.iter().any(|r| r.as_str() == c.reason)
    });
    final_answer && status.capacity_revision.as_deref() == Some(revision)
}

/// Whether the provider's answer stands until the config or the provider
/// changes: it said so (terminal, invalid config) or broke the contract.
fn for_good(error: &CallError) -> bool {
    matches!(
        error,
        CallError::Provider {
            error: ProviderError::Terminal(_) | ProviderError::InvalidConfig(_),
            ..
        } | CallError::InvalidResult { .. }
    )
}

fn forget(scope: &mut Scope<WasmMachinePool>) {
    scope.status.capacity.clear();
    scope.status.node_info = None;
}

fn unsupported(pool: &WasmMachinePool, provider: &LoadedProvider) -> String {
    format!(
        "ProviderModule {:?} (version {}) does not export node-shapes: {NO_SCALING_FROM_ZERO}",
        pool.spec.provider, provider.info.version,
    )
}
