//! A module's status once a load succeeded or failed.

use std::fmt::Write as _;

use super::oci::Origin;
use crate::api::conditions::Desired;
use crate::api::providermodule::PHASE_READY;
use crate::api::{ConditionType, ProviderModule, Reason};
use crate::controllers::reconciler::Scope;
use crate::wasm::LoadedProvider;

/// The module's status for `loaded` in service.
pub(super) fn ready(
    scope: &mut Scope<ProviderModule>,
    loaded: &LoadedProvider,
    previous_digest: Option<String>,
    origin: Option<&Origin>,
) {
    let mut message = format!(
        "serving {} {} ({})",
        loaded.info.name, loaded.info.version, loaded.digest
    );
    if let Some(origin) = origin {
        message.push_str(" from ");
        message.push_str(&origin.image);
        if let Some(key) = &origin.signed_by {
            message.push_str(", signed by ");
            message.push_str(key);
        }
        if let Some(offline) = &origin.offline {
            message.push_str("; ");
            message.push_str(offline);
        }
    }
    if let Some(canary) = &scope.status.canary {
        let _ = write!(
            message,
            "; canary {} serves {}% of objects ({} calls, {} broke)",
            canary.digest, canary.percent, canary.calls, canary.failures
        );
    }
    let now = scope.now.clone();
    let status = &mut scope.status;
    // Figures of the load that put this code in service; a reconcile that
    // finds it in service already keeps them.
    if status.active_digest.as_deref() != Some(loaded.digest.as_str()) {
        status.load_time_millis = Some(loaded.load_time.as_millis() as u64);
        status.from_cache = Some(loaded.from_cache);
        status.loaded_at = Some(now);
    }
    status.phase = Some(PHASE_READY.into());
    status.message = Some(message.clone());
    status.active_digest = Some(loaded.digest.clone());
    status.previous_digest = previous_digest;
    // A canary's reconcile names no origin: the stable version's stays.
    if origin.is_some() || scope.object.spec.source.oci.is_none() {
        status.image = origin.map(|o| o.image.clone());
        status.signed_by = origin.and_then(|o| o.signed_by.clone());
    }
    status.provider_name = Some(loaded.info.name.clone());
    status.version = Some(loaded.info.version.clone());
    scope.set(Desired::holds(
        ConditionType::Ready,
        Reason::Loaded,
        message,
    ));
}

/// The module's status when loading failed: the version in service, if
/// any, stays.
pub(super) fn failed(
    scope: &mut Scope<ProviderModule>,
    in_service: Option<&LoadedProvider>,
    reason: Reason,
    message: String,
) {
    let message = match in_service {
        Some(current) => format!("{message}; {} stays in service", current.digest),
        None => message,
    };
    scope.status.phase = Some("Failed".into());
    scope.status.message = Some(message.clone());
    scope.status.active_digest = in_service.map(|p| p.digest.clone());
    scope.set(Desired::fails(ConditionType::Ready, reason, message));
}
